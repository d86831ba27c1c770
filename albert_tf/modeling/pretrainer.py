"""AlbertPretrainer: the encoder plus the MLM and sentence-order heads."""
import os

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig, load_config
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder, AlbertModelBase
from albert_tf.modeling.heads import MaskedLMHead, SentenceOrderHead

PRETRAINER_INPUT_NAMES = INPUT_NAMES + ("masked_lm_positions",)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(AlbertModelBase):
    """ALBERT for pretraining (MLM + SOP), a functional Keras model.

    Inputs (dict): `input_word_ids`, `input_mask`, `input_type_ids` int32 [B, L]; `masked_lm_positions` int32
    [B, P]. Extra keys (labels of a pretraining batch) are ignored.
    Outputs (dict): the encoder's `sequence_output` [B, L, H], `pooled_output` [B, H], `encoder_outputs`, plus
    `mlm_logits` float32 [B, P, V] and `sop_logits` float32 [B, 2] (label 0 = original order, 1 = swapped).

    Args:
      config: an AlbertConfig, dict, preset name or path to albert_config.json.
      dropout: False builds the model with both dropout rates set to 0.
    """

    INPUT_NAMES = PRETRAINER_INPUT_NAMES

    def __init__(self, config, dropout=True, **kwargs):
        config = load_config(config)
        if not dropout:
            config = config.without_dropout()
        self.config = config
        encoder = AlbertEncoder(config, name="encoder")
        mlm_head = MaskedLMHead(config, encoder.embeddings, name="mlm_head")
        sop_head = SentenceOrderHead(config, name="sop_head")

        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in PRETRAINER_INPUT_NAMES}
        encoded = encoder({name: inputs[name] for name in INPUT_NAMES})
        outputs = dict(encoded)
        outputs["mlm_logits"] = mlm_head(encoded["sequence_output"], inputs["masked_lm_positions"])
        outputs["sop_logits"] = sop_head(encoded["pooled_output"])
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder
        self.mlm_head = mlm_head
        self.sop_head = sop_head

    # ------------------------------------------------------------------ pretrained-model directories
    def checkpoint(self):
        """The tf.train.Checkpoint layout of a pretrained-model directory: the model under the name `model`."""
        return tf.train.Checkpoint(model=self)

    @classmethod
    def from_pretrained(cls, directory, dropout=True):
        """Loads a pretrained-model directory: albert_config.json and the latest TF checkpoint in it (written by
        `albert-tf convert` or `albert-tf pretrain`). Every model weight must be found in the checkpoint."""
        directory = os.fspath(directory)
        config = AlbertConfig.from_json_file(os.path.join(directory, "albert_config.json"))
        model = cls(config, dropout=dropout)
        path = tf.train.latest_checkpoint(directory)
        if path is None:
            raise FileNotFoundError(f"{directory}: no TF checkpoint found (expected a 'checkpoint' index file and "
                                    "ckpt-N files, as written by `albert-tf convert` or `albert-tf pretrain`)")
        status = model.checkpoint().read(path)
        try:
            status.expect_partial().assert_existing_objects_matched()
        except AssertionError as e:
            raise ValueError(f"{path}: checkpoint does not hold every weight of this model ({e})") from None
        return model

    def save_pretrained(self, directory, spm_model=None):
        """Writes a pretrained-model directory: albert_config.json, a TF checkpoint, and spm.model if given."""
        from albert_tf.utils import atomic_copy  # pylint: disable=import-outside-toplevel

        directory = os.fspath(directory)
        tf.io.gfile.makedirs(directory)
        manager = tf.train.CheckpointManager(self.checkpoint(), directory, max_to_keep=1)
        manager.save(checkpoint_number=0)
        self.config.to_json_file(os.path.join(directory, "albert_config.json"))
        if spm_model:
            atomic_copy(spm_model, os.path.join(directory, "spm.model"))
        return directory

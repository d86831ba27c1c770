"""AlbertPretrainer: the encoder plus the MLM and sentence-order heads."""
import keras

from albert_tf.config import load_config
from albert_tf.modeling.base import INPUT_NAMES, AlbertModelBase
from albert_tf.modeling.encoder import AlbertEncoder
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
      fused, training_streams, remat: the encoder's training path (see AlbertEncoder).

    `from_pretrained(directory)` / `save_pretrained(directory)` read and write pretrained-model directories
    (albert_tf/checkpoints/pretrained.py).
    """

    INPUT_NAMES = PRETRAINER_INPUT_NAMES
    CONFIG_ARGS = ("fused", "training_streams", "remat")

    def __init__(self, config, dropout=True, fused=True, training_streams=1, remat=False, **kwargs):
        config = load_config(config)
        if not dropout:
            config = config.without_dropout()
        self.config = config
        encoder = AlbertEncoder(config, fused=fused, training_streams=training_streams, remat=remat,
                                name="encoder")
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

    @property
    def fused(self):
        return self.encoder.fused

    @property
    def training_streams(self):
        return self.encoder.training_streams

    @property
    def remat(self):
        return self.encoder.remat

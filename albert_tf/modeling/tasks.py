"""Task models on top of an AlbertEncoder: sequence classification / regression, span QA, multiple choice.

Each is a functional Keras model that `compile()`s, `fit()`s and saves like any other; it holds its encoder as
`.encoder` (so `albert_tf.pretrained.restore(task_model, pretrain_dir, part="encoder")` starts it from a
pretrained-model directory) and serializes the encoder's config inside its own (`get_config` / `from_config`).

Inputs: the encoder's dict (`input_word_ids`, `input_mask`, `input_type_ids`, int32 [B, L]); extra keys in a batch
dict are ignored, so a featurized batch holding labels can be passed as it is.
"""
import keras
from keras import ops

from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder
from albert_tf.modeling.layers import initializer

#: Added to the logits of padding positions (as the original's attention bias: large, finite in bfloat16).
_MASKED_LOGIT = -10000.0


def _as_encoder(encoder):
    """An AlbertEncoder, or a config / dict / preset / path to build a fresh one from."""
    return encoder if isinstance(encoder, AlbertEncoder) else AlbertEncoder(encoder)


def _inputs(shape=(None,)):
    return {name: keras.Input(shape=shape, dtype="int32", name=name) for name in INPUT_NAMES}


class _TaskModel(keras.Model):
    """What the task models share: inputs taken from a dict by name, the encoder serialized in the config."""

    _INPUT_NAMES = INPUT_NAMES

    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict):
            inputs = {name: inputs[name] for name in self._INPUT_NAMES}
        return super().call(inputs, training=training, mask=mask)

    def _base_config(self):
        return {"encoder": keras.saving.serialize_keras_object(self.encoder), "name": self.name,
                "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(_TaskModel):
    """Sequence classification (or regression) on the pooled output, as the original run_classifier:
    dropout(pooled_output) → dense(num_classes), kernel truncated normal (initializer_range), bias zeros.

    Inputs: dict of int32 [B, L] `input_word_ids`, `input_mask`, `input_type_ids`.
    Outputs: float32 logits [B, num_classes]; with num_classes=1 (regression) the predicted score [B, 1].

    Args:
      encoder: an AlbertEncoder (its weights are fine-tuned with the head), or a config to build one from.
      num_classes: number of labels; 1 means regression (train with a mean-squared-error loss).
      dropout: dropout rate on the pooled output (the paper's "classifier dropout rate", 0.1).
    """

    def __init__(self, encoder, num_classes, dropout=0.1, **kwargs):
        if int(num_classes) < 1:
            raise ValueError(f"AlbertClassifier: num_classes must be >= 1 (1 = regression), got {num_classes}")
        encoder = _as_encoder(encoder)
        head_dropout = keras.layers.Dropout(dropout, name="classifier_dropout")
        head = keras.layers.Dense(int(num_classes), kernel_initializer=initializer(encoder.config),
                                  name="classifier")
        inputs = _inputs()
        pooled = encoder(inputs)["pooled_output"]
        logits = ops.cast(head(head_dropout(pooled)), "float32")
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.head = head
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)

    def get_config(self):
        return {**self._base_config(), "num_classes": self.num_classes, "dropout": self.dropout}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanQA(_TaskModel):
    """Extractive QA (SQuAD): a dense H→2 on every position gives start and end logits.

    Padding positions (input_mask 0) get −10000 added, so softmax over the positions ignores them. For SQuAD v2
    an unanswerable question is trained with start = end = 0, the [CLS] position; at inference the no-answer score
    is start_logits[:, 0] + end_logits[:, 0] (compared with the best span's score and a threshold chosen on dev).

    Inputs: dict of int32 [B, L] `input_word_ids`, `input_mask`, `input_type_ids`.
    Outputs: dict `start_logits`, `end_logits`, float32 [B, L].

    Args:
      encoder: an AlbertEncoder, or a config to build one from.
      version_2_with_negative: SQuAD v2 (questions may have no answer); recorded for post-processing.
    """

    def __init__(self, encoder, version_2_with_negative=False, **kwargs):
        encoder = _as_encoder(encoder)
        head = keras.layers.Dense(2, kernel_initializer=initializer(encoder.config), name="span_logits")
        inputs = _inputs()
        logits = ops.cast(head(encoder(inputs)["sequence_output"]), "float32")  # [B, L, 2]
        padding = (1.0 - ops.cast(inputs["input_mask"], "float32")) * _MASKED_LOGIT
        start_logits = keras.layers.Identity(name="start_logits")(logits[:, :, 0] + padding)
        end_logits = keras.layers.Identity(name="end_logits")(logits[:, :, 1] + padding)
        super().__init__(inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits},
                         **kwargs)
        self.encoder = encoder
        self.head = head
        self.version_2_with_negative = bool(version_2_with_negative)

    def get_config(self):
        return {**self._base_config(), "version_2_with_negative": self.version_2_with_negative}


@keras.saving.register_keras_serializable(package="albert_tf")
class FoldChoices(keras.layers.Layer):
    """[B, C, L] → [B·C, L] (choice-major inside each example)."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))

    def compute_output_shape(self, input_shape):
        batch = None if input_shape[0] is None or input_shape[1] is None else input_shape[0] * input_shape[1]
        return (batch, input_shape[-1])


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(_TaskModel):
    """Multiple choice (RACE), as the original run_race: each (article + question, option) pair is one sequence;
    the pooled output of each → dropout → dense(1) gives that choice's logit; softmax over the choices.

    Inputs: dict of int32 [B, C, L] `input_word_ids`, `input_mask`, `input_type_ids` (C = num_choices).
    Outputs: float32 logits [B, C].

    Args:
      encoder: an AlbertEncoder, or a config to build one from.
      num_choices: C (RACE: 4).
      dropout: dropout rate on the pooled output.
    """

    def __init__(self, encoder, num_choices, dropout=0.1, **kwargs):
        if int(num_choices) < 2:
            raise ValueError(f"AlbertMultipleChoice: num_choices must be >= 2, got {num_choices}")
        num_choices = int(num_choices)
        encoder = _as_encoder(encoder)
        fold = FoldChoices(name="fold_choices")
        head_dropout = keras.layers.Dropout(dropout, name="classifier_dropout")
        head = keras.layers.Dense(1, kernel_initializer=initializer(encoder.config), name="choice_logit")
        inputs = _inputs((num_choices, None))
        pooled = encoder({name: fold(x) for name, x in inputs.items()})["pooled_output"]  # [B·C, H]
        logits = ops.cast(head(head_dropout(pooled)), "float32")                            # [B·C, 1]
        logits = ops.reshape(logits, (-1, num_choices))                                     # [B, C]
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.head = head
        self.num_choices = num_choices
        self.dropout = float(dropout)

    def get_config(self):
        return {**self._base_config(), "num_choices": self.num_choices, "dropout": self.dropout}

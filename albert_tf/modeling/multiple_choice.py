"""AlbertMultipleChoice: one logit per (context, choice) sequence, softmax over the choices (RACE)."""
import keras
from keras import ops

from albert_tf.modeling.layers import initializer
from albert_tf.modeling.task_model import TaskModel, as_encoder, task_inputs


@keras.saving.register_keras_serializable(package="albert_tf")
class FoldChoices(keras.layers.Layer):
    """[B, C, L] → [B·C, L] (choice-major inside each example)."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))

    def compute_output_shape(self, input_shape):
        batch = None if input_shape[0] is None or input_shape[1] is None else input_shape[0] * input_shape[1]
        return (batch, input_shape[-1])


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(TaskModel):
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
        encoder = as_encoder(encoder)
        fold = FoldChoices(name="fold_choices")
        head_dropout = keras.layers.Dropout(dropout, name="classifier_dropout")
        head = keras.layers.Dense(1, kernel_initializer=initializer(encoder.config), name="choice_logit")
        inputs = task_inputs((num_choices, None))
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

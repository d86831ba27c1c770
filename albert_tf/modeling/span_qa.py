"""AlbertSpanQA: start and end logits over the tokens (SQuAD v1.1 / v2.0)."""
import keras
from keras import ops

from albert_tf.modeling.layers import initializer
from albert_tf.modeling.task_model import MASKED_LOGIT, TaskModel, as_encoder, task_inputs


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanQA(TaskModel):
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
        encoder = as_encoder(encoder)
        head = keras.layers.Dense(2, kernel_initializer=initializer(encoder.config), name="span_logits")
        inputs = task_inputs()
        logits = ops.cast(head(encoder(inputs)["sequence_output"]), "float32")  # [B, L, 2]
        padding = (1.0 - ops.cast(inputs["input_mask"], "float32")) * MASKED_LOGIT
        start_logits = keras.layers.Identity(name="start_logits")(logits[:, :, 0] + padding)
        end_logits = keras.layers.Identity(name="end_logits")(logits[:, :, 1] + padding)
        super().__init__(inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits},
                         **kwargs)
        self.encoder = encoder
        self.head = head
        self.version_2_with_negative = bool(version_2_with_negative)

    def get_config(self):
        return {**self._base_config(), "version_2_with_negative": self.version_2_with_negative}

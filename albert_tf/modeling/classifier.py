"""AlbertClassifier: sequence classification / regression on the pooled output (GLUE)."""
import keras
from keras import ops

from albert_tf.modeling.layers import initializer
from albert_tf.modeling.task_model import TaskModel, as_encoder, task_inputs


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(TaskModel):
    """Sequence classification (or regression) on the pooled output, as the original run_classifier:
    dropout(pooled_output) → dense(num_classes), kernel truncated normal (initializer_range), bias zeros.

    Inputs: dict of int32 [B, L] `input_word_ids`, `input_mask`, `input_type_ids`.
    Outputs: float32 logits [B, num_classes]; with num_classes=1 (regression) the predicted score [B, 1].

    Args:
      encoder: an AlbertEncoder (its weights are fine-tuned with the head), or a config to build one from.
      num_classes: number of labels; 1 means regression (train with a mean-squared-error loss).
      dropout: dropout rate on the pooled output (the paper's "classifier dropout rate", 0.1).
      preprocessor: an AlbertPreprocessor: the model then also takes raw text (strings [B], (text_a, text_b)
        pairs, {"text_a", "text_b"}) in fit, predict and evaluate; `albert_tf.export_task_model` exports it.
    """

    def __init__(self, encoder, num_classes, dropout=0.1, preprocessor=None, **kwargs):
        if int(num_classes) < 1:
            raise ValueError(f"AlbertClassifier: num_classes must be >= 1 (1 = regression), got {num_classes}")
        encoder = as_encoder(encoder)
        head_dropout = keras.layers.Dropout(dropout, name="classifier_dropout")
        head = keras.layers.Dense(int(num_classes), kernel_initializer=initializer(encoder.config),
                                  name="classifier")
        inputs = task_inputs()
        pooled = encoder(inputs)["pooled_output"]
        logits = ops.cast(head(head_dropout(pooled)), "float32")
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.head = head
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)
        self._set_preprocessor(preprocessor)

    def get_config(self):
        return {**self._base_config(), "num_classes": self.num_classes, "dropout": self.dropout}

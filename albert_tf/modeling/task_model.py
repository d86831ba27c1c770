"""What the task models (classifier, span_qa, multiple_choice) share.

Each is a functional Keras model that `compile()`s, `fit()`s and saves like any other; it holds its encoder as
`.encoder` (so `albert_tf.checkpoints.pretrained.restore(task_model, pretrain_dir, part="encoder")` starts it from a
pretrained-model directory) and serializes the encoder's config inside its own (`get_config` / `from_config`).

Inputs: the encoder's dict (`input_word_ids`, `input_mask`, `input_type_ids`, int32 [B, L]); extra keys in a batch
dict are ignored, so a featurized batch holding labels can be passed as it is.
"""
import keras

from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder


#: Added to the logits of padding positions (as the original's attention bias: large, finite in bfloat16).
MASKED_LOGIT = -10000.0


def as_encoder(encoder):
    """An AlbertEncoder, or a config / dict / preset / path to build a fresh one from."""
    return encoder if isinstance(encoder, AlbertEncoder) else AlbertEncoder(encoder)


def task_inputs(shape=(None,)):
    return {name: keras.Input(shape=shape, dtype="int32", name=name) for name in INPUT_NAMES}


class TaskModel(keras.Model):
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

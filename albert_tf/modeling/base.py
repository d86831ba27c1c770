"""AlbertModelBase: what every albert_tf Keras model shares (the encoder, the pretrainer, the task models)."""
import keras
from keras import ops

from albert_tf.config import AlbertConfig

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


class AlbertModelBase(keras.Model):
    """A functional model built from an AlbertConfig and serialized as that config (plus the constructor arguments
    listed in `CONFIG_ARGS`), called with a dict from which only `INPUT_NAMES` are taken (a whole pretraining or
    fine-tuning batch can be passed), and read from / written to pretrained-model directories
    (`albert_tf.pretrained`)."""

    INPUT_NAMES = ()
    #: constructor arguments (besides `config`) that get_config records, each stored as an attribute of that name.
    CONFIG_ARGS = ()

    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict):
            inputs = {name: inputs[name] for name in self.INPUT_NAMES}
        return super().call(inputs, training=training, mask=mask)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable,
                **{name: getattr(self, name) for name in self.CONFIG_ARGS}}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)

    @classmethod
    def from_pretrained(cls, directory, **kwargs):
        """Builds the model from a pretrained-model directory's albert_config.json and restores its latest
        checkpoint (written by `albert-tf convert`, `albert-tf pretrain` or `save_pretrained`). Every weight must
        be found; an AlbertEncoder takes the encoder of any albert_tf model's checkpoint. `kwargs` go to the
        constructor (e.g. dropout=False)."""
        from albert_tf import pretrained  # pylint: disable=import-outside-toplevel

        model = cls(pretrained.read_config(directory), **kwargs)
        pretrained.restore(model, directory, part=cls.RESTORE_PART)
        return model

    #: what `from_pretrained` restores: None (the whole model) or "encoder".
    RESTORE_PART = None

    def save_pretrained(self, directory, spm_model=None):
        """Writes a new pretrained-model directory (albert_config.json, a TF checkpoint, spm.model if given),
        atomically. Returns the directory."""
        from albert_tf import pretrained  # pylint: disable=import-outside-toplevel

        return pretrained.save(self, directory, spm_model=spm_model)


def count_params(model):
    """Number of distinct parameters (shared and tied variables counted once)."""
    seen = {}
    for v in model.weights:
        seen[id(v)] = int(ops.size(v))
    return sum(seen.values())

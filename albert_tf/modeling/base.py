"""AlbertModelBase: what every albert_tf Keras model shares (the encoder, the pretrainer, the task models)."""
import keras
import tensorflow as tf
from keras import ops

from albert_tf.checkpoints import handles, pretrained
from albert_tf.config import AlbertConfig

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def trim_padding(features, length_bucket):
    """Cuts the padding that every example of a batch shares: each int32 [..., L] input becomes [..., L'], L' the
    batch's longest example (its `input_mask` sum) rounded up to a multiple of `length_bucket`, at most L.
    Padding is masked out of attention, so the model's outputs at real tokens (and the pooled output) are those of
    the full-length batch; only the FLOPs spent on padding go. Other entries (e.g. SQuAD's start positions, which
    point at real tokens) pass through."""
    mask = features["input_mask"]
    full = tf.shape(mask)[-1]
    longest = tf.maximum(1, tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1)))  # 1: an empty batch
    keep = tf.minimum(full, -(-longest // length_bucket) * length_bucket)
    return {k: v[..., :keep] if k in INPUT_NAMES else v for k, v in features.items()}


class AlbertModelBase(keras.Model):
    """A functional model built from an AlbertConfig and serialized as that config (plus the constructor arguments
    listed in `CONFIG_ARGS`), called with a dict from which only `INPUT_NAMES` are taken (a whole pretraining or
    fine-tuning batch can be passed), and read from / written to pretrained-model directories
    (`albert_tf.checkpoints.pretrained`)."""

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
    def from_pretrained(cls, handle, **kwargs):
        """Builds the model from what `handle` holds and reads its weights: a pretrained-model directory (its latest
        checkpoint: `albert-tf convert`'s, `pretrain`'s, `save_pretrained`'s), an `albert-tf export` (BASE/N, or
        BASE: its newest version), a released model's name (`albert_base_v2`, `hf:OWNER/NAME`: downloaded once
        into the cache) or a Hugging Face ALBERT directory (albert_tf.checkpoints.handles). Every weight must be
        found; an AlbertEncoder takes the encoder of any of them, an AlbertPretrainer wants the pretraining heads
        (an export holds none). `kwargs` go to the constructor (e.g. dropout=False). A bad handle: one line naming
        it and what was expected."""
        return cls.from_source(handles.resolve_init(handle, flag=f"{cls.__name__}.from_pretrained"), **kwargs)

    @classmethod
    def from_source(cls, source, **kwargs):
        """`from_pretrained` of a handle already resolved: `source` is its albert_tf.checkpoints.handles.InitSource
        (a job that resolves --init once passes it on)."""
        model = cls(source.config, **kwargs)
        handles.restore(model, source, part=cls.RESTORE_PART)
        return model

    #: what `from_pretrained` restores: None (the whole model) or "encoder".
    RESTORE_PART = None

    def save_pretrained(self, directory, spm_model=None):
        """Writes a new pretrained-model directory (albert_config.json, a TF checkpoint, spm.model if given),
        atomically. Returns the directory."""
        return pretrained.save(self, directory, spm_model=spm_model)


def count_params(model):
    """Number of distinct parameters (shared and tied variables counted once)."""
    seen = {}
    for v in model.weights:
        seen[id(v)] = int(ops.size(v))
    return sum(seen.values())

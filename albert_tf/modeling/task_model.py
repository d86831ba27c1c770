"""What the task models (classifier, span_qa, multiple_choice) share.

Each is a functional Keras model that `compile()`s, `fit()`s and saves like any other; it holds its encoder as
`.encoder` (so `from_pretrained(handle, ...)` starts it from any handle, albert_tf.checkpoints.handles) and serializes
the encoder's config inside its own (`get_config` / `from_config`).

Inputs: the encoder's dict (`input_word_ids`, `input_mask`, `input_type_ids`, int32 [B, L]); extra keys in a batch
dict are ignored, so a featurized batch holding labels can be passed as it is.
"""
import keras

from albert_tf.checkpoints import handles
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder
from albert_tf.modeling.preprocessor import AlbertPreprocessor, text_tensors


#: Added to the logits of padding positions (as the original's attention bias: large, finite in bfloat16).
MASKED_LOGIT = -10000.0


def as_encoder(encoder):
    """An AlbertEncoder, or a config / dict / preset / path to build a fresh one from."""
    return encoder if isinstance(encoder, AlbertEncoder) else AlbertEncoder(encoder)


def task_inputs(shape=(None,)):
    return {name: keras.Input(shape=shape, dtype="int32", name=name) for name in INPUT_NAMES}


class TaskModel(keras.Model):
    """What the task models share: inputs taken from a dict by name, the encoder serialized in the config; with a
    `preprocessor` (an AlbertPreprocessor), raw text in as well: anything but a dict of packed inputs goes through it
    first (strings, (text_a, text_b) pairs, {"text_a", "text_b"})."""

    _INPUT_NAMES = INPUT_NAMES
    preprocessor = None

    def call(self, inputs, training=None, mask=None):
        if self.preprocessor is not None and not (isinstance(inputs, dict) and INPUT_NAMES[0] in inputs):
            inputs = self.preprocessor(inputs)
        if isinstance(inputs, dict):
            inputs = {name: inputs[name] for name in self._INPUT_NAMES}
        return super().call(inputs, training=training, mask=mask)

    def _set_preprocessor(self, preprocessor):
        """Attaches an AlbertPreprocessor (None: none); the model then takes raw text too, so Keras's check of the
        inputs against the packed-input dict is lifted (the functional graph checks them after packing)."""
        self.preprocessor = preprocessor
        if preprocessor is not None:
            self.input_spec = None

    # keras.Model.fit's positional arguments after x and y: batch_size, epochs, verbose, callbacks, validation_split,
    # then validation_data
    _VALIDATION_DATA_AT = 5

    def fit(self, x=None, y=None, *args, **kwargs):
        """keras.Model.fit, with raw text (Python lists, numpy arrays of str, bytes or objects) taken in x and in
        validation_data's x as well, as tf.string tensors (`_text_tensors`)."""
        if len(args) > self._VALIDATION_DATA_AT:
            at = self._VALIDATION_DATA_AT
            args = (*args[:at], self._validation_tensors(args[at]), *args[at + 1:])
        if "validation_data" in kwargs:
            kwargs["validation_data"] = self._validation_tensors(kwargs["validation_data"])
        self._build_optimizer()
        return super().fit(self._text_tensors(x), y, *args, **kwargs)

    def _build_optimizer(self):
        """Creates the compiled optimizer's variables for the trainable weights, as Keras does under a distribution
        strategy. Without one, Keras creates them while it traces the train step, and TensorFlow then traces the
        whole step a second time (a variable made in a trace): half a short fit's CPU time."""
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not None and not optimizer.built:
            with self.distribute_strategy.scope():
                optimizer.build(self.trainable_variables)

    def _validation_tensors(self, data):
        """fit's validation_data with its x's raw text as tf.string tensors: (x, y) or (x, y, sample_weight), a
        tuple or a list; a tf.data.Dataset (or None) unchanged."""
        if self.preprocessor is not None and isinstance(data, (tuple, list)) and len(data) in (2, 3):
            return (text_tensors(data[0]), *data[1:])
        return data

    def evaluate(self, x=None, y=None, *args, **kwargs):
        return super().evaluate(self._text_tensors(x), y, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        return super().predict(self._text_tensors(x), *args, **kwargs)

    def _text_tensors(self, x):
        """With a preprocessor: raw text given as Python lists or numpy arrays of str (which Keras's array adapter
        refuses) as tf.string tensors (`preprocessor.text_tensors`). Anything else unchanged."""
        if self.preprocessor is None or x is None:
            return x
        if self.preprocessor.refresh():  # a new tokenizer resource: trace the steps again
            self.train_function = self.test_function = self.predict_function = None
        return text_tensors(x)

    def _base_config(self):
        config = {"encoder": keras.saving.serialize_keras_object(self.encoder), "name": self.name,
                  "trainable": self.trainable}
        if self.preprocessor is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config

    @classmethod
    def from_pretrained(cls, handle, seq_length=None, encoder_args=None, **kwargs):
        """A new task model whose encoder is read from `handle` (anything `AlbertEncoder.from_pretrained` reads: a
        pretrained-model directory, any albert_tf model's checkpoint, an export, a released model's name, a
        Hugging Face directory); its head is new. seq_length: also attach an AlbertPreprocessor of the handle's
        vocabulary and casing at that length, so that the model fits and predicts on raw strings. encoder_args:
        AlbertEncoder's constructor arguments (e.g. {"dropout": False}); `kwargs`: the task model's (num_classes,
        ...)."""
        flag = f"{cls.__name__}.from_pretrained"
        source = handles.resolve_init(handle, flag=flag)
        encoder = AlbertEncoder(source.config, **(encoder_args or {}))
        handles.restore(encoder, source, part="encoder")
        if seq_length is not None:
            if source.spm_model is None:
                raise ValueError(f"{flag} {handle}: seq_length needs a vocabulary and {source.path} holds none (no "
                                 "spm.model); attach an AlbertPreprocessor(SPM_MODEL, seq_length) yourself")
            kwargs["preprocessor"] = AlbertPreprocessor(source.spm_model, seq_length, lower_case=source.lower_case)
        return cls(encoder, **kwargs)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)


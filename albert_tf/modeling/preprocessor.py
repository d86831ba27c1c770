"""AlbertPreprocessor: raw text → the model inputs, in the graph (the exports' tokenizer), as a Keras layer."""
import os

import keras
import numpy as np
import tensorflow as tf

from albert_tf.text import vocabulary
from albert_tf.text.in_graph import clean_utf8
from albert_tf.text.sentencepiece import AlbertTokenizer

_ASSET = "spm.model"


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPreprocessor(keras.layers.Layer):
    """Packs raw text as `AlbertTokenizer.pack` does, inside the graph: in tf.data (`dataset.map(preprocessor)`),
    in a task model (`AlbertClassifier(..., preprocessor=preprocessor)` then fits and predicts on strings) and in
    an exported SavedModel (the same in-graph tokenizer `albert-tf export` and `finetune` export).

    Inputs: a string tensor [B] (single texts), a pair (text_a [B], text_b [B]) as a tuple or list, or a dict with
    `text_a` (and `text_b`); a text_b that tokenizes to no ids ("") gives [CLS] a [SEP], as `pack`. Invalid UTF-8
    becomes U+FFFD, as in the exports. Lists and numpy arrays of str are taken too.
    Outputs: dict of int32 [B, seq_length] `input_word_ids`, `input_mask`, `input_type_ids` (a scalar string gives
    [seq_length] each).

    Args:
      tokenizer: an AlbertTokenizer, or a SentencePiece model path (its recorded casing, else uncased) or bytes.
      seq_length: the packed length L.

    Saved with the model (`.keras`): the SentencePiece model as the layer's asset, the casing in its config.
    """

    def __init__(self, tokenizer=None, seq_length=128, lower_case=None, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        if int(seq_length) < 3:
            raise ValueError(f"AlbertPreprocessor: seq_length must be at least 3, got {seq_length}")
        self.seq_length = int(seq_length)
        self.tokenizer = None
        if tokenizer is not None:
            self.set_tokenizer(tokenizer, lower_case)
        self._lower_case = lower_case
        self.built = True

    def set_tokenizer(self, tokenizer, lower_case=None):
        """Sets the tokenizer: an AlbertTokenizer, or a SentencePiece model path or bytes (`lower_case`: None for
        the model's casing record, else uncased)."""
        if not isinstance(tokenizer, AlbertTokenizer):
            if lower_case is None and isinstance(tokenizer, (str, os.PathLike)):
                lower_case = vocabulary.read_casing(tokenizer)
            tokenizer = AlbertTokenizer(tokenizer, lower_case=True if lower_case is None else lower_case)
        self.tokenizer = tokenizer

    def __call__(self, inputs, *args, **kwargs):
        if tf.executing_eagerly():
            self.refresh()
        return super().__call__(text_tensors(inputs), *args, **kwargs)

    def refresh(self):
        """Builds the in-graph tokenizer again if its SentencePiece resource is gone (`tf.random.set_seed`, which
        `keras.utils.set_random_seed` calls, deletes it); call eagerly. Returns True when it was rebuilt: functions
        traced before hold the old resource."""
        if self.tokenizer is None:
            return False
        before = self.tokenizer._in_graph  # pylint: disable=protected-access  (the one built, if any)
        return self.tokenizer.in_graph is not before and before is not None

    def call(self, inputs):
        if self.tokenizer is None:
            raise ValueError("AlbertPreprocessor has no tokenizer (give one, or load the model it was saved with)")
        text_a, text_b = _texts(inputs)
        text_a = clean_utf8(tf.convert_to_tensor(text_a, tf.string))
        if text_b is not None:
            text_b = clean_utf8(tf.convert_to_tensor(text_b, tf.string))
        scalar = text_a.shape.rank == 0
        if scalar:
            text_a = text_a[tf.newaxis]
            text_b = None if text_b is None else text_b[tf.newaxis]
        packed = self.tokenizer.tf_pack(text_a, text_b, seq_length=self.seq_length)
        return {name: value[0] for name, value in packed.items()} if scalar else packed

    def compute_output_spec(self, inputs):
        text_a, _ = _texts(inputs)
        batch = tuple(getattr(text_a, "shape", (None,)))[:1]
        return {name: keras.KerasTensor(batch + (self.seq_length,), dtype="int32")
                for name in ("input_word_ids", "input_mask", "input_type_ids")}

    def get_config(self):
        lower_case = self.tokenizer.lower_case if self.tokenizer is not None else self._lower_case
        return {**super().get_config(), "seq_length": self.seq_length, "lower_case": lower_case}

    def save_assets(self, dir_path):
        if self.tokenizer is not None:
            with open(os.path.join(dir_path, _ASSET), "wb") as f:
                f.write(self.tokenizer.model_proto)

    def load_assets(self, dir_path):
        path = os.path.join(dir_path, _ASSET)
        if os.path.exists(path):
            with open(path, "rb") as f:
                self.set_tokenizer(f.read(), self._lower_case)


def _texts(inputs):
    """(text_a, text_b or None) of the inputs AlbertPreprocessor takes."""
    if isinstance(inputs, dict):
        return inputs["text_a"], inputs.get("text_b")
    if isinstance(inputs, tuple) or (isinstance(inputs, list) and len(inputs) == 2 and not isinstance(
            inputs[0], (str, bytes))):
        text_a, text_b = inputs
        return text_a, text_b
    return inputs, None


def text_tensors(inputs):
    """Raw text given as Python lists or numpy arrays of str / bytes (which Keras refuses as layer and model
    inputs) as tf.string tensors, in a pair or dict element-wise; a dict of packed inputs, tensors and anything
    else unchanged."""
    if isinstance(inputs, dict):
        return {key: _strings(value) for key, value in inputs.items()}
    if isinstance(inputs, tuple) or (isinstance(inputs, list) and len(inputs) == 2 and not isinstance(
            inputs[0], (str, bytes))):
        return tuple(_strings(value) for value in inputs)
    return _strings(inputs)


def _strings(value):
    if isinstance(value, np.ndarray) and value.dtype.kind in "USO":
        return tf.constant(value.astype(object) if value.dtype.kind == "U" else value, tf.string)
    if isinstance(value, (str, bytes)) or (isinstance(value, list) and value and all(
            isinstance(v, (str, bytes)) for v in value)):
        return tf.constant(value, tf.string)
    return value

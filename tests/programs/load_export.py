"""albert_tf.load_export(BASE) in a process that has not imported tensorflow_text: it must register TF Text's ops
itself. Serves the texts read from stdin (one a line) through serving_default and saves the outputs to OUT.npz
(tests/test_export.py).

usage: load_export.py BASE OUT
"""
import sys

import numpy as np
import tensorflow as tf

import albert_tf

base, out = sys.argv[1:]
assert "tensorflow_text" not in sys.modules  # nothing has registered the SentencePiece ops yet
loaded = albert_tf.load_export(base)
assert "tensorflow_text" in sys.modules
texts = sys.stdin.read().split("\n")
np.savez(out, **{k: v.numpy() for k, v in loaded.serving_default(text_a=tf.constant(texts)).items()})

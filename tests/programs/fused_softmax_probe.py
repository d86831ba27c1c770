"""The fused masked softmax, forward and backward, at a size where XLA:CPU 2.21 picks YNNPACK for its reductions;
prints the gradient's sum (tests/test_xla_flags.py: run with XLA_FLAGS=--xla_dump_to=DIR)."""
import albert_tf  # noqa: F401  # pylint: disable=unused-import  (its import sets XLA_FLAGS)
import tensorflow as tf

from albert_tf.modeling import fused

scores, bias = tf.random.normal([8, 4, 32, 32]), tf.zeros([8, 1, 1, 32])
with tf.GradientTape() as tape:
    tape.watch(scores)
    total = tf.reduce_sum(fused.masked_softmax(scores, bias, 0.25, fused=True) * scores)
print(float(tf.reduce_sum(tape.gradient(total, scores))))

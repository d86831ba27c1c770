"""Fine-tuning's optimizer: Keras AdamW whose `global_clipnorm` clips on the true global norm of the gradients.

Keras computes `global_clipnorm`'s norm over an IndexedSlices gradient (the word and token-type embeddings') slice by
slice: a row that occurs k times in a batch adds the squares of its k slices instead of the square of their sum.
The original's `tf.clip_by_global_norm` (optimization.py) sees the dense gradient. `AdamWDenseNorm` densifies such a
gradient (slices summed per row) and clips on the dense norm. The update is unchanged: Keras' clip already gave
AdamW dense gradients (its `slices * scale` densifies), and Keras' Adam squares an IndexedSlices slice by slice, so
a sparse gradient with repeated rows would give it another second moment. Densifying (tf.convert_to_tensor, a
segment sum into the variable's shape) also compiles under XLA, where tf.unique's dynamic shape would not.
"""
import keras


def dense_gradients(grads):
    """Each tf.IndexedSlices as its dense tensor (slices summed per row); tensors and None as they are."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]


def clip_by_global_norm(grads, clip_norm):
    """`tf.clip_by_global_norm(grads, clip_norm)[0]` on the dense gradients (IndexedSlices densified first). A
    non-finite norm gives NaN gradients, as TensorFlow's and Keras' do.

    Args:
      grads: list of tensors, tf.IndexedSlices or None; clip_norm: a positive float.
    Returns:
      a list like grads of dense tensors (None kept): each times clip_norm / max(norm, clip_norm), norm the square
      root of the sum of all squares (in float32).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    grads = dense_gradients(grads)
    squares = [tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads if g is not None]
    norm = tf.sqrt(tf.add_n(squares)) if squares else tf.zeros([], tf.float32)
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)  # NaN when norm is not finite
    return [None if g is None else g * tf.cast(scale, g.dtype) for g in grads]


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWDenseNorm(keras.optimizers.AdamW):
    """keras.optimizers.AdamW whose `global_clipnorm` is applied on the dense gradients' global norm (see
    `clip_by_global_norm`); everything else is AdamW's (clipnorm / clipvalue unchanged). Where Keras clips (each
    replica's gradients, before they are summed across replicas) is unchanged too."""

    def _clip_gradients(self, grads):
        if self.global_clipnorm and self.global_clipnorm > 0:
            return clip_by_global_norm(grads, self.global_clipnorm)
        return super()._clip_gradients(grads)

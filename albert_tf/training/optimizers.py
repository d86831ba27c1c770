"""Fine-tuning's optimizer: Keras AdamW whose `global_clipnorm` clips on the true global norm of the gradients.

Keras computes `global_clipnorm`'s norm over an IndexedSlices gradient (the word and token-type embeddings') slice by
slice: a row that occurs k times in a batch adds the squares of its k slices instead of the square of their sum.
The original's `tf.clip_by_global_norm` (optimization.py) sees the dense gradient. `AdamWDenseNorm` sums the slices
per row first (the gradients stay IndexedSlices, one slice per row), then clips on the dense norm, so the clip and
the AdamW step are the dense gradient's.
"""
import keras


def summed_rows(grad):
    """An IndexedSlices gradient with its slices summed per row: tf.IndexedSlices with unique indices (in first-seen
    order) and values [distinct rows, ...], the same dense gradient. Anything else is returned as it is."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if not isinstance(grad, tf.IndexedSlices):
        return grad
    rows, position = tf.unique(grad.indices)
    return tf.IndexedSlices(tf.math.unsorted_segment_sum(grad.values, position, tf.size(rows)), rows,
                            grad.dense_shape)


def global_norm(grads):
    """The global norm of the dense gradients: sqrt of the sum of squares (an IndexedSlices' slices summed per row
    first, `summed_rows`), in float32.

    Args:
      grads: list of tensors, tf.IndexedSlices or None (skipped).
    Returns:
      a float32 scalar tensor.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    squares = [tf.zeros([], tf.float32)]
    for grad in grads:
        if grad is not None:
            grad = summed_rows(grad)
            values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
            squares.append(tf.reduce_sum(tf.square(tf.cast(values, tf.float32))))
    return tf.sqrt(tf.add_n(squares))


def clip_by_global_norm(grads, clip_norm):
    """`tf.clip_by_global_norm(grads, clip_norm)[0]` with `global_norm` (dense) as the norm. IndexedSlices stay
    IndexedSlices, their slices summed per row (`summed_rows`): Keras' Adam squares a sparse gradient slice by
    slice too, so its second moment sees the dense gradient only with one slice per row. A non-finite norm gives
    NaN gradients, as TensorFlow's and Keras' do.

    Args:
      grads: list of tensors, tf.IndexedSlices or None; clip_norm: a positive float.
    Returns:
      a list like grads: each times clip_norm / max(norm, clip_norm).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    grads = [None if g is None else summed_rows(g) for g in grads]
    norm = global_norm(grads)
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)  # NaN when norm is not finite
    clipped = []
    for grad in grads:
        if grad is None:
            clipped.append(None)
        elif isinstance(grad, tf.IndexedSlices):
            clipped.append(tf.IndexedSlices(grad.values * tf.cast(scale, grad.values.dtype), grad.indices,
                                            grad.dense_shape))
        else:
            clipped.append(grad * tf.cast(scale, grad.dtype))
    return clipped


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWDenseNorm(keras.optimizers.AdamW):
    """keras.optimizers.AdamW whose `global_clipnorm` is applied on the dense gradients' global norm (see
    `clip_by_global_norm`); everything else is AdamW's (clipnorm / clipvalue unchanged). Where Keras clips (each
    replica's gradients, before they are summed across replicas) is unchanged too."""

    def _clip_gradients(self, grads):
        if self.global_clipnorm and self.global_clipnorm > 0:
            return clip_by_global_norm(grads, self.global_clipnorm)
        return super()._clip_gradients(grads)

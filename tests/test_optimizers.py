"""albert_tf.training.optimizers: fine-tuning's AdamW clips on the dense gradients' global norm (the original's
tf.clip_by_global_norm), also when an embedding's gradient is IndexedSlices with repeated rows: against a numpy
reference (densified by np.add.at, clipped, AdamW steps)."""
import keras
import numpy as np
import pytest

from albert_tf.training.optimizers import AdamWDenseNorm, clip_by_global_norm

IDS = np.array([[1, 1, 1, 1], [2, 1, 1, 4]], np.int32)  # repeated tokens: row 1 six times
LR, DECAY, EPS = 0.01, 0.01, 1e-6


def _model():
    """Embedding [6, 3] -> mean over tokens -> Dense 2; fixed weights (big enough that the norm exceeds 1)."""
    inputs = keras.Input([IDS.shape[1]], dtype="int32")
    embedded = keras.layers.Embedding(6, 3, name="embedding")(inputs)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)
    model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(pooled))
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(size=w.shape).astype("float32") * 3 for w in model.get_weights()])
    return model


def _loss(model, ids):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.reduce_sum(model(ids) * tf.constant([[4.0, -2.0], [1.0, 3.0]]))


def _gradients(model):
    """The model's gradients as TensorFlow gives them (the embedding's: IndexedSlices)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    with tf.GradientTape() as tape:
        loss = _loss(model, IDS)
    return tape.gradient(loss, [v.value for v in model.trainable_variables])


def _dense(grad):
    """Reference densification in numpy: each slice added into its row."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if not isinstance(grad, tf.IndexedSlices):
        return np.asarray(grad, np.float64)
    dense = np.zeros(grad.dense_shape.numpy(), np.float64)
    np.add.at(dense, grad.indices.numpy(), grad.values.numpy())
    return dense


def _reference_clip(dense, clip_norm=1.0):
    """tf.clip_by_global_norm's rule on dense arrays: times clip_norm / max(norm, clip_norm)."""
    norm = np.sqrt(sum((g ** 2).sum() for g in dense))
    return [g * clip_norm / max(norm, clip_norm) for g in dense], norm


def _reference_steps(weights, steps, decayed, epsilon=EPS, lr=LR):
    """AdamW steps from zero moments, Keras' order: decoupled decay w -= lr*wd*w, then Adam (bias correction folded
    into the step size). steps: one list of dense (already clipped) gradients per step."""
    weights = list(weights)
    moments = [(np.zeros_like(w), np.zeros_like(w)) for w in weights]
    for t, dense in enumerate(steps, 1):
        alpha = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        for k, (g, decay) in enumerate(zip(dense, decayed)):
            m, v = moments[k]
            m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
            moments[k] = m, v
            w = weights[k] * (1 - lr * DECAY) if decay else weights[k]
            weights[k] = w - alpha * m / (np.sqrt(v) + epsilon)
    return weights


def test_clip_uses_the_dense_norm_with_repeated_rows():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    grads = _gradients(_model())
    assert isinstance(grads[0], tf.IndexedSlices) and len(grads[0].indices) == IDS.size  # 8 slices, 3 rows
    want, norm = _reference_clip([_dense(g) for g in grads])
    assert norm > 1.5  # the clip acts
    sliced = np.sqrt(sum((np.asarray(g.values if isinstance(g, tf.IndexedSlices) else g) ** 2).sum()
                         for g in grads))
    assert abs(sliced - norm) > 0.1  # slice by slice would be another norm
    got = clip_by_global_norm(grads, 1.0)
    for g, w in zip(got, want):
        np.testing.assert_allclose(_dense(g), w, atol=1e-6, rtol=0)


def test_steps_equal_the_dense_reference_and_stock_keras_does_not():
    """One step (epsilon 1e-6; epsilon 1 at lr 0.5), then two (the first just under the clip norm, the second
    clipped). Adam's first steps barely see a uniform scale of the gradients at a small epsilon; at epsilon 1 the
    step is nearly proportional to it, which shows Keras' own clip (its slice-by-slice norm) scaling by another
    factor."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = _model()
    weights = [np.asarray(w, np.float64) for w in model.get_weights()]
    grads = _gradients(model)
    clipped, norm = _reference_clip([_dense(g) for g in grads])
    factor = 0.9 / norm
    small = [tf.IndexedSlices(g.values * factor, g.indices, g.dense_shape) if isinstance(g, tf.IndexedSlices)
             else g * factor for g in grads]
    decayed = [not v.path.endswith("bias") for v in model.trainable_variables]
    cases = {"one": ([grads], [clipped], EPS, LR), "one, epsilon 1": ([grads], [clipped], 1.0, 0.5),
             "two": ([small, grads], [[_dense(g) for g in small], clipped], EPS, LR)}
    error = {}
    for name, kind in (("ours", AdamWDenseNorm), ("keras", keras.optimizers.AdamW)):
        for case, (applied, reference, epsilon, lr) in cases.items():
            want = _reference_steps(weights, reference, decayed, epsilon, lr)
            model.set_weights([w.astype("float32") for w in weights])
            optimizer = kind(lr, weight_decay=DECAY, beta_1=0.9, beta_2=0.999, epsilon=epsilon,
                             global_clipnorm=1.0)
            optimizer.exclude_from_weight_decay(var_list=[v for v, d in zip(model.trainable_variables, decayed)
                                                          if not d])
            for step in applied:
                optimizer.apply(step, model.trainable_variables)
            error[name, case] = max(np.abs(np.asarray(v) - w).max()
                                    for v, w in zip(model.trainable_variables, want))
    assert max(error["ours", case] for case in cases) < 1e-6, error
    assert error["keras", "one, epsilon 1"] > 1e-4, error  # Keras clipped to another scale


@pytest.mark.parametrize("strategy, jit", [("mirrored", False), ("default", True)])
def test_model_fit_under_a_strategy_takes_the_reference_step(strategy, jit):
    """model.fit's train step, under MirroredStrategy, and XLA-compiled (as `finetune` on a GPU or TPU)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    scope = tf.distribute.MirroredStrategy(["/cpu:0"]) if strategy == "mirrored" else tf.distribute.get_strategy()
    reference = _model()
    weights = [np.asarray(w, np.float64) for w in reference.get_weights()]
    dense, _ = _reference_clip([_dense(g) for g in _gradients(reference)])
    want = _reference_steps(weights, [dense], [True] * len(weights))
    with scope.scope():
        model = _model()
        optimizer = AdamWDenseNorm(LR, weight_decay=DECAY, beta_1=0.9, beta_2=0.999, epsilon=EPS,
                                   global_clipnorm=1.0)
        model.compile(optimizer, loss=lambda _, logits: _loss_of_logits(logits), jit_compile=jit)
    model.fit(IDS, np.zeros([len(IDS), 2], np.float32), batch_size=len(IDS), epochs=1, shuffle=False, verbose=0)
    for v, w in zip(model.get_weights(), want):
        np.testing.assert_allclose(v, w, atol=1e-6, rtol=0)


def _loss_of_logits(logits):
    """_loss's arithmetic on the model's output as a per-example Keras loss: Keras averages over the batch, so
    each example's term is times the batch size."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.reduce_sum(logits * tf.constant([[4.0, -2.0], [1.0, 3.0]]), axis=-1) * len(IDS)

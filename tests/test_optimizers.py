"""albert_tf.training.optimizers: fine-tuning's optimizers clip on the dense gradients' global norm (the original's
tf.clip_by_global_norm), also when an embedding's gradient is IndexedSlices with repeated rows: against a numpy
reference (densified by np.add.at, clipped, AdamW steps). AdamWeightDecay step by step against a numpy
transcription of the original's optimization.py (schedule, clip, AdamWeightDecayOptimizer) over 10 steps."""
import re

import keras
import numpy as np
import pytest

import helpers
from albert_tf.training.optimizers import (AdamWDenseNorm, AdamWeightDecay, clip_by_global_norm,
                                           make_optimizer)
from albert_tf.training.schedules import WarmupPolynomialDecay

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
@pytest.mark.parametrize("name", ["adamw-original", "adamw-keras"])
def test_model_fit_under_a_strategy_takes_the_reference_step(strategy, jit, name):
    """model.fit's train step, under MirroredStrategy, and XLA-compiled (as `finetune` on a GPU or TPU)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    scope = tf.distribute.MirroredStrategy(["/cpu:0"]) if strategy == "mirrored" else tf.distribute.get_strategy()
    reference = _model()
    weights = [np.asarray(w, np.float64) for w in reference.get_weights()]
    grads = [_dense(g) for g in _gradients(reference)]
    if name == "adamw-keras":
        want = _reference_steps(weights, [_reference_clip(grads)[0]], [not v.path.endswith("bias") for v in
                                                                           reference.trainable_variables])
    else:
        paths = [v.path for v in reference.trainable_variables]
        want = list(original_steps(dict(zip(paths, weights)), [dict(zip(paths, grads))], [LR]))[-1][0]
        want = [want[p] for p in paths]
    with scope.scope():
        model = _model()
        optimizer = make_optimizer(name, LR, model.trainable_variables)
        model.compile(optimizer, loss=lambda _, logits: _loss_of_logits(logits), jit_compile=jit)
    model.fit(IDS, np.zeros([len(IDS), 2], np.float32), batch_size=len(IDS), epochs=1, shuffle=False, verbose=0)
    for v, w in zip(model.get_weights(), want):
        np.testing.assert_allclose(v, w, atol=1e-6, rtol=0)


def _loss_of_logits(logits):
    """_loss's arithmetic on the model's output as a per-example Keras loss: Keras averages over the batch, so
    each example's term is times the batch size."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.reduce_sum(logits * tf.constant([[4.0, -2.0], [1.0, 3.0]]), axis=-1) * len(IDS)


# ------------------------------------------------------------------------------------------ the original's update
def original_learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
    """optimization.create_optimizer's learning rate at global_step `step`: tf.train.polynomial_decay (power 1, end
    0, no cycle), then the linear warm-up while step < num_warmup_steps."""
    decayed = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)
    if num_warmup_steps and step < num_warmup_steps:
        return init_lr * step / num_warmup_steps
    return decayed


def original_steps(params, grads_per_step, learning_rates, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
                   epsilon=1e-6, exclude_from_weight_decay=("LayerNorm", "layer_norm", "bias"), clip_norm=1.0):
    """A numpy transcription of the original's fine-tuning update, in float64: tf.clip_by_global_norm on the
    (dense) gradients, then AdamWeightDecayOptimizer.apply_gradients for each variable in turn. Yields
    (params, m, v) after each step; each a dict by variable name."""
    params = {k: np.asarray(w, np.float64).copy() for k, w in params.items()}
    m = {k: np.zeros_like(w) for k, w in params.items()}
    v = {k: np.zeros_like(w) for k, w in params.items()}
    for grads, learning_rate in zip(grads_per_step, learning_rates):
        global_norm = np.sqrt(sum(np.sum(np.square(g)) for g in grads.values()))
        grads = {k: g * clip_norm / max(global_norm, clip_norm) for k, g in grads.items()}
        for name, param in params.items():
            grad = grads[name]
            next_m = beta_1 * m[name] + (1.0 - beta_1) * grad
            next_v = beta_2 * v[name] + (1.0 - beta_2) * np.square(grad)
            update = next_m / (np.sqrt(next_v) + epsilon)
            if weight_decay_rate and not any(re.search(r, name) for r in exclude_from_weight_decay):
                update += weight_decay_rate * param
            params[name] = param - learning_rate * update
            m[name], v[name] = next_m, next_v
        yield dict(params), dict(m), dict(v)


#: Variables named as the original's checkpoints and ours: decayed, or excluded by LayerNorm / layer_norm / bias.
_SHAPES = {
    "embeddings/word_embeddings": (7, 3),        # its gradients: IndexedSlices with repeated rows
    "encoder/attention/query/kernel": (3, 4),
    "encoder/attention/query/bias": (4,),
    "encoder/LayerNorm/gamma": (4,),
    "encoder/ffn_layer_norm/beta": (4,),
    "classifier/output_weights": (4, 2),
    "classifier/output_bias": (2,),
}
_DECAYED = {"embeddings/word_embeddings", "encoder/attention/query/kernel", "classifier/output_weights"}


def _gradient_steps(rng, steps):
    """Per step: {path: (what the optimizer is given, its dense numpy value)}. Scales alternate so that some
    steps are clipped (global norm > 1) and some not."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    out = []
    for step in range(steps):
        scale = (0.05, 2.0)[step % 2]
        grads = {}
        for path, shape in _SHAPES.items():
            if path.startswith("embeddings"):
                indices = np.array([1, 1, 4, 1, 6, 4])
                values = (scale * rng.normal(size=(len(indices), shape[1]))).astype(np.float32)
                dense = np.zeros(shape)
                np.add.at(dense, indices, values)
                grads[path] = (tf.IndexedSlices(tf.constant(values), tf.constant(indices), tf.constant(shape)),
                               dense)
            else:
                value = (scale * rng.normal(size=shape)).astype(np.float32)
                grads[path] = (tf.constant(value), value.astype(np.float64))
        out.append(grads)
    return out


def _initial_values(rng):
    return {path: (rng.normal(size=shape) * (0.5 if "gamma" not in path else 0.1) + ("gamma" in path))
            .astype(np.float32) for path, shape in _SHAPES.items()}


@pytest.mark.parametrize("jit", [False, True])
def test_adam_weight_decay_equals_the_original_step_by_step(jit):
    """10 steps (warm-up 3 of a 10-step linear decay, the first at lr 0), clipped and unclipped: weights and both
    moments within 1e-6 of the transcription after every step; slots named and shaped after their variables."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng(0)
    values, steps = _initial_values(rng), 10
    grads = _gradient_steps(rng, steps)
    norms = [np.sqrt(sum(np.sum(d ** 2) for _, d in g.values())) for g in grads]
    assert min(norms) < 1.0 < max(norms)  # both sides of the clip
    learning_rates = [original_learning_rate(t, 0.05, steps, 3) for t in range(steps)]
    reference = original_steps(values, [{k: d for k, (_, d) in g.items()} for g in grads], learning_rates)
    variables = helpers.named_variables(values)
    optimizer = make_optimizer("adamw-original", WarmupPolynomialDecay(0.05, steps, 3), variables)
    assert isinstance(optimizer, AdamWeightDecay) and optimizer.global_clipnorm == 1.0
    slots = {s.path.split("/")[-1]: s for s in optimizer.variables if s.path.endswith(("_adam_m", "_adam_v"))}
    assert len(slots) == 2 * len(variables)
    for v in variables:
        for suffix in ("m", "v"):
            slot = slots[f"{v.path.replace('/', '_')}_adam_{suffix}"]
            assert tuple(slot.shape) == tuple(v.shape) and slot.dtype == "float32"
    apply = lambda g: optimizer.apply(g, variables)  # noqa: E731
    apply = tf.function(apply, jit_compile=True) if jit else apply
    for t, (step, (want_w, want_m, want_v)) in enumerate(zip(grads, reference)):
        apply([step[v.path][0] for v in variables])
        for v in variables:
            name = v.path.replace("/", "_")
            for got, want in ((v, want_w), (slots[f"{name}_adam_m"], want_m), (slots[f"{name}_adam_v"], want_v)):
                np.testing.assert_allclose(np.asarray(got), want[v.path], atol=1e-6, rtol=0,
                                           err_msg=f"step {t + 1}: {got.path}")
    moved = {v.path: np.abs(np.asarray(v) - values[v.path]).max() for v in variables}
    assert min(moved.values()) > 1e-3, moved


def test_the_transcription_tells_decay_exclusions_and_keras_adamw_apart():
    """The reference can fail: without the exclusions, or with Keras AdamW's bias correction, the weights after
    10 steps differ from the original's by far more than the 1e-6 the test above allows."""
    rng = np.random.default_rng(0)
    values, steps = _initial_values(rng), 10
    grads = _gradient_steps(rng, steps)
    dense = [{k: d for k, (_, d) in g.items()} for g in grads]
    learning_rates = [original_learning_rate(t, 0.05, steps, 3) for t in range(steps)]
    want = list(original_steps(values, dense, learning_rates))[-1][0]
    decay_all = list(original_steps(values, dense, learning_rates, exclude_from_weight_decay=()))[-1][0]
    assert {k for k in want if np.abs(want[k] - decay_all[k]).max() > 1e-5} == set(_SHAPES) - _DECAYED
    variables = helpers.named_variables(values)
    optimizer = make_optimizer("adamw-keras", WarmupPolynomialDecay(0.05, steps, 3), variables)
    for step in grads:
        optimizer.apply([step[v.path][0] for v in variables], variables)
    assert min(np.abs(np.asarray(v) - want[v.path]).max() for v in variables) > 1e-3


def test_adam_weight_decay_config_round_trip_and_unknown_name():
    optimizer = AdamWeightDecay(WarmupPolynomialDecay(0.1, 10, 2), exclude_from_weight_decay=["bias"])
    restored = AdamWeightDecay.from_config(optimizer.get_config())
    assert restored.get_config() == optimizer.get_config()
    assert restored.uses_weight_decay(keras.Variable(np.zeros(2), name="kernel"))
    assert not restored.uses_layer_adaptation(keras.Variable(np.zeros(2), name="kernel"))
    with pytest.raises(ValueError, match="optimizer 'sgd': expected one of adamw-keras, adamw-original"):
        make_optimizer("sgd", 0.1, [])

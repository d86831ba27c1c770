"""The fused training kernels (albert_tf.modeling.fused) against the plain keras.ops math and autodiff, and the
whole pretrainer's training path (fused) against the numpy reference and against the unfused path's gradients."""
import numpy as np
import pytest
import tensorflow as tf

import numpy_albert as ref
from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.checkpoints import assign_from_tensors, tf1_name_map
from albert_tf.modeling import fused
from test_modeling import SMALL, compare, make_inputs


def _value_and_grads(fn, inputs, seed=0):
    """fn(*inputs), and the gradients of Σ fn(*inputs)·w (w random) with respect to every input."""
    inputs = [tf.constant(x) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        out = fn(*inputs)
        weights = tf.constant(np.random.default_rng(seed).normal(size=out.shape), out.dtype)
        total = tf.reduce_sum(tf.cast(out * weights, tf.float32))
    return out.numpy(), [g.numpy() for g in tape.gradient(total, inputs)]


def _gelu_numpy(z):
    return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z ** 3)))


CASES = {
    "bias_gelu": (lambda fused_: lambda h, b: fused.bias_gelu(h, b, fused=fused_),
                  lambda rng: [rng.normal(size=(2, 5, 12)) * 2, rng.normal(size=(12,))]),
    "residual_layer_norm": (lambda fused_: lambda y, r, g, b: fused.residual_layer_norm(y, r, g, b, 1e-12,
                                                                                        fused=fused_),
                            lambda rng: [rng.normal(size=(2, 5, 16)), rng.normal(size=(2, 5, 16)) * 3 + 1,
                                         rng.normal(size=(16,)), rng.normal(size=(16,))]),
    "masked_softmax": (lambda fused_: lambda s, b: fused.masked_softmax(s, b, 0.25, fused=fused_),
                       lambda rng: [rng.normal(size=(2, 3, 6, 6)) * 4,
                                    np.where(rng.random((2, 1, 1, 6)) < 0.3, -10000.0, 0.0)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_matches_unfused_values_and_gradients(name):
    make, draw = CASES[name]
    inputs = [x.astype("float32") for x in draw(np.random.default_rng(3))]
    want, want_grads = _value_and_grads(make(False), inputs)
    got, got_grads = _value_and_grads(make(True), inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        if name == "masked_softmax" and i == 1:
            continue  # the mask bias is not trained: the fused kernel gives it no gradient
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{name}: gradient of input {i}")


def test_fused_gelu_against_numpy_formula():
    rng = np.random.default_rng(0)
    h, b = rng.normal(size=(4, 7)).astype("float32") * 3, rng.normal(size=(7,)).astype("float32")
    got = fused.bias_gelu(tf.constant(h), tf.constant(b), fused=True).numpy()
    np.testing.assert_allclose(got, _gelu_numpy((h + b).astype("float64")), rtol=1e-5, atol=1e-6)
    # the derivative, against central differences of the numpy formula
    _, (dh, db) = _value_and_grads(lambda x, y: fused.bias_gelu(x, y, fused=True), [h, b], seed=1)
    w = np.random.default_rng(1).normal(size=h.shape)
    eps = 1e-4
    z = (h + b).astype("float64")
    numeric = (_gelu_numpy(z + eps) - _gelu_numpy(z - eps)) / (2 * eps) * w
    np.testing.assert_allclose(dh, numeric, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(db, numeric.sum(0), rtol=1e-4, atol=1e-4)


def test_bfloat16_inputs_keep_their_dtype_and_compute_in_float32():
    rng = np.random.default_rng(0)
    y = tf.cast(tf.constant(rng.normal(size=(3, 8)).astype("float32")), tf.bfloat16)
    r = tf.cast(tf.constant(rng.normal(size=(3, 8)).astype("float32") + 100.0), tf.bfloat16)
    gamma, beta = tf.ones((8,)), tf.zeros((8,))
    out = fused.residual_layer_norm(y, r, gamma, beta, 1e-12, fused=True)
    assert out.dtype == tf.bfloat16
    z = tf.cast(y, tf.float32) + tf.cast(r, tf.float32)
    expected = (z - tf.reduce_mean(z, -1, keepdims=True)) / tf.math.reduce_std(z, -1, keepdims=True)
    np.testing.assert_allclose(tf.cast(out, tf.float32).numpy(), expected.numpy(), atol=2e-2)


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the calls of each fused kernel (the layers look them up at call time)."""
    calls = {name: 0 for name in fused._tf_kernels()}

    def counting(name, kernel):
        def wrapper(*args):
            calls[name] += 1
            return kernel(*args)
        return wrapper

    for name, kernel in list(fused._tf_kernels().items()):
        monkeypatch.setitem(fused._KERNELS, name, counting(name, kernel))
    return calls


def _model_and_batch(sharing="all"):
    cfg = dict(SMALL, sharing=sharing, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    weights = ref.random_weights(cfg, np.random.default_rng(0))
    model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
    assign_from_tensors(model, weights, tf1_name_map(model), "random weights")
    return cfg, weights, model, make_inputs(cfg)


@pytest.mark.parametrize("sharing", ["all", "none"])
def test_training_path_matches_numpy_reference(sharing, kernel_calls):
    cfg, weights, model, batch = _model_and_batch(sharing)
    expected = ref.forward(weights, cfg, batch["input_word_ids"], batch["input_mask"], batch["input_type_ids"],
                           batch["masked_lm_positions"])
    model(batch, training=False)
    assert not any(kernel_calls.values()), "inference must not use the fused (XLA) kernels"
    diff = compare(model(batch, training=True), expected, batch["input_mask"])
    blocks = cfg["num_hidden_layers"] * cfg["inner_group_num"]
    assert kernel_calls == {"bias_gelu": blocks, "residual_layer_norm": 2 * blocks, "masked_softmax": blocks}
    assert diff < 1e-5


def test_training_path_gradients_match_unfused(kernel_calls):
    _, _, model, batch = _model_and_batch()
    labels = np.random.default_rng(5).integers(0, SMALL["vocab_size"], batch["masked_lm_positions"].shape)

    def grads():
        with tf.GradientTape() as tape:
            out = model(batch, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, out["mlm_logits"])) + \
                tf.reduce_mean(out["sop_logits"][:, 0] ** 2) + tf.reduce_mean(out["sequence_output"] ** 2)
        return [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, model.trainable_variables)]

    got = grads()
    assert kernel_calls["bias_gelu"] > 0
    fused.ENABLED = False
    try:
        want = grads()
    finally:
        fused.ENABLED = True
    for g, w, v in zip(got, want, model.trainable_variables):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6, err_msg=v.path)

"""albert_tf.runtime.host_xla: the probe for XLA on the host, its overrides, and the non-XLA path of the LAMB update and the
fused kernels against the XLA path (same numbers) where this TensorFlow has host XLA (not the TPU wheel)."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.runtime import requirements, host_xla
from albert_tf.modeling import fused
from albert_tf.training import lamb

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


ON_TPU_WHEEL = requirements.installed_tensorflow()[0] == "tensorflow-tpu"
NO_HOST_XLA = "the TPU wheel has no XLA for the host: only the fallback path runs here"


def _as_string(x):
    return tf.strings.as_string(x)  # a string op: XLA refuses to compile it


def test_probe_finds_host_xla_except_on_the_tpu_wheel():
    assert host_xla._probe() is not ON_TPU_WHEEL  # pylint: disable=protected-access


def test_environment_variable_forces_either_way_and_rejects_anything_else(monkeypatch):
    monkeypatch.setenv(host_xla.ENV_VAR, "0")
    assert host_xla.available() is False
    monkeypatch.setenv(host_xla.ENV_VAR, "on")
    assert host_xla.available() is True
    monkeypatch.setenv(host_xla.ENV_VAR, "maybe")
    with pytest.raises(ValueError, match="ALBERT_TF_HOST_XLA='maybe': expected 0 .* or 1"):
        host_xla.available()


def test_override_wins_over_the_environment_and_nests(monkeypatch):
    monkeypatch.setenv(host_xla.ENV_VAR, "1")
    with host_xla.override(False):
        assert not host_xla.available()
        with host_xla.override(True):
            assert host_xla.available()
        assert not host_xla.available()
    assert host_xla.available()


def test_jit_function_compiles_with_xla_only_when_available():
    fn = host_xla.jit_function(_as_string)
    with host_xla.override(False):  # op by op: the string op runs
        assert fn(tf.constant(3)).numpy() == b"3"
    with host_xla.override(True), pytest.raises(tf.errors.OpError):  # XLA refuses the string op
        fn(tf.constant(3))


def test_jit_function_works_while_a_tf_function_is_traced():
    """The probe runs eagerly even when the first use is inside a trace (host_xla._probe's init_scope)."""
    double = host_xla.jit_function(lambda x: 2.0 * x)
    assert float(tf.function(lambda x: double(x) + 1.0)(tf.constant(3.0))) == 7.0


def _lamb_trajectory(seed=0):
    rng = np.random.default_rng(seed)
    variable = tf.Variable(rng.normal(size=(6, 5)).astype(np.float32), name="kernel")
    optimizer = lamb.LAMB(0.01)
    for _ in range(3):
        optimizer.apply([tf.constant(rng.normal(size=(6, 5)).astype(np.float32))], [variable])
    return variable.numpy(), [s.numpy() for s in optimizer._m + optimizer._v]  # pylint: disable=protected-access


@pytest.mark.skipif(ON_TPU_WHEEL, reason=NO_HOST_XLA)
def test_lamb_update_without_xla_matches_the_xla_update():
    with host_xla.override(True):
        want, want_slots = _lamb_trajectory()
    with host_xla.override(False):
        got, got_slots = _lamb_trajectory()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    for g, w in zip(got_slots, want_slots):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    assert not np.allclose(got, _lamb_trajectory(seed=1)[0])  # the comparison can fail


def _fused_value_and_grads(rng):
    h = tf.constant(rng.normal(size=(2, 5, 12)).astype(np.float32) * 2)
    b = tf.constant(rng.normal(size=(12,)).astype(np.float32))
    scores = tf.constant(rng.normal(size=(2, 3, 6, 6)).astype(np.float32) * 4)
    mask = tf.constant(np.where(rng.random((2, 1, 1, 6)) < 0.3, -10000.0, 0.0).astype(np.float32))
    gamma, beta = tf.ones([12]), tf.zeros([12])
    with tf.GradientTape() as tape:
        tape.watch([h, b, scores])
        out = fused.residual_layer_norm(fused.bias_gelu(h, b, fused=True), h, gamma, beta, 1e-12, fused=True)
        q, k, v = fused.split_heads(tf.concat([out, out, out], -1), tf.zeros([36]), 3, fused=True)
        probs = fused.masked_softmax(scores, mask, 0.5, fused=True)
        total = tf.reduce_sum(out * out) + tf.reduce_sum(q * k * v) + tf.reduce_sum(probs * scores)
    return [total.numpy()] + [g.numpy() for g in tape.gradient(total, [h, b, scores])]


@pytest.mark.skipif(ON_TPU_WHEEL, reason=NO_HOST_XLA)
def test_fused_kernels_without_xla_match_the_xla_kernels():
    with host_xla.override(True):
        want = _fused_value_and_grads(np.random.default_rng(4))
    with host_xla.override(False):
        got = _fused_value_and_grads(np.random.default_rng(4))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)

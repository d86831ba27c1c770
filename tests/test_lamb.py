"""LAMB against a hand-written numpy LAMB (the original lamb_optimizer.py semantics) over several steps."""
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import helpers
from albert_tf.training import LAMB

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


def numpy_lamb(params, grads_per_step, lrs, wd=0.01, b1=0.9, b2=0.999, eps=1e-6,
               exclude_wd=("LayerNorm", "layer_norm", "bias"), exclude_adapt=None):
    """Reference: no bias correction, λ·w inside the update, trust ratio ‖w‖/‖u‖ (1 if either is 0)."""
    exclude_adapt = exclude_wd if exclude_adapt is None else exclude_adapt
    params = {k: v.astype(np.float64).copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    for grads, lr in zip(grads_per_step, lrs):
        for name, w in params.items():
            g = grads[name].astype(np.float64)
            m[name] = b1 * m[name] + (1 - b1) * g
            v[name] = b2 * v[name] + (1 - b2) * g * g
            u = m[name] / (np.sqrt(v[name]) + eps)
            if wd and not any(re.search(r, name) for r in exclude_wd):
                u = u + wd * w
            ratio = 1.0
            if not any(re.search(r, name) for r in exclude_adapt):
                wn, un = np.linalg.norm(w), np.linalg.norm(u)
                ratio = wn / un if wn > 0 and un > 0 else 1.0
            params[name] = w - ratio * lr * u
    return params


def _make_variables(rng):
    values = {
        "dense/kernel": rng.normal(size=(3, 4)).astype(np.float32),
        "dense/bias": rng.normal(size=(4,)).astype(np.float32),
        "encoder/layer_norm/gamma": (1 + 0.1 * rng.normal(size=(4,))).astype(np.float32),
        "zero_init/kernel": np.zeros((2, 2), np.float32),  # ‖w‖ = 0 on the first step → trust ratio 1
    }
    return values, helpers.named_variables(values)


@pytest.mark.parametrize("exclude_adapt", [None, ("bias",)])
def test_lamb_matches_numpy_over_several_steps(exclude_adapt):
    rng = np.random.default_rng(0)
    values, variables = _make_variables(rng)
    steps = 5
    grads = [{k: rng.normal(size=v.shape).astype(np.float32) for k, v in values.items()} for _ in range(steps)]
    grads[2]["dense/bias"][:] = 0.0  # a zero gradient on an excluded variable
    lrs = [0.05, 0.1, 0.02, 0.07, 0.03]
    lr_var = keras.Variable(0.0, trainable=False)
    opt = LAMB(learning_rate=lambda: lr_var, weight_decay_rate=0.1, exclude_from_layer_adaptation=exclude_adapt)
    for step in range(steps):
        lr_var.assign(lrs[step])
        opt.apply([tf.constant(grads[step][v.path]) for v in variables], variables)
    expected = numpy_lamb(values, grads, lrs, wd=0.1, exclude_adapt=exclude_adapt)
    for v in variables:
        np.testing.assert_allclose(v.numpy(), expected[v.path], rtol=2e-5, atol=1e-6, err_msg=v.path)
    # The included variables really moved by the adapted step, the excluded ones by plain lr·u.
    assert not np.allclose(variables[0].numpy(), values["dense/kernel"])


def test_exclusions_follow_the_original_defaults():
    _, variables = _make_variables(np.random.default_rng(1))
    opt = LAMB()
    decay = {v.path: opt.uses_weight_decay(v) for v in variables}
    adapt = {v.path: opt.uses_layer_adaptation(v) for v in variables}
    assert decay == {"dense/kernel": True, "dense/bias": False, "encoder/layer_norm/gamma": False,
                     "zero_init/kernel": True}
    assert adapt == decay  # layer-adaptation exclusions default to the weight-decay ones
    assert LAMB(weight_decay_rate=0.0).uses_weight_decay(variables[0]) is False
    only_bias = LAMB(exclude_from_layer_adaptation=["bias"])
    assert only_bias.uses_layer_adaptation(variables[2]) is True


def test_slots_are_float32_for_bfloat16_variables():
    with keras.name_scope("dense"):
        w = keras.Variable(np.ones((2, 2)), dtype="bfloat16", name="kernel")
    opt = LAMB(learning_rate=0.1)
    opt.apply([tf.ones((2, 2), tf.bfloat16)], [w])
    assert {s.dtype for s in opt.variables if s.shape == (2, 2)} == {"float32"}
    assert w.dtype == "bfloat16"
    # m = 0.1, v = 0.001, u = 0.1/(√0.001+ε) + 0.01 = 3.1722..., ratio = 2/(2·3.1722) → Δ = 0.1·1 per element
    np.testing.assert_allclose(np.asarray(w.numpy(), np.float32), 0.9 * np.ones((2, 2)), atol=1e-2)


def test_config_round_trip():
    opt = LAMB(learning_rate=0.001, weight_decay_rate=0.02, exclude_from_layer_adaptation=["bias"])
    clone = LAMB.from_config(opt.get_config())
    assert clone.get_config()["exclude_from_layer_adaptation"] == ["bias"]
    assert clone.weight_decay_rate == 0.02

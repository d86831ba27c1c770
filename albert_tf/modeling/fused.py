"""Fused elementwise pieces of the transformer block, for training speed on CPU (and anywhere XLA runs).

Between the matmuls, a block spends most of its time in chains of small elementwise ops (GELU, LayerNorm with its
residual add, the scaled and masked softmax) and in their autodiff gradients, each op a full pass over memory, in
bfloat16 on CPU (slow, converted element by element). Here each piece is one kernel forward and one backward:

    bias_gelu(h, bias)                      gelu_tanh(h + bias)
    residual_layer_norm(y, residual, γ, β)  LayerNorm(y + residual) · γ + β   (over the last axis)
    masked_softmax(scores, bias, scale)     softmax(scores · scale + bias)     (over the last axis)

With `fused=True` and the TensorFlow backend, the forward and a hand-written backward are each an XLA-compiled
function (`tf.function(jit_compile=True)`) joined by `tf.custom_gradient`; they compute in float32 whatever the
input dtype and return the input dtype (γ, β and their gradients stay float32). The matmuls stay outside XLA,
in TensorFlow's oneDNN kernels (AMX on CPUs that have it), which XLA's CPU backend does not reach for bfloat16.

With `fused=False` (other backends, inference, anything exported: TF Serving does not JIT-compile on CPU by
default) the same math runs as plain `keras.ops`. The layers pass `fused=use_fused(training)`: on in training.
"""
import math

import keras
from keras import ops

# Set to False to compare against the unfused ops (benchmarks/train_step.py --no-fused).
ENABLED = True

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def use_fused(training):
    """Whether a layer called with `training` should use the fused kernels: TensorFlow backend, training=True."""
    return ENABLED and training is True and keras.backend.backend() == "tensorflow"


# ---------------------------------------------------------------------------------------------- the math
def _gelu(z):
    return 0.5 * z * (1.0 + ops.tanh(_GELU_C * (z + _GELU_A * z * z * z)))


def _layer_norm(z, gamma, beta, epsilon):
    mean = ops.mean(z, axis=-1, keepdims=True)
    centered = z - mean
    variance = ops.mean(ops.square(centered), axis=-1, keepdims=True)
    return centered * ops.rsqrt(variance + epsilon) * gamma + beta


def _softmax(scores, bias, scale):
    return ops.softmax(scores * scale + bias, axis=-1)


def _f32(x):
    return ops.cast(x, "float32")


# ---------------------------------------------------------------------------------------------- public API
def bias_gelu(h, bias, fused=False):
    """gelu_tanh(h + bias).

    Args:
      h: float [..., N] (a matmul output), bias: [N].
      fused: one kernel forward and backward (TensorFlow), computing in float32.
    Returns:
      [..., N] in h's dtype.
    """
    if fused:
        return _tf_kernels()["bias_gelu"](h, ops.cast(bias, h.dtype))
    z = h + ops.cast(bias, h.dtype)
    return _gelu(z)


def residual_layer_norm(y, residual, gamma, beta, epsilon, fused=False):
    """LayerNorm(y + residual) over the last axis, computed in float32: (z − mean)/√(var + ε) · γ + β.

    Args:
      y, residual: float [..., H], same dtype; gamma, beta: float32 [H]; epsilon: float.
    Returns:
      [..., H] in y's dtype.
    """
    if fused:
        # (variables are read here: tf.custom_gradient takes tensors)
        return _tf_kernels()["residual_layer_norm"](y, residual, _f32(gamma), _f32(beta), float(epsilon))
    z = _f32(y) + _f32(residual)
    return ops.cast(_layer_norm(z, _f32(gamma), _f32(beta), epsilon), y.dtype)


def masked_softmax(scores, bias, scale, fused=False):
    """softmax(scores · scale + bias) over the last axis, computed in float32.

    Args:
      scores: float [B, N, L, L] (q·kᵀ), bias: float32 broadcastable to it (the attention mask bias
        [B, 1, 1, L]), scale: a Python float (1/√d).
    Returns:
      [B, N, L, L] in scores' dtype.
    """
    if fused:
        return _tf_kernels()["masked_softmax"](scores, _f32(bias), float(scale))
    return ops.cast(_softmax(_f32(scores), _f32(bias), scale), scores.dtype)


# ---------------------------------------------------------------------------------------------- TensorFlow kernels
_KERNELS = {}


def _tf_kernels():
    """Builds (once) the custom-gradient functions whose forward and backward are XLA-compiled."""
    if _KERNELS:
        return _KERNELS
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def xla(fn):
        return tf.function(fn, jit_compile=True, autograph=False)

    def sum_leading(x):
        """Sum over every axis but the last: [..., N] → [N]."""
        return tf.reduce_sum(tf.reshape(x, (-1, tf.shape(x)[-1])), axis=0)

    # gelu_tanh(h + b); d/dz = 0.5(1 + t) + 0.5 z (1 − t²) c (1 + 3a z²), t = tanh(c (z + a z³)).
    @xla
    def gelu_forward(h, b):
        return tf.cast(_gelu(tf.cast(h, tf.float32) + tf.cast(b, tf.float32)), h.dtype)

    @xla
    def gelu_backward(h, b, dy):
        z = tf.cast(h, tf.float32) + tf.cast(b, tf.float32)
        z2 = z * z
        t = tf.tanh(_GELU_C * z * (1.0 + _GELU_A * z2))
        dz = tf.cast(dy, tf.float32) * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * _GELU_C * (1.0 + 3.0 * _GELU_A * z2))
        return tf.cast(dz, h.dtype), tf.cast(sum_leading(dz), b.dtype)

    @tf.custom_gradient
    def fused_bias_gelu(h, b):
        def grad(dy):
            return gelu_backward(h, b, dy)
        return gelu_forward(h, b), grad

    # LayerNorm(y + r): x̂ = (z − μ)·s, s = 1/√(σ² + ε); dz = s·(g − mean(g) − x̂·mean(g·x̂)), g = dout·γ.
    def normalize(y, r, epsilon):
        z = tf.cast(y, tf.float32) + tf.cast(r, tf.float32)
        mean = tf.reduce_mean(z, axis=-1, keepdims=True)
        centered = z - mean
        rstd = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon)
        return centered * rstd, rstd

    @xla
    def layer_norm_forward(y, r, gamma, beta, epsilon):
        x_hat, _ = normalize(y, r, epsilon)
        return tf.cast(x_hat * gamma + beta, y.dtype)

    @xla
    def layer_norm_backward(y, r, gamma, epsilon, dout):
        x_hat, rstd = normalize(y, r, epsilon)
        dout = tf.cast(dout, tf.float32)
        g = dout * gamma
        dz = rstd * (g - tf.reduce_mean(g, axis=-1, keepdims=True)
                     - x_hat * tf.reduce_mean(g * x_hat, axis=-1, keepdims=True))
        return tf.cast(dz, y.dtype), sum_leading(dout * x_hat), sum_leading(dout)

    def fused_residual_layer_norm(y, r, gamma, beta, epsilon):
        @tf.custom_gradient
        def fn(y, r, gamma, beta):
            def grad(dout):
                dz, dgamma, dbeta = layer_norm_backward(y, r, gamma, epsilon, dout)
                return dz, tf.cast(dz, r.dtype), dgamma, dbeta
            return layer_norm_forward(y, r, gamma, beta, epsilon), grad
        return fn(y, r, gamma, beta)

    # p = softmax(s·scale + bias); ds = scale · p · (dp − Σ dp·p).
    @xla
    def softmax_forward(scores, bias, scale):
        return tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32) * scale + bias, axis=-1), scores.dtype)

    @xla
    def softmax_backward(scores, bias, scale, dp):
        p = tf.nn.softmax(tf.cast(scores, tf.float32) * scale + bias, axis=-1)
        dp = tf.cast(dp, tf.float32)
        ds = scale * p * (dp - tf.reduce_sum(dp * p, axis=-1, keepdims=True))
        return tf.cast(ds, scores.dtype)

    def fused_masked_softmax(scores, bias, scale):
        @tf.custom_gradient
        def fn(scores, bias):
            def grad(dp):
                return softmax_backward(scores, bias, scale, dp), tf.zeros_like(bias)  # the mask is not trained
            return softmax_forward(scores, bias, scale), grad
        return fn(scores, bias)

    _KERNELS.update(bias_gelu=fused_bias_gelu, residual_layer_norm=fused_residual_layer_norm,
                    masked_softmax=fused_masked_softmax)
    return _KERNELS

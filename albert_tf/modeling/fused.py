"""Fused pieces of the transformer block, for training speed on CPU (and anywhere XLA runs).

Between the matmuls, a block spends much of its time in chains of small elementwise ops (bias adds, GELU,
LayerNorm with its residual add, the scaled and masked softmax, the head transposes) and in their autodiff
gradients, each op a full pass over memory, in bfloat16 on CPU (slow, converted element by element). Here each
piece is one kernel forward and one backward:

    bias_gelu(h, bias)                          gelu_tanh(h + bias)
    residual_layer_norm(y, residual, γ, β, ε,   LayerNorm(y + bias + residual) · γ + β   (over the last axis;
                        bias=None, copies=1)    `copies` equal outputs, their gradients summed in the kernel)
    masked_softmax(scores, bias, scale)         softmax(scores · scale + bias)           (over the last axis)
    split_heads(qkv, bias, num_heads)           [B, L, 3H] + bias → q, k, v, each [B, N, L, D]
    shared_cast(w, dtype, uses, streams=1)      `uses` × `streams` copies of cast(w, dtype) whose gradients are
                                                summed in float32 as they come (a cross-layer-shared weight, cast
                                                once per step; an application on `streams` batch slices)
    shared_vectors(vectors, uses, streams=1)    the same for a block's float32 biases, γ and β, in one sum

With `fused=True` and the TensorFlow backend, the forward and a hand-written backward are each an XLA-compiled
function (`tf.function(jit_compile=True)`) joined by `tf.custom_gradient`; they compute in float32 whatever the
input dtype and return the input dtype (biases, γ, β and their gradients stay float32). The matmuls stay outside
XLA, in TensorFlow's oneDNN kernels (AMX on CPUs that have it), which XLA's CPU backend does not reach for bfloat16.
Where this TensorFlow has no XLA for the host (the `tensorflow-tpu` wheel; albert_tf/runtime/host_xla.py) the kernels are
plain tf.functions, the same math op by op.

With `fused=False` (other backends, inference, anything exported: TF Serving does not JIT-compile on CPU by
default) the same math runs as plain `keras.ops`. A layer built with `fused=True` (the default) takes the fused
path when called with training=True, or with training=False inside `training_step()` (a pretraining step without
dropout): `use_fused(training, layer.fused)`.
"""
import contextlib
import itertools
import threading

import keras
from keras import ops

from albert_tf.modeling.primitives import gelu_tanh, split_into_heads

_training_step = threading.local()


@contextlib.contextmanager
def training_step():
    """Marks the model calls traced within the block as a training step's: a call with training=False (a step
    without dropout: `pretrain --no-dropout`, `--no-dropout-after-step`) takes the fused training path too, without
    dropout, instead of the inference graph. Evaluation and export call the model outside such a block."""
    depth = getattr(_training_step, "depth", 0)
    _training_step.depth = depth + 1
    try:
        yield
    finally:
        _training_step.depth = depth


def use_fused(training, enabled=True):
    """Whether a layer built with fused=`enabled` and called with `training` runs its fused training path:
    TensorFlow backend, and training=True, or training=False within `training_step()` (dropout off)."""
    in_step = training is False and getattr(_training_step, "depth", 0) > 0
    return bool(enabled) and (training is True or in_step) and keras.backend.backend() == "tensorflow"


# ---------------------------------------------------------------------------------------------- the math
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
        return tf_kernels()["bias_gelu"](h, _f32(bias))
    z = h + ops.cast(bias, h.dtype)
    return gelu_tanh(z)


def residual_layer_norm(y, residual, gamma, beta, epsilon, bias=None, copies=1, fused=False):
    """LayerNorm(y + bias + residual) over the last axis, computed in float32: (z − mean)/√(var + ε) · γ + β.

    Args:
      y, residual: float [..., H], same dtype; gamma, beta: float32 [H]; epsilon: float; bias: None or [H]
        (the bias of the dense layer that produced y, added in float32).
      copies: 1 returns the output; n > 1 returns a list of n equal outputs, for an output consumed n times (the
        next block's matmul and its residual): their gradients are summed inside the fused backward kernel
        instead of by a separate TensorFlow AddN.
    Returns:
      [..., H] in y's dtype (or a list of `copies` of it).
    """
    if fused:
        # (variables are read here: tf.custom_gradient takes tensors)
        bias = None if bias is None else _f32(bias)
        return tf_kernels()["residual_layer_norm"](y, residual, _f32(gamma), _f32(beta), float(epsilon), bias,
                                                    int(copies))
    z = _f32(y) + _f32(residual)
    if bias is not None:
        z = z + _f32(bias)
    out = ops.cast(_layer_norm(z, _f32(gamma), _f32(beta), epsilon), y.dtype)
    return [out] * copies if copies > 1 else out


def masked_softmax(scores, bias, scale, fused=False):
    """softmax(scores · scale + bias) over the last axis, computed in float32.

    Args:
      scores: float [B, N, L, L] (q·kᵀ), bias: float32 broadcastable to it (the attention mask bias
        [B, 1, 1, L]), scale: a Python float (1/√d).
    Returns:
      [B, N, L, L] in scores' dtype.
    """
    if fused:
        return tf_kernels()["masked_softmax"](scores, _f32(bias), float(scale))
    return ops.cast(_softmax(_f32(scores), _f32(bias), scale), scores.dtype)


def split_heads(qkv, bias, num_heads, fused=False):
    """Adds the query/key/value biases and splits the heads.

    Args:
      qkv: float [B, L, 3H], x·[W_q | W_k | W_v].
      bias: [3H], [b_q | b_k | b_v].
      num_heads: N (a Python int), H = N·D.
    Returns:
      q, k, v: each [B, N, L, D] in qkv's dtype.
    """
    if fused:
        return tf_kernels()["split_heads"](qkv, _f32(bias), int(num_heads))
    return tuple(split_into_heads(ops.cast(_f32(qkv) + _f32(bias), qkv.dtype), num_heads, 3))


def shared_cast(value, dtype, uses, fused=False, streams=1):
    """`uses` × `streams` tensors equal to cast(value, dtype), for a weight applied `uses` times in one step
    (cross-layer sharing), each application on `streams` slices of the batch: ordered by application, then slice
    (application u, slice s at u · streams + s). It is cast once, not once per application, and the gradients of
    the applications are summed in float32 (fused) as the backward pass produces them, last application first (a
    running sum: one weight-sized float32 sum alive, not one gradient per application); an application's slices
    join the sum in the same kernel.

    Args:
      value: float32 tensor (a variable's value); dtype: the compute dtype; uses, streams: Python ints ≥ 1.
    Returns:
      a list of `uses` × `streams` tensors of `dtype`.
    """
    if uses * streams == 1 or not fused:
        cast = ops.cast(value, dtype)
        return [cast] * (uses * streams)
    return tf_kernels()["shared_cast"](value, dtype, int(uses), int(streams))


def shared_vectors(vectors, uses, fused=False, streams=1):
    """`uses` × `streams` copies of the float32 `vectors` (a block's biases, γ and β: 1-D tensors), in
    shared_cast's order, whose gradients are summed as shared_cast's are: in one fixed order, whatever order the
    backward pass produces them in. (Left to TensorFlow, the gradients of a tensor used by more than two ops are
    summed by one AddN, which adds first whichever input buffer it can reuse; which one that is depends on what
    other ops still hold, so with concurrent streams the sum's rounding varied from run to run: docs/numerics.md.)
    The vectors travel as one concatenation, so a block's vectors cost one running sum per application.

    Args:
      vectors: a list of float32 [n_i] tensors; uses, streams: Python ints ≥ 1.
    Returns:
      a list of `uses` × `streams` lists, each equal to `vectors`.
    """
    if uses * streams == 1 or not fused:
        return [list(vectors)] * (uses * streams)
    sizes = [int(v.shape[0]) for v in vectors]
    copies = shared_cast(ops.concatenate(vectors, axis=0), "float32", uses, fused=True, streams=streams)
    return [ops.split(copy, list(itertools.accumulate(sizes[:-1])), axis=0) for copy in copies]


# ---------------------------------------------------------------------------------------------- TensorFlow kernels
def tf_kernels():
    """{name: custom-gradient function} (albert_tf.modeling.tf_kernels, imported on first use: it imports
    TensorFlow). The layers look a kernel up at each call."""
    from albert_tf.modeling import tf_kernels as kernels  # pylint: disable=import-outside-toplevel

    return kernels.KERNELS

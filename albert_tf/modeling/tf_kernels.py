"""The TensorFlow side of albert_tf.modeling.fused: custom-gradient functions whose forward and backward are
XLA-compiled where the host has XLA (op by op on the TPU wheel, see albert_tf/runtime/host_xla.py). Imported on the first
fused call (`fused.tf_kernels()`), so that the model code stays keras.ops only until TensorFlow trains it.

    bias_gelu(h, b)                                         gelu_tanh(h + b)
    residual_layer_norm(y, r, gamma, beta, eps, bias, n)    LayerNorm(y + r (+ bias)), n copies of the output
    masked_softmax(scores, bias, scale)                     softmax(scores · scale + bias)
    split_heads(qkv, b, num_heads)                          q, k, v heads of qkv + b
    shared_cast(w, dtype, uses, streams)                    `uses` × `streams` casts of w, gradients summed as
                                                            they arrive
"""
import tensorflow as tf

from albert_tf.runtime import host_xla
from albert_tf.modeling.primitives import GELU_A, GELU_C, gelu_tanh, split_into_heads


def xla(fn):  # XLA-compiled where the host has XLA; op by op on the TPU wheel (see albert_tf/runtime/host_xla.py)
    return host_xla.jit_function(fn, autograph=False)

# Reductions. TensorFlow 2.21's XLA:CPU (YNNPACK fusions off: albert_tf/runtime/xla_flags.py) emits a column
# reduction as a slow strided loop (an [8192, 1024] float32 sum: 20 ms, vs 1.2 ms for a oneDNN matvec on 2 cores)
# and a row reduction about 1.3-1.5x slower than a matvec with ones. So where the step runs op by op on a CPU the
# kernels take row means as matvecs inside the kernel and leave column sums (the bias, γ and β gradients of
# float32 inputs) to TensorFlow's MatMul outside it (a product with ones inside the kernel is slow at other
# shapes, [512, 768]; docs/benchmarks.md). Not elsewhere: a GPU's float32 matmuls may run in TF32, a TPU's in
# bfloat16 passes, and inside a whole-step XLA compilation (`--xla on`, a TPU replica) the matvecs are XLA dots.
def matvec_reductions():
    """Whether the kernels traced now take their reductions as matvecs (see above): no GPU visible and the graph
    being traced is not inside an XLA compilation. Decided when a kernel is traced (a Python bool)."""
    from tensorflow.python.ops import control_flow_util  # pylint: disable=import-outside-toplevel

    return (not tf.config.list_logical_devices("GPU")
            and not control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))

def sum_leading(x):
    """Sum over every axis but the last: [..., N] → [N], inside a kernel."""
    return tf.reduce_sum(tf.reshape(x, (-1, tf.shape(x)[-1])), axis=0)

def column_sums(*xs):
    """sum_leading of each x by TensorFlow's MatMul, 1ᵀ·X, outside any kernel (see matvec_reductions). Returns a
    list of [N] tensors."""
    sums = []
    for x in xs:
        matrix = tf.reshape(x, (-1, tf.shape(x)[-1]))
        sums.append(tf.linalg.matvec(matrix, tf.ones(tf.shape(matrix)[:1], x.dtype), transpose_a=True))
    return sums

def mean_last(x, matvec):
    """Mean over the last axis, kept: [..., N] → [..., 1]; as x·(1/N)·1 if `matvec`."""
    if not matvec:
        return tf.reduce_mean(x, axis=-1, keepdims=True)
    n = tf.shape(x)[-1]  # (dynamic: fine-tuning's length buckets)
    return tf.linalg.matvec(x, tf.fill([n], 1.0 / tf.cast(n, x.dtype)))[..., None]

def sum_last(x, matvec):
    """Sum over the last axis, kept: [..., N] → [..., 1]; as x·1 if `matvec`."""
    if not matvec:
        return tf.reduce_sum(x, axis=-1, keepdims=True)
    return tf.linalg.matvec(x, tf.ones(tf.shape(x)[-1:], x.dtype))[..., None]

def sums_outside(x, matvec):
    """Whether a kernel on `x` leaves its column sums to column_sums: matvec reductions and float32 x (a bfloat16
    kernel sums its float32 values inside, not the rounded output)."""
    return matvec and x.dtype == tf.float32

# gelu_tanh(h + b); d/dz = 0.5(1 + t) + 0.5 z (1 − t²) c (1 + 3a z²), t = tanh(c (z + a z³)).
@xla
def gelu_forward(h, b):
    return tf.cast(gelu_tanh(tf.cast(h, tf.float32) + tf.cast(b, tf.float32)), h.dtype)

def gelu_dz(h, b, dy):
    z = tf.cast(h, tf.float32) + tf.cast(b, tf.float32)
    z2 = z * z
    t = tf.tanh(GELU_C * z * (1.0 + GELU_A * z2))
    return tf.cast(dy, tf.float32) * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_A * z2))

@xla
def gelu_backward(h, b, dy):  # db summed in the kernel from the float32 dz
    dz = gelu_dz(h, b, dy)
    return tf.cast(dz, h.dtype), tf.cast(sum_leading(dz), b.dtype)

@xla
def gelu_backward_dz(h, b, dy):  # sums_outside: db = column_sums(dz)
    return gelu_dz(h, b, dy)

@tf.custom_gradient
def fused_bias_gelu(h, b):
    def grad(dy):
        if not sums_outside(h, matvec_reductions()):
            return gelu_backward(h, b, dy)
        dz = gelu_backward_dz(h, b, dy)
        return dz, tf.cast(column_sums(dz)[0], b.dtype)
    return gelu_forward(h, b), grad

# LayerNorm(y + r): x̂ = (z − μ)·s, s = 1/√(σ² + ε); dz = s·(g − mean(g) − x̂·mean(g·x̂)), g = dout·γ.
def normalize(y, r, b, epsilon, matvec):
    z = tf.cast(y, tf.float32) + tf.cast(r, tf.float32)
    if b is not None:
        z = z + b
    centered = z - mean_last(z, matvec)
    rstd = tf.math.rsqrt(mean_last(tf.square(centered), matvec) + epsilon)
    return centered * rstd, rstd

@xla
def layer_norm_forward(y, r, b, gamma, beta, epsilon, matvec):
    x_hat, _ = normalize(y, r, b, epsilon, matvec)
    return tf.cast(x_hat * gamma + beta, y.dtype)

def layer_norm_dz(y, r, b, gamma, epsilon, matvec, douts):
    x_hat, rstd = normalize(y, r, b, epsilon, matvec)
    dout = tf.add_n([tf.cast(d, tf.float32) for d in douts])  # the gradients of the output's copies
    g = dout * gamma
    return rstd * (g - mean_last(g, matvec) - x_hat * mean_last(g * x_hat, matvec)), dout, x_hat

@xla
def layer_norm_backward(y, r, b, gamma, epsilon, matvec, *douts):  # the sums in the kernel
    dz, dout, x_hat = layer_norm_dz(y, r, b, gamma, epsilon, matvec, douts)
    dbias = None if b is None else sum_leading(dz)
    return tf.cast(dz, y.dtype), dbias, sum_leading(dout * x_hat), sum_leading(dout)

@xla
def layer_norm_backward_arrays(y, r, b, gamma, epsilon, *douts):  # sums_outside: dz and dout·x̂ for column_sums
    dz, dout, x_hat = layer_norm_dz(y, r, b, gamma, epsilon, True, douts)
    return dz, dout * x_hat

def layer_norm_backward_sums_outside(y, r, b, gamma, epsilon, *douts):
    """layer_norm_backward's results, the column sums by column_sums (sums_outside); Σdout is the sum of each
    copy's column sums."""
    dz, dout_x_hat = layer_norm_backward_arrays(y, r, b, gamma, epsilon, *douts)
    sums = column_sums(dz, dout_x_hat, *douts)
    return dz, (sums[0] if b is not None else None), sums[1], tf.add_n(sums[2:])

def fused_residual_layer_norm(y, r, gamma, beta, epsilon, bias=None, copies=1):
    with_bias = bias is not None

    @tf.custom_gradient
    def fn(*args):
        y, r, gamma, beta = args[:4]
        b = args[4] if with_bias else None
        out = layer_norm_forward(y, r, b, gamma, beta, epsilon, matvec_reductions())
        outs = [out] + [tf.identity(out) for _ in range(copies - 1)]

        def grad(*douts):
            douts = [d for d in douts if d is not None] or [tf.zeros_like(out)]
            matvec = matvec_reductions()
            if sums_outside(y, matvec):
                dz, dbias, dgamma, dbeta = layer_norm_backward_sums_outside(y, r, b, gamma, epsilon, *douts)
            else:
                dz, dbias, dgamma, dbeta = layer_norm_backward(y, r, b, gamma, epsilon, matvec, *douts)
            return [dz, dz, dgamma, dbeta] + ([dbias] if with_bias else [])
        return (outs if copies > 1 else out), grad
    result = fn(y, r, gamma, beta, *([bias] if with_bias else []))
    return list(result) if copies > 1 else result

# p = softmax(s·scale + bias); ds = scale · p · (dp − Σ dp·p).
@xla
def softmax_forward(scores, bias, scale):
    return tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32) * scale + bias, axis=-1), scores.dtype)

@xla
def softmax_backward(scores, bias, scale, dp, matvec):
    p = tf.nn.softmax(tf.cast(scores, tf.float32) * scale + bias, axis=-1)
    dp = tf.cast(dp, tf.float32)
    ds = scale * p * (dp - sum_last(dp * p, matvec))
    return tf.cast(ds, scores.dtype)

def fused_masked_softmax(scores, bias, scale):
    @tf.custom_gradient
    def fn(scores, bias):
        def grad(dp):
            ds = softmax_backward(scores, bias, scale, dp, matvec_reductions())
            return ds, tf.zeros_like(bias)  # the mask is not trained
        return softmax_forward(scores, bias, scale), grad
    return fn(scores, bias)

# q, k, v = heads(qkv + b); the backward is the inverse transpose, and db the column sums.
@xla
def split_heads_forward(qkv, b, num_heads):
    return tuple(split_into_heads(tf.cast(tf.cast(qkv, tf.float32) + b, qkv.dtype), num_heads, 3))

def merge_heads(dq, dk, dv):
    shape = tf.shape(dq)  # [B, N, L, D]
    return tf.concat([tf.reshape(tf.transpose(h, (0, 2, 1, 3)), (shape[0], shape[2], shape[1] * shape[3]))
                      for h in (dq, dk, dv)], axis=-1)  # [B, L, 3H]: one transpose per head tensor (not a 5-D stack)

@xla
def split_heads_backward(dq, dk, dv):  # db summed in the kernel in float32
    d = merge_heads(dq, dk, dv)
    return d, sum_leading(tf.cast(d, tf.float32))

@xla
def split_heads_backward_merged(dq, dk, dv):  # sums_outside: db = column_sums(d)
    return merge_heads(dq, dk, dv)

def fused_split_heads(qkv, b, num_heads):
    @tf.custom_gradient
    def fn(qkv, b):
        heads = split_heads_forward(qkv, b, num_heads)

        def grad(*d_heads):
            d_heads = [tf.zeros_like(h) if d is None else d for h, d in zip(heads, d_heads)]
            if not sums_outside(qkv, matvec_reductions()):
                return split_heads_backward(*d_heads)
            d = split_heads_backward_merged(*d_heads)
            return d, column_sums(d)[0]
        return heads, grad
    return list(fn(qkv, b))

# n copies of cast(w) for n uses in order; the gradient is Σ of the uses' gradients, in float32, summed as the
# backward pass reaches them (last use first): a float32 carrier (w itself) is threaded through one link per
# use, and link k's gradient is the carrier's gradient from link k + 1 plus use k's. Only the running sum and
# one use's gradient are alive at a time, not all n (12 weight-sized gradients for albert_base). A use that runs
# as `streams` batch slices gets one copy per slice, and the slices' gradients join the running sum in the same
# kernel: without it TensorFlow would first sum them with an AddN, one more pass over a weight-sized tensor.
@xla
def add_float32(total, *grads):
    for g in grads:
        total = total + tf.cast(g, tf.float32)
    return total

def make_link(streams):
    @tf.custom_gradient
    def link(carrier, cast):
        def grad(*upstream):
            d_uses, d_carrier = [d for d in upstream[:-1] if d is not None], upstream[-1]
            if not d_uses:
                return d_carrier, None
            if d_carrier is None:
                return add_float32(tf.cast(d_uses[0], tf.float32), *d_uses[1:]), None
            return add_float32(d_carrier, *d_uses), None
        return (*[tf.identity(cast) for _ in range(streams)], tf.identity(carrier)), grad
    return link

def fused_shared_cast(w, dtype, uses, streams=1):
    link = make_link(streams)
    carrier, cast, outs = w, tf.cast(w, dtype), []
    for _ in range(uses):
        *copies, carrier = link(carrier, cast)
        outs.extend(copies)
    return outs


KERNELS = {"bias_gelu": fused_bias_gelu, "residual_layer_norm": fused_residual_layer_norm,
           "masked_softmax": fused_masked_softmax, "split_heads": fused_split_heads,
           "shared_cast": fused_shared_cast}

"""The plain keras.ops math that the fused kernels (albert_tf.modeling.fused, .tf_kernels) and the layers share.

    gelu_tanh(z)                          the original's GELU, tanh approximation
    split_into_heads(x, num_heads, parts) [B, L, parts·H] → parts tensors [B, N, L, H/N]
"""
import math

from keras import ops

GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


def gelu_tanh(z):
    """GELU, tanh approximation (the original ALBERT `gelu`): 0.5·z·(1 + tanh(√(2/π)·(z + 0.044715·z³)))."""
    return 0.5 * z * (1.0 + ops.tanh(GELU_C * (z + GELU_A * z * z * z)))


def split_into_heads(x, num_heads, parts=1):
    """[B, L, parts·H] → `parts` tensors [B, N, L, D] (N = num_heads, D = H / N): the head split of q, k and v,
    computed apart (parts=1) or from one [H, 3H] matmul (parts=3)."""
    batch, length = ops.shape(x)[0], ops.shape(x)[1]
    hidden = ops.shape(x)[2] // parts
    x = ops.reshape(x, (batch, length, parts, num_heads, hidden // num_heads))
    x = ops.transpose(x, (2, 0, 3, 1, 4))  # [parts, B, N, L, D]
    return [x[i] for i in range(parts)]

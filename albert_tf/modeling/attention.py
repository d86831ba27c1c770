"""AttentionSublayer: multi-head self-attention, output projection, residual and post-LayerNorm."""
import math

import keras
from keras import ops

from albert_tf.config import load_config
from albert_tf.modeling.fused import masked_softmax, shared_cast, shared_vectors, split_heads, use_fused
from albert_tf.modeling.primitives import split_into_heads
from albert_tf.modeling.layers import (
    add_bias_and_norm, dense, dropout_seed, float32_values, layer_norm, seeded_dropout, split_input)


@keras.saving.register_keras_serializable(package="albert_tf")
class AttentionSublayer(keras.layers.Layer):
    """The attention half of a post-LN transformer block:
    LayerNorm(x + Dropout(Dense_out(MultiHeadSelfAttention(x)))).

    Scores are q·kᵀ/√d + (1 − mask)·(−10000), softmaxed in float32 (also under bf16 compute), as the original.
    With training=True (TensorFlow) it runs `train_call`: one [H, 3H] matmul for q, k and v, and fused kernels
    (see `fused`) for the bias adds with the head split, the softmax and the residual LayerNorm.

    Call args:
      x: float [B, L, H].
      input_mask: int [B, L], 1 for tokens, 0 for padding.
    Returns:
      float [B, L, H].
    """

    def __init__(self, config, fused=True, **kwargs):
        super().__init__(**kwargs)
        self.config = load_config(config)
        self.fused = bool(fused)  # training=True runs `train_call` (TensorFlow backend)
        c = self.config
        self.query = dense(c.hidden_size, c, "query")
        self.key = dense(c.hidden_size, c, "key")
        self.value = dense(c.hidden_size, c, "value")
        self.output_dense = dense(c.hidden_size, c, "output_dense")
        self.attention_dropout = keras.layers.Dropout(c.attention_probs_dropout_prob, name="attention_dropout")
        self.output_dropout = keras.layers.Dropout(c.hidden_dropout_prob, name="output_dropout")
        self.layer_norm = layer_norm("attention_layer_norm")

    def build(self, input_shape):
        for layer in (self.query, self.key, self.value, self.output_dense, self.layer_norm):
            layer.build(input_shape)
        self.built = True

    def call(self, x, input_mask, training=None):
        if use_fused(training, self.fused):
            return self.train_call(x, attention_bias(input_mask), self.step_weights(1)[0], training)
        c = self.config
        (q,) = split_into_heads(self.query(x), c.num_attention_heads)  # [B, N, L, D]
        (k,) = split_into_heads(self.key(x), c.num_attention_heads)
        (v,) = split_into_heads(self.value(x), c.num_attention_heads)
        context = self._attend(q, k, v, attention_bias(input_mask), training)
        out = self.output_dropout(self.output_dense(context), training=training)
        return self.layer_norm(out + x)

    def _attend(self, q, k, v, bias, training):
        """Scaled dot-product attention over heads: q, k, v [B, N, L, D], bias float32 [B, 1, 1, L] -> the
        context [B, L, H] (heads joined), in q's dtype."""
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # [B, N, L, L]
        scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(self.config.head_size)) + bias
        probs = ops.cast(ops.softmax(scores, axis=-1), q.dtype)
        probs = self.attention_dropout(probs, training=training)
        context = ops.matmul(probs, v)  # [B, N, L, D]
        context = ops.transpose(context, (0, 2, 1, 3))
        return ops.reshape(context, (ops.shape(q)[0], ops.shape(q)[2], self.config.hidden_size))

    def unpadded_call(self, x, tokens, batch_length, bias):
        """Inference on a batch's tokens only (see `AlbertEncoder.unpadded_call`): the dense layers and the
        LayerNorm run on the [T, H] token rows; only the attention itself goes through the [B, L] layout.

        Args:
          x: float [T, H], the batch's tokens (row-major order of the [B, L] positions in `tokens`).
          tokens: int [T] their flat positions b·L + l; batch_length: (B, L); bias: `attention_bias`.
        Returns:
          float [T, H].
        """
        batch, length = batch_length
        hidden = self.config.hidden_size
        qkv = ops.concatenate([self.query(x), self.key(x), self.value(x)], axis=-1)  # [T, 3H]
        qkv = ops.reshape(ops.scatter(tokens[:, None], qkv, (batch * length, 3 * hidden)), (batch, length, -1))
        q, k, v = split_into_heads(qkv, self.config.num_attention_heads, parts=3)
        context = ops.take(ops.reshape(self._attend(q, k, v, bias, False), (-1, hidden)), tokens, axis=0)
        return self.layer_norm(self.output_dense(context) + x)

    # ------------------------------------------------------------------ training path (fused kernels)
    def step_weights(self, uses=1, streams=1):
        """The weights as one training step uses them, each variable read once: a list of `uses` × `streams` dicts,
        one per application and batch slice (application u, slice s at u · streams + s; see `fused.shared_cast`)
        of this (possibly cross-layer-shared) block, holding `qkv_kernel` [H, 3H] (= [W_q | W_k |
        W_v]) and `output_kernel` [H, H] in the compute dtype (cast once per step; gradients summed in float32),
        and float32 `qkv_bias` [3H], `output_bias`, `gamma`, `beta` [H]."""
        wq, wk, wv, wo, bq, bk, bv, bo, gamma, beta = float32_values(
            self.query.kernel, self.key.kernel, self.value.kernel, self.output_dense.kernel, self.query.bias,
            self.key.bias, self.value.bias, self.output_dense.bias, self.layer_norm.gamma, self.layer_norm.beta)
        qkv_kernels = shared_cast(ops.concatenate([wq, wk, wv], axis=1), self.compute_dtype, uses, fused=True,
                                  streams=streams)
        output_kernels = shared_cast(wo, self.compute_dtype, uses, fused=True, streams=streams)
        vectors = shared_vectors([ops.concatenate([bq, bk, bv], axis=0), bo, gamma, beta], uses, fused=True,
                                 streams=streams)
        return [{"qkv_kernel": a, "output_kernel": b, **dict(zip(("qkv_bias", "output_bias", "gamma", "beta"), v))}
                for a, b, v in zip(qkv_kernels, output_kernels, vectors)]

    def dropout_seeds(self, training):
        """The seeds of this application's two dropout masks (attention probabilities, output), each an int [2]
        tensor or None (see `layers.dropout_seed`)."""
        return (dropout_seed(self.attention_dropout, training), dropout_seed(self.output_dropout, training))

    def train_call(self, x, bias, weights, training, copies=1, seeds=None):
        """The block in training, with fused kernels.

        Args:
          x: [B, L, H] in the compute dtype, or a pair of equal such tensors (a previous block's copies=2).
          bias: float32 [B, 1, 1, L], `attention_bias(input_mask)`; weights: one dict of `step_weights()`;
          training: enables dropout; copies: 2 returns a pair (see `fused.residual_layer_norm`);
          seeds: `dropout_seeds(training)` drawn beforehand (a rematerialized block passes the same seeds to its
            recomputation), or None to draw them here.
        Returns:
          [B, L, H] (or a list of `copies` of it).
        """
        if seeds is None:
            seeds = self.dropout_seeds(training)
        c = self.config
        x, residual = split_input(x)
        batch, length, hidden = ops.shape(x)[0], ops.shape(x)[1], c.hidden_size
        qkv = ops.matmul(ops.reshape(x, (-1, hidden)), weights["qkv_kernel"])  # [B·L, 3H]
        q, k, v = split_heads(ops.reshape(qkv, (batch, length, 3 * hidden)), weights["qkv_bias"],
                              c.num_attention_heads, fused=True)  # each [B, N, L, D]
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # [B, N, L, L]
        probs = masked_softmax(scores, bias, 1.0 / math.sqrt(c.head_size), fused=True)
        probs = seeded_dropout(probs, self.attention_dropout, seeds[0])
        context = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))  # [B, L, N, D]
        out = ops.matmul(ops.reshape(context, (-1, hidden)), weights["output_kernel"])
        out = ops.reshape(out, (batch, length, hidden))
        return add_bias_and_norm(out, residual, weights["output_bias"], weights, self.output_dropout, seeds[1],
                                 copies)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(), "fused": self.fused}


def attention_bias(input_mask):
    """int [B, L] mask (1 = token, 0 = padding) → float32 [B, 1, 1, L] additive bias (1 − mask)·(−10000)."""
    mask = ops.cast(input_mask, "float32")
    return ops.expand_dims(ops.expand_dims((1.0 - mask) * -10000.0, 1), 1)

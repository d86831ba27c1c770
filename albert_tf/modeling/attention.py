"""AttentionSublayer: multi-head self-attention, output projection, residual and post-LayerNorm."""
import math

import keras
from keras import ops

from albert_tf.config import load_config
from albert_tf.modeling.fused import masked_softmax, residual_layer_norm, use_fused
from albert_tf.modeling.layers import LAYER_NORM_EPSILON, dense, layer_norm


@keras.saving.register_keras_serializable(package="albert_tf")
class AttentionSublayer(keras.layers.Layer):
    """The attention half of a post-LN transformer block:
    LayerNorm(x + Dropout(Dense_out(MultiHeadSelfAttention(x)))).

    Scores are q·kᵀ/√d + (1 − mask)·(−10000), softmaxed in float32 (also under bf16 compute), as the original.
    With training=True (TensorFlow) the softmax and the residual LayerNorm run as fused kernels (see `fused`).

    Call args:
      x: float [B, L, H].
      input_mask: int [B, L], 1 for tokens, 0 for padding.
    Returns:
      float [B, L, H].
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = load_config(config)
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

    def _split_heads(self, x):
        c = self.config
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, c.num_attention_heads, c.head_size))
        return ops.transpose(x, (0, 2, 1, 3))  # [B, N, L, D]

    def call(self, x, input_mask, training=None):
        c = self.config
        fused = use_fused(training)
        q = self._split_heads(self.query(x))
        k = self._split_heads(self.key(x))
        v = self._split_heads(self.value(x))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # [B, N, L, L]
        scale = 1.0 / math.sqrt(c.head_size)
        if fused:
            probs = masked_softmax(scores, attention_bias(input_mask), scale, fused=True)
        else:
            scores = ops.cast(scores, "float32") * scale + attention_bias(input_mask)
            probs = ops.cast(ops.softmax(scores, axis=-1), x.dtype)
        probs = self.attention_dropout(probs, training=training)
        context = ops.matmul(probs, v)  # [B, N, L, D]
        context = ops.transpose(context, (0, 2, 1, 3))
        context = ops.reshape(context, (ops.shape(x)[0], ops.shape(x)[1], c.hidden_size))
        out = self.output_dropout(self.output_dense(context), training=training)
        if fused:
            return residual_layer_norm(out, x, self.layer_norm.gamma, self.layer_norm.beta, LAYER_NORM_EPSILON,
                                       fused=True)
        return self.layer_norm(out + x)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}


def attention_bias(input_mask):
    """int [B, L] mask (1 = token, 0 = padding) → float32 [B, 1, 1, L] additive bias (1 − mask)·(−10000)."""
    mask = ops.cast(input_mask, "float32")
    return ops.expand_dims(ops.expand_dims((1.0 - mask) * -10000.0, 1), 1)

"""FeedForwardSublayer: the FFN half of a post-LN transformer block."""
import keras
from keras import ops

from albert_tf.config import load_config
from albert_tf.modeling.fused import bias_gelu, shared_cast, shared_vectors, use_fused
from albert_tf.modeling.layers import (
    activation, add_bias_and_norm, dense, dropout_seed, float32_values, layer_norm, split_input)


@keras.saving.register_keras_serializable(package="albert_tf")
class FeedForwardSublayer(keras.layers.Layer):
    """LayerNorm(x + Dropout(Dense_out(act(Dense_in(x))))), with act the config's hidden_act (tanh-GELU).

    With training=True (TensorFlow) it runs `train_call`: the bias + GELU and the bias + residual LayerNorm run as
    fused kernels (see `fused`).

    Call args:
      x: float [B, L, H].
    Returns:
      float [B, L, H].
    """

    def __init__(self, config, fused=True, **kwargs):
        super().__init__(**kwargs)
        self.config = load_config(config)
        self.fused = bool(fused)  # training=True runs `train_call` (TensorFlow backend)
        c = self.config
        self.intermediate = dense(c.intermediate_size, c, "intermediate_dense", activation(c.hidden_act))
        self.output_dense = dense(c.hidden_size, c, "output_dense")
        self.dropout = keras.layers.Dropout(c.hidden_dropout_prob, name="ffn_dropout")
        self.layer_norm = layer_norm("ffn_layer_norm")

    def build(self, input_shape):
        self.intermediate.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.config.intermediate_size,))
        self.layer_norm.build(input_shape)
        self.built = True

    def call(self, x, training=None):
        if use_fused(training, self.fused):
            return self.train_call(x, self.step_weights(1)[0], training)
        y = self.output_dense(self.intermediate(x))
        return self.layer_norm(self.dropout(y, training=training) + x)

    # ------------------------------------------------------------------ training path (fused kernels)
    def step_weights(self, uses=1, streams=1):
        """The weights as one training step uses them, each variable read once: a list of `uses` × `streams` dicts,
        one per application and batch slice (application u, slice s at u · streams + s; see `fused.shared_cast`)
        of this (possibly cross-layer-shared) block, holding `input_kernel` [H, I] and
        `output_kernel` [I, H] in the compute dtype (cast once per step; gradients summed in float32) and float32
        `input_bias` [I], `output_bias`, `gamma`, `beta` [H]."""
        wi, wo, bi, bo, gamma, beta = float32_values(
            self.intermediate.kernel, self.output_dense.kernel, self.intermediate.bias, self.output_dense.bias,
            self.layer_norm.gamma, self.layer_norm.beta)
        input_kernels = shared_cast(wi, self.compute_dtype, uses, fused=True, streams=streams)
        output_kernels = shared_cast(wo, self.compute_dtype, uses, fused=True, streams=streams)
        vectors = shared_vectors([bi, bo, gamma, beta], uses, fused=True, streams=streams)
        return [{"input_kernel": a, "output_kernel": b, **dict(zip(("input_bias", "output_bias", "gamma", "beta"), v))}
                for a, b, v in zip(input_kernels, output_kernels, vectors)]

    def dropout_seeds(self, training):
        """The seed of this application's dropout mask, as a 1-tuple (an int [2] tensor or None)."""
        return (dropout_seed(self.dropout, training),)

    def train_call(self, x, weights, training, copies=1, seeds=None):
        """The block in training, with fused kernels. x: [B, L, H] in the compute dtype, or a pair of equal such
        tensors; weights: one dict of `step_weights()`; copies: 2 returns a pair (see `fused.residual_layer_norm`);
        seeds: `dropout_seeds(training)` drawn beforehand, or None to draw them here.
        Returns [B, L, H] (or a list of `copies` of it)."""
        if seeds is None:
            seeds = self.dropout_seeds(training)
        c = self.config
        x, residual = split_input(x)
        batch, length, hidden = ops.shape(x)[0], ops.shape(x)[1], c.hidden_size
        h = ops.matmul(ops.reshape(x, (-1, hidden)), weights["input_kernel"])  # [B·L, I]
        if c.hidden_act in ("gelu", "gelu_new"):
            h = bias_gelu(h, weights["input_bias"], fused=True)
        else:
            h = self.intermediate.activation(h + ops.cast(weights["input_bias"], h.dtype))
        y = ops.reshape(ops.matmul(h, weights["output_kernel"]), (batch, length, hidden))
        return add_bias_and_norm(y, residual, weights["output_bias"], weights, self.dropout, seeds[0], copies)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(), "fused": self.fused}

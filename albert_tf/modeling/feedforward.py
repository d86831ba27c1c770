"""FeedForwardSublayer: the FFN half of a post-LN transformer block."""
import keras
from keras import ops

from albert_tf.config import load_config
from albert_tf.modeling.fused import bias_gelu, residual_layer_norm, use_fused
from albert_tf.modeling.layers import LAYER_NORM_EPSILON, activation, dense, layer_norm


@keras.saving.register_keras_serializable(package="albert_tf")
class FeedForwardSublayer(keras.layers.Layer):
    """LayerNorm(x + Dropout(Dense_out(act(Dense_in(x))))), with act the config's hidden_act (tanh-GELU).

    With training=True (TensorFlow) the bias + GELU and the residual LayerNorm run as fused kernels (see `fused`).

    Call args:
      x: float [B, L, H].
    Returns:
      float [B, L, H].
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = load_config(config)
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
        c = self.config
        if not use_fused(training):
            y = self.output_dense(self.intermediate(x))
            return self.layer_norm(self.dropout(y, training=training) + x)
        h = ops.matmul(x, self.intermediate.kernel)
        if c.hidden_act in ("gelu", "gelu_new"):
            h = bias_gelu(h, self.intermediate.bias, fused=True)
        else:
            h = self.intermediate.activation(h + self.intermediate.bias)
        y = self.dropout(self.output_dense(h), training=training)
        return residual_layer_norm(y, x, self.layer_norm.gamma, self.layer_norm.beta, LAYER_NORM_EPSILON,
                                   fused=True)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

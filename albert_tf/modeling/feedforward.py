"""FeedForwardSublayer: the FFN half of a post-LN transformer block."""
import keras

from albert_tf.config import AlbertConfig
from albert_tf.modeling.layers import activation, dense, layer_norm


@keras.saving.register_keras_serializable(package="albert_tf")
class FeedForwardSublayer(keras.layers.Layer):
    """LayerNorm(x + Dropout(Dense_out(act(Dense_in(x))))), with act the config's hidden_act (tanh-GELU).

    Call args:
      x: float [B, L, H].
    Returns:
      float [B, L, H].
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config if isinstance(config, AlbertConfig) else AlbertConfig.from_dict(config)
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
        y = self.output_dense(self.intermediate(x))
        return self.layer_norm(self.dropout(y, training=training) + x)

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

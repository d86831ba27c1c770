"""Pretraining heads: MaskedLMHead (decoder tied to the word embeddings) and SentenceOrderHead."""
import keras
from keras import ops

from albert_tf.config import load_config
from albert_tf.modeling.layers import activation, dense, layer_norm


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Gathers the masked positions, then dense(H→E, hidden_act) → LayerNorm → logits against the word-embedding
    table (transposed, tied) + an output bias [V].

    Args:
      config: AlbertConfig.
      embedding: the FactorizedEmbedding whose `word_embeddings` [V, E] is the decoder matrix.
    Call args:
      sequence_output: float [B, L, H].
      masked_lm_positions: int32 [B, P].
    Returns:
      float32 logits [B, P, V].
    """

    def __init__(self, config, embedding, **kwargs):
        super().__init__(**kwargs)
        self.config = load_config(config)
        c = self.config
        self.embedding = embedding
        self.transform = dense(c.embedding_size, c, "transform_dense", activation(c.hidden_act))
        self.layer_norm = layer_norm("transform_layer_norm")

    def build(self, input_shape=None):
        c = self.config
        self.transform.build((None, None, c.hidden_size))
        self.layer_norm.build((None, None, c.embedding_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(c.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        positions = ops.expand_dims(ops.cast(masked_lm_positions, "int32"), -1)  # [B, P, 1]
        gathered = ops.take_along_axis(sequence_output, positions, axis=1)  # [B, P, H]
        x = self.layer_norm(self.transform(gathered))
        table = ops.cast(self.embedding.word_embeddings, x.dtype)
        logits = ops.matmul(x, ops.transpose(table)) + ops.cast(self.output_bias, x.dtype)
        return ops.cast(logits, "float32")

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}


@keras.saving.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(keras.layers.Layer):
    """dense H→2 on the pooled output. Label 0 = original order, 1 = swapped.

    Call args:
      pooled_output: float [B, H].
    Returns:
      float32 logits [B, 2].
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = load_config(config)
        self.dense = dense(2, self.config, "sop_dense")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.built = True

    def call(self, pooled_output):
        return ops.cast(self.dense(pooled_output), "float32")

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

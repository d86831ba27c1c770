"""FactorizedEmbedding: ALBERT's factorized embedding parameterization."""
import keras
from keras import ops

from albert_tf.config import load_config
from albert_tf.modeling.layers import dense, initializer, layer_norm


@keras.saving.register_keras_serializable(package="albert_tf")
class FactorizedEmbedding(keras.layers.Layer):
    """Word (V×E) + position (max_pos×E) + token type (types×E) embeddings, LayerNorm and dropout at width E,
    then the E→H projection `embedding_hidden_mapping_in` (present only when E ≠ H).

    Call args:
      input_word_ids: int32 [B, L].
      input_type_ids: int32 [B, L].
      training: bool, enables dropout.
    Returns:
      float [B, L, H].

    `word_embeddings` ([V, E]) is also the MLM decoder matrix (tied), see `MaskedLMHead`.
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = load_config(config)
        c = self.config
        self.layer_norm = layer_norm("embeddings_layer_norm")
        self.dropout = keras.layers.Dropout(c.hidden_dropout_prob, name="embeddings_dropout")
        self.projection = (
            dense(c.hidden_size, c, "embedding_hidden_mapping_in") if c.embedding_size != c.hidden_size else None
        )

    def build(self, input_shape=None):
        c = self.config
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(c.vocab_size, c.embedding_size), initializer=initializer(c))
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(c.max_position_embeddings, c.embedding_size),
            initializer=initializer(c))
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(c.type_vocab_size, c.embedding_size), initializer=initializer(c))
        self.layer_norm.build((None, None, c.embedding_size))
        if self.projection is not None:
            self.projection.build((None, None, c.embedding_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=None):
        seq_length = ops.shape(input_word_ids)[1]
        words = ops.take(self.word_embeddings, input_word_ids, axis=0)
        types = ops.take(self.token_type_embeddings, input_type_ids, axis=0)
        positions = self.position_embeddings[:seq_length]
        x = words + types + ops.expand_dims(positions, 0)
        x = self.layer_norm(x)
        x = self.dropout(x, training=training)
        if self.projection is not None:
            x = self.projection(x)
        return x

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

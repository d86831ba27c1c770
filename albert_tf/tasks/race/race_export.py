"""The RACE export: serving_default takes article string [B], question string [B], options string [B, 4] and returns
probabilities float32 [B, 4], label int32 [B].
"""
import tensorflow as tf

from albert_tf.modeling.base import trim_padding
from albert_tf.serving.saved_model import keras_weights, write_task_export
from albert_tf.serving.signatures import SERVING_LENGTH_BUCKET
from albert_tf.tasks.race.data import NUM_CHOICES
from albert_tf.tasks.race.in_graph import race_inputs


def race_signatures(model, tokenizer, seq_length, max_qa_length):
    """(module, signatures) for `write_saved_model`: serving_default (article, question, options [B, 4] ->
    probabilities [B, 4], label [B])."""
    module = tf.Module()
    module.model_weights = keras_weights(model)  # not the Keras model: see keras_weights
    module.tokenizer = tokenizer.in_graph

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="article"),
                                  tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None, NUM_CHOICES], tf.string, name="options")], autograph=False)
    def serving_default(article, question, options):
        inputs = race_inputs(tokenizer, article, question, options, seq_length, max_qa_length)
        logits = model(trim_padding(inputs, SERVING_LENGTH_BUCKET), training=False)  # as the encoder export
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "label": tf.argmax(logits, -1, output_type=tf.int32)}

    module.serving_default = serving_default
    return module, {"serving_default": serving_default}  # traced once, in the save (signatures.encoder_signatures)


def export_race(model, tokenizer, output_base, seq_length, max_qa_length, version=None, overwrite=False):
    """A fine-tuned AlbertMultipleChoice as a raw-text RACE SavedModel at BASE/N; returns the path."""
    module, signatures = race_signatures(model, tokenizer, seq_length, max_qa_length)
    config = {"task": "race", "max_seq_length": int(seq_length), "max_qa_length": int(max_qa_length),
              "lower_case": tokenizer.lower_case}
    return write_task_export(module, signatures, output_base, config, version, overwrite)

"""The encoder's serving signatures: raw text in, packed in the graph exactly as `AlbertTokenizer.pack` does it.

Signatures (B = batch, L = --max-seq-length, H = hidden size):
  serving_default  text_a string [B], optional text_b string [B]
                       -> pooled_output [B,H], sequence_output [B,L,H], input_mask int32 [B,L]
                          ([CLS] a [SEP] b [SEP]; [CLS] a [SEP] for a row without a second segment: text_b
                          omitted, or a text_b that tokenizes to no ids such as "", see albert_tf.text.segments)
  text             text_a string [B] -> the same ([CLS] a [SEP]; for TF Serving's REST API, which does not
                                        honour optional inputs)
  encode           input_word_ids, input_mask, input_type_ids int32 [B,L'] -> the same outputs
Text is tokenized in the graph exactly as `AlbertTokenizer.pack` does it (normalization, SentencePiece, the
digit-comma rule, truncation of the longer side); invalid UTF-8 bytes become U+FFFD first, as `create-data` reads
them.
Each batch runs at its longest text (rounded up to SERVING_LENGTH_BUCKET positions), not at L: the outputs are the
full-length batch's (padding is masked out of attention), sequence_output is zero at padding positions, and short
requests cost less. `text_to_inputs` is shared with the task exports.
"""
import tensorflow as tf

from albert_tf.modeling.base import trim_padding
from albert_tf.serving.saved_model import keras_weights
from albert_tf.text.in_graph import clean_utf8

OUTPUT_NAMES = ("pooled_output", "sequence_output", "input_mask")
#: the encoder signatures run each batch at its longest text rounded up to a multiple of this (see outputs()).
SERVING_LENGTH_BUCKET = 8


def text_to_inputs(tokenizer, text_a, text_b=None, seq_length=128):
    """In-graph: string [B] (and text_b: None, string [B], or [0] for an omitted one) -> the packed int32
    [B, seq_length] model inputs, as `AlbertTokenizer.pack`; a row without a second segment (text_b omitted, or one
    that tokenizes to no ids, such as "") is [CLS] a [SEP] (albert_tf.text.segments).

    Invalid UTF-8 becomes U+FFFD (as `create-data` reads its input); text_a and text_b of different lengths raise
    InvalidArgumentError "text_a and text_b must have the same length". Task exports reuse this.
    """
    return tokenizer.tf_pack(clean_utf8(text_a), None if text_b is None else clean_utf8(text_b),
                             seq_length=seq_length)


def encoder_signatures(encoder, tokenizer, seq_length=128):
    """(module, signatures) for `write_saved_model`: serving_default, text and encode (see the module doc).

    serving_default's text_b is optional: its signature records a default (an empty [0] string tensor) in
    SignatureDef.defaults, which the TF1 session loader (saved_model_cli, TF Serving's gRPC Predict since 2.14) and
    the function restored by tf.saved_model.load (`loaded.serving_default(text_a)`, not `loaded.signatures[...]`)
    honour; TF Serving's REST API does not (it wants every input), hence `text`.
    """
    module = tf.Module()
    module.encoder_weights = keras_weights(encoder)
    module.tokenizer = tokenizer.in_graph

    def outputs(inputs):
        # The encoder runs on the batch cut to its longest text (rounded up to SERVING_LENGTH_BUCKET), and its
        # dense layers on the real tokens only (AlbertEncoder.unpadded_call): padding is masked out of attention,
        # so the real positions and the pooled output are those of the full-length batch, at the cost of the text
        # actually sent; sequence_output is padded back to L with zeros. Outputs are float32 in any compute dtype.
        mask = inputs["input_mask"]
        out = encoder.unpadded_call(trim_padding(inputs, SERVING_LENGTH_BUCKET))
        sequence = tf.cast(out["sequence_output"], tf.float32)
        sequence = tf.pad(sequence, [[0, 0], [0, tf.shape(mask)[1] - tf.shape(sequence)[1]], [0, 0]])
        sequence.set_shape(mask.shape.concatenate(out["sequence_output"].shape[-1:]))
        return {"pooled_output": tf.cast(out["pooled_output"], tf.float32), "sequence_output": sequence,
                "input_mask": mask}

    text_a_spec = tf.TensorSpec([None], tf.string, name="text_a")
    no_text_b = tf.constant([], tf.string)

    @tf.function(input_signature=[text_a_spec, tf.TensorSpec([None], tf.string, name="text_b")], autograph=False)
    def serving_default(text_a, text_b=no_text_b):
        return outputs(text_to_inputs(tokenizer, text_a, text_b, seq_length))

    @tf.function(input_signature=[text_a_spec], autograph=False)
    def text(text_a):
        return outputs(text_to_inputs(tokenizer, text_a, None, seq_length))

    ids = {name: tf.TensorSpec([None, None], tf.int32, name=name)
           for name in ("input_word_ids", "input_mask", "input_type_ids")}

    @tf.function(input_signature=[ids], autograph=False)
    def encode(inputs):
        return outputs(inputs)

    module.serving_default, module.text, module.encode = serving_default, text, encode
    # The tf.functions, not concrete functions: only then does tf.saved_model.save record serving_default's default
    # argument in SignatureDef.defaults, and each is traced once, inside the save (a concrete function traced
    # before it is traced again there: the save's context is part of a trace's key).
    return module, {"serving_default": serving_default, "text": text, "encode": encode}

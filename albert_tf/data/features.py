"""The pretraining TFRecord format, shared with google-research/albert's create_pretraining_data.py.

Each tf.train.Example holds (L = max_seq_length, P = max_predictions_per_seq):
  input_ids, input_mask, segment_ids, token_boundary   int64[L]
  masked_lm_positions, masked_lm_ids                    int64[P]
  masked_lm_weights                                     float[P]
  next_sentence_labels                                  int64[1]   the SOP label: 0 original order, 1 swapped
Unmasked records (`create-data --no-mask`, for dynamic masking) carry the same features with P slots of zeros.
"""
INT_SEQ_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_boundary")
INT_PRED_FEATURES = ("masked_lm_positions", "masked_lm_ids")
FLOAT_PRED_FEATURES = ("masked_lm_weights",)
LABEL_FEATURE = "next_sentence_labels"


def feature_spec(max_seq_length, max_predictions):
    """The tf.io.parse_example spec for records of these lengths."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  (keeps TF out of create-data's workers)

    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in INT_SEQ_FEATURES}
    spec.update({name: tf.io.FixedLenFeature([max_predictions], tf.int64) for name in INT_PRED_FEATURES})
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions], tf.float32)
    spec[LABEL_FEATURE] = tf.io.FixedLenFeature([1], tf.int64)
    return spec

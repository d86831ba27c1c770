"""The SQuAD export: question and context strings in, the answer out (see albert_tf.tasks.squad.in_graph).

SQuAD  serving_default  question string [B], context string [B]
         -> answer string [B]: the best span cut from the context as written ("" when v2 predicts no answer),
            start, end int64 [B]: its character (Unicode code point) offsets into the context,
                context[start:end] == answer in Python; -1, -1 for "",
            score float32 [B]: the answer's start + end logit (v2's "no answer": the null score; v1 without any
                valid span: 0),
            null_score_diff float32 [B] (v2 only): the null score - the best span's score (+inf without a span);
                the answer is "" when it exceeds the threshold chosen on dev (assets.extra/task_config.json).
       windows          question, context -> the windows and their logits: input_word_ids, input_mask,
            input_type_ids int32 [W, L], example_index int32 [W], token_start, token_end int64 [W, L] (character
            span of each window token in its context, -1 outside the context), token_is_max_context bool [W, L],
            start_logits, end_logits float32 [W, L] (W = the windows of all B questions, in order).
"""
import tensorflow as tf

from albert_tf.serving.saved_model import keras_weights, write_task_export
from albert_tf.tasks.squad.in_graph import squad_answers, squad_windows
from albert_tf.tasks.squad.scoring import MAX_ANSWER_LENGTH, N_BEST
from albert_tf.text.in_graph import clean_utf8, make_offset_encoder


def squad_signatures(model, tokenizer, seq_length, doc_stride=128, max_query_length=64,
                     max_answer_length=MAX_ANSWER_LENGTH, n_best=N_BEST, version_2_with_negative=False,
                     null_score_diff_threshold=0.0):
    """(module, signatures) for `albert_tf.serving.saved_model.write_saved_model`: serving_default and windows (module doc).

    Args:
      model: an AlbertSpanQA (dict in -> start_logits, end_logits [W, L]).
      tokenizer: the AlbertTokenizer it was fine-tuned with.
      seq_length, doc_stride, max_query_length, max_answer_length, n_best: as in squad.featurize / postprocess.
      version_2_with_negative, null_score_diff_threshold: v2's "no answer" rule and its threshold.
    """
    module = tf.Module()
    module.model_weights = keras_weights(model)  # not the Keras model: see keras_weights
    module.encoder = make_offset_encoder(tokenizer)
    strings = [tf.TensorSpec([None], tf.string, name="question"), tf.TensorSpec([None], tf.string, name="context")]

    def features_and_logits(question, context):
        question, context = clean_utf8(question), clean_utf8(context)
        check = tf.debugging.assert_equal(tf.size(question), tf.size(context),
                                          message="question and context must have the same length")
        with tf.control_dependencies([check]):
            context = tf.identity(context)
        windows = squad_windows(module.encoder, tokenizer, question, context, seq_length, doc_stride,
                                max_query_length)
        logits = model({name: windows[name] for name in ("input_word_ids", "input_mask", "input_type_ids")},
                       training=False)
        return context, windows, logits["start_logits"], logits["end_logits"]

    @tf.function(input_signature=strings, autograph=False)
    def serving_default(question, context):
        context, windows, start_logits, end_logits = features_and_logits(question, context)
        return squad_answers(windows, start_logits, end_logits, context, tf.size(context), n_best=n_best,
                             max_answer_length=max_answer_length, version_2_with_negative=version_2_with_negative,
                             null_score_diff_threshold=null_score_diff_threshold)

    @tf.function(input_signature=strings, autograph=False)
    def windows_signature(question, context):
        _, windows, start_logits, end_logits = features_and_logits(question, context)
        return dict(windows, start_logits=start_logits, end_logits=end_logits)

    module.serving_default, module.windows = serving_default, windows_signature
    # the tf.functions: each traced once, in the save (see albert_tf.serving.signatures.encoder_signatures)
    return module, {"serving_default": serving_default, "windows": windows_signature}


def export_squad(model, tokenizer, output_base, seq_length, doc_stride, max_query_length,
                 max_answer_length=MAX_ANSWER_LENGTH, n_best=N_BEST, version_2_with_negative=False,
                 null_score_diff_threshold=0.0, version=None, overwrite=False):
    """A fine-tuned AlbertSpanQA as a raw-text SQuAD SavedModel at BASE/N (see the module doc); returns the path."""
    module, signatures = squad_signatures(model, tokenizer, seq_length, doc_stride, max_query_length,
                                          max_answer_length, n_best, version_2_with_negative,
                                          null_score_diff_threshold)
    config = {"task": "squad2" if version_2_with_negative else "squad1", "max_seq_length": int(seq_length),
              "doc_stride": int(doc_stride), "max_query_length": int(max_query_length),
              "max_answer_length": int(max_answer_length), "n_best": int(n_best),
              "version_2_with_negative": bool(version_2_with_negative),
              "null_score_diff_threshold": float(null_score_diff_threshold), "lower_case": tokenizer.lower_case}
    return write_task_export(module, signatures, output_base, config, version, overwrite)

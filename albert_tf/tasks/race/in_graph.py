"""RACE featurization in the graph: the twin of albert_tf.tasks.race's Python `featurize`, used by fine-tuning's
tf.data pipeline and by the RACE export.
"""
import tensorflow as tf

from albert_tf.tasks.race import data as race
from albert_tf.tasks.race.data import NUM_CHOICES
from albert_tf.text.in_graph import clean_utf8, row_positions


def race_inputs(tokenizer, article, question, options, seq_length, max_qa_length):
    """In-graph `race.featurize`: string [B], [B], [B, 4] -> int32 [B, 4, L] input_word_ids, input_mask,
    input_type_ids. Each option's second segment is the question with its "_" blanks filled by the option, or the
    question, a space and the option; it keeps its last max_qa_length tokens and the article is cut to fit."""
    race.check_qa_length(max_qa_length, seq_length)
    article, question, options = clean_utf8(article), clean_utf8(question), clean_utf8(options)
    batch = tf.size(question)
    check = tf.debugging.assert_equal(tf.stack([tf.size(article), tf.shape(options)[0]]), tf.stack([batch, batch]),
                                      message="article, question and options must have the same batch size")
    with tf.control_dependencies([check]):
        option = tf.reshape(options, [-1])                                                     # [B·4]
    question = tf.repeat(question, NUM_CHOICES)
    parts = tf.strings.split(question, "_")                                                    # ragged [B·4, P]
    count = parts.row_lengths()
    is_last = row_positions(count) == tf.repeat(count - 1, count)
    filler = tf.where(is_last, "", tf.gather(option, parts.value_rowids()))
    filled = tf.strings.reduce_join(parts.with_flat_values(tf.strings.join([parts.flat_values, filler])), axis=-1)
    appended = tf.strings.join([question, option], separator=" ")
    has_blank = tf.strings.regex_full_match(question, "(?s).*_.*")
    endings = tokenizer.tf_encode(tf.where(has_blank, filled, appended))
    count = endings.row_lengths()
    endings = tf.ragged.boolean_mask(endings, endings.with_flat_values(
        row_positions(count) >= tf.repeat(count - max_qa_length, count)))
    article_ids = tokenizer.in_graph.encode_prefix(article, seq_length - 3)  # at most L - 3 ids are kept
    article_ids = tf.gather(article_ids, tf.repeat(tf.range(tf.size(article)), NUM_CHOICES))
    keep = seq_length - 3 - endings.row_lengths()
    count = article_ids.row_lengths()
    article_ids = tf.ragged.boolean_mask(article_ids, article_ids.with_flat_values(
        row_positions(count) < tf.repeat(keep, count)))

    def column(value):
        return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([tf.size(option), 1]), tf.constant(value, tf.int32)))

    first = [column(tokenizer.cls_id), article_ids, column(tokenizer.sep_id)]
    second = [endings, column(tokenizer.sep_id)]
    words = tf.concat(first + second, axis=1)
    types = tf.concat([tf.zeros_like(p) for p in first] + [tf.ones_like(p) for p in second], axis=1)
    shape = [None, seq_length]
    out = {"input_word_ids": words.to_tensor(0, shape=shape), "input_mask": tf.ones_like(words).to_tensor(0, shape=shape),
           "input_type_ids": types.to_tensor(0, shape=shape)}
    return {k: tf.reshape(v, [-1, NUM_CHOICES, seq_length]) for k, v in out.items()}

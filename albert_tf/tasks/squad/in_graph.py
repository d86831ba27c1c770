"""SQuAD featurization and answer extraction in the graph: the twins of albert_tf.tasks.squad's Python `featurize` and
`postprocess`, used by fine-tuning's tf.data pipeline and by the SQuAD export (tasks/squad/squad_export.py).

Windows: [CLS] question (first max_query_length tokens) [SEP] context window [SEP]; windows of
L - len(question) - 3 tokens every doc_stride tokens; a span's start must lie where its window gives the token the
most context; the n_best (`scoring.N_BEST`) highest start and end logits of each window pair into spans of at
most max_answer_length (`scoring.MAX_ANSWER_LENGTH`) tokens; the highest start + end logit wins (the earliest window,
start, end on a tie). Token character spans come from the in-graph offset encoder
(albert_tf.text.in_graph.OffsetEncoder).
"""
import numpy as np
import tensorflow as tf

from albert_tf.tasks.squad import data as squad
from albert_tf.tasks.squad.scoring import MAX_ANSWER_LENGTH, N_BEST
from albert_tf.text.in_graph import make_offset_encoder, row_positions
from albert_tf.text.normalize import unicode_classes


def squad_windows(encoder, tokenizer, question, context, seq_length, doc_stride, max_query_length):
    """In-graph `squad.featurize` (prediction) of B questions: every window of every context.

    Args:
      encoder: the `make_offset_encoder` module; tokenizer: the AlbertTokenizer.
      question, context: string [B] (valid UTF-8).
      seq_length, doc_stride, max_query_length: as in `squad.featurize`.
    Returns:
      dict: input_word_ids, input_mask, input_type_ids int32 [W, L]; example_index int32 [W]; token_start,
      token_end int64 [W, L] (-1 outside the context); token_is_max_context bool [W, L].
    """
    return _squad_windows(encoder, tokenizer, question, context, seq_length, doc_stride, max_query_length)[0]


def _squad_windows(encoder, tokenizer, question, context, seq_length, doc_stride, max_query_length,
                   answer_start=None, answer_end=None, context_rows=None):
    """(squad_windows's dict, {doc_span_index [, start_positions, end_positions, keep]}). With context_rows
    (int [B]), `context` holds each distinct context once and question b's is context[context_rows[b]]."""
    squad.check_window_sizes(seq_length, doc_stride, max_query_length)
    query = encoder.tokenizer.encode(question)
    query = tf.ragged.boolean_mask(query, query.with_flat_values(row_positions(query.row_lengths()) < max_query_length))
    context_ids, span_start, span_end = encoder.encode_with_offsets(context)
    if context_rows is not None:  # each distinct context tokenized once
        context_ids, span_start, span_end = (tf.gather(t, context_rows) for t in (context_ids, span_start, span_end))
    num_query, num_context = query.row_lengths(), context_ids.row_lengths()
    # windows: lengths of max_tokens every step = min(max_tokens, doc_stride) tokens (squad.doc_windows)
    max_tokens = seq_length - num_query - 3
    step = tf.minimum(max_tokens, doc_stride)
    num_windows = 1 + tf.maximum((num_context - max_tokens + step - 1) // step, 0)
    example = tf.repeat(tf.range(tf.size(num_windows, out_type=tf.int64)), num_windows)      # [W]
    window = tf.ragged.range(num_windows).flat_values                                          # [W]
    start = window * tf.gather(step, example)
    length = tf.minimum(tf.gather(num_context, example) - start, tf.gather(max_tokens, example))
    # token p of window w: [CLS] query [SEP] context[start + k] (k = p - offset) [SEP] padding
    position = tf.range(seq_length, dtype=tf.int64)[tf.newaxis, :]                            # [1, L]
    offset = tf.gather(num_query, example)[:, tf.newaxis] + 2                                 # [W, 1]
    k = position - offset
    in_context = (k >= 0) & (k < length[:, tf.newaxis])
    token = start[:, tf.newaxis] + k                                                           # context index
    context_base = tf.gather(context_ids.row_splits, example)[:, tf.newaxis]
    query_base = tf.gather(query.row_splits, example)[:, tf.newaxis]
    is_query = (position >= 1) & (position < offset - 1)
    # indices into the flat ids (and spans) of all contexts / queries; outside them: a padding entry at the end
    num_tokens = tf.size(context_ids.flat_values, out_type=tf.int64)
    flat_index = tf.where(in_context, context_base + token, num_tokens)
    query_index = tf.where(is_query, query_base + position - 1, tf.size(query.flat_values, out_type=tf.int64))
    query_token = tf.gather(tf.concat([query.flat_values, [0]], 0), query_index)
    context_token = tf.gather(tf.concat([context_ids.flat_values, [0]], 0), flat_index)
    end_of_window = offset + length[:, tf.newaxis]                                             # the last [SEP]
    words = tf.where(position == 0, tokenizer.cls_id,
                     tf.where(is_query, query_token,
                              tf.where((position == offset - 1) | (position == end_of_window), tokenizer.sep_id,
                                       tf.where(in_context, context_token, 0))))
    mask = position <= end_of_window
    types = (position >= offset) & mask
    # most context: score min(left, right) + 0.01 * length in float64 (as numpy), the earliest window on a tie
    score = (tf.cast(tf.minimum(k, length[:, tf.newaxis] - 1 - k), tf.float64)
             + 0.01 * tf.cast(length[:, tf.newaxis], tf.float64))
    segments = num_tokens + 1
    best = tf.math.unsorted_segment_max(tf.reshape(score, [-1]), tf.reshape(flat_index, [-1]), segments)
    window_2d = tf.broadcast_to(window[:, tf.newaxis], tf.shape(k))
    is_best = in_context & (score == tf.gather(best, flat_index))
    best_window = tf.math.unsorted_segment_min(tf.boolean_mask(window_2d, is_best),
                                               tf.boolean_mask(flat_index, is_best), segments)
    max_context = in_context & (tf.gather(best_window, flat_index) == window_2d)
    no_span = tf.constant([-1], tf.int64)
    windows = {
        "input_word_ids": tf.cast(words, tf.int32), "input_mask": tf.cast(mask, tf.int32),
        "input_type_ids": tf.cast(types, tf.int32), "example_index": tf.cast(example, tf.int32),
        "token_start": tf.gather(tf.concat([span_start.flat_values, no_span], 0), flat_index),
        "token_end": tf.gather(tf.concat([span_end.flat_values, no_span], 0), flat_index),
        "token_is_max_context": max_context,
    }
    extra = {"doc_span_index": tf.cast(window, tf.int32)}
    if answer_start is not None:
        # the answer's first and last context token: those whose span overlaps [answer_start, answer_end)
        answer_start, answer_end = tf.cast(answer_start, tf.int64), tf.cast(answer_end, tf.int64)
        rows, nrows = span_start.value_rowids(), span_start.nrows()
        overlaps = ((span_start.flat_values < tf.gather(answer_end, rows))
                    & (span_end.flat_values > tf.gather(answer_start, rows)))
        token_index = tf.ragged.range(num_context).flat_values
        big = tf.constant(np.iinfo(np.int64).max, tf.int64)
        first = tf.math.unsorted_segment_min(tf.where(overlaps, token_index, big), rows, nrows)
        last = tf.math.unsorted_segment_max(tf.where(overlaps, token_index, -1), rows, nrows)
        found = tf.math.unsorted_segment_max(tf.cast(overlaps, tf.int32), rows, nrows) > 0
        keep = found | (answer_start < 0)  # an answer that covers no token: the question is skipped
        first, last, found, keep = (tf.gather(t, example) for t in (first, last, found, keep))
        inside = found & (start <= first) & (last < start + length)
        window_offset = offset[:, 0]
        extra["start_positions"] = tf.cast(tf.where(inside, first - start + window_offset, 0), tf.int32)
        extra["end_positions"] = tf.cast(tf.where(inside, last - start + window_offset, 0), tf.int32)
        extra["keep"] = keep
    return windows, extra


def featurize_squad(examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64, is_training=False,
                    examples_per_batch=256):
    """`squad.featurize` run in tf.data with the export's in-graph tokenizer (`make_offset_encoder`,
    `squad_windows`): the same list of `squad.SquadFeature`, windows in example order.

    Args:
      examples: list[squad.SquadExample].
      tokenizer: an AlbertTokenizer.
      max_seq_length, doc_stride, max_query_length, is_training: as in `squad.featurize` (training: start/end
        positions from each example's first answer; questions whose answer covers no token are skipped).
      examples_per_batch: questions featurized per tf.data element.
    Returns:
      list[squad.SquadFeature].
    """
    squad.check_window_sizes(max_seq_length, doc_stride, max_query_length)
    if not examples:
        return []
    contexts = {}
    context_index = np.asarray([contexts.setdefault(e.context, len(contexts)) for e in examples], np.int64)
    answers = np.full([len(examples), 2], -1, np.int64)
    if is_training:
        for n, example in enumerate(examples):
            if not example.is_impossible:
                answers[n] = squad.training_answer_span(example)
    encoder = make_offset_encoder(tokenizer)
    tables = {"question": tf.constant([e.question for e in examples]), "context": tf.constant(list(contexts)),
              "context_index": tf.constant(context_index), "answers": tf.constant(answers)}

    def featurize(index):
        question = tf.gather(tables["question"], index)
        distinct, rows = tf.unique(tf.gather(tables["context_index"], index))  # questions share paragraphs
        context = tf.gather(tables["context"], distinct)
        answer = tf.gather(tables["answers"], index) if is_training else None
        windows, extra = _squad_windows(encoder, tokenizer, question, context, max_seq_length, doc_stride,
                                        max_query_length, None if answer is None else answer[:, 0],
                                        None if answer is None else answer[:, 1], context_rows=rows)
        windows = dict(windows, **extra)
        windows["example_index"] = tf.gather(index, windows["example_index"])
        return windows

    dataset = tf.data.Dataset.range(len(examples)).batch(examples_per_batch)
    # no AutoGraph: the featurizers use tf.cond where they branch; converting them only costs tracing time
    dataset = dataset.map(tf.autograph.experimental.do_not_convert(featurize), num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)
    features = []
    for batch in dataset.prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        spans = np.stack([batch["token_start"], batch["token_end"]], axis=-1).astype(np.int32)
        for w in range(len(batch["example_index"])):
            if is_training and not batch["keep"][w]:
                continue
            feature = squad.SquadFeature(
                len(features), int(batch["example_index"][w]), int(batch["doc_span_index"][w]),
                batch["input_word_ids"][w], batch["input_mask"][w], batch["input_type_ids"][w], spans[w],
                batch["token_is_max_context"][w])
            if is_training:
                feature.start_position = int(batch["start_positions"][w])
                feature.end_position = int(batch["end_positions"][w])
                feature.is_impossible = feature.start_position == 0
            features.append(feature)
    return features


def squad_answers(windows, start_logits, end_logits, context, num_examples, n_best=N_BEST,
                  max_answer_length=MAX_ANSWER_LENGTH,
                  version_2_with_negative=False, null_score_diff_threshold=0.0):
    """In-graph `squad.postprocess`'s answer of each question.

    Args:
      windows: `squad_windows`'s dict; start_logits, end_logits: float32 [W, L].
      context: string [B]; num_examples: B (a scalar tensor).
    Returns:
      dict answer string [B], start, end int64 [B], score float32 [B] (+ null_score_diff float32 [B] for v2).
    """
    k = min(n_best, windows["input_word_ids"].shape[-1])
    starts64, ends64 = tf.cast(start_logits, tf.float64), tf.cast(end_logits, tf.float64)
    top_start = tf.math.top_k(start_logits, k=k).indices                                     # [W, k]
    top_end = tf.math.top_k(end_logits, k=k).indices
    token_start, token_end = windows["token_start"], windows["token_end"]
    s_char = tf.gather(token_start, top_start, batch_dims=1)                                 # [W, k]
    s_ok = (s_char >= 0) & tf.gather(windows["token_is_max_context"], top_start, batch_dims=1)
    e_char_start = tf.gather(token_start, top_end, batch_dims=1)
    e_char = tf.gather(token_end, top_end, batch_dims=1)
    s_pos, e_pos = top_start[:, :, tf.newaxis], top_end[:, tf.newaxis, :]                   # [W, k, 1], [W, 1, k]
    valid = (s_ok[:, :, tf.newaxis] & (e_char_start >= 0)[:, tf.newaxis, :] & (e_pos >= s_pos)
             & (e_pos - s_pos + 1 <= max_answer_length) & (e_char[:, tf.newaxis, :] > s_char[:, :, tf.newaxis]))
    score = (tf.gather(starts64, top_start, batch_dims=1)[:, :, tf.newaxis]
             + tf.gather(ends64, top_end, batch_dims=1)[:, tf.newaxis, :])
    neg_inf = tf.constant(-np.inf, tf.float64)
    score = tf.reshape(tf.where(valid, score, neg_inf), [-1, k * k])                          # [W, k·k]
    # the best candidate: highest score; on a tie the earliest window, then start rank, then end rank
    window_best = tf.reduce_max(score, axis=1)
    candidate = tf.range(k * k)[tf.newaxis, :]
    window_choice = tf.reduce_min(tf.where(score == window_best[:, tf.newaxis], candidate, k * k), axis=1)
    example = windows["example_index"]
    has_span = tf.math.unsorted_segment_max(tf.cast(window_best > neg_inf, tf.int32), example, num_examples) > 0
    best = tf.where(has_span, tf.math.unsorted_segment_max(window_best, example, num_examples), neg_inf)
    window_id = tf.range(tf.size(example))
    chosen_window = tf.math.unsorted_segment_min(
        tf.where((window_best == tf.gather(best, example)) & (window_best > neg_inf), window_id, tf.size(example)),
        example, num_examples)
    safe_window = tf.minimum(chosen_window, tf.maximum(tf.size(example) - 1, 0))
    choice = tf.gather(window_choice, safe_window)
    start_token = tf.gather(tf.gather(top_start, safe_window), choice // k, batch_dims=1)
    end_token = tf.gather(tf.gather(top_end, safe_window), choice % k, batch_dims=1)
    char_start = tf.gather(tf.gather(token_start, safe_window), start_token, batch_dims=1)
    char_end = tf.gather(tf.gather(token_end, safe_window), end_token, batch_dims=1)
    answered = has_span
    outputs = {}
    span_score = tf.where(has_span, best, tf.zeros_like(best))
    if version_2_with_negative:
        null = tf.math.unsorted_segment_min(starts64[:, 0] + ends64[:, 0], example, num_examples)
        diff = tf.where(has_span, null - best, tf.constant(np.inf, tf.float64))
        answered = has_span & ~(diff > null_score_diff_threshold)
        span_score = tf.where(answered, best, null)
        outputs["null_score_diff"] = tf.cast(diff, tf.float32)
    char_start = tf.where(answered, char_start, -tf.ones_like(char_start))
    char_end = tf.where(answered, char_end, -tf.ones_like(char_end))
    answer = tf.strings.substr(context, tf.maximum(char_start, 0), tf.maximum(char_end - char_start, 0),
                               unit="UTF8_CHAR")
    answer, char_start, char_end = strip_answer(answer, char_start, char_end)
    outputs["answer"] = tf.where(answered, answer, "")
    outputs.update(start=char_start, end=char_end, score=tf.cast(span_score, tf.float32))
    return outputs


def strip_answer(answer, char_start, char_end):
    """Edge whitespace (Python's str.isspace, incl. the no-break space) stripped from each answer, its character
    span moved with it: str.strip() of `postprocess`, so context[start:end] == answer still holds.

    Args:
      answer: string [B]; char_start, char_end: int64 [B], the answer's character span in its context (-1, -1
        for no answer, which stays so).
    Returns:
      (answer, char_start, char_end), the same shapes.
    """
    space = unicode_classes()[0]
    left = tf.strings.regex_replace(answer, f"^{space}+", "")
    stripped = tf.strings.regex_replace(left, f"{space}+$", "")
    length = tf.strings.length(answer, unit="UTF8_CHAR")
    lead = tf.cast(length - tf.strings.length(left, unit="UTF8_CHAR"), tf.int64)
    kept = tf.cast(tf.strings.length(stripped, unit="UTF8_CHAR"), tf.int64)
    spanned = char_start >= 0
    new_start = tf.where(spanned, char_start + lead, char_start)
    return stripped, new_start, tf.where(spanned, new_start + kept, char_end)

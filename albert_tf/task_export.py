"""Raw-text SavedModels of fine-tuned SQuAD (v1.1 / v2.0) and RACE models, for TF Serving.

`albert-tf finetune --task squad1|squad2|race` writes them to OUTPUT/export/N (albert_tf.export's atomic BASE/N
writer). Everything the Python featurizer and post-processing (albert_tf.tasks.squad / race) do runs in the graph,
so a served answer equals the Python one:

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
RACE   serving_default  article string [B], question string [B], options string [B, 4]
         -> probabilities float32 [B, 4], label int32 [B].

SQuAD featurization: [CLS] question (first max_query_length tokens) [SEP] context window [SEP]; windows of
L - len(question) - 3 tokens every doc_stride tokens; a span's start must lie where its window gives the token the
most context; the n_best (20) highest start and end logits of each window pair into spans of at most
max_answer_length (30) tokens; the highest start + end logit wins (the earliest window, start, end on a tie). Token
character spans come from `tf_encode_with_offsets`, the in-graph twin of `AlbertTokenizer.encode_with_offsets`.
"""
import json

import numpy as np

from albert_tf import export
from albert_tf.modeling.base import trim_padding
from albert_tf.tokenization import MAX_WORD_CHARS, SPIECE_UNDERLINE

TASK_CONFIG_ASSET = "task_config.json"
NUM_CHOICES = 4


# ------------------------------------------------------------------------------------ the digit-comma spans
def digit_comma_spans(tokenizer):
    """Where each piece of a digit-comma expansion lies, as `AlbertTokenizer.encode_with_offsets` computes it.

    Args:
      tokenizer: an AlbertTokenizer.
    Returns:
      {id: [(begin, end), ...]} for each id the digit-comma rule expands (one pair per piece of the expansion):
      byte offsets relative to the END of the original piece in the normalized text (so <= 0): the head "3.0"
      re-encoded on its own, then the comma (-1, 0).
    """
    from sentencepiece import sentencepiece_pb2  # pylint: disable=import-outside-toplevel

    spans = {}
    for i, expansion in tokenizer._digit_comma_ids.items():  # pylint: disable=protected-access
        head = tokenizer.id_to_piece(i)[:-1].lstrip(SPIECE_UNDERLINE)
        size = len(head.encode("utf-8"))
        proto = sentencepiece_pb2.SentencePieceText()
        proto.ParseFromString(tokenizer._sp.encode(head, out_type="serialized_proto"))  # pylint: disable=protected-access
        pieces = list(proto.pieces)
        if len(pieces) == len(expansion):  # the rule dropped a lone leading "▁"
            pieces = pieces[1:]
        if len(pieces) == len(expansion) - 1:
            head_spans = [(p.begin - size - 1, p.end - size - 1) for p in pieces]
        else:  # as encode_with_offsets: every piece gets the head's span
            head_spans = [(-size - 1, -1)] * (len(expansion) - 1)
        spans[i] = head_spans + [(-1, 0)]
    return spans


def clean_utf8(strings):
    """In-graph: invalid UTF-8 -> U+FFFD, as `albert_tf.export.text_to_inputs` and `create-data` read text."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)


def make_offset_encoder(tokenizer):
    """A tf.Module whose `encode_with_offsets(strings [B])` is the in-graph `AlbertTokenizer.encode_with_offsets`:
    (ids int32, starts int64, ends int64), each ragged [B, None]; starts/ends are character (code point) offsets
    into each input string. Attach it to the exported module (it tracks the tokenizer's resources)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

    from albert_tf.tokenization import _unicode_classes  # pylint: disable=import-outside-toplevel

    whitespace_class, combining_class = _unicode_classes()
    in_graph = tokenizer.in_graph
    spans = digit_comma_spans(tokenizer)
    rel = [spans.get(i, [(0, 0)]) for i in range(tokenizer.vocab_size)]

    class OffsetEncoder(tf.Module):
        """In-graph `encode_with_offsets` (see make_offset_encoder)."""

        def __init__(self):
            super().__init__(name="albert_offset_encoder")
            self.tokenizer = in_graph
            self.lower_case = tokenizer.lower_case
            lengths = tf.constant([len(r) for r in rel], tf.int64)
            self.relative_begin = tf.RaggedTensor.from_row_lengths(
                tf.constant([b for r in rel for b, _ in r], tf.int64), lengths)
            self.relative_end = tf.RaggedTensor.from_row_lengths(
                tf.constant([e for r in rel for _, e in r], tf.int64), lengths)
            self.expanded = tf.constant([i in spans for i in range(tokenizer.vocab_size)])

        def normalized_sources(self, text):
            """The original character span of each character of `normalize(text)` (normalize_with_offsets):
            (normalized text [B], starts, ends int64 ragged [B, None] local character offsets, char counts [B])."""
            chars = tf.strings.unicode_split(text, "UTF-8")
            flat, rows = chars.flat_values, chars.value_rowids()
            nrows = chars.nrows()
            index = tf.range(tf.size(flat, out_type=tf.int64))
            row_start = tf.gather(chars.row_splits, rows)
            pos = index - row_start
            # whitespace runs -> one space standing for the run's first character; none at either end
            is_space = tf.strings.regex_full_match(flat, whitespace_class)
            big = tf.constant(np.iinfo(np.int64).max, tf.int64)
            first_word = tf.gather(tf.math.unsorted_segment_min(tf.where(is_space, big, index), rows, nrows), rows)
            last_word = tf.gather(tf.math.unsorted_segment_max(tf.where(is_space, -1 * tf.ones_like(index), index),
                                                               rows, nrows), rows)
            after_space = tf.concat([[False], is_space[:-1]], axis=0)
            keep = ~is_space | (~after_space & (index > first_word) & (index < last_word))
            # each word's characters after its first MAX_WORD_CHARS are dropped (normalize's word cap)
            word_start = ~is_space & (after_space | (pos == 0))
            word = tf.cumsum(tf.cast(word_start, tf.int64))  # 1-based word number; 0 before the first word
            word_first = tf.gather(tf.concat([[0], tf.boolean_mask(index, word_start)], axis=0), word)
            keep &= is_space | (index - word_first < MAX_WORD_CHARS)
            kept = tf.boolean_mask(tf.where(is_space, tf.constant(" "), flat), keep)
            kept_pos, kept_rows = tf.boolean_mask(pos, keep), tf.boolean_mask(rows, keep)
            # `` and '' -> " : in each run of one quote character, pairs from the left
            kept_index = tf.range(tf.size(kept, out_type=tf.int64))
            is_quote = (kept == "`") | (kept == "'")
            same = tf.concat([[False], (kept[1:] == kept[:-1]) & (kept_rows[1:] == kept_rows[:-1])], 0) & is_quote
            run = tf.cumsum(tf.cast(~same, tf.int64)) - 1
            run_first = tf.gather(tf.boolean_mask(kept_index, ~same), run)
            run_length = tf.gather(tf.math.bincount(run, dtype=tf.int64, minlength=1), run)
            in_run = kept_index - run_first
            pair_first = is_quote & (in_run % 2 == 0) & (in_run + 1 < run_length)
            kept = tf.where(pair_first, tf.constant('"'), kept)
            kept_end = tf.where(pair_first, kept_pos + 2, kept_pos + 1)
            keep = ~(is_quote & (in_run % 2 == 1))
            kept, kept_pos, kept_end, kept_rows = (tf.boolean_mask(t, keep)
                                                   for t in (kept, kept_pos, kept_end, kept_rows))
            # NFKD, combining marks dropped, lowercased: character by character (see normalize_with_offsets)
            pieces = tf.strings.regex_replace(tf_text.normalize_utf8(kept, "NFKD"), combining_class, "")
            if self.lower_case:
                pieces = tf.strings.lower(pieces, encoding="utf-8")
            pieces = tf.where(kept == tf.constant("\x00"), kept, pieces)  # NUL: as it is (ICU stops at it)
            widths = tf.cast(tf.strings.length(pieces, unit="UTF8_CHAR"), tf.int64)
            starts = tf.RaggedTensor.from_value_rowids(tf.repeat(kept_pos, widths), tf.repeat(kept_rows, widths),
                                                       nrows)
            ends = starts.with_flat_values(tf.repeat(kept_end, widths))
            # the whole-string normalization gives the tokenizer's ids (str.lower's final sigma); the same length
            normalized = self.tokenizer.normalize(text)
            joined = tf.strings.reduce_join(tf.RaggedTensor.from_value_rowids(pieces, kept_rows, nrows), axis=-1)
            same_length = tf.strings.length(normalized, unit="UTF8_CHAR") == tf.strings.length(joined,
                                                                                                unit="UTF8_CHAR")
            return tf.where(same_length, normalized, joined), starts, ends, chars.row_lengths(), is_space

        def encode_with_offsets(self, text):
            """text string [B] (valid UTF-8) -> (ids int32, starts int64, ends int64), ragged [B, None]."""
            normalized, sources_start, sources_end, num_chars, is_space = self.normalized_sources(text)
            ids, begin, end = self.tokenizer.sentencepiece.tokenize_with_offsets(normalized)
            ids = tf.cast(ids, tf.int32)
            begin, end = tf.cast(begin, tf.int64), tf.cast(end, tf.int64)
            if self.tokenizer.has_runs:
                ids, begin, end = self._canonical_order(ids, begin, end)
            if self.tokenizer.has_digit_comma:
                ids, begin, end = self._expand_digit_comma(ids, begin, end)
            return ids, *self._original_spans(normalized, begin, end, sources_start, sources_end, num_chars,
                                              is_space)

        def _canonical_order(self, ids, begin, end):
            """The tokenizer's canonical_order, the byte spans laid out again in the new order (a run's pieces
            are adjacent in the text)."""
            flat = ids.flat_values
            root = tf.gather(self.tokenizer.run_root, flat)
            first = tf.ragged.range(ids.row_lengths()).flat_values == 0
            same = tf.concat([[False], (root[1:] == root[:-1]) & (root[1:] >= 0)], axis=0)
            run_start = ~same | first
            run = tf.cumsum(tf.cast(run_start, tf.int64))
            order = tf.argsort(run * self.tokenizer.power_base + tf.gather(self.tokenizer.run_power, flat),
                               stable=True)
            lengths = tf.gather(end.flat_values - begin.flat_values, order)
            run_first = tf.gather(tf.boolean_mask(tf.range(tf.size(flat, out_type=tf.int64)), run_start), run - 1)
            before = tf.cumsum(lengths, exclusive=True)
            new_begin = tf.gather(begin.flat_values, run_first) + before - tf.gather(before, run_first)
            return (ids.with_flat_values(tf.gather(flat, order)), begin.with_flat_values(new_begin),
                    end.with_flat_values(new_begin + lengths))

        def _expand_digit_comma(self, ids, begin, end):
            flat = ids.flat_values
            expansion = tf.gather(self.tokenizer.expansion, flat)   # ragged [pieces, E]
            piece = expansion.value_rowids()
            expanded = tf.gather(self.expanded, tf.gather(flat, piece))
            piece_end = tf.gather(end.flat_values, piece)
            new_begin = tf.where(expanded, piece_end + tf.gather(self.relative_begin, flat).flat_values,
                                 tf.gather(begin.flat_values, piece))
            new_end = tf.where(expanded, piece_end + tf.gather(self.relative_end, flat).flat_values, piece_end)
            rows = tf.gather(ids.value_rowids(), piece)

            def ragged(values):
                return tf.RaggedTensor.from_value_rowids(values, rows, ids.nrows())

            return ragged(expansion.flat_values), ragged(new_begin), ragged(new_end)

        @staticmethod
        def _original_spans(normalized, begin, end, sources_start, sources_end, num_chars, is_space):
            """Byte spans in `normalized` -> trimmed character spans of the original text (original_span)."""
            _, char_bytes = tf.strings.unicode_decode_with_offsets(normalized, "UTF-8")
            byte_base = tf.cumsum(tf.cast(tf.strings.length(normalized), tf.int64), exclusive=True)
            starts_global = tf.cast(char_bytes.flat_values, tf.int64) + tf.gather(byte_base,
                                                                                  char_bytes.value_rowids())
            piece_rows = begin.value_rowids()

            def char_index(byte):  # global normalized character at (local) byte offset `byte`
                return tf.searchsorted(starts_global, byte.flat_values + tf.gather(byte_base, piece_rows),
                                       side="left", out_type=tf.int64)

            first, last = char_index(begin), char_index(end)
            row_chars_end = tf.gather(char_bytes.row_splits[1:], piece_rows)
            source_start, source_end = sources_start.flat_values, sources_end.flat_values
            count = tf.size(source_start, out_type=tf.int64)
            text_base = tf.gather(tf.cumsum(num_chars, exclusive=True), piece_rows)
            text_length = tf.gather(num_chars, piece_rows)
            # (clipped: an empty piece's first/last may point outside its row, and are not used then)
            s = tf.clip_by_value(tf.gather(source_start, tf.minimum(first, count - 1)), 0, text_length)
            e = tf.clip_by_value(tf.gather(source_end, tf.maximum(tf.minimum(last - 1, count - 1), 0)), 0,
                                 text_length)
            # trim whitespace: the first non-space character at or after s, the last before e (original text)
            word_index = tf.boolean_mask(tf.range(tf.size(is_space, out_type=tf.int64)), ~is_space)
            words_before = tf.concat([[0], tf.cumsum(tf.cast(~is_space, tf.int64))], axis=0)  # [N + 1]
            padded = tf.concat([word_index, [tf.size(is_space, out_type=tf.int64)]], axis=0)
            next_word = tf.gather(padded, tf.gather(words_before, s + text_base)) - text_base
            trimmed_start = tf.minimum(tf.minimum(next_word, text_length), e)
            previous = tf.gather(words_before, e + text_base)
            last_word_end = tf.where(previous > 0, tf.gather(padded, tf.maximum(previous - 1, 0)) + 1,
                                     tf.zeros_like(previous))
            trimmed_end = tf.maximum(last_word_end - text_base, trimmed_start)
            empty = last <= first
            at = tf.where(first < row_chars_end, s, text_length)
            start = tf.where(empty, at, trimmed_start)
            stop = tf.where(empty, at, trimmed_end)
            return begin.with_flat_values(start), begin.with_flat_values(stop)

    with tf.init_scope():
        return OffsetEncoder()


# ------------------------------------------------------------------------------------ SQuAD
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


def squad_training_windows(encoder, tokenizer, question, context, answer_start, answer_end, seq_length, doc_stride,
                           max_query_length):
    """In-graph `squad.featurize(..., is_training=True)` of B questions.

    Args:
      as `squad_windows`, plus answer_start, answer_end: int64 [B], the first answer's character span in the
        context ([start, end)); -1, -1 for an unanswerable question.
    Returns:
      `squad_windows`'s dict plus doc_span_index int32 [W], start_positions, end_positions int32 [W] (0 where the
      answer is not wholly inside the window or there is none), keep bool [W] (False for every window of a
      question whose answer covers no token: `squad.featurize` skips those questions).
    """
    windows, extra = _squad_windows(encoder, tokenizer, question, context, seq_length, doc_stride, max_query_length,
                                    answer_start, answer_end)
    return dict(windows, **extra)


def _squad_windows(encoder, tokenizer, question, context, seq_length, doc_stride, max_query_length,
                   answer_start=None, answer_end=None, context_rows=None):
    """(squad_windows's dict, {doc_span_index [, start_positions, end_positions, keep]}). With context_rows
    (int [B]), `context` holds each distinct context once and question b's is context[context_rows[b]]."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.tasks import squad  # pylint: disable=import-outside-toplevel

    squad.check_window_sizes(seq_length, doc_stride, max_query_length)
    query = encoder.tokenizer.encode(question)
    query = tf.ragged.boolean_mask(query, tf.ragged.range(query.row_lengths()) < max_query_length)
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
    score = tf.cast(tf.minimum(k, length[:, tf.newaxis] - 1 - k), tf.float64) + \
        0.01 * tf.cast(length[:, tf.newaxis], tf.float64)
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
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.tasks import squad  # pylint: disable=import-outside-toplevel

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


def squad_answers(windows, start_logits, end_logits, context, num_examples, n_best=20, max_answer_length=30,
                  version_2_with_negative=False, null_score_diff_threshold=0.0):
    """In-graph `squad.postprocess`'s answer of each question.

    Args:
      windows: `squad_windows`'s dict; start_logits, end_logits: float32 [W, L].
      context: string [B]; num_examples: B (a scalar tensor).
    Returns:
      dict answer string [B], start, end int64 [B], score float32 [B] (+ null_score_diff float32 [B] for v2).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

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
    outputs["answer"] = tf.where(answered, tf.strings.substr(context, tf.maximum(char_start, 0),
                                                             tf.maximum(char_end - char_start, 0),
                                                             unit="UTF8_CHAR"), "")
    outputs.update(start=char_start, end=char_end, score=tf.cast(span_score, tf.float32))
    return outputs


def squad_signatures(model, tokenizer, seq_length, doc_stride=128, max_query_length=64, max_answer_length=30,
                     n_best=20, version_2_with_negative=False, null_score_diff_threshold=0.0):
    """(module, signatures) for `albert_tf.export.write_saved_model`: serving_default and windows (module doc).

    Args:
      model: an AlbertSpanQA (dict in -> start_logits, end_logits [W, L]).
      tokenizer: the AlbertTokenizer it was fine-tuned with.
      seq_length, doc_stride, max_query_length, max_answer_length, n_best: as in squad.featurize / postprocess.
      version_2_with_negative, null_score_diff_threshold: v2's "no answer" rule and its threshold.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    module = tf.Module()
    module.model_weights = export.keras_weights(model)  # not the Keras model: see export.keras_weights
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

    @tf.function(input_signature=strings)
    def serving_default(question, context):
        context, windows, start_logits, end_logits = features_and_logits(question, context)
        return squad_answers(windows, start_logits, end_logits, context, tf.size(context), n_best=n_best,
                             max_answer_length=max_answer_length, version_2_with_negative=version_2_with_negative,
                             null_score_diff_threshold=null_score_diff_threshold)

    @tf.function(input_signature=strings)
    def windows_signature(question, context):
        _, windows, start_logits, end_logits = features_and_logits(question, context)
        return dict(windows, start_logits=start_logits, end_logits=end_logits)

    module.serving_default, module.windows = serving_default, windows_signature
    return module, {"serving_default": serving_default.get_concrete_function(),
                    "windows": windows_signature.get_concrete_function()}


# ------------------------------------------------------------------------------------ RACE
def race_inputs(tokenizer, article, question, options, seq_length, max_qa_length):
    """In-graph `race.featurize`: string [B], [B], [B, 4] -> int32 [B, 4, L] input_word_ids, input_mask,
    input_type_ids. Each option's second segment is the question with its "_" blanks filled by the option, or the
    question, a space and the option; it keeps its last max_qa_length tokens and the article is cut to fit."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.tasks import race  # pylint: disable=import-outside-toplevel

    race.check_qa_length(max_qa_length, seq_length)
    article, question, options = clean_utf8(article), clean_utf8(question), clean_utf8(options)
    batch = tf.size(question)
    check = tf.debugging.assert_equal(tf.stack([tf.size(article), tf.shape(options)[0]]), tf.stack([batch, batch]),
                                      message="article, question and options must have the same batch size")
    with tf.control_dependencies([check]):
        option = tf.reshape(options, [-1])                                                     # [B·4]
    question = tf.repeat(question, NUM_CHOICES)
    parts = tf.strings.split(question, "_")                                                    # ragged [B·4, P]
    is_last = tf.ragged.range(parts.row_lengths()) == parts.row_lengths()[:, tf.newaxis] - 1
    filler = tf.where(is_last.flat_values, "", tf.gather(option, parts.value_rowids()))
    filled = tf.strings.reduce_join(parts.with_flat_values(tf.strings.join([parts.flat_values, filler])), axis=-1)
    appended = tf.strings.join([question, option], separator=" ")
    has_blank = tf.strings.regex_full_match(question, "(?s).*_.*")
    endings = tokenizer.tf_encode(tf.where(has_blank, filled, appended))
    endings = tf.ragged.boolean_mask(endings, tf.ragged.range(endings.row_lengths())
                                     >= endings.row_lengths()[:, tf.newaxis] - max_qa_length)
    article_ids = tokenizer.in_graph.encode_prefix(article, seq_length - 3)  # at most L - 3 ids are kept
    article_ids = tf.gather(article_ids, tf.repeat(tf.range(tf.size(article)), NUM_CHOICES))
    keep = seq_length - 3 - endings.row_lengths()
    article_ids = tf.ragged.boolean_mask(article_ids, tf.ragged.range(article_ids.row_lengths()) < keep[:, None])

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


def race_signatures(model, tokenizer, seq_length, max_qa_length):
    """(module, signatures) for `write_saved_model`: serving_default (article, question, options [B, 4] ->
    probabilities [B, 4], label [B])."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    module = tf.Module()
    module.model_weights = export.keras_weights(model)  # not the Keras model: see export.keras_weights
    module.tokenizer = tokenizer.in_graph

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="article"),
                                  tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None, NUM_CHOICES], tf.string, name="options")])
    def serving_default(article, question, options):
        inputs = race_inputs(tokenizer, article, question, options, seq_length, max_qa_length)
        logits = model(trim_padding(inputs, export.SERVING_LENGTH_BUCKET), training=False)  # as the encoder export
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "label": tf.argmax(logits, -1, output_type=tf.int32)}

    module.serving_default = serving_default
    return module, {"serving_default": serving_default.get_concrete_function()}


# ------------------------------------------------------------------------------------ writing
def export_task(module, signatures, output_base, task_config, version=None, overwrite=False):
    """Writes BASE/N with `albert_tf.export.write_saved_model`, task_config (a dict: the featurization and
    post-processing parameters) as assets.extra/task_config.json. Returns the path."""
    return export.write_saved_model(module, output_base, signatures, version=version, overwrite=overwrite,
                                    extra_assets={TASK_CONFIG_ASSET: json.dumps(task_config, indent=2) + "\n"})


def export_squad(model, tokenizer, output_base, seq_length, doc_stride, max_query_length, max_answer_length=30,
                 n_best=20, version_2_with_negative=False, null_score_diff_threshold=0.0, version=None,
                 overwrite=False):
    """A fine-tuned AlbertSpanQA as a raw-text SQuAD SavedModel at BASE/N (see the module doc); returns the path."""
    module, signatures = squad_signatures(model, tokenizer, seq_length, doc_stride, max_query_length,
                                          max_answer_length, n_best, version_2_with_negative,
                                          null_score_diff_threshold)
    config = {"task": "squad2" if version_2_with_negative else "squad1", "max_seq_length": int(seq_length),
              "doc_stride": int(doc_stride), "max_query_length": int(max_query_length),
              "max_answer_length": int(max_answer_length), "n_best": int(n_best),
              "version_2_with_negative": bool(version_2_with_negative),
              "null_score_diff_threshold": float(null_score_diff_threshold), "lower_case": tokenizer.lower_case}
    return export_task(module, signatures, output_base, config, version, overwrite)


def export_race(model, tokenizer, output_base, seq_length, max_qa_length, version=None, overwrite=False):
    """A fine-tuned AlbertMultipleChoice as a raw-text RACE SavedModel at BASE/N; returns the path."""
    module, signatures = race_signatures(model, tokenizer, seq_length, max_qa_length)
    config = {"task": "race", "max_seq_length": int(seq_length), "max_qa_length": int(max_qa_length),
              "lower_case": tokenizer.lower_case}
    return export_task(module, signatures, output_base, config, version, overwrite)

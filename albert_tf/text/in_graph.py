"""The in-graph tokenizers (TensorFlow + tensorflow-text): the twins of albert_tf.text's Python code, for tf.data,
tf.function and exported SavedModels. Importing this module imports TensorFlow; `AlbertTokenizer.in_graph` does it on
first use.

    InGraphTokenizer    normalize / encode / pack / cut_words: the same ids as AlbertTokenizer.encode / pack
    OffsetEncoder       encode_with_offsets: ids plus each piece's character span in the input (SQuAD)
    clean_utf8          invalid UTF-8 -> U+FFFD, as the Python side reads text

Build them with `make_tokenizer` / `make_offset_encoder` (their resources are created eagerly, also when first used
inside a tf.function) and attach them to the tf.Module you export, so a SavedModel tracks their resources.
"""
import functools

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.text.normalize import MAX_WORD_CHARS, char_class, joining_codepoints, unicode_classes
from albert_tf.text.segments import segment_lengths


@functools.lru_cache(maxsize=None)
def joining_class():
    """An RE2 class of the characters NFKC may join to the one before them (normalize.joining_codepoints)."""
    return char_class(sorted(joining_codepoints()))


class InGraphTokenizer(tf.Module):
    """In-graph twin of an AlbertTokenizer (see its tf_normalize / tf_encode / tf_pack); build it with
    `make_tokenizer`."""

    def __init__(self, tokenizer):
        super().__init__(name="albert_tokenizer")
        self.whitespace_class, self.combining_class = unicode_classes()
        self.lower_case = tokenizer.lower_case
        self.keep_accents = tokenizer.keep_accents
        self.cut_is_exact = tokenizer.pieces_stay_in_words
        self.special_ids = (tokenizer.cls_id, tokenizer.sep_id)
        self.sentencepiece = tf_text.SentencepieceTokenizer(model=tokenizer.model_proto, out_type=tf.int32)
        # Row i: the ids that replace id i (itself, or its digit-comma expansion).
        rows = [[i] for i in range(tokenizer.vocab_size)]
        for i, expansion in tokenizer.digit_comma_ids.items():
            rows[i] = expansion
        self.has_digit_comma = bool(tokenizer.digit_comma_ids)
        root, power = tokenizer.run_root, tokenizer.run_power
        self.has_runs = max(root) >= 0  # else no piece can take part in a tie
        self.run_root = tf.constant(root, tf.int32)
        self.run_power = tf.constant(power, tf.int64)
        self.power_base = max(power) + 1
        self.expansion = tf.RaggedTensor.from_row_lengths(
            tf.constant(np.concatenate([np.asarray(r, np.int32) for r in rows]), tf.int32),
            tf.constant([len(r) for r in rows], tf.int64))

    def alive(self):
        """False once TensorFlow has dropped the SentencePiece resource (checked when executing eagerly): TF
        Text's is owned by the eager kernel that created it, and `tf.random.set_seed` (so
        `keras.utils.set_random_seed`) clears the eager kernel cache, deleting it."""
        if not tf.executing_eagerly():
            return True
        try:
            self.sentencepiece.tokenize(tf.constant([""]))
        except tf.errors.NotFoundError:
            return False
        return True

    def normalize(self, strings):
        text = tf.strings.regex_replace(strings, self.whitespace_class + "+", " ")
        text = tf.strings.regex_replace(text, "^ | $", "")
        text = tf.strings.regex_replace(text, f"([^ ]{{{MAX_WORD_CHARS}}})[^ ]+", r"\1")  # linear (RE2)
        text = tf.strings.regex_replace(text, "``|''", '"')
        if self.keep_accents:
            text = tf_text.normalize_utf8(text, "NFKC")
        else:
            text = tf_text.normalize_utf8(text, "NFKD")
            text = tf.strings.regex_replace(text, self.combining_class, "")
        if self.lower_case:
            text = self._lower(text)
        return text

    @staticmethod
    def _lower(strings):
        """tf.strings.lower(utf-8) stops at a NUL byte: if the batch holds one, lowercase the NUL-separated
        parts and rejoin them (the NUL goes in as a tensor value: string attributes would truncate it too)."""
        flat = tf.reshape(strings, [-1])

        def nul_safe():
            parts = tf.strings.split(flat, sep=tf.constant("\x00"))  # ragged [N, parts]
            count = parts.row_lengths()
            is_last = row_positions(count) == tf.repeat(count - 1, count)
            suffix = tf.where(is_last, tf.constant(""), tf.constant("\x00"))
            lowered = tf.strings.join([tf.strings.lower(parts.flat_values, encoding="utf-8"), suffix])
            return tf.strings.reduce_join(parts.with_flat_values(lowered), axis=-1)

        has_nul = tf.reduce_any(tf.strings.regex_full_match(flat, "(?s).*\\x00.*"))
        lowered = tf.cond(has_nul, nul_safe, lambda: tf.strings.lower(flat, encoding="utf-8"))
        return tf.reshape(lowered, tf.shape(strings))

    def encode(self, strings):
        strings = tf.convert_to_tensor(strings, tf.string)
        if strings.shape.rank == 0:
            return self.encode(strings[tf.newaxis])[0]
        ids = self.sentencepiece.tokenize(self.normalize(strings))
        if self.has_runs:
            ids = self.canonical_order(ids)
        if self.has_digit_comma:
            ids = tf.gather(self.expansion, ids).merge_dims(1, 2)
        return ids

    def cut_words(self, strings, max_words):
        """(first max_words words joined by " ", bool [B] words were dropped); words as `normalize` sees them
        (runs of Python's whitespace). Costs one regex pass and one split over the input's bytes."""
        text = tf.strings.regex_replace(strings, self.whitespace_class + "+", " ")
        text = tf.strings.regex_replace(text, "^ | $", "")
        words = tf.strings.split(text, sep=" ", maxsplit=max_words)  # ragged [B, <= max_words + 1]
        head = tf.strings.reduce_join(words[:, :max_words], axis=-1, separator=" ")
        return head, words.row_lengths() > max_words

    def encode_prefix(self, strings, count):
        """Ragged ids [B, None] whose first min(count, len) ids per row are `encode`'s, tokenizing only the
        first `count` words of each string (the rest only for rows whose words gave fewer than count ids)."""
        strings = tf.convert_to_tensor(strings, tf.string)
        if not self.cut_is_exact:
            return self.encode(strings)
        head, was_cut = self.cut_words(strings, count)
        ids = self.encode(head)
        short = was_cut & (ids.row_lengths() < count)  # e.g. words that normalize to nothing
        return tf.cond(tf.reduce_any(short), lambda: self.encode(tf.where(short, strings, head)), lambda: ids)

    def canonical_order(self, ids):
        """`canonical_order` on ragged ids [B, None]: a stable sort of the flat ids by (run number, power),
        where a run is a maximal stretch of adjacent ids (in one row) with the same root >= 0."""
        flat = ids.flat_values
        root = tf.gather(self.run_root, flat)
        first = tf.ragged.range(ids.row_lengths()).flat_values == 0
        same = tf.concat([[False], (root[1:] == root[:-1]) & (root[1:] >= 0)], axis=0)
        run = tf.cumsum(tf.cast(~same | first, tf.int64))
        key = run * self.power_base + tf.gather(self.run_power, flat)
        return ids.with_flat_values(tf.gather(flat, tf.argsort(key, stable=True)))

    def pack(self, text_a, text_b, seq_length):
        """`AlbertTokenizer.tf_pack`: string [B] (text_b: None or string [B] or [0]) -> int32 [B, seq_length]
        input_word_ids, input_mask, input_type_ids; the layout and the no-second-segment rule are
        albert_tf.text.segments'."""
        cls_id, sep_id = self.special_ids
        text_a = tf.convert_to_tensor(text_a, tf.string)
        ids_a = self.encode_prefix(text_a, seq_length - 2)  # a keeps at most L - 2 ids, b at most L - 3
        ids_b = None if text_b is None else self.encode_prefix(second_texts(text_a, text_b), seq_length - 3)
        len_a = ids_a.row_lengths()
        len_b = tf.zeros_like(len_a) if ids_b is None else ids_b.row_lengths()
        keep_a, keep_b, has_b = segment_lengths(len_a, len_b, seq_length, tf.minimum, tf.maximum, tf.where)
        batch = tf.shape(len_a, out_type=tf.int64)[0]

        def column(value):
            return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([batch, 1]), tf.constant(value, tf.int32)))

        def head(ids, keep):
            count = ids.row_lengths()
            return tf.ragged.boolean_mask(ids, ids.with_flat_values(row_positions(count) < tf.repeat(keep, count)))

        parts = [column(cls_id), head(ids_a, keep_a), column(sep_id)]
        types = [tf.zeros_like(p) for p in parts]
        if ids_b is not None:  # rows without a second segment keep no id of b and no second [SEP]
            second = [head(ids_b, keep_b), tf.ragged.boolean_mask(column(sep_id), has_b[:, tf.newaxis])]
            parts += second
            types += [tf.ones_like(p) for p in second]
        words = tf.concat(parts, axis=1)
        shape = [None, seq_length]
        return {
            "input_word_ids": words.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(words).to_tensor(0, shape=shape),
            "input_type_ids": tf.concat(types, axis=1).to_tensor(0, shape=shape),
        }


def row_positions(row_lengths):
    """int64 [sum(row_lengths)]: each value's position in its row, for a ragged tensor of `row_lengths`. Compared
    with a per-row value repeated over its row (tf.repeat(value, row_lengths)), it is the flat twin of comparing
    tf.ragged.range(row_lengths) with a column, without that comparison's ragged broadcasting, which takes a
    third of a second to trace each time (an export traces it a dozen times)."""
    return tf.ragged.range(row_lengths).flat_values


def second_texts(text_a, text_b):
    """text_b as a column beside text_a (string [B]): a text_b of size 0 is an omitted one, B empty strings (no
    second segment, albert_tf.text.segments); any other size but text_a's raises InvalidArgumentError "text_a
    and text_b must have the same length"."""
    text_b = tf.convert_to_tensor(text_b, tf.string)
    size_a, size_b = tf.size(text_a), tf.size(text_b)
    check = tf.debugging.Assert(tf.equal(size_b, size_a) | tf.equal(size_b, 0),
                                ["text_a and text_b must have the same length"])
    with tf.control_dependencies([check]):
        return tf.cond(tf.equal(size_b, 0), lambda: tf.fill(tf.shape(text_a), ""),
                       lambda: tf.reshape(text_b, tf.shape(text_a)))


class OffsetEncoder(tf.Module):
    """In-graph `AlbertTokenizer.encode_with_offsets` (see `make_offset_encoder`)."""

    def __init__(self, tokenizer):
        super().__init__(name="albert_offset_encoder")
        self.tokenizer = tokenizer.in_graph
        self.lower_case = tokenizer.lower_case
        self.keep_accents = tokenizer.keep_accents
        self.whitespace_class, self.combining_class = unicode_classes()
        self.joining_class = joining_class() if self.keep_accents else None
        spans = tokenizer.digit_comma_spans()
        rel = [spans.get(i, [(0, 0)]) for i in range(tokenizer.vocab_size)]
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
        is_space = tf.strings.regex_full_match(flat, self.whitespace_class)
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
        if self.keep_accents:  # NFKC segment by segment (normalize._nfkc_with_sources)
            kept, kept_pos, kept_end, kept_rows = self._nfkc_segments(kept, kept_pos, kept_end, kept_rows)
            pieces = tf_text.normalize_utf8(kept, "NFKC")
        else:  # NFKD, combining marks dropped: character by character (see normalize_with_offsets)
            pieces = tf.strings.regex_replace(tf_text.normalize_utf8(kept, "NFKD"), self.combining_class, "")
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

    def _nfkc_segments(self, kept, kept_pos, kept_end, kept_rows):
        """The characters `kept` [N] grouped into the segments NFKC works on one at a time: a new one at each
        character NFKC never joins to the one before (and at each row's start and around a NUL). Returns (segment
        strings [S], first character's start [S], last character's end [S], rows [S])."""
        size = tf.size(kept, out_type=tf.int64)
        is_nul = kept == tf.constant("\x00")
        new_row = tf.concat([[True], kept_rows[1:] != kept_rows[:-1]], axis=0)
        after_nul = tf.concat([[False], is_nul[:-1]], axis=0)
        starts = new_row | is_nul | after_nul | ~tf.strings.regex_full_match(kept, self.joining_class)
        segment = tf.cumsum(tf.cast(starts, tf.int64)) - 1
        count = tf.reduce_sum(tf.cast(starts, tf.int64))
        first = tf.boolean_mask(tf.range(size), starts)
        joined = tf.strings.unsorted_segment_join(kept, segment, count)
        return (joined, tf.gather(kept_pos, first), tf.math.unsorted_segment_max(kept_end, segment, count),
                tf.gather(kept_rows, first))

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


def make_tokenizer(tokenizer):
    """The InGraphTokenizer of an AlbertTokenizer (use `tokenizer.in_graph`, which keeps one per tokenizer)."""
    with tf.init_scope():  # resources and tables are created eagerly even when first used inside a tf.function
        return InGraphTokenizer(tokenizer)


def make_offset_encoder(tokenizer):
    """A tf.Module whose `encode_with_offsets(strings [B])` is the in-graph `AlbertTokenizer.encode_with_offsets`:
    (ids int32, starts int64, ends int64), each ragged [B, None]; starts/ends are character (code point) offsets
    into each input string. Attach it to the exported module (it tracks the tokenizer's resources)."""
    with tf.init_scope():
        return OffsetEncoder(tokenizer)


def clean_utf8(strings):
    """In-graph: invalid UTF-8 -> U+FFFD, as `albert_tf.serving` and `create-data` read text."""
    return tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)

"""AlbertTokenizer: ALBERT's tokenization (normalize + SentencePiece + the digit-comma rule), in Python and in-graph.

The Python path (`normalize`, `AlbertTokenizer.encode` / `pack`) needs only `sentencepiece`; the in-graph path
(`AlbertTokenizer.tf_encode` / `tf_pack`) is built on first use and gives identical ids, so it can run inside
tf.data, a tf.function or an exported SavedModel.

Semantics follow google-research/albert's `preprocess_text` and `encode_pieces`, with three deliberate differences
(marked "ours" below):
  * `normalize`: collapse whitespace runs to one space and strip, NFKD, drop combining marks, lowercase unless
    cased; ours: ``  and '' -> " as well (XLNet's and Hugging Face's preprocessing do it; the original ALBERT's
    `preprocess_text` does not); ours: each word cut to its first MAX_WORD_CHARS code points (bounded work);
  * SentencePiece segmentation of the normalized text; ours: equal-score ties put in one canonical order (see
    `canonical_order`), so that pip `sentencepiece` (any version) and TF Text's embedded copy give the same ids;
  * the digit-comma rule: a piece such as "▁3.0," (ends in ",", the character before is a digit) is replaced by the
    pieces of "3.0" (the piece without its comma and without any "▁") followed by "," as its own piece. When the
    original piece did not start with "▁" the "▁" that re-encoding adds in front is dropped again: what the
    reference code does under Python 2 and what Hugging Face's AlbertTokenizer does. (Under Python 3 the reference
    compares a str with bytes there and never drops it; the two differ only for such pieces without "▁".)

Special ids (fixed by the vocabulary, see `albert-tf vocab`): <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4.
"""
import itertools
import operator
import os

import numpy as np

from albert_tf import files
from albert_tf.text import record
from albert_tf.text.normalize import as_text, normalize, normalize_with_offsets
from albert_tf.text.segments import segment_lengths

SPIECE_UNDERLINE = "\u2581"
# The special ids, fixed by the vocabulary (docs/data.md); every other module takes them from here.
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = 0, 1, 2, 3, 4
SPECIAL_PIECES = {"[CLS]": CLS_ID, "[SEP]": SEP_ID, "[MASK]": MASK_ID}


def primitive_root(piece):
    """(w, k): the shortest string w with piece == w * k ("====" -> ("=", 4), "abab" -> ("ab", 2))."""
    n = len(piece)
    for size in range(1, n + 1):
        if n % size == 0 and piece[:size] * (n // size) == piece:
            return piece[:size], n // size
    return piece, 1


def run_tables(pieces, skip=()):
    """Tables for `canonical_order`: root[id] (an int >= 0 naming the piece's primitive root; -1 - id when the
    vocabulary has no other power of that root, so the piece takes part in no tie) and power[id] (k in
    piece == w * k).

    Args:
      pieces: the vocabulary's pieces, by id.
      skip: ids that never take part (control and unknown pieces).
    Returns:
      (root, power): two lists of ints, one entry per id.
    """
    roots = [primitive_root(p) for p in pieces]
    powers_of = {}
    for i, (w, k) in enumerate(roots):
        if i not in skip:
            powers_of.setdefault(w, set()).add(k)
    names = {w: n for n, w in enumerate(sorted(w for w, ks in powers_of.items() if len(ks) > 1))}
    root = [-1 - i if i in skip else names.get(w, -1 - i) for i, (w, _) in enumerate(roots)]
    return root, [k for _, k in roots]


def canonical_order(ids, root, power):
    """Puts each maximal run of adjacent pieces that are powers of one word (equal root[id] >= 0) in ascending
    order of power.

    Such pieces commute ("==" + "====" == "====" + "=="), so any order of a run is a segmentation of the same
    text with the same score: SentencePiece's Viterbi meets an exact tie and breaks it by its implementation
    (pip `sentencepiece` >= 0.2.2 one way; <= 0.2.1 and the copy inside TF Text the other). Sorting the runs makes
    the result independent of that choice; ascending is what pip >= 0.2.2 gives when the float32 sums are equal
    (which of the two sums rounds higher often decides instead: docs/tokenization.md). The in-graph twin is
    `InGraphTokenizer.canonical_order`. Ties between segmentations that are not rearrangements of each other would
    need two different sums of float32 scores to be exactly equal; none occurs on the Python documentation (see
    docs/tokenization.md).

    Args:
      ids: list of ints (SentencePiece ids).
      root, power: from `run_tables`.
    Returns:
      a list of ints: ids itself when no run has two pieces, else the reordered copy.
    """
    roots = list(map(root.__getitem__, ids))
    if not any(map(operator.eq, roots, itertools.islice(roots, 1, None))):  # fast path (C loops): no run
        return ids
    out, start, n = None, 0, len(ids)
    for end in range(1, n + 1):
        if end < n and root[ids[end]] >= 0 and root[ids[end]] == root[ids[start]]:
            continue
        if end - start > 1:
            run = sorted(ids[start:end], key=power.__getitem__)
            if run != ids[start:end]:
                out = list(ids) if out is None else out
                out[start:end] = run
        start = end
    return ids if out is None else out


def canonical_order_with_spans(ids, begins, ends, root, power):
    """`canonical_order` that carries each piece's span along: a run's pieces are adjacent in the text, so the
    run's spans are laid out again from the run's first begin in the new order (each piece keeps its length).
    The in-graph twin is `OffsetEncoder._canonical_order`.

    Args:
      ids: list of ints (SentencePiece ids), in segmentation order.
      begins, ends: lists of ints, each piece's (byte) span; within a run, ends[k] == begins[k + 1].
      root, power: from `run_tables`.
    Returns:
      (ids, begins, ends): lists, == canonical_order(ids, root, power) and the spans of its pieces.
    """
    ordered = canonical_order(ids, root, power)
    if ordered is ids:
        return ids, begins, ends
    ids, begins, ends = list(ids), list(begins), list(ends)
    out_begins, out_ends = list(begins), list(ends)
    start, n = 0, len(ids)
    for end in range(1, n + 1):
        if end < n and root[ids[end]] >= 0 and root[ids[end]] == root[ids[start]]:
            continue
        if end - start > 1:
            order = sorted(range(start, end), key=lambda k: power[ids[k]])  # stable, as canonical_order
            at = begins[start]
            for k, source in enumerate(order, start):
                out_begins[k], at = at, at + ends[source] - begins[source]
                out_ends[k] = at
        start = end
    return ordered, out_begins, out_ends


def pieces_stay_in_words(pieces):
    """True when no piece can span two whitespace-separated words: no piece holds a whitespace character and "▁"
    (SentencePiece's space) only ever as its first character (`split_by_whitespace`, SentencePiece's default).

    Then SentencePiece segments each word on its own: every segmentation passes through each word boundary, so the
    Viterbi path up to a boundary (and its tie-breaking) does not depend on what follows, and the ids of the first K
    words of a text are the first ids of the whole text (canonical order and the digit-comma rule act within a
    word too: a piece starting with "▁" is never part of a run, see `run_tables`). `tf_pack` relies on it to
    tokenize only as many words as it can keep.
    """
    return not any(SPIECE_UNDERLINE in p[1:] or any(c.isspace() for c in p) for p in pieces)


def _ends_with_digit_comma(piece):
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def _read_model(spm_model):
    """Returns (serialized model bytes, a name for messages) for a path (local or gs://) or bytes."""
    if isinstance(spm_model, (bytes, bytearray)):
        return bytes(spm_model), "<serialized SentencePiece model>"
    path = os.fspath(spm_model)
    if files.is_url(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"SentencePiece model {path} not found")
        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read(), path
    if not os.path.isfile(path):
        raise FileNotFoundError(f"SentencePiece model {path} not found")
    with open(path, "rb") as f:
        return f.read(), path


def _varint(data, pos):
    """(value, next position) of the protobuf varint at data[pos:]; ValueError when it runs past the end."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("a varint runs past the end")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def top_level_fields(data):
    """The field numbers of a serialized protobuf message's top-level fields, in order (walked at the wire level:
    varint 0, 64-bit 1, length-delimited 2, 32-bit 5). ValueError when a field runs past the end of `data`."""
    fields, pos = [], 0
    sizes = {1: 8, 5: 4}
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            pos += length
        elif wire in sizes:
            pos += sizes[wire]
        else:
            raise ValueError(f"wire type {wire} is not used by SentencePiece models")
        if pos > len(data) or number == 0:
            raise ValueError("a field runs past the end")
        fields.append(number)
    return fields


# ModelProto's fields: 1 the pieces (repeated), 2 trainer_spec, 3 normalizer_spec (sentencepiece_model.proto).
# A trained model always holds all three, the specs after the pieces; a file cut short at a piece's boundary still
# parses (as a model of the pieces before the cut) but has neither spec.
_PIECES, _TRAINER_SPEC, _NORMALIZER_SPEC = 1, 2, 3


def check_model_layout(data, name):
    """Refuses bytes that are not a whole trained SentencePiece model: a field cut short, or no trainer_spec /
    normalizer_spec (a file truncated between pieces, which SentencePiece itself loads as a smaller model)."""
    try:
        fields = set(top_level_fields(data))
    except ValueError as e:
        raise ValueError(f"SentencePiece model {name} is truncated or corrupt ({e})") from None
    missing = [what for number, what in ((_PIECES, "pieces"), (_TRAINER_SPEC, "trainer_spec"),
                                         (_NORMALIZER_SPEC, "normalizer_spec")) if number not in fields]
    if missing:
        raise ValueError(f"SentencePiece model {name} is truncated or not a trained model: it has no "
                         f"{' and no '.join(missing)} ({len(data):,} bytes; a file cut short loses them)")


class AlbertTokenizer:
    """ALBERT's tokenizer: `normalize` + SentencePiece + the digit-comma rule, in Python and in-graph.

    Args:
      spm_model: path of a SentencePiece .model (local or any tf.io.gfile filesystem such as gs://), or its bytes.
        For a path, its text-normalization record X.casing.json (albert_tf.text.record) is read when present: it
        decides lower_case and keep_accents, and its fingerprint must be the model's.
      lower_case: lowercase during normalization (False for cased vocabularies); None: as recorded, else True. A
        value that contradicts the record is a ValueError.
      keep_accents: normalize with NFKC, keeping accents and voicing marks, instead of NFKD with combining marks
        dropped (albert_tf.text.normalize); None: as recorded, else False. A value that contradicts the record is
        a ValueError.

    Attributes:
      pad_id, unk_id, cls_id, sep_id, mask_id: 0, 1, 2, 3, 4 (checked against the model).
      vocab_size: number of pieces.
      model_name: the path given (or a placeholder for bytes), used in messages.
      lower_case, keep_accents: the normalization used (bools).
      fingerprint: the model's SHA-256 (hex), which records, model directories and exports carry.
      run_root, run_power: the tables of `canonical_order` (see `run_tables`), one entry per id.
      digit_comma_ids: {id: [ids]} for each piece the digit-comma rule replaces, the ids put in its place.
      pieces_stay_in_words: see `pieces_stay_in_words` (whether `tf_pack` may cut words before tokenizing).
    """

    pad_id, unk_id = PAD_ID, UNK_ID
    cls_id, sep_id, mask_id = CLS_ID, SEP_ID, MASK_ID

    def __init__(self, spm_model, lower_case=None, keep_accents=None):
        import sentencepiece as spm  # pylint: disable=import-outside-toplevel

        self.model_proto, self.model_name = _read_model(spm_model)
        self.fingerprint = record.fingerprint(self.model_proto)
        recorded = record.TextRecord()
        if not isinstance(spm_model, (bytes, bytearray)):
            recorded = record.read_text_record(spm_model, self.model_proto)
        self.lower_case = record.resolve_lower_case(
            recorded.lower_case, None if lower_case is None else not lower_case, recorded.path,
            flags=("lower_case=False", "lower_case=True"))
        self.keep_accents = record.resolve_keep_accents(recorded.keep_accents, keep_accents, recorded.path,
                                                        flags=("keep_accents=True", "keep_accents=False"))
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(self.model_proto)
        except Exception as e:  # sentencepiece raises RuntimeError / OSError on a bad proto
            raise ValueError(f"{self.model_name} is not a SentencePiece model ({e})") from e
        check_model_layout(self.model_proto, self.model_name)
        self._check_special_ids()
        special = {i for i in range(self.vocab_size) if self._sp.is_control(i) or self._sp.is_unknown(i)}
        self.run_root, self.run_power = run_tables(
            [self._sp.id_to_piece(i) for i in range(self.vocab_size)], special)
        # id of a piece ending in digit + comma -> the ids the digit-comma rule puts in its place.
        self.digit_comma_ids = {}
        for i in range(self.vocab_size):
            piece = self._sp.id_to_piece(i)
            if not self._sp.is_control(i) and _ends_with_digit_comma(piece):
                self.digit_comma_ids[i] = [self._sp.piece_to_id(p) for p in self._split_digit_comma(piece)]
        self.pieces_stay_in_words = pieces_stay_in_words(
            [self._sp.id_to_piece(i) for i in range(self.vocab_size) if not self._sp.is_control(i)])
        self._in_graph = None

    # ----------------------------------------------------------------------------------------------- Python path
    @property
    def vocab_size(self):
        """Number of pieces in the SentencePiece model (the model's vocab_size)."""
        return self._sp.get_piece_size()

    def _check_special_ids(self):
        expected = {"<pad>": (self._sp.pad_id(), PAD_ID), "<unk>": (self._sp.unk_id(), UNK_ID)}
        for name, (got, want) in expected.items():
            if got != want:
                raise ValueError(
                    f"SentencePiece model {self.model_name}: {name} has id {got}, expected {want} "
                    "(train the vocabulary with `albert-tf vocab`, or pad_id=0 unk_id=1)")
        for piece, want in SPECIAL_PIECES.items():
            got = self._sp.piece_to_id(piece)
            if (got != want or want >= self.vocab_size or self._sp.id_to_piece(want) != piece
                    or not self._sp.is_control(want)):
                where = ("missing" if got == self._sp.unk_id() else
                         "not a control symbol" if got == want else f"at id {got}")
                raise ValueError(
                    f"SentencePiece model {self.model_name}: {piece} is {where}, expected at id {want} "
                    "([CLS] [SEP] [MASK] must be control symbols 2, 3, 4; train with `albert-tf vocab`)")

    def _segment(self, text):
        """Normalized str -> SentencePiece ids, ties in canonical order (no digit-comma rule)."""
        return canonical_order(self._sp.encode(text), self.run_root, self.run_power)

    def _segment_with_spans(self, text):
        """Normalized str -> (ids, begins, ends): `_segment`'s ids and each piece's byte span in text's UTF-8
        (SentencePiece's own offsets, laid out again where canonical order moved pieces)."""
        from sentencepiece import sentencepiece_pb2  # pylint: disable=import-outside-toplevel

        proto = sentencepiece_pb2.SentencePieceText()
        proto.ParseFromString(self._sp.encode(text, out_type="serialized_proto"))
        pieces = list(proto.pieces)
        return canonical_order_with_spans([p.id for p in pieces], [p.begin for p in pieces],
                                          [p.end for p in pieces], self.run_root, self.run_power)

    def _split_digit_comma(self, piece):
        """The digit-comma rule for one piece: "▁3.0," -> pieces("3.0") + [","]."""
        pieces = [self._sp.id_to_piece(i) for i in self._segment(piece[:-1].replace(SPIECE_UNDERLINE, ""))]
        if not piece.startswith(SPIECE_UNDERLINE) and pieces and pieces[0].startswith(SPIECE_UNDERLINE):
            pieces = pieces[1:] if pieces[0] == SPIECE_UNDERLINE else [pieces[0][1:]] + pieces[1:]
        return pieces + [piece[-1]]

    def encode_as_pieces(self, text):
        """str (or UTF-8 bytes) -> list of pieces (normalized, segmented, digit-comma rule applied); an unknown
        piece is given as its text."""
        pieces = self._sp.encode(normalize(as_text(text), self.lower_case, self.keep_accents), out_type=str)
        ids = [self._sp.piece_to_id(p) for p in pieces]  # an unknown piece's text gives unk_id, which never moves
        ordered = canonical_order(ids, self.run_root, self.run_power)
        pieces = [p if i == j else self._sp.id_to_piece(j) for p, i, j in zip(pieces, ids, ordered)]
        out = []
        for piece in pieces:
            if _ends_with_digit_comma(piece):
                out.extend(self._split_digit_comma(piece))
            else:
                out.append(piece)
        return out

    def encode(self, text):
        """str (or UTF-8 bytes) -> list[int] ids; a list of them -> a list of such lists. No [CLS]/[SEP] (see
        `pack`)."""
        if not isinstance(text, (str, bytes, bytearray)):
            return [self.encode(t) for t in text]
        ids = self._segment(normalize(as_text(text), self.lower_case, self.keep_accents))
        if not self.digit_comma_ids or self.digit_comma_ids.keys().isdisjoint(ids):
            return ids
        out = []
        for i in ids:
            expansion = self.digit_comma_ids.get(i)
            if expansion is None:
                out.append(i)
            else:
                out.extend(expansion)
        return out

    def encode_with_offsets(self, text):
        """`encode` plus, for each id, the span of `text` it comes from (through normalization, SentencePiece's own
        normalizer and the digit-comma rule).

        Args:
          text: a str.
        Returns:
          (ids, spans): ids == encode(text); spans[k] = (start, end) character offsets into `text` with
          text[start:end] the original characters of piece k, whitespace trimmed from both ends (start == end for
          a piece that covers no character, such as a lone "▁"). Pieces from one character share its span.
        """
        text = as_text(text)
        normalized, starts, ends = normalize_with_offsets(text, self.lower_case, self.keep_accents)
        piece_ids, piece_begins, piece_ends = self._segment_with_spans(normalized)
        # SentencePiece's begin/end are byte offsets into the UTF-8 string it was given.
        data = np.frombuffer(normalized.encode("utf-8"), np.uint8)
        is_first_byte = (data & 0xC0) != 0x80  # not a UTF-8 continuation byte
        char_at_byte = np.append(np.cumsum(is_first_byte) - 1, len(normalized)).tolist()
        starts, ends = starts.tolist(), ends.tolist()  # Python ints: indexed one at a time below

        def original_span(begin, end):  # normalized character span -> trimmed span of `text`
            if end <= begin:
                at = starts[begin] if begin < len(starts) else len(text)
                return at, at
            s, e = starts[begin], ends[end - 1]
            while s < e and text[s].isspace():
                s += 1
            while e > s and text[e - 1].isspace():
                e -= 1
            return s, e

        ids, spans = [], []
        for piece_id, piece_begin, piece_end in zip(piece_ids, piece_begins, piece_ends):
            begin, end = char_at_byte[piece_begin], char_at_byte[piece_end]
            expansion = self.digit_comma_ids.get(piece_id)
            if expansion is None:
                ids.append(piece_id)
                spans.append(original_span(begin, end))
                continue
            # "▁3.0," -> pieces of "3.0" + ",": the comma is the span's last character, the rest re-encoded.
            ids.extend(expansion)
            head_begin = begin
            while head_begin < end - 1 and normalized[head_begin] == " ":
                head_begin += 1
            _, sub_begins, sub_ends = self._segment_with_spans(normalized[head_begin:end - 1])
            sub_spans = list(zip(sub_begins, sub_ends))
            if len(sub_spans) == len(expansion):  # the rule dropped a lone leading "▁"
                sub_spans = sub_spans[1:]
            if len(sub_spans) == len(expansion) - 1:
                base = len(normalized[:head_begin].encode("utf-8"))
                for b, e in sub_spans:
                    spans.append(original_span(char_at_byte[base + b], char_at_byte[base + e]))
            else:  # not seen: SentencePiece's normalizer changed the head; give its span to each piece
                spans.extend([original_span(head_begin, end - 1)] * (len(expansion) - 1))
            spans.append(original_span(end - 1, end))
        return ids, spans

    def digit_comma_spans(self):
        """Where each piece of a digit-comma expansion lies, as `encode_with_offsets` computes it (the in-graph
        offset encoder's table).

        Returns:
          {id: [(begin, end), ...]} for each id the digit-comma rule expands (one pair per piece of the expansion):
          byte offsets relative to the END of the original piece in the normalized text (so <= 0): the head "3.0"
          re-encoded on its own, then the comma (-1, 0).
        """
        spans = {}
        for i, expansion in self.digit_comma_ids.items():
            head = self.id_to_piece(i)[:-1].lstrip(SPIECE_UNDERLINE)
            size = len(head.encode("utf-8"))
            _, begins, ends = self._segment_with_spans(head)
            pieces = list(zip(begins, ends))
            if len(pieces) == len(expansion):  # the rule dropped a lone leading "▁"
                pieces = pieces[1:]
            if len(pieces) == len(expansion) - 1:
                head_spans = [(b - size - 1, e - size - 1) for b, e in pieces]
            else:  # as encode_with_offsets: every piece gets the head's span
                head_spans = [(-size - 1, -1)] * (len(expansion) - 1)
            spans[i] = head_spans + [(-1, 0)]
        return spans

    def decode(self, ids):
        """list[int] (or a 1-D array) -> str; special ids decode to nothing."""
        return self._sp.decode([int(i) for i in ids])

    def id_to_piece(self, id_):
        return self._sp.id_to_piece(int(id_))

    def piece_to_id(self, piece):
        """The piece's id, or unk_id when the vocabulary lacks it."""
        return self._sp.piece_to_id(piece)

    def pack(self, text_a, text_b=None, seq_length=128):
        """[CLS] a [SEP] (b [SEP]) padded with 0 to seq_length; the longer side is truncated first, from its end. A
        text_b that is None or tokenizes to no ids ("", whitespace) is no second segment: [CLS] a [SEP]
        (albert_tf.text.segments, the rule every export follows too).

        Args:
          text_a: a str (or UTF-8 bytes), or a list of B of them.
          text_b: None, or the same kind as text_a (a list may hold None for a row without one).
          seq_length: L, the packed length.
        Returns:
          dict of int32 numpy arrays `input_word_ids`, `input_mask`, `input_type_ids`, each [L] (or [B, L]).
        """
        single = isinstance(text_a, (str, bytes))
        texts_a = [text_a] if single else list(text_a)
        if text_b is None:
            texts_b = [None] * len(texts_a)
        else:
            texts_b = [text_b] if isinstance(text_b, (str, bytes)) else list(text_b)
            if isinstance(text_b, (str, bytes)) != single or len(texts_b) != len(texts_a):
                raise ValueError(f"pack: text_b must match text_a (got {len(texts_b)} text_b for "
                                 f"{len(texts_a)} text_a)")
        minimum = 2 if text_b is None else 3
        if seq_length < minimum:
            raise ValueError(f"pack: seq_length must be at least {minimum}, got {seq_length}")
        words = np.zeros([len(texts_a), seq_length], np.int32)
        mask = np.zeros([len(texts_a), seq_length], np.int32)
        types = np.zeros([len(texts_a), seq_length], np.int32)
        for row, (a, b) in enumerate(zip(texts_a, texts_b)):
            ids_a = self.encode(a)
            ids_b = [] if b is None else self.encode(b)
            len_a, len_b, has_b = segment_lengths(len(ids_a), len(ids_b), seq_length)
            tokens = [self.cls_id] + ids_a[:len_a] + [self.sep_id]
            if has_b:
                types[row, len(tokens):len(tokens) + len_b + 1] = 1
                tokens += ids_b[:len_b] + [self.sep_id]
            words[row, :len(tokens)] = tokens
            mask[row, :len(tokens)] = 1
        out = {"input_word_ids": words, "input_mask": mask, "input_type_ids": types}
        if single:
            out = {k: v[0] for k, v in out.items()}
        return out

    # ------------------------------------------------------------------------------------------------ in-graph
    @property
    def in_graph(self):
        """The tf.Module holding the in-graph tokenizer (SentencePiece resource + digit-comma table), built on
        first use, and built again (when accessed eagerly) after `tf.random.set_seed` has deleted its SentencePiece
        resource. Attach it to the tf.Module you export (e.g. `export_module.tokenizer = tok.in_graph`) so a
        SavedModel tracks its resources; build tf.data pipelines and exports after seeding."""
        if self._in_graph is not None and not self._in_graph.alive():
            self._in_graph = None
        if self._in_graph is None:
            from albert_tf.text import in_graph  # pylint: disable=import-outside-toplevel  (TensorFlow)

            self._in_graph = in_graph.make_tokenizer(self)
        return self._in_graph

    def tf_normalize(self, strings):
        """In-graph `normalize`: tf.string [...] -> tf.string [...] (same shape)."""
        return self.in_graph.normalize(strings)

    def tf_encode(self, strings):
        """In-graph `encode`: tf.string [B] -> tf.RaggedTensor int32 [B, None] (a scalar gives int32 [None]).

        Identical ids to `encode` for valid UTF-8 text; no py_function, so it works in tf.data, tf.function and
        SavedModels.
        """
        return self.in_graph.encode(strings)

    def tf_pack(self, text_a, text_b=None, seq_length=128):
        """In-graph `pack`: tf.string [B] (and optional [B]) -> dict of int32 [B, seq_length] tensors
        `input_word_ids`, `input_mask`, `input_type_ids`, equal to `pack` on the same strings. A text_b of size 0
        is an omitted one, and a row whose text_b tokenizes to no ids has no second segment, as in `pack`
        (albert_tf.text.segments); otherwise text_b must have text_a's size (InvalidArgumentError "text_a and
        text_b must have the same length").

        Bounded work: each text is cut after its first seq_length - 2 words (seq_length - 3 for pairs; every word
        gives at least one id) before normalization and SentencePiece, so a long request costs a whitespace pass over
        its bytes, not its segmentation. The cut gives exactly `pack`'s ids (see `pieces_stay_in_words`; for a
        vocabulary where that does not hold nothing is cut). A text whose kept words give too few ids (words that
        normalize to nothing, such as lone combining marks) is tokenized whole. A word longer than MAX_WORD_CHARS
        characters is cut by `normalize` (both paths), so SentencePiece's work per word is bounded too.
        """
        return self.in_graph.pack(text_a, text_b, seq_length)

    def tf_cut_words(self, strings, max_words):
        """In-graph: (the first max_words whitespace-separated words of each string joined by single spaces, bool
        [B]: whether words were dropped). The cut `tf_pack` makes before normalizing."""
        return self.in_graph.cut_words(strings, max_words)

"""ALBERT's text normalization, in Python: `normalize` (what trains the vocabulary and feeds the tokenizer) and
`normalize_with_offsets` (the same, with each output character's source span in the input).

Semantics follow google-research/albert's `preprocess_text`: collapse whitespace runs to one space and strip, NFKD,
drop combining marks, lowercase unless cased; ours: ``  and '' -> " as well (XLNet's and Hugging Face's
preprocessing do it; the original ALBERT's does not); ours: each word cut to its first MAX_WORD_CHARS code points
(bounded work). With keep_accents (Hugging Face's name; `albert-tf vocab --keep-accents` records it beside the
vocabulary, albert_tf.text.record) NFKC replaces NFKD-and-drop: accents and voicing marks stay (が stays が, é stays
é), compatibility forms still fold (ｶﾞ -> ガ, ﬁ -> fi). The in-graph twin is albert_tf.text.in_graph.
"""
import functools
import re
import unicodedata

import numpy as np

_QUOTE_PAIRS = re.compile(r"``|''")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# Words (whitespace-separated, as str.split() sees them) are cut to their first MAX_WORD_CHARS characters (code points,
# before NFKD) by `normalize`, in Python and in the graph alike. Ours: the original has no such cap. It bounds what
# SentencePiece sees per word, so a request or corpus line that is one huge whitespace-free run (base64, minified
# code) costs work bounded by MAX_WORD_CHARS per word; no word of the Python documentation is longer than 200.
MAX_WORD_CHARS = 256


def normalize(text, lower_case=True, keep_accents=False):
    """ALBERT's text preprocessing (the same function trains the vocabulary and feeds the tokenizer).

    Args:
      text: a str.
      lower_case: lowercase the result (uncased models, the default).
      keep_accents: NFKC instead of NFKD with combining marks dropped (accents and voicing marks kept).
    Returns:
      the normalized str: whitespace runs collapsed to one space and stripped, each word cut to its first
      MAX_WORD_CHARS characters, ``/'' replaced by ", NFKD decomposition with combining marks
      (unicodedata.combining != 0) removed (keep_accents: NFKC), lowercased unless cased.
    """
    text = _join_words(text)
    text = text.replace("``", '"').replace("''", '"')
    if text.isascii():  # ASCII has no decompositions, compositions or combining marks
        pass
    elif keep_accents:
        text = unicodedata.normalize("NFKC", text)
    else:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    if lower_case:
        text = text.lower()
    return text


def _join_words(text):
    """The words of `text` (str.split()), each cut to its first MAX_WORD_CHARS characters, joined by one space."""
    words = text.split()
    if len(text) > MAX_WORD_CHARS and max(map(len, words), default=0) > MAX_WORD_CHARS:
        words = [w[:MAX_WORD_CHARS] for w in words]
    return " ".join(words)


def normalize_with_offsets(text, lower_case=True, keep_accents=False):
    """`normalize` that also says where each normalized character comes from in `text`.

    Args:
      text: a str.
      lower_case, keep_accents: as in `normalize`.
    Returns:
      (normalized, starts, ends): normalized == normalize(text, lower_case, keep_accents) and int64
      [len(normalized)] arrays:
      normalized[k] comes from text[starts[k]:ends[k]] (a space that replaced a whitespace run points at the run's
      first character; the characters NFKD makes of one character, e.g. "ﬁ" -> "fi", all point at that character;
      the '"' that replaced `` or '' spans both).
    """
    # Whitespace runs -> one space, standing for the run's first character; none at either end; words capped.
    normalized = _join_words(text)
    is_space = np.isin(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32), _whitespace_codepoints())
    keep = ~is_space
    keep[1:] |= is_space[1:] & ~is_space[:-1]
    if len(text) > MAX_WORD_CHARS:  # drop each word's characters after its first MAX_WORD_CHARS
        index = np.arange(len(text))
        word_start = ~is_space
        word_start[1:] &= is_space[:-1]
        position = index - np.maximum.accumulate(np.where(word_start, index, 0))
        keep &= is_space | (position < MAX_WORD_CHARS)
    words = np.flatnonzero(~is_space)
    if words.size:
        keep[:words[0]] = False
        keep[words[-1] + 1:] = False
    starts = np.flatnonzero(keep)
    ends = starts + 1
    # `` and '' -> " (one left-to-right pass equals the two str.replace calls: the characters differ).
    if "``" in normalized or "''" in normalized:
        keep = np.ones([len(normalized)], bool)
        for m in _QUOTE_PAIRS.finditer(normalized):
            ends[m.start()] = ends[m.start() + 1]
            keep[m.start() + 1] = False
        normalized = _QUOTE_PAIRS.sub('"', normalized)
        starts, ends = starts[keep], ends[keep]
    if keep_accents and not normalized.isascii():
        normalized, source_first, source_last = _nfkc_with_sources(normalized)
        starts, ends = starts[source_first], ends[source_last]
    # NFKD decomposes each character on its own, then reorders only combining marks, which are all dropped:
    # character by character gives the same string as `normalize`.
    elif not normalized.isascii():
        parts, source, last = [], [], 0
        for m in _NON_ASCII.finditer(normalized):
            k = m.start()
            decomposed = "".join(d for d in unicodedata.normalize("NFKD", m.group()) if not unicodedata.combining(d))
            parts += [normalized[last:k], decomposed]
            source += list(range(last, k)) + [k] * len(decomposed)
            last = k + 1
        parts.append(normalized[last:])
        source += range(last, len(normalized))
        normalized = "".join(parts)
        source = np.asarray(source, np.int64)
        starts, ends = starts[source], ends[source]
    if lower_case:
        lowered = normalized.lower()  # the whole string: str.lower() is context-sensitive (final sigma)
        if len(lowered) != len(normalized):  # a character that lowercases to several
            widths = np.asarray([len(c.lower()) for c in normalized], np.int64)
            starts, ends = np.repeat(starts, widths), np.repeat(ends, widths)
        normalized = lowered
    return normalized, starts, ends


def _nfkc_with_sources(text):
    """(NFKC of text, first, last): int64 arrays, each output character comes from text[first[k]:last[k] + 1].

    NFKC is applied to segments that start at a character which no composition joins to what precedes it
    (`joining_codepoints`); the segments' NFKC joined is the NFKC of the whole text, and each output character
    points at its whole segment (a base letter with its marks, a Hangul syllable's jamo)."""
    joins = joining_codepoints()
    bounds = [k for k, c in enumerate(text) if k == 0 or ord(c) not in joins] + [len(text)]
    parts, first, last = [], [], []
    for a, b in zip(bounds, bounds[1:]):
        piece = text[a:b] if b - a == 1 and text[a].isascii() else unicodedata.normalize("NFKC", text[a:b])
        parts.append(piece)
        first += [a] * len(piece)
        last += [b - 1] * len(piece)
    return "".join(parts), np.asarray(first, np.int64), np.asarray(last, np.int64)


@functools.lru_cache(maxsize=None)
def joining_codepoints():
    """The code points NFKC may join to the character before them: those whose NFKD starts with a combining mark
    (unicodedata.combining != 0), with a starter that is the second half of a canonical composition (e.g. the
    Oriya, Tamil and Sinhala vowel signs), or with a Hangul medial vowel or final consonant jamo. A frozenset of
    ints (the in-graph twin makes an RE2 class of it)."""
    seconds = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for c in range(0x110000):
        parts = unicodedata.decomposition(chr(c)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            seconds.add(int(parts[1], 16))
    found = set()
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        head = unicodedata.normalize("NFKD", chr(c))[:1]
        if head and (unicodedata.combining(head) or ord(head) in seconds):
            found.add(c)
    return frozenset(found)


@functools.lru_cache(maxsize=None)
def _whitespace_codepoints():
    """The code points str.split() splits on (str.isspace()), as a sorted int array."""
    return np.asarray([c for c in range(0x110000) if chr(c).isspace()], np.uint32)


def char_class(codepoints):
    """A regular-expression class matching exactly the given code points (sorted ints), in the `\\x{HEX}` syntax that
    RE2 (TensorFlow's regex ops) and Oniguruma (Hugging Face tokenizers' Replace) both read."""
    ranges = []
    for c in codepoints:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return "[" + "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges) + "]"


@functools.lru_cache(maxsize=None)
def unicode_classes():
    """Classes (`char_class`) for Python's notion of whitespace (str.split) and of combining marks
    (unicodedata.combining)."""
    all_chars = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    whitespace = [c for c in all_chars if chr(c).isspace()]
    combining = [c for c in all_chars if unicodedata.combining(chr(c))]
    return char_class(whitespace), char_class(combining)


def as_text(text):
    """str as is; bytes (e.g. from a tf.data iterator) decoded as UTF-8, bad bytes replaced by U+FFFD."""
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        raise TypeError(f"expected str or bytes, got {type(text).__name__}")
    return text

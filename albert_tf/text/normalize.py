"""ALBERT's text normalization, in Python: `normalize` (what trains the vocabulary and feeds the tokenizer) and
`normalize_with_offsets` (the same, with each output character's source span in the input).

Semantics follow google-research/albert's `preprocess_text`: collapse whitespace runs to one space and strip, NFKD,
drop combining marks, lowercase unless cased; ours: ``  and '' -> " as well (XLNet's and Hugging Face's
preprocessing do it; the original ALBERT's does not); ours: each word cut to its first MAX_WORD_CHARS code points
(bounded work). The in-graph twin is albert_tf.text.in_graph.
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


def normalize(text, lower_case=True):
    """ALBERT's text preprocessing (the same function trains the vocabulary and feeds the tokenizer).

    Args:
      text: a str.
      lower_case: lowercase the result (uncased models, the default).
    Returns:
      the normalized str: whitespace runs collapsed to one space and stripped, each word cut to its first
      MAX_WORD_CHARS characters, ``/'' replaced by ", NFKD decomposition with combining marks
      (unicodedata.combining != 0) removed, lowercased unless cased.
    """
    text = _join_words(text)
    text = text.replace("``", '"').replace("''", '"')
    if not text.isascii():  # ASCII has no decompositions and no combining marks
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


def normalize_with_offsets(text, lower_case=True):
    """`normalize` that also says where each normalized character comes from in `text`.

    Args:
      text: a str.
      lower_case: as in `normalize`.
    Returns:
      (normalized, starts, ends): normalized == normalize(text, lower_case) and int64 [len(normalized)] arrays:
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
    # NFKD decomposes each character on its own, then reorders only combining marks, which are all dropped:
    # character by character gives the same string as `normalize`.
    if not normalized.isascii():
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


@functools.lru_cache(maxsize=None)
def _whitespace_codepoints():
    """The code points str.split() splits on (str.isspace()), as a sorted int array."""
    return np.asarray([c for c in range(0x110000) if chr(c).isspace()], np.uint32)


def as_text(text):
    """str as is; bytes (e.g. from a tf.data iterator) decoded as UTF-8, bad bytes replaced by U+FFFD."""
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        raise TypeError(f"expected str or bytes, got {type(text).__name__}")
    return text

"""Reading corpus text: how `vocab`, `create-data` and the Beam pipeline take raw lines.

    decode_utf8(raw)                   bytes → (str, invalid bytes replaced by U+FFFD, counted)
    open_binary(path)                  a binary file object (local directly, URLs through tf.io.gfile)
    check_text_files(files)            refuses a UTF-16 / UTF-32 file (a BOM, or NUL-heavy) or one mostly invalid
                                       UTF-8 (naming its likely encoding: EUC-KR, Shift-JIS, ...) with one line
    split_long_line(text, limit)       a line → pieces of at most `limit` UTF-8 bytes (sentence ends, else spaces,
                                       else a character boundary)

No process-global state (no codecs error handler to register): any number of threads or importers may decode at
once. No TensorFlow here: create-data's worker processes import this.
"""
import codecs
import concurrent.futures
import re

from albert_tf.files import is_url

_REPLACEMENT = "\ufffd"
_REPLACEMENT_BYTES = _REPLACEMENT.encode("utf-8")  # EF BF BD


def decode_utf8(raw):
    """bytes → (str, number of invalid bytes replaced by U+FFFD).

    The text is `raw.decode("utf-8", "replace")`: one U+FFFD for each invalid sequence the decoder reports (a
    truncated multi-byte sequence is one). The count is the bytes those sequences span: valid sequences encode back
    to their own bytes and each replaced one became a U+FFFD (3 bytes); a U+FFFD already in `raw` is the bytes
    EF BF BD, which always decode as themselves (EF is no continuation byte), so those are told apart by counting.
    Linear in len(raw) however many bytes are invalid.
    """
    text = raw.decode("utf-8", "replace")
    if _REPLACEMENT not in text:
        return text, 0
    replacements = text.count(_REPLACEMENT) - raw.count(_REPLACEMENT_BYTES)
    return text, len(raw) - (len(text.encode("utf-8")) - len(_REPLACEMENT_BYTES) * replacements)


# ---------------------------------------------------------------------------------------------- the encoding
HEAD_BYTES = 4096  # what is read of each file to tell its encoding
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))  # UTF-32 first: its little-endian BOM starts with UTF-16's
_NUL_SHARE = 0.1  # UTF-16 text holds a NUL in about every other byte where it is Latin script; UTF-8 text none


def wide_encoding(head):
    """"UTF-16" or "UTF-32" when the first bytes of a file (`head`) are those of such a file: a byte-order mark, or
    NUL bytes in more than a tenth of them (three of four: UTF-32); else None."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    nuls = head.count(0)
    if head and nuls > _NUL_SHARE * len(head):
        return "UTF-32" if nuls > 0.6 * len(head) else "UTF-16"
    return None


# A file whose first bytes are more than this share invalid UTF-8 is in another encoding: refused, not read with a
# U+FFFD for every other character (an EUC-KR file is about 40% invalid UTF-8). A few stray bytes are replaced and
# counted (decode_utf8), with a warning.
INVALID_SHARE = 0.1
# The encodings `likely_encoding` tries, in order: the first that decodes a file's first bytes cleanly is named.
LEGACY_ENCODINGS = ("euc-kr", "shift_jis", "gb18030", "big5", "cp1252", "latin-1")


def likely_encoding(head):
    """The first of LEGACY_ENCODINGS that decodes `head` (a file's first bytes, possibly cut inside a character)
    without an error, or None."""
    cut = head.rfind(b"\n") + 1
    candidates = [head[:cut]] if cut else [head[:len(head) - drop] for drop in range(4)]
    for name in LEGACY_ENCODINGS:
        for sample in candidates:
            try:
                sample.decode(name)
            except UnicodeDecodeError:
                continue
            return name
    return None


def check_head(path, head):
    """ValueError naming `path` when its first bytes say it is UTF-16 or UTF-32 text (see `wide_encoding`), or text
    in another encoding (more than INVALID_SHARE of them invalid UTF-8: the message names the encoding it most
    likely is, `likely_encoding`)."""
    name = wide_encoding(head)
    if name:
        raise ValueError(f"{path} looks like {name}; convert it to UTF-8 (e.g. iconv -f {name} -t UTF-8)")
    cut = head.rfind(b"\n") + 1 or len(head)  # whole lines: a character cut at the end is not counted
    invalid = decode_utf8(head[:cut])[1]
    if invalid > INVALID_SHARE * cut:
        guess = likely_encoding(head)
        raise ValueError(f"{path} is not UTF-8 text ({100 * invalid / cut:.0f}% of its first {cut:,} bytes are "
                         f"invalid UTF-8); it decodes as {guess}: convert it to UTF-8 first (e.g. iconv -f "
                         f"{guess.upper()} -t UTF-8 {path} > {path}.utf8)")


def open_binary(path):
    """A binary file object: local paths directly (no TensorFlow), URLs through tf.io.gfile."""
    if is_url(path):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")  # pylint: disable=consider-using-with


def check_text_files(files, opener=None):
    """Reads the first HEAD_BYTES of every file (in parallel: on gs:// each is a round trip) and refuses a UTF-16
    or UTF-32 one (`check_head`; the first in file order). `opener`: path → a binary file object (default:
    `open_binary`; the Beam pipeline passes its FileSystems.open)."""
    opener = opener or open_binary

    def head(path):
        with opener(path) as f:
            return f.read(HEAD_BYTES)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(16, len(files)))) as pool:
        for path, first in zip(files, pool.map(head, files)):
            check_head(path, first)


# ---------------------------------------------------------------------------------------------- long lines
# A sentence ends at . ! ? (closing quotes and brackets kept with it) before white space, or at a CJK full stop,
# exclamation or question mark (UTF-8 bytes of 。！？), which need no space after them.
_SENTENCE_END = re.compile(rb"[.!?][\"')\]]*\s|\xe3\x80\x82|\xef\xbc\x81|\xef\xbc\x9f")
_SPACE = re.compile(rb"\s")


def _last_cut(pattern, data, limit):
    """The end of the last match of `pattern` in data[:limit + 1] that leaves at most `limit` bytes before it once
    trailing white space is dropped, or None."""
    cuts = [m.end() for m in pattern.finditer(data, 0, limit + 1)]
    for cut in reversed(cuts[-2:]):
        if 0 < len(data[:cut].rstrip()) <= limit:
            return cut
    return None


def split_long_line(text, limit):
    """`text` (one line, str) cut into pieces of at most `limit` UTF-8 bytes each: each piece ends at the last
    sentence end that fits, else at the last white space, else at `limit` bytes moved back to a character boundary
    (a word longer than `limit`). White space around the cuts is dropped; nothing else is. A text that fits is
    returned as it is: [text]."""
    if limit < 4:
        raise ValueError(f"a line limit must hold a character (4 bytes), got {limit}")
    data = text.encode("utf-8")
    if len(data) <= limit:
        return [text]
    pieces = []
    while len(data) > limit:
        cut = _last_cut(_SENTENCE_END, data, limit) or _last_cut(_SPACE, data, limit)
        if cut is None:
            cut = limit
            while data[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte: the character starts before it
                cut -= 1
        piece = data[:cut].rstrip()
        if piece:
            pieces.append(piece.decode("utf-8"))
        data = data[cut:].lstrip()
    if data:
        pieces.append(data.decode("utf-8"))
    return pieces


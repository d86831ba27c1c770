"""Reading corpus text: how `vocab`, `create-data` and the Beam pipeline take raw lines.

    decode_utf8(raw)                   bytes → (str, invalid bytes replaced by U+FFFD, counted)
    open_binary(path)                  a binary file object (local directly, URLs through tf.io.gfile)
    check_text_files(files)            refuses a binary file (an executable, an archive, control bytes), a UTF-16 /
                                       UTF-32 file (a BOM, or NUL-heavy) or one mostly invalid UTF-8 (naming its
                                       likely encoding: EUC-KR, Shift-JIS, ...) with one line
    split_long_line(text, limit, piece_limit)
                                       a line longer than `limit` UTF-8 bytes → pieces of at most `piece_limit`
                                       (sentence ends, else spaces, else a character boundary): vocab's and
                                       create-data's one way to split a long line into sentences

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


# What a file's first bytes are when it is no text at all: (its first bytes, what it is).
_SIGNATURES = ((b"\x7fELF", "an ELF executable or library"), (b"\x1f\x8b", "gzip-compressed"),
               (b"BZh91AY&SY", "bzip2-compressed"), (b"\xfd7zXZ\x00", "xz-compressed"),
               (b"\x28\xb5\x2f\xfd", "zstd-compressed"), (b"PK\x03\x04", "a zip archive"), (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive"), (b"%PDF-", "a PDF"),
               (b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF89a", "a GIF image"),
               (b"SQLite format 3\x00", "an SQLite database"))
# Text holds no control characters but white space, backspace (man pages' overstrike) and escape (terminal
# colours); random bytes hold about 10% of them: past this share of a file's first characters it is binary.
_CONTROL_SHARE = 0.05
_TEXT_CONTROLS = frozenset("\t\n\v\f\r\b\x1b")


def _control_share(text):
    """The share of `text`'s characters that are control characters text does not hold (C0 but _TEXT_CONTROLS,
    DEL)."""
    controls = sum(1 for c in text if (c < " " or c == "\x7f") and c not in _TEXT_CONTROLS)
    return controls / max(1, len(text))


def _wide_decodings(head, name):
    """`head` decoded as each byte order of `name` ("UTF-16" / "UTF-32") that decodes it without an error (a
    character cut at the end dropped)."""
    width = 2 if name == "UTF-16" else 4
    whole = head[:len(head) - len(head) % width]
    found = []
    for order in ("le", "be"):
        try:
            found.append(whole.decode(f"{name.lower()}-{order}"))
        except UnicodeDecodeError:
            pass
    return found


def binary_kind(head):
    """What a file is whose first bytes (`head`) are no text in any encoding, or None: a known signature (ELF,
    gzip, zip, PDF, ... `_SIGNATURES`), NUL bytes that do not decode as UTF-16 / UTF-32 text, or more than
    _CONTROL_SHARE control characters (in UTF-8, or in the wide encoding its NULs suggest). A file with a
    byte-order mark is text (`wide_encoding`)."""
    for signature, name in _SIGNATURES:
        if head.startswith(signature):
            return name
    if any(head.startswith(bom) for bom, _ in _BOMS):
        return None
    wide = wide_encoding(head)
    if wide:
        texts = _wide_decodings(head, wide)
        if not any(_control_share(text) <= _CONTROL_SHARE for text in texts):
            return f"NUL bytes in {100 * head.count(0) / len(head):.0f}% of its first {len(head):,} bytes"
        return None
    share = _control_share(head.decode("latin-1"))
    if share > _CONTROL_SHARE and not _utf16_without_nuls(head):
        return f"control bytes in {100 * share:.0f}% of its first {len(head):,} bytes"
    return None


def _utf16_without_nuls(head):
    """True when `head` holds control bytes that UTF-8 text does not, yet decodes as UTF-16 text (no BOM, no NUL:
    CJK script, whose code units have no zero byte)."""
    return (_control_share(head.decode("latin-1")) > _CONTROL_SHARE
            and any(_control_share(text) <= _CONTROL_SHARE for text in _wide_decodings(head, "UTF-16")))


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
    likely is, `likely_encoding`), or no text at all (`binary_kind`)."""
    kind = binary_kind(head)
    if kind:
        raise ValueError(f"{path} is a binary file, not text ({kind}): give UTF-8 text files, one sentence per line")
    name = wide_encoding(head) or ("UTF-16" if _utf16_without_nuls(head) else None)
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
_SPACES = re.compile(rb"\s*")


def _last_cut(pattern, data, start, limit):
    """The end of the last match of `pattern` in data[start:start + limit + 1] that leaves at most `limit` bytes
    after `start` once trailing white space is dropped, or None."""
    cuts = [m.end() for m in pattern.finditer(data, start, start + limit + 1)]
    for cut in reversed(cuts[-2:]):
        if 0 < len(data[start:cut].rstrip()) <= limit:
            return cut
    return None


def split_long_line(text, limit, piece_limit=None):
    """`text` (one line, str) cut, when it is longer than `limit` UTF-8 bytes, into pieces of at most `piece_limit`
    bytes each (default: `limit`): each piece ends at the last sentence end that fits, else at the last white
    space, else at `piece_limit` bytes moved back to a character boundary (a word longer than that). White space
    around the cuts is dropped; nothing else is. A text that fits `limit` is returned as it is: [text]. Linear in
    the line's length.

    vocab cuts a line into pieces as long as SentencePiece takes (`limit` both); create-data cuts a long line into
    pieces of about a sentence or two, the segments its sentence-order pairs are made of."""
    piece_limit = piece_limit or limit
    if min(limit, piece_limit) < 4:
        raise ValueError(f"a line limit must hold a character (4 bytes), got {min(limit, piece_limit)}")
    data = text.encode("utf-8")
    if len(data) <= limit:
        return [text]
    pieces, start = [], 0
    while len(data) - start > piece_limit:
        cut = _last_cut(_SENTENCE_END, data, start, piece_limit) or _last_cut(_SPACE, data, start, piece_limit)
        if cut is None:
            cut = start + piece_limit
            while data[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte: the character starts before it
                cut -= 1
        piece = data[start:cut].rstrip()
        if piece:
            pieces.append(piece.decode("utf-8"))
        start = _SPACES.match(data, cut).end()
    if start < len(data):
        pieces.append(data[start:].decode("utf-8"))
    return pieces

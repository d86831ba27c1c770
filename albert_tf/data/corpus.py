"""Reading corpus text: UTF-8 decoding that replaces invalid bytes with U+FFFD and counts them.

No process-global state (no codecs error handler to register): any number of threads or importers may decode at
once. No TensorFlow here: create-data's worker processes import this.
"""

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

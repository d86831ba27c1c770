"""Reading corpus text: UTF-8 decoding that replaces invalid bytes with U+FFFD and counts them.

One error handler, registered once for the whole package (codecs handlers are process-global by name).
No TensorFlow here: create-data's worker processes import this.
"""
import codecs

_ERRORS = "albert_tf_count_replace"
_replaced = [0]


def _count_and_replace(error):
    _replaced[0] += error.end - error.start
    return "\ufffd", error.end


codecs.register_error(_ERRORS, _count_and_replace)


def decode_utf8(raw):
    """bytes → (str, number of invalid bytes replaced by U+FFFD)."""
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        before = _replaced[0]
        text = raw.decode("utf-8", _ERRORS)
        return text, _replaced[0] - before

"""The faults a command cannot fix by itself, as one line naming the path and their exit code
(albert_tf.runtime.exit_codes): a full disk (74), a path this user may not write or a read-only filesystem (78, a
matter of permission, not of space), a storage service (gs://) that does not answer (69) or refuses access (78). No
TensorFlow here: TensorFlow's errors are recognised by their class name and message, as TensorFlow raises them.

    classify(error) -> ExitError or None     what the CLI prints and exits with instead of a traceback

What TensorFlow raises (tf.io.gfile, TFRecordWriter, checkpoints; TensorFlow 2.18-2.21), PATH anywhere in the text
(a checkpoint's save prefixes it with "{{function_node __wrapped__SaveV2...}}"):
  * a full local disk: ResourceExhaustedError "PATH; No space left on device" (Python's own writes: OSError ENOSPC);
    a file past the size limit (RLIMIT_FSIZE, a filesystem's largest file): OutOfRangeError "PATH; File too large";
  * a local path this user may not write: PermissionDeniedError "PATH; Permission denied", on a read-only
    filesystem "PATH; Read-only file system" (Python's own: OSError EACCES, EPERM, EROFS);
  * gs:// without network: FailedPreconditionError "Error executing an HTTP request: libcurl code 6 meaning 'Could
    not resolve hostname', error details: Could not resolve host: www.googleapis.com\\n\\t when reading metadata of
    gs://BUCKET/PATH" (after its own retries); a service that keeps failing: UnavailableError / DeadlineExceededError
    with the same "Error executing an HTTP request" text;
  * gs:// refused (HTTP 401, 403): PermissionDeniedError (UnauthenticatedError from the credential providers).
"""
import errno
import re

from albert_tf.runtime import exit_codes

# Python's OSErrors of an output that cannot be written for lack of room (or a failing disk): exit 74
_NO_SPACE = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
             errno.EFBIG: "file too large", errno.EIO: "input/output error"}
# ... and of a path this user may not write (or read): exit 78
_REFUSED = {errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
            errno.EROFS: "read-only file system"}
_NO_SPACE_TEXT = re.compile(r"No space left on device|Disk quota exceeded|File too large", re.IGNORECASE)
_REFUSED_TEXT = re.compile(r"Permission denied|Operation not permitted|Read-only file system", re.IGNORECASE)
_HTTP_FAILED = re.compile(r"Error executing an HTTP request|libcurl code|Could not resolve host|Couldn't connect|"
                          r"Timeout was reached|Connection (refused|reset|timed out)", re.IGNORECASE)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"]+", re.IGNORECASE)
_CURL_DETAIL = re.compile(r"error details: ([^\n]+)")
# A path's reason in TensorFlow's text: "PATH; No space left on device" (the path ends at a space, ";" or "}")
_TF_PATH = re.compile(r"([^\s;{}]+); (?:" + _NO_SPACE_TEXT.pattern + "|" + _REFUSED_TEXT.pattern + ")", re.IGNORECASE)
# Temporary names and the output each stands for: albert_tf.files.temp_path_for's (.NAME.tmp-<12 hex>, a file or a
# folder), TensorFlow's atomic writes' (NAME.tmp<32 hex>), a checkpoint save's (PREFIX_temp/part-..., *.tempstate<N>)
_TEMPORARIES = ((re.compile(r"(^|/)\.([^/]+)\.tmp-[0-9a-f]{12}(?=/|$)"), r"\1\2"),
                (re.compile(r"\.tmp[0-9a-f]{32}$"), ""),
                (re.compile(r"_temp/part-\d+-of-\d+[^/]*$"), ""),
                (re.compile(r"\.tempstate\d+$"), ""))


def _tensorflow_error(error):
    """The TensorFlow error class name of `error` (e.g. "ResourceExhaustedError"), or None for any other."""
    module = type(error).__module__ or ""
    return type(error).__name__ if module.startswith("tensorflow") else None


def _first_line(text):
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def _where(error):
    """The path or URL the error names (the output's own name for a temporary file of it), or ""."""
    filename = getattr(error, "filename", None)
    text = getattr(error, "message", None) or str(error)
    url = _URL.search(text)
    path = _TF_PATH.search(text)  # TensorFlow's "PATH; No space left on device"
    where = str(filename) if filename else url.group(0).rstrip(".,;:)") if url else path.group(1) if path else ""
    for pattern, replacement in _TEMPORARIES:
        where = pattern.sub(replacement, where)
    return where


def _detail(error):
    text = getattr(error, "message", None) or str(error)
    curl = _CURL_DETAIL.search(text)
    return (curl.group(1) if curl else _first_line(text)).strip()


def output_failed(where, reason):
    """The OutputFailed (exit 74) for `where` (a path) that could not be written for `reason`."""
    return exit_codes.OutputFailed(f"{where + ': ' if where else ''}could not be written: {reason}; free space (or "
                                   "choose another output), then run again")


def access_refused(where, reason):
    """The AccessRefused (exit 78) for the local path `where` that this user may not write (or read), or that lies
    on a read-only filesystem (`reason`)."""
    advice = ("choose an output on a writable filesystem" if "read-only" in reason else
              "give this user access to it (its permissions or owner) or choose another path")
    return exit_codes.AccessRefused(f"{where + ': ' if where else ''}access refused ({reason}): a matter of "
                                    f"permission, not of space; {advice}, then run again")


def classify(error):
    """The ExitError (with its one line) that `error` stands for, or None when it is none of the faults above (an
    ExitError is returned as it is)."""
    if isinstance(error, exit_codes.ExitError):
        return error
    if isinstance(error, OSError) and error.errno in _NO_SPACE:
        return output_failed(_where(error), _NO_SPACE[error.errno])
    if isinstance(error, OSError) and error.errno in _REFUSED:
        return access_refused(_where(error), _REFUSED[error.errno])
    name = _tensorflow_error(error)
    if name is None:
        return None
    text = getattr(error, "message", None) or str(error)
    where = _where(error)
    if name in ("ResourceExhaustedError", "OutOfRangeError") and _NO_SPACE_TEXT.search(text):
        return output_failed(where, _NO_SPACE_TEXT.search(text).group(0).lower())
    if name in ("PermissionDeniedError", "UnauthenticatedError") and "://" in text:
        return exit_codes.AccessRefused(
            f"{where}: access refused ({_detail(error)}); log in (gcloud auth application-default login) or give "
            "the account access to the bucket, then run again")
    if name == "PermissionDeniedError" and _REFUSED_TEXT.search(text):
        return access_refused(where, _REFUSED_TEXT.search(text).group(0).lower())
    if name in ("FailedPreconditionError", "UnavailableError", "DeadlineExceededError", "AbortedError",
                "UnknownError") and _HTTP_FAILED.search(text):
        return exit_codes.Unavailable(
            f"{where or 'the storage service'}: not reachable ({_detail(error)}); check the network (and that the "
            "bucket's name is right), then run again")
    return None


def unexpected_line(error):
    """One line for an error no other rule covers: its type and first line, and where the traceback is."""
    return (f"{type(error).__name__}: {_first_line(getattr(error, 'message', None) or error) or '(no message)'} "
            "(run with --verbose for the traceback)")


__all__ = ["access_refused", "classify", "output_failed", "unexpected_line"]

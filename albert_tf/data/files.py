"""The one input-file matcher: every `--input` / `--train-data` / file-pattern argument goes through `match_files`.

A pattern is a glob, a comma-separated list of globs, or a list of globs; local paths and any tf.io.gfile
filesystem (gs://) work. No TensorFlow import for local paths (create-data's workers and `vocab` stay light).
"""
import glob as _glob
import os


def split_patterns(patterns):
    """'a*,b*' / ['a*', 'b*'] / b'a*' → ['a*', 'b*'] (empty items dropped)."""
    if isinstance(patterns, (str, bytes, os.PathLike)):
        patterns = [patterns]
    out = []
    for pattern in patterns:
        pattern = pattern.decode() if isinstance(pattern, bytes) else os.fspath(pattern)
        out.extend(p.strip() for p in pattern.split(",") if p.strip())
    return out


def _glob_any(pattern):
    if "://" in pattern:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return [f for f in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(f)]
    return [f for f in _glob.glob(os.path.expanduser(pattern)) if os.path.isfile(f)]


def match_files(patterns, flag="--input", glob=None):
    """Sorted, de-duplicated files matching `patterns` (see the module docstring).

    Args:
      patterns: a glob, comma-separated globs, or a list of globs.
      flag: the option the patterns came from, named in errors (e.g. "--train-data").
      glob: pattern → list of paths; default: local glob, or tf.io.gfile.glob for URLs (the Beam pipeline passes
        Beam's FileSystems, which know its other filesystems).
    Raises:
      FileNotFoundError naming the flag and the first pattern that matches no file.
    """
    items = split_patterns(patterns)
    if not items:
        raise FileNotFoundError(f"{flag} {patterns!r} names no file")
    files = set()
    for pattern in items:
        matched = (glob or _glob_any)(pattern)
        if not matched:
            raise FileNotFoundError(f"{flag} {pattern!r} matches no file")
        files.update(matched)
    return sorted(files)

"""File access for the task readers: local paths through `os`, URLs (gs://, ...) through tf.io.gfile.

TensorFlow is imported only for a URL, so reading local task files stays TensorFlow-free.
"""
import glob as glob_lib
import os


def _gfile(path):
    if "://" not in path:
        return None
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


def isdir(path):
    path = os.fspath(path)
    gfile = _gfile(path)
    return gfile.isdir(path) if gfile else os.path.isdir(path)


def isfile(path):
    path = os.fspath(path)
    gfile = _gfile(path)
    return gfile.exists(path) and not gfile.isdir(path) if gfile else os.path.isfile(path)


def glob(pattern):
    """Sorted paths matching pattern."""
    gfile = _gfile(pattern)
    return sorted(gfile.glob(pattern) if gfile else glob_lib.glob(pattern))


def open_text(path):
    """A text file object (UTF-8) whose lines end at "\\n" only (a "\\r" inside a line stays there)."""
    path = os.fspath(path)
    gfile = _gfile(path)
    if gfile:
        return gfile.GFile(path, "r")
    return open(path, encoding="utf-8", newline="\n")  # pylint: disable=consider-using-with


def read_text(path):
    """The whole file as a str (UTF-8)."""
    with open_text(path) as f:
        return f.read()

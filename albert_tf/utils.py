"""Small shared helpers: atomic writes (local or gs://)."""
import contextlib
import os
import uuid

import tensorflow as tf


def _temp_name(path):
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:12]}")


@contextlib.contextmanager
def atomic_output(path, mode="wb"):
    """Yields a file object writing to a temp name beside `path`; renamed onto `path` only on success.

    A crash leaves either the old file or the new one, never half of one. Works for local paths and any
    tf.io.gfile filesystem (gs://).
    """
    path = os.fspath(path)
    tmp = _temp_name(path)
    try:
        with tf.io.gfile.GFile(tmp, mode) as f:
            yield f
        tf.io.gfile.rename(tmp, path, overwrite=True)
    except BaseException:
        with contextlib.suppress(Exception):
            tf.io.gfile.remove(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(path):
    """Yields a temp directory name beside `path` to fill; renamed onto `path` only when the block succeeds (an
    existing `path` is removed first, and only then), else removed. A crash leaves the old directory or the new
    one, never half of one. Local paths and tf.io.gfile filesystems (gs://)."""
    path = os.fspath(path)
    tmp = _temp_name(path)
    try:
        yield tmp
        if tf.io.gfile.exists(path):
            tf.io.gfile.rmtree(path)
        tf.io.gfile.rename(tmp, path)
    except BaseException:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.rmtree(tmp)
        raise


def atomic_write_text(path, text):
    with atomic_output(path, "w") as f:
        f.write(text)


def atomic_copy(src, dst):
    """Copies `src` to `dst` atomically."""
    with tf.io.gfile.GFile(os.fspath(src), "rb") as f:
        data = f.read()
    with atomic_output(dst, "wb") as f:
        f.write(data)


def temp_path_for(path):
    """A temporary sibling name for `path` (for writers that need a path, such as TFRecordWriter)."""
    return _temp_name(os.fspath(path))

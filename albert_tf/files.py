"""File access for local paths and URLs (gs://, ...), and atomic writes: the one copy of each.

Reading: local paths go through the standard library, URLs through tf.io.gfile, so light tools (`albert-tf plan`,
`vocab`, create-data's workers, the task readers) never import TensorFlow for local files.

    is_url / is_local / exists / isdir / isfile / glob / listdir / size / open_text / read_text
    match_files(patterns, flag)        every --input / --train-data / file-pattern argument
    check_output_dir(path, flag)       an output directory (or prefix) that a file stands in for: one clear error
    check_output_prefix(prefix, flag)  an output file-name prefix that names a directory: one clear error
    check_input_file(path, flag)       an input file that is missing or a directory: one clear error

Writing: a crash leaves either the old result or the new one, never half of one (for directories on URL
filesystems, a weaker guarantee: see `atomic_directory`).

    atomic_output(path)                a file object writing to a temp name, renamed onto `path` on success
    atomic_write_text / atomic_copy    the same for a str / a copy of another file
    atomic_directory(path)             a temp directory to fill, moved onto `path` on success (marker files last)
    temp_path_for(path)                a temp sibling name, for writers that need a path (TFRecordWriter)
    remove(path)                       a file, or a folder with all it holds

Temp names are hidden siblings, `.NAME.tmp-<12 hex>` (`temp_names` matches those of given names); what a killed
run leaves of them, the next run of the same output removes (albert_tf.runtime.leftovers).
"""
import contextlib
import glob as _glob
import os
import re
import shutil
import uuid


def is_url(path):
    """True for a URL (gs://..., any tf.io.gfile scheme), read through tf.io.gfile; False for a local path."""
    return "://" in os.fspath(path)


def is_local(*paths):
    """True when none of `paths` (None skipped) is a URL: what can be checked without importing TensorFlow."""
    return not any(is_url(path) for path in paths if path is not None)


def _gfile(path):
    """tf.io.gfile for a URL such as gs://..., None for a local path."""
    if not is_url(path):
        return None
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


def _tf_gfile():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


# ---------------------------------------------------------------------------------------------- reading
def exists(path):
    path = os.fspath(path)
    gfile = _gfile(path)
    return gfile.exists(path) if gfile else os.path.exists(path)


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
    return sorted(gfile.glob(pattern) if gfile else _glob.glob(pattern))


def listdir(path):
    """The names in the folder `path` (no trailing "/"); [] when it is not a folder."""
    path = os.fspath(path)
    gfile = _gfile(path)
    if gfile:
        return [name.rstrip("/") for name in gfile.listdir(path)] if gfile.isdir(path) else []
    return os.listdir(path) if os.path.isdir(path) else []


def size(path):
    """The bytes of the file `path`, or of every file under the folder `path`."""
    path = os.fspath(path)
    gfile = _gfile(path)
    if gfile:
        if not gfile.isdir(path):
            return gfile.stat(path).length
        return sum(gfile.stat(os.path.join(d, n)).length for d, _, names in gfile.walk(path) for n in names)
    if not os.path.isdir(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path) for n in names)


def remove(path):
    """Removes the file `path`, or the folder `path` with everything in it."""
    path = os.fspath(path)
    gfile = _gfile(path)
    if gfile:
        (gfile.rmtree if gfile.isdir(path) else gfile.remove)(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


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


def split_patterns(patterns):
    """'a*,b*' / ['a*', 'b*'] / b'a*' → ['a*', 'b*'] (empty items dropped)."""
    if isinstance(patterns, (str, bytes, os.PathLike)):
        patterns = [patterns]
    out = []
    for pattern in patterns:
        pattern = pattern.decode() if isinstance(pattern, bytes) else os.fspath(pattern)
        out.extend(p.strip() for p in pattern.split(",") if p.strip())
    return out


def _glob_files(pattern):
    gfile = _gfile(pattern)
    if gfile:
        return [f for f in gfile.glob(pattern) if not gfile.isdir(f)]
    return [f for f in _glob.glob(os.path.expanduser(pattern)) if os.path.isfile(f)]


def match_files(patterns, flag="--input", glob=None):  # pylint: disable=redefined-outer-name
    """Sorted, de-duplicated files matching `patterns`.

    Args:
      patterns: a glob, comma-separated globs, or a list of globs (local paths or any tf.io.gfile filesystem).
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
        matched = (glob or _glob_files)(pattern)
        if not matched:
            if isdir(pattern):
                raise FileNotFoundError(f"{flag} {pattern!r} is a directory; pass the files in it, e.g. "
                                        f"'{pattern.rstrip('/')}/*'")
            raise FileNotFoundError(f"{flag} {pattern!r} matches no file")
        files.update(matched)
    return sorted(files)


def _file_in_the_way(start):
    """The first of `start` and its ancestors that is a file, or None. Local paths only (on object stores such as
    gs:// an object and a "directory" of the same name can coexist)."""
    path = os.path.abspath(os.path.expanduser(start))
    while True:
        if os.path.exists(path):
            return None if os.path.isdir(path) else path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def check_output_dir(path, flag, prefix=False):
    """Refuses (ValueError naming `flag`), before anything is written, an output directory that is a file or lies
    under one. `prefix`: `path` is a file-name prefix (create-data's PREFIX-00000-of-N.tfrecord): its directory is
    checked. On a URL (gs://) it asks the service once whether `path` exists, so that a bucket that does not answer
    or refuses access fails here, before any work, with TensorFlow's error naming `path` (albert_tf.runtime.faults).
    """
    path = os.fspath(path)
    if is_url(path):
        exists(path)
        return
    blocker = _file_in_the_way((os.path.dirname(path) or ".") if prefix else path)
    if blocker is None:
        return
    if blocker == os.path.abspath(os.path.expanduser(path)):
        raise ValueError(f"{flag} {path} is a file; expected a directory")
    raise ValueError(f"{flag} {path}: {blocker} is a file, not a directory")


def check_output_prefix(prefix, flag, example_name):
    """Refuses (ValueError naming `flag`) an output prefix that names a directory (an existing one, or a path ending
    in a separator: the outputs would be hidden files such as DIR/.model), or lies under a file (`check_output_dir`).
    `example_name`: a file-name prefix to suggest inside the directory (e.g. "spm")."""
    prefix = os.fspath(prefix)
    if prefix.endswith(("/", os.sep)) or (prefix and isdir(prefix)):
        example = prefix.rstrip("/" + os.sep) + "/" + example_name
        raise ValueError(f"{flag} {prefix} is a directory, not a file-name prefix; give a prefix inside it, e.g. "
                         f"{flag} {example}")
    check_output_dir(prefix, flag, prefix=True)


def check_input_file(path, flag, usual_name=None):
    """Refuses an input file that does not exist (FileNotFoundError) or is a directory (ValueError; when the
    directory holds `usual_name`, such as spm.model, the message names that file)."""
    path = os.fspath(path)
    if isdir(path):
        inside = os.path.join(path, usual_name) if usual_name else None
        hint = f"; did you mean {inside}?" if inside and exists(inside) else ""
        raise ValueError(f"{flag} {path} is a directory; expected a file{hint}")
    if not exists(path):
        raise FileNotFoundError(f"{flag} {path}: no such file")


# ---------------------------------------------------------------------------------------------- atomic writing
def temp_path_for(path):
    """A temporary hidden sibling name for `path` (for writers that need a path, such as TFRecordWriter)."""
    head, tail = os.path.split(os.fspath(path))
    return os.path.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:12]}")


def temp_names(names):
    """The pattern (re.fullmatch) of the names `temp_path_for` gives the temporaries of the files named by the
    regular expression `names` (e.g. r"\\d+": an export's versions): .NAME.tmp-<12 hex>."""
    return re.compile(r"\.(?:" + names + r")\.tmp-[0-9a-f]{12}")


@contextlib.contextmanager
def atomic_output(path, mode="wb"):
    """Yields a file object writing to a temp name beside `path`; renamed onto `path` only on success.

    A crash leaves either the old file or the new one, never half of one. Works for local paths and any
    tf.io.gfile filesystem (gs://).
    """
    gfile = _tf_gfile()
    path = os.fspath(path)
    tmp = temp_path_for(path)
    try:
        with gfile.GFile(tmp, mode) as f:
            yield f
        gfile.rename(tmp, path, overwrite=True)
    except BaseException:
        with contextlib.suppress(Exception):
            gfile.remove(tmp)
        raise


def renames_directories_atomically(path):
    """True for local paths (os rename); False for URLs such as gs://, where tf.io.gfile renames a directory object
    by object (copy, then delete), in no particular order."""
    path = os.fspath(path)
    return not is_url(path) or path.startswith("file://")


@contextlib.contextmanager
def atomic_directory(path, markers=()):
    """Yields a temp directory name beside `path` to fill; moved onto `path` only when the block succeeds (an
    existing `path` is removed first, and only then), else removed.

    `markers`: the top-level file names whose presence tells a reader that the directory is complete, in the order
    they are to be written last (the owners of the layouts pass them: serving.saved_model `saved_model.pb`, which
    TF Serving and tf.saved_model.load key on; checkpoints.pretrained albert_config.json and the `checkpoint` state
    file, which tf.train.latest_checkpoint keys on).

    Local paths: the move is one rename, so a reader sees the old directory or the new one, never half of one (the
    old one is gone an instant before the rename). URLs (gs://, any tf.io.gfile filesystem without atomic directory
    rename): the temp directory's files are copied into `path` with the `markers` at its top after every other file,
    then the temp is removed; an existing `path` loses its marker files before any other file. So a reader that keys
    on a marker file never sees a partial
    directory; while the old one is replaced it sees none. A crash may leave a marker-less partial `path` and the
    hidden temp; the next write with overwrite replaces them.
    """
    gfile = _tf_gfile()
    path = os.fspath(path).rstrip("/") or os.fspath(path)
    tmp = temp_path_for(path)
    try:
        yield tmp
        if gfile.exists(path):
            _remove_tree(gfile, path, markers)
        if renames_directories_atomically(path):
            gfile.rename(tmp, path)
        else:
            _move_tree_markers_last(gfile, tmp, path, markers)
    except BaseException:
        if gfile.exists(tmp):
            _remove_tree(gfile, tmp, markers)
        raise


def _files_markers_last(gfile, root, markers):
    """The relative paths of the files under root: every other file (sorted), then the top-level `markers` in
    their order."""
    files = []
    for directory, _, names in gfile.walk(root):
        files.extend(os.path.join(directory[len(root):].strip("/"), name) for name in names)
    return sorted(f for f in files if f not in markers) + [m for m in markers if m in files]


def _copy_file(gfile, src, dst):
    """One file's copy (tests replace it to watch the order and to crash midway)."""
    gfile.copy(src, dst, overwrite=True)


def _move_tree_markers_last(gfile, src, dst, markers):
    """Copies the tree src to dst, marker files last, then removes src; a failed copy removes the partial dst."""
    try:
        for directory, _, _ in gfile.walk(src):
            gfile.makedirs(dst + directory[len(src):])
        for relative in _files_markers_last(gfile, src, markers):
            _copy_file(gfile, os.path.join(src, relative), os.path.join(dst, relative))
    except BaseException:
        with contextlib.suppress(Exception):
            _remove_tree(gfile, dst, markers)
        raise
    _remove_tree(gfile, src, markers)


def _remove_tree(gfile, path, markers):
    """Removes a directory tree file by file, its top-level marker files first (a reader keying on them stops
    considering it before any other file goes), then the emptied directories (TF's ram:// filesystem cannot
    rmtree a directory that holds files)."""
    for relative in reversed(_files_markers_last(gfile, path, markers)):
        gfile.remove(os.path.join(path, relative))
    gfile.rmtree(path)


def atomic_write_text(path, text):
    with atomic_output(path, "w") as f:
        f.write(text)


def atomic_copy(src, dst):
    """Copies `src` to `dst` atomically."""
    with _tf_gfile().GFile(os.fspath(src), "rb") as f:
        data = f.read()
    with atomic_output(dst, "wb") as f:
        f.write(data)

"""No temporary file outlives its run. A handled fault (a full disk, a path that may not be written, Ctrl-C)
removes the temporaries where it happens (albert_tf.files.atomic_output / atomic_directory, create-data's shards,
`save_checkpoint` here); a run that is killed (kill -9, the out-of-memory killer, a lost machine) cannot, so the
next run of the same output removes what it left, holding that output's lock (albert_tf.runtime.lock: no live run
is writing them), and says what it removed in one line (`note`).

Only names the package itself gives its temporaries, in the job's own output, are ever removed:

    .NAME.tmp-<12 hex>        albert_tf.files.temp_path_for's, for the NAMEs the job writes there (a file, or a
                              folder: an export's BASE/.N.tmp-*, a converted directory's)
    CHECKPOINT_TEMPORARIES    TensorFlow's while it saves one of our checkpoints (layout's ckpt-N): the sharded
                              save's folder ckpt-N_temp/, the bundle writer's ckpt-N.index.tempstate<digits> (and
                              .data-*), the state file's checkpoint.tmp<32 hex>
    private_temp_dir(kind)    a work folder in the system's temporary directory, albert_tf_KIND_*, holding a flock
                              while its run lives; `remove_abandoned(kind)` removes those whose run is gone

    remove(directory, names=None, checkpoints=False) -> [(path, bytes)]
    note(removed)             `albert-tf CMD: note: removed the temporary files of an interrupted earlier run: ...`
    new_directory(path, flag, work=())   the lock of a new directory while it is written, what a killed writer
                              of it left removed first
    save_checkpoint(manager, number)   a tf.train.CheckpointManager save that leaves nothing of itself if it fails

No TensorFlow here (tf.io.gfile through albert_tf.files for gs:// paths).
"""
import contextlib
import fcntl
import os
import re
import shutil
import tempfile

from albert_tf import files, layout, messages
from albert_tf.runtime import lock

CHECKPOINT_TEMPORARIES = re.compile(
    rf"{layout.CHECKPOINT_PREFIX}-\d+_temp|{layout.CHECKPOINT_PREFIX}-\d+\.[^/]+\.tempstate\d+|"
    rf"{re.escape(layout.CHECKPOINT_STATE_FILE)}\.tmp[0-9a-f]{{32}}")
_HELD = ".albert_tf.held"  # the flocked file of a private_temp_dir while its run lives


def remove(directory, names=None, checkpoints=False):
    """Removes from `directory` (local or gs://) the temporaries (files or folders) of the files named by `names`
    (a regular expression of names: `files.temp_names`) and, with `checkpoints`, TensorFlow's temporaries of its
    checkpoints (CHECKPOINT_TEMPORARIES). Call it holding the output's lock. Returns [(path, bytes)], sorted."""
    patterns = ([files.temp_names(names)] if names else []) + ([CHECKPOINT_TEMPORARIES] if checkpoints else [])
    removed = []
    for name in sorted(files.listdir(directory)):
        if any(p.fullmatch(name) for p in patterns):
            path = os.path.join(directory, name)
            removed.append((path + ("/" if files.isdir(path) else ""), files.size(path)))
            files.remove(path)
    return removed


def _size_text(size):
    """1234567 → '1.2 MB' (decimal units, as `ls -h --si` and `df -H`)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def some(paths, shown=4):
    """'3 file(s): a, b, c' / '12 file(s): a, b, c, d and 8 more'."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return f"{len(paths)} file(s): {', '.join(paths[:shown])}{more}"


def note_text(removed):
    """The note's text for `removed` ([(path, bytes)], from `remove`), or None when nothing was removed."""
    if not removed:
        return None
    return (f"removed the temporary files of an interrupted earlier run: {some([p for p, _ in removed])} "
            f"({_size_text(sum(size for _, size in removed))})")


def note(removed):
    """Says in one line (a note on stderr) what `removed` holds; nothing when it is empty."""
    text = note_text(removed)
    if text:
        messages.say("note", text)


@contextlib.contextmanager
def new_directory(path, flag, work=()):
    """Holds the lock of the new directory `path` (lock.prefix_lock: PARENT/.NAME.albert_tf.lock) while it is
    written (albert_tf.files.atomic_directory), having removed, with a note, what a killed writer of it left: its
    PARENT/.NAME.tmp-* and the abandoned private_temp_dir folders of the kinds `work`. `flag`: the option that named
    `path`, for messages."""
    directory, name = os.path.split(os.fspath(path).rstrip("/"))
    with lock.prefix_lock(os.path.join(directory, name), flag):
        names = "|".join(re.escape(n) for n in (name, f".{name}{lock.LOCK_FILE}"))
        note(remove(directory or ".", names) + [found for kind in work for found in remove_abandoned(kind)])
        yield


# ---------------------------------------------------------------------------------------------- checkpoints
def remove_partial_save(directory, number):
    """Removes what a failed save of checkpoint `number` left in `directory`: TensorFlow's ckpt-N_temp folder and
    the files of ckpt-N, which the `checkpoint` state file does not name (it still names the last complete save)."""
    prefix = os.path.join(directory, f"{layout.CHECKPOINT_PREFIX}-{number}")
    for path in files.glob(prefix + "_temp*") + files.glob(prefix + ".*"):
        with contextlib.suppress(Exception):
            files.remove(path)


def save_checkpoint(manager, number):
    """manager.save(checkpoint_number=number) (a tf.train.CheckpointManager); a save that fails (a full disk, a
    path that may not be written, Ctrl-C) leaves nothing of itself: the last complete checkpoint stays the latest.
    Returns the saved path."""
    try:
        return manager.save(checkpoint_number=number)
    except BaseException:
        remove_partial_save(manager.directory, number)
        raise


# ---------------------------------------------------------------------------------------------- the system's temp dir
@contextlib.contextmanager
def private_temp_dir(kind):
    """A new empty folder, albert_tf_KIND_*/work in the system's temporary directory, removed when the block ends.
    While it lives, albert_tf_KIND_*/.albert_tf.held beside it holds a flock, which the kernel releases when the
    process dies, however it dies: so `remove_abandoned(kind)` finds what a killed run left. Yields its path."""
    path = tempfile.mkdtemp(prefix=f"albert_tf_{kind}_")
    try:
        with open(os.path.join(path, _HELD + ".tmp"), "w", encoding="utf-8") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            os.rename(held.name, os.path.join(path, _HELD))  # named once held: a finder never sees it unheld
            os.mkdir(os.path.join(path, "work"))
            yield os.path.join(path, "work")
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_abandoned(kind):
    """Removes the private_temp_dir(kind) folders whose run is gone (their flock free). Returns [(path, bytes)]."""
    root = tempfile.gettempdir()
    removed = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not name.startswith(f"albert_tf_{kind}_") or not os.path.isfile(os.path.join(path, _HELD)):
            continue
        try:
            with open(os.path.join(path, _HELD), encoding="utf-8") as held:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # taken: its run is gone
                removed.append((path + "/", files.size(path)))
                shutil.rmtree(path, ignore_errors=True)
        except OSError:  # held by a live run, or not ours to open
            continue
    return removed


__all__ = ["CHECKPOINT_TEMPORARIES", "new_directory", "note", "note_text", "private_temp_dir", "remove",
           "remove_abandoned", "remove_partial_save", "save_checkpoint", "some"]

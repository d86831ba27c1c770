"""One run per output directory: a lock file, `.albert_tf.lock`, in the directory a run writes.

`pretrain --model-dir` and `finetune --output` hold it for the whole run (`output_lock`, taken by the run in
albert_tf/training/ once its settings are checked, released when it ends, errors included); vocab's, create-data's
and Beam's output prefixes (`prefix_lock`) and an export's BASE hold one while they are written. A second run on
the same output is refused with one line naming the holder (exit 77, albert_tf.runtime.exit_codes). The file is
JSON: {"host", "pid", "started", "heartbeat", "token"} (times in Unix seconds), plus "run_id" when the environment
has ALBERT_TF_RUN_ID.

Staleness: a killed run cannot remove its lock, so a lock is taken over (with a line saying so) when
  - its holder ran on this host and its pid is no longer alive, or
  - its heartbeat is older than STALE_AFTER_S (a holder refreshes it every HEARTBEAT_S from a daemon thread), which
    covers a holder on another host (a preempted TPU VM, a killed container), or
  - it records the same run id as this process (ALBERT_TF_RUN_ID): a previous attempt of the same run, which
    whatever relaunches it (the keeper, albert_tf/cloud/) knows to be gone, e.g. on a recreated TPU worker with a
    new host name.

Creation is atomic on a local filesystem (O_CREAT | O_EXCL). On gs:// (tf.io.gfile has no exclusive create) the
lock is written to a temp object, renamed onto the lock name with overwrite=False, then read back: the run holds
it only if the object carries its own random token. Two runs starting within the same second on one gs:// directory
can still both pass the existence check inside that rename; the read-back makes the loser of the last write refuse,
but a small window remains where both proceed. That race needs two launches of one command at the same moment;
the lock is meant to catch a second run started by mistake while the first one works.

`create-data --output DIR/NAME` holds DIR/.NAME.albert_tf.lock (`prefix_lock`): one run per output prefix.

Multi-worker pretraining: only the chief (TF_CONFIG task "chief", or worker 0 without one) takes the lock; the
other workers write only under .worker_N and run alongside it.
"""
import contextlib
import json
import os
import socket
import threading
import time
import uuid

from albert_tf import files, messages
from albert_tf.files import check_output_dir, temp_path_for
from albert_tf.runtime import cluster
from albert_tf.runtime.exit_codes import LockHeld

LOCK_FILE = ".albert_tf.lock"
HEARTBEAT_S = 60       # how often a holder refreshes its heartbeat
STALE_AFTER_S = 600    # a lock whose heartbeat is older than this is taken over (10 heartbeats missed)
RUN_ID_ENV = "ALBERT_TF_RUN_ID"  # the identity of a run across its attempts, set by whatever relaunches it


def _gfile():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def describe(holder, now=None):
    """One phrase naming a lock's holder: 'host H pid P since 2024-05-01 12:00:00 (heartbeat 12 s ago)'."""
    now = time.time() if now is None else now
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("started", 0)))
    beat = max(0, int(now - holder.get("heartbeat", 0)))
    return f"host {holder.get('host')} pid {holder.get('pid')} since {started} (heartbeat {beat} s ago)"


def stale_reason(holder, now=None, host=None):
    """Why a lock's holder is gone ('its pid is not running on this host', 'no heartbeat for N s'), or None when
    it may still be running."""
    now = time.time() if now is None else now
    host = socket.gethostname() if host is None else host
    if holder.get("host") == host and isinstance(holder.get("pid"), int) and not _pid_alive(holder["pid"]):
        return "its pid is not running on this host"
    age = now - float(holder.get("heartbeat", 0))
    if age > STALE_AFTER_S:
        return f"no heartbeat for {int(age)} s (stale after {STALE_AFTER_S} s)"
    return None


# ---------------------------------------------------------------------------------------------- file access
def _read(path):
    """The lock's JSON dict, {} for an unreadable or half-written one, None when there is no lock."""
    try:
        if files.is_url(path):
            gfile = _gfile()
            if not gfile.exists(path):
                return None
            with gfile.GFile(path, "r") as f:
                text = f.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        holder = json.loads(text)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _create_exclusive(path, text):
    """Writes `text` to `path` if no file is there; True when this call created it."""
    if files.is_url(path):
        gfile, tmp = _gfile(), temp_path_for(path)
        with gfile.GFile(tmp, "w") as f:
            f.write(text)
        try:
            if gfile.exists(path):
                return False
            gfile.rename(tmp, path, overwrite=False)
            return True
        except Exception:  # pylint: disable=broad-except  # the target appeared in between
            return False
        finally:
            if gfile.exists(tmp):
                gfile.remove(tmp)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except BaseException:  # a full disk: no empty lock file is left behind
        _remove(path)
        raise
    return True


def _remove(path):
    try:
        if files.is_url(path):
            _gfile().remove(path)
        else:
            os.remove(path)
    except Exception:  # pylint: disable=broad-except  # already gone
        pass


def _overwrite(path, text):
    """Replaces the lock's content in one step (a reader never sees half of it)."""
    if files.is_url(path):
        with _gfile().GFile(path, "w") as f:  # a GCS object is replaced whole on close
            f.write(text)
        return
    tmp = temp_path_for(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:  # a full disk: the heartbeat is missed, no temporary file is left
        _remove(tmp)
        raise


def _make_directory(directory, flag):
    """Creates `directory` when missing; True if this call created it. A file in its place is refused."""
    if files.is_url(directory):
        gfile = _gfile()
        if gfile.exists(directory) and not gfile.isdir(directory):
            raise ValueError(f"{flag} {directory}: is a file, expected a directory")
        created = not gfile.exists(directory)
        gfile.makedirs(directory)
        return created

    check_output_dir(directory, flag)  # a file in its place, or in the way of its parents
    created = not os.path.exists(directory)
    os.makedirs(directory, exist_ok=True)
    return created


# ---------------------------------------------------------------------------------------------- the lock
class DirectoryLock:
    """The lock of one output directory, held from `acquire()` to `release()` (or as a context manager).

    Args:
      directory: the output directory (local or gs://); created when missing (removed again on release if the
        run left it empty).
      flag: the option that named it, for messages (e.g. "--model-dir").
      run_id: this run's identity across its attempts (default: $ALBERT_TF_RUN_ID; None: none).
      lock_file: the lock's name in `directory` (`prefix_lock`: one per output prefix).
      target: what messages name as in use (default: the directory).
    Raises (acquire):
      albert_tf.runtime.exit_codes.LockHeld naming the holder when another live run holds it.
    """

    def __init__(self, directory, flag, run_id=None, lock_file=LOCK_FILE, target=None):
        self.directory = os.fspath(directory).rstrip("/") or "/"
        self.flag = flag
        self.target = target or self.directory  # what messages name as in use (a directory, or an output prefix)
        self.path = os.path.join(self.directory, lock_file)
        self.token = uuid.uuid4().hex
        self.run_id = run_id if run_id is not None else (os.environ.get(RUN_ID_ENV) or None)
        self.record = None
        self._created_directory = False
        self._stop = threading.Event()
        self._thread = None

    def _content(self, now):
        if self.record is None:
            self.record = {"host": socket.gethostname(), "pid": os.getpid(), "started": now, "token": self.token}
            if self.run_id:
                self.record["run_id"] = self.run_id
        self.record = dict(self.record, heartbeat=now)
        return json.dumps(self.record) + "\n"

    def _takeover_line(self, holder):
        """The line printed when this run takes `holder`'s lock over, or None when `holder` may be a live other
        run (LockHeld)."""
        if not holder:
            return f"taking over the stale lock {self.path} of an unknown run: its lock file is unreadable"
        if self.run_id and holder.get("run_id") == self.run_id:
            age = max(0, int(time.time() - float(holder.get("heartbeat", 0))))
            return (f"taking over the lock of run {self.run_id} from {holder.get('host')} (pid {holder.get('pid')}), "
                    f"last heartbeat {age} s ago")
        reason = stale_reason(holder)
        return None if reason is None else f"taking over the stale lock {self.path} of {describe(holder)}: {reason}"

    def acquire(self):
        self._created_directory = _make_directory(self.directory, self.flag)
        try:
            self._take()
        except BaseException:  # refused, or the lock file could not be written: the directory made for it goes
            self._remove_created_directory()
            raise
        self._thread = threading.Thread(target=self._beat, name="albert_tf-lock-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _take(self):
        """Creates the lock file, taking a stale one over (acquire's work once the directory is there)."""
        for _ in range(3):  # a takeover that loses a race with another taker tries again
            if _create_exclusive(self.path, self._content(time.time())):
                if (_read(self.path) or {}).get("token") == self.token:
                    break
                raise LockHeld(f"{self.flag} {self.target}: another run took the lock at the same moment")
            holder = _read(self.path)
            if holder is None:
                continue
            line = self._takeover_line(holder)
            if line is None:
                raise LockHeld(f"{self.flag} {self.target} is in use by another run: {describe(holder)}; "
                               f"wait for it to end (its lock: {self.path})")
            messages.say("note", line)
            _remove(self.path)
        else:
            raise LockHeld(f"{self.flag} {self.target}: could not take the lock {self.path}")

    def _beat(self):
        while not self._stop.wait(HEARTBEAT_S):
            try:
                if (_read(self.path) or {}).get("token") != self.token:
                    return  # taken over (we were thought dead): leave the new holder's file alone
                _overwrite(self.path, self._content(time.time()))
            except Exception:  # pylint: disable=broad-except  # a missed heartbeat is retried at the next one
                pass

    def release(self):
        """Removes the lock if it is still ours (and the directory if this run created it and left it empty)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if (_read(self.path) or {}).get("token") == self.token:
            _remove(self.path)
        self._remove_created_directory()

    def _remove_created_directory(self):
        """Removes the directory if this lock created it and it is empty (local paths)."""
        if self._created_directory and not files.is_url(self.directory):
            try:
                os.rmdir(self.directory)
            except OSError:  # not empty: the run wrote something
                pass

    def __enter__(self):
        self.acquire()
        _HELD.append(self)
        return self

    def __exit__(self, *exc):
        if self in _HELD:
            _HELD.remove(self)
        self.release()
        return False


# The locks this process holds (a `with` of DirectoryLock), so that an abort from any thread (a second Ctrl-C,
# albert_tf.runtime.signals.StopSignal, which ends the process without unwinding) can still release them: the one piece of
# module-level mutable state here, on purpose.
_HELD = []


def release_held():
    """Releases every lock this process holds (`_HELD`); a failure leaves that lock to be taken over by the next run
    (its pid is gone)."""
    for held in list(_HELD):
        try:
            held.release()
        except Exception:  # pylint: disable=broad-except
            pass


def prefix_lock(output_prefix, flag):
    """The lock of an output file-name prefix DIR/NAME (create-data's shards DIR/NAME-*): DIR/.NAME.albert_tf.lock,
    so that runs writing other prefixes in the same directory (train and eval data) go on side by side."""
    directory, name = os.path.split(os.fspath(output_prefix))
    return DirectoryLock(directory or ".", flag, lock_file=f".{name}{LOCK_FILE}", target=output_prefix)


def output_lock(directory, flag):
    """The context holding `directory`'s lock for a run: a DirectoryLock on the chief (one process, or the chief
    worker of a multi-worker run), nothing on the other workers. A job takes it once its flags are checked (and,
    on a TPU, the slice is connected) and before it writes or restores anything."""
    if not cluster.is_chief_from_env():
        return contextlib.nullcontext()
    return DirectoryLock(directory, flag)

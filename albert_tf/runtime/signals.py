"""Signals as requests to stop, and the duration format of progress lines. No TensorFlow here.

    StopSignal(prog)     SIGTERM / SIGINT → the run finishes the call in flight, saves and exits
    duration_text(s)     '42s', '12m05s', '3h07m', '2d05h'
"""
import os
import select
import signal
import sys
import threading

from albert_tf.runtime import exit_codes, lock

# The wall time of one compiled training call once the step time is known (training.loop.LoopLength): between calls
# the host acts on a stop signal, so a signal is acted on within about this many seconds.
LOOP_SECONDS = 10.0


def duration_text(seconds):
    """A duration as a log shows it: '42s', '12m05s', '3h07m', '2d05h'."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"



class StopSignal:
    """SIGTERM (a preemption notice) and SIGINT (Ctrl-C) as a request to stop: `requested` becomes the signal
    number, and the loop finishes the compiled call in flight, saves and exits with `exit_code`: 75 after SIGTERM
    (stopped before its end, resumable: exit_codes.STOPPED), 130 after SIGINT (the shell's code for an interrupt);
    neither is 0, so that `albert-tf pretrain ... && next` stops there.

    Two cases exit at once with one line, from a watcher thread woken through `signal.set_wakeup_fd` (Python runs
    signal handlers on the main thread only between bytecodes, which a long TensorFlow call holds off):
    - while `at_once` holds a reason (a string: e.g. nothing trained yet, so nothing to save), the first signal;
    - a SIGINT after an earlier signal (a second Ctrl-C): aborts without saving, one line on stderr, exit 130.
    With `exits=False` (a library call, e.g. from a notebook) neither case ends the process: a signal only requests
    the stop. A context manager; the previous handlers and wakeup fd come back on exit. Off the main thread (where
    Python cannot install handlers: a worker thread, a notebook's background run) it installs nothing and no stop is
    ever requested."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, prog="albert-tf", at_once=None, on_request=None, exits=True):
        self.prog, self.at_once, self.on_request, self.exits = prog, at_once, on_request, exits
        self._requested = None
        self._previous, self._previous_fd, self._pipe, self._watcher = {}, None, None, None
        self._lock = threading.Lock()

    @property
    def requested(self):
        """The first stop signal's number, or None."""
        self._drain()
        return self._requested

    @property
    def exit_code(self):
        return exit_codes.INTERRUPTED if self._requested == signal.SIGINT else exit_codes.STOPPED

    @property
    def name(self):
        return signal.Signals(self._requested).name if self._requested else None

    def _handle(self, signum, frame):  # pylint: disable=unused-argument
        """Python's handler: its C side writes the number to the wakeup fd, which `_drain` reads."""

    def _drain(self):
        """Acts on the signal numbers waiting in the wakeup pipe (either thread may call it; a byte is read once)."""
        while self._pipe:
            try:
                data = os.read(self._pipe[0], 64)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            for signum in data:
                self._on_signal(signum)

    def _on_signal(self, signum):
        with self._lock:
            earlier = self._requested
            if earlier is None:
                self._requested = signum
        name = signal.Signals(signum).name
        if earlier is not None and signum == signal.SIGINT and self.exits:
            self._exit(f"{self.prog}: second interrupt ({name}): aborted without saving; the last checkpoint is "
                       "intact", sys.stderr, exit_codes.INTERRUPTED)
        if earlier is None and self.at_once and self.exits:
            self._exit(f"{name}: {self.at_once}; exiting", sys.stdout, self.exit_code)
        if earlier is None and self.on_request is not None:
            self.on_request(signum)

    @staticmethod
    def _exit(text, stream, code):
        """One line, the output locks released (albert_tf.runtime.lock), exit `code` at once (no unwinding)."""
        print(text, file=stream, flush=True)
        sys.stdout.flush()
        lock.release_held()
        os._exit(code)  # pylint: disable=protected-access

    def _watch(self, read_fd):
        while self._pipe:
            try:
                select.select([read_fd], [], [])
                data = os.read(read_fd, 64)
            except BlockingIOError:
                continue
            except OSError:  # closed on exit
                return
            if not data:
                return
            for signum in data:
                self._on_signal(signum)

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self  # Python installs signal handlers on the main thread only: nothing to install here
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        self._pipe = (read_fd, write_fd)
        self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        self._previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._watcher = threading.Thread(target=self._watch, args=(read_fd,), name="stop-signal", daemon=True)
        self._watcher.start()
        return self

    def reinstall(self):
        """Puts this handler back for SIGTERM and SIGINT (main thread). Call it after creating a
        MultiWorkerMirroredStrategy: TensorFlow's coordination service installs its own SIGTERM handler (its
        preemption notifier) when it starts, which would swallow the signal."""
        if self._pipe is None:
            return
        for s in self.SIGNALS:
            signal.signal(s, self._handle)

    def __exit__(self, *exc):
        if self._pipe is None:
            return False  # nothing was installed (off the main thread)
        signal.set_wakeup_fd(self._previous_fd)
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._drain()
        read_fd, write_fd = self._pipe
        os.close(write_fd)  # the watcher's read returns b"" and it ends
        self._watcher.join(timeout=5)
        self._pipe = None
        os.close(read_fd)
        return False

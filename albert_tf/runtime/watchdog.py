"""The step watchdog: ends a run whose training makes no progress, from a thread of its own. No TensorFlow here.

A client whose TPU host went away may wait for ever inside a compiled call, with no error and no signal: only the
process can notice that no step completes. `pretrain` beats the watchdog after each compiled call, save and
evaluation; when none comes for `limit` seconds (`first_limit` until the first step, counted from the start: it
covers start-up, restore and XLA compile, which can take 10+ minutes for a large model on a pod), `on_expire(line)`
runs: the command line prints the line and exits 76 (exit_codes.RUNTIME_LOST) at once, and whatever relaunches
runs (the pod keeper) resumes from the last checkpoint.

    with StepWatchdog(first_limit=3600, limit=1800, on_expire=exit_lost) as watchdog:
        ... watchdog.beat() after each step ...
"""
import os
import sys
import threading
import time

from albert_tf.runtime import exit_codes


class StepWatchdog:
    """`expired()` is the check (tests call it with a fake `clock`); entered, a daemon thread makes it every `poll`
    seconds and calls `on_expire(line)` once. A limit of 0 turns that phase's check off."""

    def __init__(self, first_limit, limit, on_expire, clock=time.monotonic, poll=None, started=None):
        self.first_limit, self.limit, self.on_expire, self.clock = first_limit, limit, on_expire, clock
        # default: every 5 s, or a quarter of a shorter limit
        self.poll = poll or min([5.0] + [v / 4 for v in (first_limit, limit) if v])
        self.last = clock() if started is None else started
        self.stepped = False
        self._stop = threading.Event()
        self._thread = None

    def beat(self):
        """A step (or a save, an evaluation) completed."""
        self.last, self.stepped = self.clock(), True

    def expired(self):
        """The line to end the run with, or None while it makes progress."""
        limit = self.limit if self.stepped else self.first_limit
        age = self.clock() - self.last
        if not limit or age <= limit:
            return None
        if self.stepped:
            return (f"no training step completed for {age:.0f}s (--step-timeout {limit:g}): the TPU, a host or a peer "
                    "is gone without an error; a relaunch resumes from the last checkpoint")
        return (f"the first training step did not complete within {age:.0f}s of the start (--first-step-timeout "
                f"{limit:g}: start-up, restore and compile); a relaunch resumes from the last checkpoint")

    def _watch(self):
        while not self._stop.wait(self.poll):
            line = self.expired()
            if line:
                self.on_expire(line)
                return

    def __enter__(self):
        if self.first_limit or self.limit:
            self._thread = threading.Thread(target=self._watch, name="step-watchdog", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        return False


def exit_lost(prog):
    """An on_expire for a command: `PROG: error: LINE` on stderr, then the process ends with exit 76 at once (a hung
    TensorFlow call cannot be unwound; nothing is saved: the last checkpoint is what a relaunch resumes from)."""
    def expire(line):
        print(f"{prog}: error: {line}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(exit_codes.RUNTIME_LOST)  # pylint: disable=protected-access
    return expire


__all__ = ["StepWatchdog", "exit_lost"]

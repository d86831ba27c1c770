"""The exit codes of `albert-tf` commands: one meaning each, so that whatever restarts a run (tpu/'s keeper, a
job scheduler, a shell loop) knows what to do next without reading the log. No TensorFlow here.

    code  meaning                                                          what to do next
    0     done: the run reached its end (or had nothing left to train)    nothing
    2     bad flags or data (one line names the flag or file)              stop: fix the command or the data
    3     non-finite loss (nothing saved after it)                         stop: lower the learning rate, check data
    75    stopped on a signal (SIGTERM) after saving                       relaunch the same command: it resumes
    76    the TPU / runtime or a peer worker went away mid-run, or the     relaunch (after the slice is back): it
          Cloud TPU API did not answer at start-up                          resumes from the last checkpoint
    77    the output directory's lock is held by another live run          wait, then retry
    130   interrupted (Ctrl-C, SIGINT)                                     a person asked to stop: nothing
    143   ended by SIGTERM with nothing to keep (create-data: no shard     run the same command again: it starts
          written; 128 + 15, the shell's code for it)                      over

A command that ends with one of the exceptions below prints its one line (`albert-tf CMD: error: ...`) and exits
with its code (albert_tf.cli).
"""

DONE = 0
BAD_INPUT = 2
NON_FINITE = 3
STOPPED = 75
RUNTIME_LOST = 76
LOCK_HELD = 77
INTERRUPTED = 130
TERMINATED = 143


class ExitError(Exception):
    """An error that ends a command with its own exit code (`exit_code`) and one line (its message)."""

    exit_code = BAD_INPUT


class LockHeld(ExitError):
    """The output directory is in use by another live run (albert_tf.lock)."""

    exit_code = LOCK_HELD


class RuntimeLost(ExitError):
    """The TPU, its runtime or a peer worker went away (or the Cloud TPU API did not answer): a relaunch resumes
    from the last checkpoint."""

    exit_code = RUNTIME_LOST

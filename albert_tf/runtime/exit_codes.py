"""The exit codes of `albert-tf` commands: one meaning each, so that whatever restarts a run (tpu/'s keeper, a
job scheduler, a shell loop) knows what to do next without reading the log. No TensorFlow here.

    code  meaning                                                          what to do next
    0     done: the run reached its end (or had nothing left to train)     nothing
    1     an unexpected error: one line, its type and message (--verbose:  report it with the --verbose traceback
          its traceback)
    2     bad flags or data (one line names the flag or file)              stop: fix the command or the data
    3     non-finite loss (nothing saved after it)                         stop: lower the learning rate, check data
    4     a supervisor (keep-alive) stopped on purpose, for the reason     read those lines, fix what they name,
          its last lines name: it gave up after --max-restarts, a          run the same command again (it resumes)
          permanent cloud error, a slice that did not settle, a run
          that exited with a code that is not retried; what it made is
          deleted (or its last line names what still bills)
    69    a storage service (a gs:// bucket) did not answer: no network,   run again once it answers (pretrain
          DNS, an outage (after TensorFlow's own retries)                  resumes from its last checkpoint)
    74    an output could not be written: the disk or quota is full, a     stop: free space or choose another
          file too large, the filesystem failing; nothing half-written or  output, then run again
          temporary is left
    75    stopped on a signal (SIGTERM) after saving                       relaunch the same command: it resumes
    76    the TPU / runtime or a peer worker went away mid-run, or the     relaunch (after the slice is back): it
          Cloud TPU API did not answer at start-up; create-data: a worker  resumes from the last checkpoint;
          process was killed (the out-of-memory killer, kill -9)           create-data starts over (fewer
                                                                           --workers if memory is short)
    77    the output directory's lock is held by another live run          wait, then retry
    78    access refused: a local path not writable (or readable) by this  stop: make the path writable (or
          user (EACCES, EPERM, a read-only filesystem: EROFS), or a        choose another), fix the credentials
          bucket's credentials missing or lacking permission (HTTP 401 /   (gcloud auth application-default
          403); one line names the path                                    login) or the bucket's IAM; a retry
                                                                           will not help
    130   interrupted (Ctrl-C, SIGINT)                                     a person asked to stop: nothing
    143   ended by SIGTERM with nothing to keep (create-data: no shard     run the same command again: it starts
          written; 128 + 15, the shell's code for it); keep-alive: ended   over (keep-alive: it resumes)
          by SIGTERM or SIGHUP after deleting what it made

A command that ends with one of the exceptions below prints its one line (`albert-tf CMD: error: ...`) and exits
with its code (albert_tf.cli); albert_tf.runtime.faults turns the operating system's and TensorFlow's errors of a
full disk, a path this user may not write (or a read-only filesystem) and an unanswering / refusing bucket into them.

sysexits.h's numbers where one fits: 69 EX_UNAVAILABLE, 74 EX_IOERR, 75 EX_TEMPFAIL, 76 EX_PROTOCOL, 77 EX_NOPERM
(here: the lock is another run's), 78 EX_CONFIG (here: the permissions or credentials).
"""

DONE = 0
UNEXPECTED = 1
BAD_INPUT = 2
NON_FINITE = 3
GAVE_UP = 4
UNAVAILABLE = 69
OUTPUT_FAILED = 74
STOPPED = 75
RUNTIME_LOST = 76
LOCK_HELD = 77
ACCESS_REFUSED = 78
INTERRUPTED = 130
TERMINATED = 143


class ExitError(Exception):
    """An error that ends a command with its own exit code (`exit_code`) and one line (its message)."""

    exit_code = BAD_INPUT


class LockHeld(ExitError):
    """The output directory is in use by another live run (albert_tf.runtime.lock)."""

    exit_code = LOCK_HELD


class RuntimeLost(ExitError):
    """The TPU, its runtime or a peer worker went away (or the Cloud TPU API did not answer): a relaunch resumes
    from the last checkpoint."""

    exit_code = RUNTIME_LOST


class Unavailable(ExitError):
    """A storage service (a gs:// bucket) did not answer: no network, DNS, an outage. Run again once it answers."""

    exit_code = UNAVAILABLE


class OutputFailed(ExitError):
    """An output could not be written (a full disk or quota, a failing filesystem); what was half written has been
    removed."""

    exit_code = OUTPUT_FAILED


class AccessRefused(ExitError):
    """Access refused: a local path this user may not write (or read), a read-only filesystem, or a storage
    service's credentials missing or lacking permission on the bucket. A retry will not help."""

    exit_code = ACCESS_REFUSED

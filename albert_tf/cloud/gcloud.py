"""`gcloud`, run with a timeout: each call gives its output or a failure of one class, so that the keeper acts on
what kind of failure it was, not on its wording. No TensorFlow here.

    result = run(["compute", "tpus", "tpu-vm", "describe", "pod", "--zone=europe-west4-a"], timeout=120)
    result.ok, result.stdout, result.failure (None, TRANSIENT, CAPACITY, PERMANENT, NOT_FOUND, ALREADY_EXISTS),
    result.line (the error's last line, for a message)

The classes (what the keeper does with each: albert_tf/cloud/decisions.py):
    TRANSIENT       a timeout, a 5xx, 429 or an API rate limit ("Quota exceeded for quota metric ... per minute"),
                    a dropped connection, an expired token, anything not recognised: the same call may work later
    CAPACITY        no capacity in the zone (RESOURCE_EXHAUSTED, a stockout): try again later
    PERMANENT       quota exceeded, permission denied, a bad argument (image or accelerator type unknown in the
                    zone), the API disabled, a gcloud usage error, gcloud missing: no retry will change it
    NOT_FOUND       the API said the resource does not exist
    ALREADY_EXISTS  a create found the resource there already
"""
import dataclasses
import os
import re
import shlex
import signal
import subprocess

TRANSIENT = "transient"
CAPACITY = "capacity"
PERMANENT = "permanent"
NOT_FOUND = "not found"
ALREADY_EXISTS = "already exists"
FAILURES = (TRANSIENT, CAPACITY, PERMANENT, NOT_FOUND)

# Checked in this order on gcloud's stderr: a rate limit (a RESOURCE_EXHAUSTED "quota" of requests per minute) first,
# then a quota error (a RESOURCE_EXHAUSTED too) before capacity.
_PATTERNS = (
    (TRANSIENT, r"Quota exceeded for quota metric .*per (minute|second)|RATE_LIMIT_EXCEEDED|rateLimitExceeded|"
                r"Too Many Requests|\b429\b"),
    (PERMANENT, r"quota|PERMISSION_DENIED|\b403\b|Permission denied on resource|SERVICE_DISABLED|"
                r"has not been used in project|API .*is disabled|INVALID_ARGUMENT|\b400\b|FAILED_PRECONDITION|"
                r"unrecognized arguments|argument .*: (invalid|expected)|Invalid (value|choice)"),
    (NOT_FOUND, r"NOT_FOUND|\b404\b|was not found"),
    (ALREADY_EXISTS, r"ALREADY_EXISTS|already exists"),
    (CAPACITY, r"RESOURCE_EXHAUSTED|no more capacity|insufficient capacity|ZONE_RESOURCE_POOL_EXHAUSTED|stockout"),
)


@dataclasses.dataclass(frozen=True)
class Result:
    """One gcloud call: its words (without `gcloud`), its output, and its failure class (None: it succeeded)."""
    args: tuple
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = 0
    failure: str | None = None

    @property
    def ok(self):
        return self.failure is None

    @property
    def line(self):
        """The error's last non-empty line (what a message quotes)."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"gcloud exited {self.returncode}"

    @property
    def command(self):
        return shlex.join(["gcloud", *self.args])


def classify(returncode, stderr):
    """The failure class of a finished call (None when it succeeded)."""
    if returncode == 0:
        return None
    for failure, pattern in _PATTERNS:
        if re.search(pattern, stderr, flags=re.IGNORECASE if failure == PERMANENT else 0):
            return failure
    return TRANSIENT


def run(args, timeout):
    """Runs `gcloud ARGS` for at most `timeout` seconds (then its whole process group, an ssh included, is killed:
    a timeout is TRANSIENT). Ctrl-C kills it too and goes on up."""
    args = tuple(args)
    try:
        process = subprocess.Popen(["gcloud", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,  # pylint: disable=consider-using-with
                                   stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    except FileNotFoundError:
        return Result(args, stderr="gcloud is not on PATH: install the Google Cloud CLI and log in "
                                   "(gcloud auth login)", returncode=None, failure=PERMANENT)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
        return timed_out(args, timeout)
    except BaseException:
        _kill(process)
        raise
    return Result(args, stdout, stderr, process.returncode, classify(process.returncode, stderr))


def timed_out(args, timeout):
    """The Result of a call that did not end within `timeout` seconds (TRANSIENT: the next poll goes on)."""
    return Result(tuple(args), stderr=f"gcloud {' '.join(args[:4])} ... timed out after {timeout:g} s",
                  returncode=None, failure=TRANSIENT)


def _kill(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.communicate()


__all__ = ["Result", "run", "classify", "timed_out", "TRANSIENT", "CAPACITY", "PERMANENT", "NOT_FOUND", "ALREADY_EXISTS",
           "FAILURES"]

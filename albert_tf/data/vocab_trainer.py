"""SentencePiece's trainer in a child process, so that Ctrl-C stops `albert-tf vocab` at once, and vocab's progress
lines (the sampling's counts, then the trainer's stage).

SentencePiece's C++ trainer does not return to Python until it is done, so a Ctrl-C in the process that runs it
waits for the end of training (or surfaces as `INTERNAL: KeyboardInterrupt`). Here the trainer runs in a child
process (this file, run by the same Python; the sentences go through its stdin): the parent waits in short polls,
and on Ctrl-C (or any exception) kills the child, whose only files are in a temporary directory the parent removes,
and raises again. The child runs in its own session (a terminal's Ctrl-C reaches only the parent), ignores SIGINT
and dies with its parent (PR_SET_PDEATHSIG on Linux). The trainer's arguments, its input and its thread count are the same as
in one process, so the model's bytes are too. A parent killed with kill -9 removes nothing: `vocab` gives the child
a folder the next `vocab` run removes (albert_tf.runtime.leftovers.private_temp_dir).

    train_in_child(sentences, progress=None, work_dir=None, **trainer_arguments) -> the model's bytes
    Progress(stream)     `progress: ... | elapsed 12s` lines on stderr: refreshed in place on a terminal, else one
                         every 10 s
"""
import contextlib
import ctypes
import io
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import time

import sentencepiece as spm

BATCH = 10_000  # sentences per message to the child
POLL_SECONDS = 0.1  # how often the parent looks at the child (and can act on Ctrl-C)
# SentencePiece's log lines, as absl writes them ("I0000 00:00:17.4 123 trainer_interface.cc:446] Loaded all 17648
# sentences") or its own older logger ("trainer_interface.cc(446) LOG(INFO) Loaded all 17648 sentences")
_LOG_LINE = re.compile(r"\.cc(?::\d+\]|\(\d+\) LOG\(\w+\)) (.*)$")
_ERROR = "TRAINER_ERROR"  # the child's last stderr line when the trainer refused: the message, as JSON


class Progress:
    """`progress: ...` lines on `stream` (default stderr). On a terminal one line, refreshed in place at most every
    `tty_seconds`; else (a log) a new line at most every `log_seconds`, and at least that often while the work goes
    on (`tick`, called by a waiting loop, repeats the latest text), each with the time since the start. `clock`: the
    time source (tests pass a fake one)."""

    def __init__(self, stream=None, tty_seconds=0.5, log_seconds=10.0, clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = tty_seconds if self.tty else log_seconds
        self.clock = clock
        self.start = clock()
        self.last = None
        self.text = ""
        self.open = False  # a refreshed line is on the terminal, not yet ended

    def __call__(self, text):
        """The latest news: shown now unless a line was shown less than the interval ago."""
        self.text = text
        self.tick()

    def tick(self):
        now = self.clock()
        if not self.text or (self.last is not None and now - self.last < self.every):
            return
        self.last = now
        line = f"progress: {self.text} | elapsed {int(now - self.start)}s"
        if self.tty:
            self.stream.write(f"\r\x1b[K{line}")
            self.open = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def end(self):
        """Ends a refreshed line (before other output)."""
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False


def sampling_text(lines, text_bytes, sampled):
    """The sampling's progress: `read 12,345 lines (3.4 MB of text), 10,000 sentences in the sample`."""
    return f"read {lines:,} lines ({text_bytes / 1e6:.1f} MB of text), {sampled:,} sentences in the sample"


def _die_with_parent():
    """Linux: this process gets SIGKILL when its parent dies (a parent killed by SIGKILL cannot stop it)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _drain(items):
    """Yields the list's items, dropping each reference once yielded (SentencePiece keeps its own copy)."""
    for i, item in enumerate(items):
        items[i] = None
        yield item


def _child(model_path):
    """The child (this file run as a program): the trainer's arguments, then lists of sentences, then None, as
    pickles on stdin; writes the model to `model_path`, or `TRAINER_ERROR message` on stderr and exits 3.
    SentencePiece's log (its stages) goes to stderr, a file the parent reads."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    arguments = pickle.load(sys.stdin.buffer)
    sentences = []
    while (batch := pickle.load(sys.stdin.buffer)) is not None:
        sentences.extend(batch)
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=_drain(sentences), model_writer=model, minloglevel=0,
                                       **arguments)
    except RuntimeError as e:
        sys.stderr.write(f"\n{_ERROR} {json.dumps(str(e))}\n")
        sys.stderr.flush()
        return 3
    with open(model_path, "wb") as f:
        f.write(model.getvalue())
    return 0


def _stage(log_path, offset):
    """(the last stage line SentencePiece logged after `offset`, the new offset)."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return None, offset
    end = data.rfind(b"\n") + 1
    stage = None
    for line in data[:end].decode("utf-8", errors="replace").splitlines():
        found = _LOG_LINE.search(line)
        if found:
            stage = found.group(1).strip()
    return stage, offset + end


def _failure(log_path, code):
    """The RuntimeError for a child that ended with `code`: the trainer's message, or the end of its log."""
    with open(log_path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    for line in reversed(text.splitlines()):
        if line.startswith(_ERROR + " "):
            return RuntimeError(json.loads(line[len(_ERROR) + 1:]))
    last = [line for line in text.splitlines() if line.strip()][-1:] or ["no output"]
    return RuntimeError(f"the SentencePiece trainer's process ended with exit code {code} ({last[0].strip()})")


def train_in_child(sentences, progress=None, work_dir=None, **arguments):
    """Trains a SentencePiece model on `sentences` (a list, emptied as it is sent) with `arguments`
    (SentencePieceTrainer.train's, but sentence_iterator / model_writer / minloglevel) in a child process (this
    file run by the same Python: no main module is imported again, as multiprocessing's spawn would); returns the
    model's bytes. `progress`: called with a text for each stage of the trainer ("trainer: EM sub_iter=1 ...").
    Raises RuntimeError with the trainer's message when it fails; on KeyboardInterrupt (or any exception) the child
    is ended first and its files removed. `work_dir`: the folder for the child's files (its log and the model),
    which the caller removes (vocab's: albert_tf.runtime.leftovers.private_temp_dir); None: a temporary one."""
    with (contextlib.nullcontext(work_dir) if work_dir else
          tempfile.TemporaryDirectory(prefix="albert_tf_vocab_")) as work:
        log_path, model_path = os.path.join(work, "trainer.log"), os.path.join(work, "spm.model")
        with open(log_path, "wb") as log:
            # its own session: a terminal's Ctrl-C reaches only the parent, which ends the child
            child = subprocess.Popen([sys.executable, os.path.abspath(__file__), model_path],  # pylint: disable=consider-using-with
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log,
                                     start_new_session=True)
        try:
            _send(child, sentences, arguments)
            offset = 0
            while True:
                try:
                    code = child.wait(POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    stage, offset = _stage(log_path, offset)
                    if progress and stage:
                        progress(f"trainer: {stage}")
                    elif progress and hasattr(progress, "tick"):
                        progress.tick()
            if code != 0:
                raise _failure(log_path, code)
            with open(model_path, "rb") as f:
                return f.read()
        finally:
            if child.poll() is None:
                child.kill()  # it holds nothing: its files are in `work`, removed here
                child.wait()


def _send(child, sentences, arguments):
    """The arguments, then the sentences in batches of BATCH (each dropped here once sent), then None."""
    try:
        pickle.dump(arguments, child.stdin)
        for start in range(0, len(sentences), BATCH):
            pickle.dump(sentences[start:start + BATCH], child.stdin)
            sentences[start:start + BATCH] = [None] * len(sentences[start:start + BATCH])
        pickle.dump(None, child.stdin)
        child.stdin.close()
    except BrokenPipeError:  # the child ended early: its exit code and log say why
        pass
    sentences.clear()


__all__ = ["Progress", "sampling_text", "train_in_child"]


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))

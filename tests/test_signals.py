"""Ctrl-C and SIGTERM through the CLI, in subprocesses: `finetune` stops at a step boundary and resumes, a second
Ctrl-C aborts at once, `create-data` (with worker processes) leaves no temp file and no process, and any other
command's KeyboardInterrupt is one line. A terminal's Ctrl-C reaches the whole process group: the tests send it
so (`os.killpg`)."""
import os
import re
import signal
import threading
import time

import pytest

import finetune_helpers as fh
import helpers


def start(command, args):
    """`albert-tf COMMAND ARGS` in a new session (its own process group: signal_group reaches its workers)."""
    return helpers.spawn(command, *args, new_session=True)


def group_gone(pgid, timeout=10):
    """True once no process of the group is left (workers, resource tracker)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


# C++ log lines of TensorFlow and SentencePiece that can reach stderr in a test's environment (not ours).
_NATIVE_LOG = re.compile(r"^([EIWF]\d{4} |\S+\.cc\(\d+\) LOG)")


def our_lines(stderr):
    """stderr's lines less native log lines, create-data's progress bar and the jobs' progress lines."""
    return [line for line in stderr.splitlines()
            if not _NATIVE_LOG.match(line) and not line.startswith(("[", "progress: "))]


# ---------------------------------------------------------------------------------------------- finetune
def finetune_args(tmp_path, spm_model, epochs=30, num_train=320):
    init = str(tmp_path / "init")
    if not os.path.isdir(init):
        fh.save_random_init(init, spm_model)
    data = fh.write_sst2(str(tmp_path / "sst2"), num_train, 32)
    return ["--task", "sst2", "--data-dir", data, "--init", init, "--output", tmp_path / "out", "--epochs", epochs,
            "--batch-size", 8, "--max-seq-length", 24, "--seed", 3]


STOPPED = re.compile(r"SIGINT: (stopped after epoch (\d+)|stopped at step \d+ of epoch (\d+) \(not kept: a run resumes "
                     r"from whole epochs\)); the last checkpoint is (\S+) \(epoch (\d+)\); the same command resumes")


@pytest.mark.slow  # two fine-tuning processes (about a minute on this shared machine)
def test_ctrl_c_stops_finetune_at_a_step_and_the_same_command_resumes(tmp_path, tiny_spm_model):
    args = finetune_args(tmp_path, tiny_spm_model, epochs=6)
    out = tmp_path / "out"
    proc = start("finetune", args)
    proc.wait_until(lambda: os.path.exists(f"{out}/checkpoints/ckpt-1.index"))  # epoch 1 saved (after its line)
    time.sleep(0.5)  # most likely inside epoch 2 (40 steps, a few seconds); during its checkpoint is as good
    proc.signal_group(signal.SIGINT)
    rc, stdout, stderr = proc.finish()
    assert rc == 130, stdout + stderr
    assert "Traceback" not in stderr and our_lines(stderr) == [], stderr
    match = STOPPED.fullmatch(stdout.strip().splitlines()[-1])
    assert match, stdout
    epoch = int(match.group(5))
    assert match.group(4) == f"{out}/checkpoints/ckpt-{epoch}" and epoch >= 1
    if match.group(3):  # stopped inside an epoch: the one after the checkpoint's
        assert int(match.group(3)) == epoch + 1
    assert not (out / ".albert_tf.lock").exists()  # the output lock is released
    assert not (out / "eval_results.json").exists()
    if epoch == 6:
        return  # the SIGINT came after the last epoch's checkpoint: nothing left to resume
    again = helpers.run_cli("finetune", args)
    assert f"resumed from {out}/checkpoints/ckpt-{epoch} after epoch {epoch}" in again.stdout
    assert (out / "eval_results.json").exists() and sorted(os.listdir(out / "export")) == ["1"]


@pytest.mark.slow  # one fine-tuning process (about 30 s on this shared machine)
def test_a_second_ctrl_c_aborts_finetune_at_once(tmp_path, tiny_spm_model):
    out = tmp_path / "out"
    # one compiled call per epoch of 200 steps (seconds long, also on a fast machine): the first SIGINT lands inside
    # a call, and the second one (signals of one kind sent together merge into one) while the main thread is still
    # inside TensorFlow
    args = finetune_args(tmp_path, tiny_spm_model, num_train=1600) + ["--steps-per-execution", 200]
    proc = start("finetune", args)
    proc.wait_until(lambda: os.path.exists(f"{out}/checkpoints/ckpt-1.index"))  # epoch 1 saved (after its line)
    time.sleep(0.5)
    proc.signal_group(signal.SIGINT)
    time.sleep(0.3)
    proc.signal_group(signal.SIGINT)
    rc, stdout, stderr = proc.finish()
    assert rc == 130, stdout + stderr
    assert our_lines(stderr) == [
        "albert-tf finetune: second interrupt (SIGINT): aborted without saving; the last checkpoint is intact"], stderr
    assert not (out / ".albert_tf.lock").exists()
    assert os.path.exists(f"{out}/checkpoints/ckpt-1.index")


class FakeModel:
    stop_training = False


def test_stop_on_signal_turns_sigterm_into_a_stop_request_and_restores_the_handlers():
    from albert_tf.training.callbacks import StopOnSignal  # pylint: disable=import-outside-toplevel

    before = {s: signal.getsignal(s) for s in StopOnSignal.SIGNALS}
    stop = StopOnSignal()
    stop.set_model(FakeModel())
    stop.on_train_begin()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.time() + 10
        while not stop.model.stop_training and time.time() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM: still one stop request
        time.sleep(0.1)
    finally:
        stop.on_train_end()
    assert stop.model.stop_training and stop.requested == signal.SIGTERM
    assert (stop.name, stop.exit_code) == ("SIGTERM", 75)
    assert {s: signal.getsignal(s) for s in StopOnSignal.SIGNALS} == before
    assert all(t.name != "stop-signal" for t in threading.enumerate())  # the watcher has ended


def test_stop_signal_off_the_main_thread_installs_nothing():
    """A run started from a thread (a notebook's background job): Python allows handlers on the main thread only, so
    StopSignal installs none there and starts no watcher; the process's handlers stay as they are."""
    from albert_tf.runtime.signals import StopSignal  # pylint: disable=import-outside-toplevel

    before = {s: signal.getsignal(s) for s in StopSignal.SIGNALS}
    seen = []

    def body():
        with StopSignal("albert-tf test", at_once="nothing to save") as stop:
            stop.reinstall()
            seen.append(({s: signal.getsignal(s) for s in StopSignal.SIGNALS}, stop.requested,
                         [t.name for t in threading.enumerate()]))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(timeout=30)
    handlers, requested, threads = seen[0]
    assert handlers == before and requested is None and "stop-signal" not in threads
    assert {s: signal.getsignal(s) for s in StopSignal.SIGNALS} == before


def test_a_library_stop_signal_only_requests_the_stop():
    """exits=False (albert_tf.pretrain / finetune from Python): a signal before anything is trained and a second
    SIGINT both just request the stop (with exits=True each would end this process at once)."""
    from albert_tf.runtime.signals import StopSignal  # pylint: disable=import-outside-toplevel

    before = {s: signal.getsignal(s) for s in StopSignal.SIGNALS}
    with StopSignal("albert-tf test", at_once="nothing to save", exits=False) as stop:
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.time() + 10
        while stop.requested is None and time.time() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
    assert (stop.requested, stop.exit_code) == (signal.SIGINT, 130)
    assert {s: signal.getsignal(s) for s in StopSignal.SIGNALS} == before


# ---------------------------------------------------------------------------------------------- create-data
def start_long_create_data(tmp_path, spm_model, workers):
    """A create-data run of about 20 s in its own process group (3,000 documents took 6 s once the pipeline got
    faster, and a run could end before the signal), once it has written records to its temp files: returns
    (process, output folder)."""
    corpus = helpers.write_corpus(str(tmp_path / "corpus.txt"), num_docs=10000)
    out_dir = tmp_path / "data"
    proc = start("create-data", ["--input", corpus, "--spm-model", spm_model, "--output", out_dir / "train",
                                 "--max-seq-length", 64, "--num-shards", 2, "--workers", workers, "--dupe-factor", 40])

    def records_written():
        return out_dir.is_dir() and any(p.stat().st_size > 0 for p in out_dir.iterdir() if ".tmp-" in p.name)

    proc.wait_until(records_written)
    return proc, out_dir


@pytest.mark.slow  # a create-data run with 2 workers, interrupted after its first records (about 20 s)
@pytest.mark.parametrize("signum, code, line", [
    (signal.SIGINT, 130, "albert-tf create-data: interrupted: no shard written, the temporary files removed"),
    (signal.SIGTERM, 143, "albert-tf create-data: SIGTERM: no shard written, the temporary files removed")])
def test_ctrl_c_or_sigterm_during_create_data_leaves_no_temp_file_and_no_process(tmp_path, tiny_spm_model, signum,
                                                                                 code, line):
    proc, out_dir = start_long_create_data(tmp_path, tiny_spm_model, workers=2)
    proc.signal_group(signum)  # as a terminal's Ctrl-C, or a service manager's stop: the whole group
    rc, stdout, stderr = proc.finish()
    assert rc == code, stderr
    assert "Traceback" not in stderr
    assert our_lines(stderr) == [line] and stdout == ""
    assert not out_dir.exists()  # no shard, no temp file, no lock: the folder the run made is gone too
    assert group_gone(proc.pid), "a worker process outlived the interrupted run"


@pytest.mark.slow  # a create-data run killed after its first records, then a small one (about 30 s)
def test_a_later_run_removes_the_temp_files_a_killed_run_left_and_only_those(tmp_path, tiny_spm_model):
    proc, out_dir = start_long_create_data(tmp_path, tiny_spm_model, workers=1)
    proc.signal_group(signal.SIGKILL)  # a crash: nothing is cleaned up
    proc.finish()
    left = sorted(p.name for p in out_dir.iterdir())
    assert [re.sub(r"[0-9a-f]{12}$", "X", n) for n in left] == [
        ".train-00000-of-00002.tfrecord.tmp-X", ".train-00001-of-00002.tfrecord.tmp-X", ".train.albert_tf.lock"]
    others = [".eval-00000-of-00001.tfrecord.tmp-0123456789ab", ".train-notes.tmp-0123456789ab", "train.txt"]
    for name in others:  # another prefix's temp file, and files of the user's: never ours to remove
        (out_dir / name).write_text("not this run's")
    small = helpers.write_corpus(str(tmp_path / "small.txt"), num_docs=20)
    proc = helpers.run_cli("create-data", ["--input", small, "--spm-model", tiny_spm_model, "--output",
                                           out_dir / "train", "--max-seq-length", 64, "--num-shards", 2])
    assert "taking over the stale lock" in proc.stderr
    removed = ", ".join(str(out_dir / n) for n in left[:2])
    assert f"removed the temporary files of an interrupted earlier run: 2 file(s): {removed} (" in proc.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(
        others + [".train.record_counts.json", "train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"])


# ---------------------------------------------------------------------------------------------- any command
def test_keyboard_interrupt_in_any_command_is_one_line_and_exit_130(monkeypatch, cli, tmp_path):
    from albert_tf import cli as albert_cli  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import vocab  # pylint: disable=import-outside-toplevel

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(vocab, "vocab", interrupted)
    monkeypatch.setattr(albert_cli, "quiet_tensorflow", lambda command, verbose: None)
    (tmp_path / "x.txt").write_text("a sentence.\n")  # past the checks before the work (vocab.preflight)
    assert cli("vocab", "--input", tmp_path / "x.txt", "--output-prefix", tmp_path / "y")[::2] == (
        130, "albert-tf vocab: interrupted\n")


# ---------------------------------------------------------------------------------------------- vocab
def _children(pid):
    """The pids of `pid`'s child processes (Linux /proc)."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
            found += [int(p) for p in f.read().split()]
    return found


def _trainer_child(pid):
    """The pid of vocab's trainer process under `pid`, or None."""
    for child in _children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"vocab_trainer" in f.read():
                    return child
        except FileNotFoundError:
            pass
    return None


def test_ctrl_c_stops_vocab_within_a_second_while_sentencepiece_trains(tmp_path):
    """SentencePiece's trainer ignores SIGINT until it is done (before: the whole training, then exit 2 with
    `INTERNAL: KeyboardInterrupt` or exit 0). It runs in a child process now: a Ctrl-C to the process group while
    it trains ends vocab at once with one line and exit 130, the trainer gone, nothing written."""
    corpus = helpers.write_corpus(str(tmp_path / "corpus.txt"), num_docs=12_000)
    out = tmp_path / "out"
    proc = start("vocab", ["--input", corpus, "--output-prefix", out / "spm", "--vocab-size", 200])
    proc.wait_until(lambda: _trainer_child(proc.pid) is not None, timeout=120)
    trainer = _trainer_child(proc.pid)
    time.sleep(0.3)  # training (a 200-piece vocabulary of this corpus can be done in about a second under load)
    assert proc.poll() is None
    sent = time.time()
    proc.signal_group(signal.SIGINT)
    code, _, err = proc.finish(timeout=30)
    took = time.time() - sent
    assert code == 130, err
    assert [line for line in our_lines(err) if not line.startswith("progress: ")] == ["albert-tf vocab: interrupted"]
    assert took < 1.5, took  # "within a second" (loaded CI machines get half a second more)
    assert not os.path.exists(f"/proc/{trainer}") or open(f"/proc/{trainer}/stat").read().split()[2] == "Z"
    assert not out.exists() or os.listdir(out) == []

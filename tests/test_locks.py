"""One run per output directory (albert_tf.runtime.lock): a second run on a busy --model-dir / --output is refused with one
line naming the holder; a killed run's lock is taken over; the lock is gone when a run ends."""
import json
import os
import re
import signal
import socket
import time

import pytest

import finetune_helpers as fh
import helpers as ph
from albert_tf.runtime import cluster, exit_codes, lock
from helpers import error_lines


def write_lock(directory, host, pid, heartbeat_age, **extra):
    os.makedirs(directory, exist_ok=True)
    now = time.time()
    with open(os.path.join(directory, lock.LOCK_FILE), "w", encoding="utf-8") as f:
        json.dump({"host": host, "pid": pid, "started": now - 3600, "heartbeat": now - heartbeat_age,
                   "token": "theirs", **extra}, f)


def read_lock(directory):
    with open(os.path.join(directory, lock.LOCK_FILE), encoding="utf-8") as f:
        return json.load(f)


def test_a_previous_attempt_of_the_same_run_is_taken_over_at_once(tmp_path, monkeypatch, capsys):
    """A recreated TPU worker 0 has a new host name and the old attempt's heartbeat is fresh: the pid rule and the
    staleness rule do not apply, the run id does (ALBERT_TF_RUN_ID, recorded in the lock)."""
    write_lock(tmp_path, "old-worker-0", 4242, 30, run_id="albert-xxl-1")
    monkeypatch.setenv(lock.RUN_ID_ENV, "albert-xxl-1")
    held = lock.DirectoryLock(tmp_path, "--model-dir").acquire()
    try:
        assert capsys.readouterr().err.splitlines() == [
            "albert-tf: note: taking over the lock of run albert-xxl-1 from old-worker-0 (pid 4242), last heartbeat 30 s "
            "ago"]
        record = read_lock(tmp_path)
        assert record["token"] == held.token and record["run_id"] == "albert-xxl-1"
        assert (record["host"], record["pid"]) == (socket.gethostname(), os.getpid())
    finally:
        held.release()
    assert not (tmp_path / lock.LOCK_FILE).exists()


@pytest.mark.parametrize("theirs, ours", [("albert-xxl-1", "albert-xxl-2"), (None, "albert-xxl-1"),
                                          ("albert-xxl-1", None)])
def test_another_runs_live_lock_is_refused_with_exit_77(tmp_path, monkeypatch, theirs, ours):
    """Another run id, or a run id on one side only: a live holder (fresh heartbeat, another host) keeps its lock;
    the refusal is LockHeld, which the CLI turns into exit 77 ("wait, retry"), not 2 ("bad flags")."""
    write_lock(tmp_path, "other-host", 4242, 5, **({"run_id": theirs} if theirs else {}))
    if ours:
        monkeypatch.setenv(lock.RUN_ID_ENV, ours)
    else:
        monkeypatch.delenv(lock.RUN_ID_ENV, raising=False)
    with pytest.raises(exit_codes.LockHeld, match="is in use by another run: host other-host pid 4242") as info:
        lock.DirectoryLock(tmp_path, "--model-dir").acquire()
    assert info.value.exit_code == 77 and not isinstance(info.value, ValueError)
    assert read_lock(tmp_path)["token"] == "theirs"  # left alone


def test_a_lock_without_a_run_id_records_none(tmp_path, monkeypatch):
    monkeypatch.delenv(lock.RUN_ID_ENV, raising=False)
    with lock.DirectoryLock(tmp_path, "--model-dir") as held:
        assert "run_id" not in read_lock(tmp_path) and held.run_id is None


# A second `pretrain` on a held model dir, as the chief of a 2-worker cluster whose other worker never starts:
# creating the MultiWorkerMirroredStrategy waits for that worker (minutes), so only a run that takes the lock
# before the strategy is made can end within the test's bound. The same order keeps a second client on a TPU from
# initializing (resetting) the TPU under the running job.
def test_the_lock_is_taken_before_the_strategy_is_made(pretrain_data, tmp_path):
    model_dir = tmp_path / "model"
    write_lock(model_dir, socket.gethostname(), os.getpid(), 5)  # this test process: a live holder on this host
    ports = ",".join(f'"127.0.0.1:{port}"' for port in (1, 2))  # nothing listens there: worker 1 never comes
    tf_config = '{"cluster": {"worker": [%s]}, "task": {"type": "worker", "index": 0}}' % ports
    started = time.time()
    proc = ph.run_cli("pretrain", ph.pretrain_args(pretrain_data, model_dir), timeout=120, check=False,
                      env={"TF_CONFIG": tf_config})
    seconds = time.time() - started
    assert proc.returncode == 77, proc.stdout + proc.stderr
    assert error_lines(proc.stderr) == [
        f"albert-tf pretrain: error: --model-dir {model_dir} is in use by another run: host {socket.gethostname()} "
        f"pid {os.getpid()} since " + error_lines(proc.stderr)[0].split(" since ", 1)[1]]
    assert "Traceback" not in proc.stderr and "plan:" not in proc.stdout  # refused before the strategy and the plan
    assert seconds < 100, seconds  # a TensorFlow import, no wait for the missing worker
    assert read_lock(model_dir)["token"] == "theirs"


def test_stale_rule():
    now, here = 1_000_000.0, socket.gethostname()
    alive = {"host": here, "pid": os.getpid(), "heartbeat": now - 5}
    assert lock.stale_reason(alive, now=now) is None
    assert lock.stale_reason(dict(alive, heartbeat=now - lock.STALE_AFTER_S - 1), now=now).startswith("no heartbeat")
    dead = ph.run_python("import os; print(os.getpid())")
    assert lock.stale_reason(dict(alive, pid=int(dead.stdout)), now=now) == "its pid is not running on this host"
    # another host's pid is not ours to probe: only the heartbeat decides
    assert lock.stale_reason({"host": "elsewhere", "pid": 1, "heartbeat": now - 5}, now=now) is None


def test_tf_config_workers_other_than_the_chief_take_no_lock():
    worker = lambda t, i, cluster: {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": t, "index": i}})}
    two = {"worker": ["a:1", "b:1"]}
    assert cluster.is_chief_from_env(worker("worker", 0, two)) and not cluster.is_chief_from_env(worker("worker", 1, two))
    with_chief = {"chief": ["c:1"], "worker": ["a:1"]}
    assert cluster.is_chief_from_env(worker("chief", 0, with_chief))
    assert not cluster.is_chief_from_env(worker("worker", 0, with_chief))
    assert cluster.is_chief_from_env({})


@pytest.mark.slow  # two TensorFlow processes side by side: about a minute on this shared machine
def test_second_pretrain_on_a_busy_model_dir_is_refused_then_the_first_ends_and_releases(pretrain_data, tmp_path):
    model_dir = tmp_path / "model"
    first = ph.spawn("pretrain", *ph.pretrain_args(pretrain_data, model_dir, steps=100000,
                                                   save_checkpoints_steps=100000))
    try:
        first.wait_until((model_dir / lock.LOCK_FILE).exists)
        second = ph.run_cli("pretrain", ph.pretrain_args(pretrain_data, model_dir), check=False)
    finally:
        first.send_signal(signal.SIGTERM)  # saves and exits 75
        _, out, err = first.finish(timeout=300)
    assert second.returncode == 77, second.stderr  # the lock is held by a live run: wait, retry
    lines = error_lines(second.stderr)
    assert len(lines) == 1 and "Traceback" not in second.stderr
    assert lines[0].startswith(f"albert-tf pretrain: error: --model-dir {model_dir} is in use by another run: "
                               f"host {socket.gethostname()} pid {first.pid} since ")
    assert first.returncode == 75, out + err
    assert not (model_dir / lock.LOCK_FILE).exists()  # released at the end


@pytest.mark.slow  # two TensorFlow processes, one after the other
def test_a_sigkilled_runs_lock_does_not_block_the_next_run(pretrain_data, tmp_path):
    model_dir = tmp_path / "model"
    args = ph.pretrain_args(pretrain_data, model_dir, steps=4)
    killed = ph.run_cli_killed_when("pretrain", args, str(model_dir / lock.LOCK_FILE))
    assert killed.returncode == -signal.SIGKILL
    assert (model_dir / lock.LOCK_FILE).exists()  # a killed run cannot remove it
    proc = ph.run_cli("pretrain", args)
    assert f"taking over the stale lock {model_dir / lock.LOCK_FILE}" in proc.stderr  # a warning
    assert "its pid is not running on this host" in proc.stderr
    assert not (model_dir / lock.LOCK_FILE).exists()


def finetune_args(init, data, output):
    return ["--task", "sst2", "--init", init, "--data-dir", data, "--output", output, "--epochs", 1]


@pytest.mark.parametrize("heartbeat_age, refused", [
    (5, True), pytest.param(lock.STALE_AFTER_S + 60, False, marks=pytest.mark.slow)])
def test_finetune_output_held_by_another_host(tmp_path, tiny_spm_model, heartbeat_age, refused):
    """The lock is taken once the inputs are checked (a bad --init fails first, without touching --output): a live
    holder refuses the run with one line; a stale one is taken over and the run completes."""
    output = tmp_path / "out"
    write_lock(output, "other-host", 4242, heartbeat_age)
    init = fh.save_random_init(str(tmp_path / "init"), tiny_spm_model)
    data = fh.write_sst2(str(tmp_path / "sst2"), num_train=16, num_dev=8)
    args = finetune_args(init, data, output) + ["--batch-size", 8, "--max-seq-length", 16]
    proc = ph.run_cli("finetune", args, check=False)
    if refused:
        assert proc.returncode == 77
        err = error_lines(proc.stderr)
        assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert err[0].startswith(f"albert-tf finetune: error: --output {output} is in use by another run: "
                                 "host other-host pid 4242 since ")
        assert re.search(r"\(heartbeat \d+ s ago\)", err[0]), err[0]
        assert (output / lock.LOCK_FILE).exists()  # the other run's lock is left alone
        assert sorted(os.listdir(output)) == [lock.LOCK_FILE]  # nothing written
    else:
        assert proc.returncode == 0, proc.stderr
        assert "taking over the stale lock" in proc.stderr and "no heartbeat for" in proc.stderr
        assert not (output / lock.LOCK_FILE).exists()
        assert (output / "eval_results.json").exists()


def test_a_bad_input_fails_before_the_lock_is_looked_at(tmp_path):
    """Inputs first: a missing --init is one line, whoever holds --output (its lock is not touched)."""
    output = tmp_path / "out"
    write_lock(output, "other-host", 4242, 5)
    proc = ph.run_cli("finetune", finetune_args(tmp_path / "no-init", tmp_path / "no-data", output), check=False)
    assert proc.returncode == 2
    err = error_lines(proc.stderr)
    assert len(err) == 1 and err[0].startswith(f"albert-tf finetune: error: --init {tmp_path / 'no-init'}: "), err
    assert (output / lock.LOCK_FILE).exists()

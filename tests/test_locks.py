"""One run per output directory (albert_tf.runtime.lock): a second run on a busy --model-dir / --output is refused with one
line naming the holder; a killed run's lock is taken over; the lock is gone when a run ends."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

import helpers as ph
from albert_tf.runtime import cluster, lock
from test_pretrain import base_args, data_dir  # noqa: F401  # pylint: disable=unused-import


def start_cli(command, args):
    """`albert-tf COMMAND ARGS` started in the background (this checkout's albert_tf)."""
    return subprocess.Popen([sys.executable, "-m", "albert_tf", command, *map(str, args)], cwd=ph.REPO,
                            env=ph._checkout_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # pylint: disable=protected-access


def wait_for(path, proc, timeout=300):
    deadline = time.time() + timeout
    while not os.path.exists(path) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert os.path.exists(path), f"{path} never appeared; the process ended with {proc.poll()}"


def error_lines(stderr):
    """Our lines in a subprocess's stderr (TensorFlow's start-up lines left out)."""
    return [line for line in stderr.splitlines() if line.startswith("albert-tf")]


def write_lock(directory, host, pid, heartbeat_age):
    os.makedirs(directory, exist_ok=True)
    now = time.time()
    with open(os.path.join(directory, lock.LOCK_FILE), "w", encoding="utf-8") as f:
        json.dump({"host": host, "pid": pid, "started": now - 3600, "heartbeat": now - heartbeat_age,
                   "token": "theirs"}, f)


def test_stale_rule():
    now, here = 1_000_000.0, socket.gethostname()
    alive = {"host": here, "pid": os.getpid(), "heartbeat": now - 5}
    assert lock.stale_reason(alive, now=now) is None
    assert lock.stale_reason(dict(alive, heartbeat=now - lock.STALE_AFTER_S - 1), now=now).startswith("no heartbeat")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
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
def test_second_pretrain_on_a_busy_model_dir_is_refused_then_the_first_ends_and_releases(data_dir, tmp_path):  # noqa: F811
    model_dir = tmp_path / "model"
    first = start_cli("pretrain", base_args(data_dir, model_dir, steps=100000, save_checkpoints_steps=100000))
    try:
        wait_for(model_dir / lock.LOCK_FILE, first)
        second = ph.run_cli("pretrain", base_args(data_dir, model_dir), check=False)
    finally:
        first.send_signal(signal.SIGTERM)  # saves and exits 0
        out, err = first.communicate(timeout=300)
    assert second.returncode == 2, second.stderr
    lines = error_lines(second.stderr)
    assert len(lines) == 1 and "Traceback" not in second.stderr
    assert lines[0].startswith(f"albert-tf pretrain: error: --model-dir {model_dir} is in use by another run: "
                               f"host {socket.gethostname()} pid {first.pid} since ")
    assert first.returncode == 0, out + err
    assert not (model_dir / lock.LOCK_FILE).exists()  # released at the end


@pytest.mark.slow  # two TensorFlow processes, one after the other
def test_a_sigkilled_runs_lock_does_not_block_the_next_run(data_dir, tmp_path):  # noqa: F811
    model_dir = tmp_path / "model"
    args = base_args(data_dir, model_dir, steps=4)
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
    import finetune_helpers as fh  # pylint: disable=import-outside-toplevel

    output = tmp_path / "out"
    write_lock(output, "other-host", 4242, heartbeat_age)
    init = fh.save_random_init(str(tmp_path / "init"), tiny_spm_model)
    data = fh.write_sst2(str(tmp_path / "sst2"), num_train=16, num_dev=8)
    args = finetune_args(init, data, output) + ["--batch-size", 8, "--max-seq-length", 16]
    proc = ph.run_cli("finetune", args, check=False)
    if refused:
        assert proc.returncode == 2
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

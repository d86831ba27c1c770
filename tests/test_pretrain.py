"""The pretraining loop: 1 vs 4 replicas, SIGKILL / SIGTERM / SIGINT from outside and the resume (bit-exact),
progress lines, non-finite loss, refusals, --init, the XLA-compiled step on CPU, and `albert_tf.pretrain` from
Python (a result, the run record, no signal handlers off the main thread)."""
import contextlib
import dataclasses
import filecmp
import io
import json
import glob
import os
import re
import shutil
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

import albert_tf
import helpers as ph
from albert_tf.config import AlbertConfig
from albert_tf.settings.pretrain_config import PretrainConfig
from albert_tf.runtime import host_xla
from albert_tf.training import pretraining
from albert_tf.training.batch_plan import BatchPlan
from albert_tf.training.loop import LoopLength

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


SEQ, PRED, TINY = ph.PRETRAIN_SEQ, ph.PRETRAIN_PRED, ph.PRETRAIN_TINY


@pytest.fixture(scope="module")
def uninterrupted(pretrain_data, tmp_path_factory):
    """6 steps on one device (the default strategy), checkpoints at 2, 4 and 6."""
    model_dir = tmp_path_factory.mktemp("uninterrupted") / "model"
    ph.run_cli("pretrain", ph.pretrain_args(pretrain_data, model_dir))
    return model_dir


@pytest.mark.slow  # three fresh TensorFlow processes: about a minute idle, several on this shared machine
def test_one_replica_equals_four_cpu_replicas(pretrain_data, uninterrupted, tmp_path):
    model_dir = tmp_path / "four"
    proc = ph.run_cli("pretrain", ph.pretrain_args(pretrain_data, model_dir, cpu_replicas=4))
    assert "on 4 replica(s) (MirroredStrategy)" in proc.stdout
    one, four = ph.train_metrics(uninterrupted), ph.train_metrics(model_dir)
    assert sorted(one) == sorted(four) == [2, 4, 6]
    for step in one:
        for key in ("loss", "masked_lm_loss", "sentence_order_loss", "masked_lm_accuracy", "grad_norm"):
            np.testing.assert_allclose(four[step][key], one[step][key], rtol=1e-5, err_msg=f"{key} at {step}")
    assert one[6]["loss"] != one[2]["loss"]  # it trained
    ph.assert_same_checkpoint(uninterrupted, model_dir, 6)


# The compiled loop as it was before the metric sums stayed on the devices (a reduction across replicas every
# step): the reference the on-device sums must equal. One fresh process (tests/programs/per_step_reduction.py) runs
# pretrain twice, with --cpu-replicas 2, once as it is and once with that loop in place of loop.make_train_loop.
def metric_rows(model_dir):
    with open(os.path.join(model_dir, "metrics.jsonl"), encoding="utf-8") as f:
        return {(r["split"], r["step"]): r for r in map(json.loads, f)}


@pytest.mark.slow  # two 2-replica runs in a fresh process: about a minute and a half on this shared machine
def test_metrics_summed_on_the_devices_equal_the_per_step_reduction(pretrain_data, tmp_path):
    """Every metrics.jsonl row (train and eval) of a 2-replica run equals the row the per-step reduction gives, up
    to the order of float32 additions; the calls hold several steps (rows every 4 steps, calls of 1, 2, 4 ...)."""
    runs = {name: ph.pretrain_args(pretrain_data, tmp_path / name, steps=8, steps_per_loop=4, save_checkpoints_steps=4,
                            cpu_replicas=2, eval_data=pretrain_data / "eval.tfrecord", max_eval_steps=2)
            for name in ("on_device", "per_step")}
    proc = ph.run_program("per_step_reduction", json.dumps(runs["on_device"]), json.dumps(runs["per_step"]),
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    on_device, per_step = metric_rows(tmp_path / "on_device"), metric_rows(tmp_path / "per_step")
    assert sorted(on_device) == sorted(per_step) == [("eval", 4), ("eval", 8), ("train", 4), ("train", 8)]
    keys = ("loss", "masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss", "sentence_order_accuracy")
    for row in on_device:
        for key in keys + (("grad_norm", "learning_rate") if row[0] == "train" else ()):
            assert on_device[row][key] == pytest.approx(per_step[row][key], rel=1e-6), (row, key)
    assert on_device[("train", 8)]["loss"] != on_device[("train", 4)]["loss"]  # it trained


# ------------------------------------------------------------------------------------------ same seed, same bytes
QUICK_SEQ, QUICK_PRED = 128, 20


@pytest.fixture(scope="module")
def shared_blocks_data(tmp_path_factory):
    """Records at the quickstart's lengths (128 tokens, 20 predictions) and albert_tiny (4 layers in 2 groups): each
    block's weights serve two layers, each on the two slices of the batch a CPU run makes by default (--streams
    2), so four gradients join each weight's sum. (With two or fewer, as in PRETRAIN_TINY, the order of a float sum
    does not change its bits; the runs below would be equal even without a fixed order.)"""
    directory = tmp_path_factory.mktemp("shared_blocks")
    ph.write_records(str(directory / "train.tfrecord"), 192, QUICK_SEQ, QUICK_PRED, seed=0)
    AlbertConfig.from_preset("albert_tiny").to_json_file(str(directory / "albert_config.json"))
    return directory


SHARED_BLOCKS = dict(steps=8, max_seq_length=QUICK_SEQ, max_predictions=QUICK_PRED, batch_size=32, steps_per_loop=4,
                     save_checkpoints_steps=4)  # 8 steps of batch 32, checkpoints at 4 and 8


class WholeRowCalls(LoopLength):
    """Each compiled call runs every step up to the next metrics row (the wall clock decides in a real run)."""

    def next(self, remaining):
        return min(self.cap, remaining)


class OneStepCalls(LoopLength):
    """Each compiled call runs one step."""

    def next(self, remaining):
        return 1


@pytest.fixture(scope="module")
def shared_blocks_run(shared_blocks_data, tmp_path_factory):
    """A run with the defaults on `shared_blocks_data` (SHARED_BLOCKS), in this process, its calls as long as its
    metrics rows allow (WholeRowCalls): (model_dir, its stdout)."""
    model_dir = tmp_path_factory.mktemp("shared_blocks_run") / "model"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.MonkeyPatch.context() as patch:
        patch.setattr(pretraining, "LoopLength", WholeRowCalls)
        assert albert_tf.pretrain(ph.pretrain_config(shared_blocks_data, model_dir, **SHARED_BLOCKS)).exit_code == 0
    return model_dir, out.getvalue()


def assert_same_checkpoint_files(dir_a, dir_b, step):
    """MODEL_DIR/ckpt-STEP's files are equal byte for byte, and so every tensor (optimizer slots included)."""
    for suffix in (".index", ".data-00000-of-00001"):
        assert filecmp.cmp(dir_a / f"ckpt-{step}{suffix}", dir_b / f"ckpt-{step}{suffix}", shallow=False), suffix
    ph.assert_bit_exact(dir_a, dir_b, step)


def test_two_default_runs_write_the_same_checkpoint_files(shared_blocks_data, shared_blocks_run, tmp_path, cli,
                                                          monkeypatch):
    """Same seed, same data, same flags, the defaults otherwise (2 streams on a CPU), the steps split differently
    into compiled calls (4 + 4 in the first run, 8 x 1 here; in a real run the wall clock decides): the same
    checkpoint files, byte for byte, and so every tensor bit for bit, and the same metrics rows. (Was: 134 of 146
    tensors differed, by up to 6e-8 after 10 steps: the order of the gradient sums depended on the timing of the
    concurrent streams. And the rows' losses and norms differed by 2e-9 relative where the calls split a row's
    steps differently: they were float32 sums over each call's steps.)"""
    first, first_out = shared_blocks_run
    monkeypatch.setattr(pretraining, "LoopLength", OneStepCalls)
    code, out, _ = cli("pretrain", *ph.pretrain_args(shared_blocks_data, tmp_path / "again", **SHARED_BLOCKS))
    assert code == 0 and "streams 2" in first_out and "streams 2" in out  # the default on a CPU
    assert_same_checkpoint_files(first, tmp_path / "again", 8)
    assert rows_but_speed(first) == rows_but_speed(tmp_path / "again")  # the logged losses and norms too


def rows_but_speed(model_dir):
    """The train rows of MODEL_DIR/metrics.jsonl without their speeds."""
    return {step: {k: v for k, v in row.items() if not k.endswith("_per_sec")}
            for step, row in ph.train_metrics(model_dir).items()}


# ------------------------------------------------------------------------------------------ faults from outside
LONG = 40  # steps of the runs stopped from outside: long enough that a signal lands mid-run


def long_args(pretrain_data, model_dir):
    return ph.pretrain_args(pretrain_data, model_dir, steps=LONG, steps_per_loop=5, save_checkpoints_steps=10)


@pytest.fixture(scope="module")
def long_uninterrupted(pretrain_data, tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("long") / "model"
    ph.run_cli("pretrain", long_args(pretrain_data, model_dir))
    return model_dir


def progress_step(line):
    """The step of a `progress:` line, else None."""
    match = re.match(r"progress: step ([\d,]+)/", line)
    return int(match.group(1).replace(",", "")) if match else None


def stop_after_first_call(pretrain_data, model_dir, tmp_path, signum):
    """Starts a long run, sends `signum` once a call has trained a step; returns (proc, stdout, stderr, seconds
    from the signal to the process's end)."""
    proc = ph.spawn("pretrain", *long_args(pretrain_data, model_dir), merge_stderr=True)
    proc.read_until(lambda line: (progress_step(line) or 0) >= 1, timeout=300)
    proc.send_signal(signum)
    sent = time.time()
    _, out, err = proc.finish(timeout=120)
    return proc, out, err, time.time() - sent


@pytest.mark.slow  # two fresh TensorFlow processes
def test_sigkill_after_a_checkpoint_then_resume_is_bit_exact(shared_blocks_data, shared_blocks_run, tmp_path):
    """Killed (SIGKILL) right after its first checkpoint and run again, a run with the defaults on shared blocks
    (where the order of the gradient sums matters) ends with the uninterrupted run's weights, bit for bit."""
    model_dir = tmp_path / "killed"
    args = ph.pretrain_args(shared_blocks_data, model_dir, **SHARED_BLOCKS)
    proc = ph.spawn("pretrain", *args, merge_stderr=True)
    proc.wait_until((model_dir / "checkpoint").exists, timeout=300)
    proc.kill()  # a crash from outside, right after the first checkpoint was written
    proc.finish(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    killed_at = int(tf.train.latest_checkpoint(str(model_dir)).rsplit("-", 1)[1])
    assert killed_at < SHARED_BLOCKS["steps"]
    resumed = ph.run_cli("pretrain", args)
    assert f"resumed from {model_dir}/ckpt-{killed_at} at step {killed_at}" in resumed.stdout
    uninterrupted = shared_blocks_run[0]
    # Same learning rate after the restart as in the uninterrupted run, and the same weights and optimizer slots to
    # the last bit (not the same files: the checkpoints' save counter counts the saves a kill cut short)
    assert ph.train_metrics(model_dir)[8]["learning_rate"] == ph.train_metrics(uninterrupted)[8]["learning_rate"]
    ph.assert_bit_exact(uninterrupted, model_dir, 8)


@pytest.mark.slow  # three fresh TensorFlow processes
def test_sigterm_mid_run_saves_within_the_bound_then_resume_is_bit_exact(pretrain_data, long_uninterrupted, tmp_path):
    model_dir = tmp_path / "preempted"
    proc, out, err, seconds = stop_after_first_call(pretrain_data, model_dir, tmp_path, signal.SIGTERM)
    assert proc.returncode == 75, err  # stopped before its end: resumable, not done
    stopped_at = int(tf.train.latest_checkpoint(str(model_dir)).rsplit("-", 1)[1])
    assert 1 <= stopped_at < LONG  # it stopped mid-run, at the end of the call in flight
    assert f"SIGTERM: saved step {stopped_at} ({model_dir}/ckpt-{stopped_at}); exiting" in out
    assert seconds < 30, out  # one call of <= 5 steps of a tiny model, the save and the exit
    resumed = ph.run_cli("pretrain", long_args(pretrain_data, model_dir))
    assert f"at step {stopped_at}" in resumed.stdout
    ph.assert_bit_exact(long_uninterrupted, model_dir, LONG)


@pytest.mark.stack_agnostic  # Python above TensorFlow: covered on the TPU-side stacks by the tests around it
def test_sigint_saves_with_one_line_and_exits_130(pretrain_data, tmp_path):
    model_dir = tmp_path / "interrupted"
    proc, out, err, _ = stop_after_first_call(pretrain_data, model_dir, tmp_path, signal.SIGINT)
    assert proc.returncode == 130
    stopped_at = int(tf.train.latest_checkpoint(str(model_dir)).rsplit("-", 1)[1])
    assert out.strip().splitlines()[-1] == (f"SIGINT: saved step {stopped_at} ({model_dir}/ckpt-{stopped_at}); "
                                           "exiting, the same command resumes")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err + out


@pytest.mark.slow  # the paper's batch 4096 on a CPU: ~8 GiB and a first step of a minute or more
def test_default_flags_show_progress_within_30s_and_sigterm_saves_within_one_call(tmp_path):
    """The required flags and the steps (a CPU run at the pod recipe's batch and steps is refused), plus
    --max-seq-length 128, where albert_tiny's positions end: batch 4096, --steps-per-loop 100. Was: no line for 30
    minutes, SIGTERM ignored for 15."""
    ph.write_records(str(tmp_path / "train.tfrecord"), 2 * 4096, 128, 20, seed=0)
    model_dir = tmp_path / "model"
    proc = ph.spawn("pretrain", "--config", "albert_tiny", "--train-data", tmp_path / "train.tfrecord",
                    "--model-dir", model_dir, "--max-seq-length", "128", "--num-train-steps", "1000",
                    "--num-warmup-steps", "100", merge_stderr=True)
    _, started = proc.read_until(lambda line: line.startswith("training "), timeout=300)
    _, first = proc.read_until(lambda line: line.startswith("progress: "), timeout=60)
    assert first - started <= 30
    proc.read_until(lambda line: (progress_step(line) or 0) >= 1, timeout=1200)
    time.sleep(2)  # inside the next call (one step at this batch)
    proc.send_signal(signal.SIGTERM)
    sent = time.time()
    while not (model_dir / "checkpoint").exists() and proc.poll() is None:
        time.sleep(0.05)
    seconds = time.time() - sent
    _, out, err = proc.finish(timeout=600)
    assert proc.returncode == 75, err
    stopped_at = int(tf.train.latest_checkpoint(str(model_dir)).rsplit("-", 1)[1])
    assert stopped_at in (2, 3), out  # the call in flight when the signal came (1 or 2 steps after the first call)
    stop_row = [line for line in out.splitlines() if line.startswith(f"train step {stopped_at}: ")][0]
    row_seconds = stopped_at * 4096 / float(re.search(r"examples_per_sec=([\d.e+-]+)", stop_row).group(1))
    # Within 30 s where a step takes ~10 s (this batch on an idle 2-core VM); on a machine so loaded that the steps
    # are slower, within the calls of the row (steps 1..N, the first one compiling) and the save.
    assert seconds <= max(30.0, row_seconds), (seconds, row_seconds, out)


@pytest.mark.slow  # two TensorFlow processes
def test_workers_agree_on_the_chiefs_call_length_and_save_and_on_any_stop():
    import socket

    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("localhost", 0))
            ports.append(sock.getsockname()[1])
    proposals = [[7, True, False], [3, False, True]]  # the chief's clock says save; worker 1 got SIGTERM
    # one worker each (tests/programs/agree_worker.py), printing what pretraining.agree decides
    procs = [ph.spawn(json.dumps(ports), i, json.dumps(p), program="agree_worker", env={"TF_CPP_MIN_LOG_LEVEL": "3"})
             for i, p in enumerate(proposals)]
    outputs = [json.loads(proc.finish(timeout=300)[1]) for proc in procs]
    assert outputs == [[[7, True, True], [8, False, False]]] * 2


# ------------------------------------------------------------------------------------------ in-process runs
def test_sigterm_in_process_saves_after_the_next_call_and_exits_75(pretrain_data, tmp_path, monkeypatch, cli):
    from albert_tf.training import run

    sent = []

    def preempt_on_first_log(name, value):
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)  # during the row of step 2: the loop saves after the next call

    monkeypatch.setattr(run, "write_scalar_summary", preempt_on_first_log)
    model_dir = tmp_path / "preempted"
    sigint_before = signal.getsignal(signal.SIGINT)
    code, out, _ = cli("pretrain", *ph.pretrain_args(pretrain_data, model_dir, steps=100, save_checkpoints_steps=50))
    assert code == 75
    saved = tf.train.get_checkpoint_state(str(model_dir)).all_model_checkpoint_paths
    assert len(saved) == 1 and saved[0].endswith(("ckpt-3", "ckpt-4"))  # calls of <= 2 steps (--steps-per-loop)
    assert out.strip().splitlines()[-1].startswith(f"SIGTERM: saved step {saved[0][-1]} (")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and signal.getsignal(signal.SIGINT) is sigint_before


def test_non_finite_loss_stops_without_a_checkpoint(pretrain_data, tmp_path, capsys):
    bad = tmp_path / "nan.tfrecord"
    with tf.io.TFRecordWriter(str(bad)) as writer:
        for raw in tf.data.TFRecordDataset(str(pretrain_data / "train.tfrecord")).take(32):
            example = tf.train.Example.FromString(raw.numpy())
            example.features.feature["masked_lm_weights"].float_list.value[0] = float("nan")
            writer.write(example.SerializeToString())
    model_dir = tmp_path / "nan_model"
    result = albert_tf.pretrain(ph.pretrain_config(pretrain_data, model_dir, train_data=bad))
    assert (result.status, result.exit_code, result.checkpoint) == ("non-finite", 3, None)
    err = capsys.readouterr().err
    assert "non-finite loss at step 1 (" in err and "stopped without saving" in err  # the first call: 1 step
    assert tf.train.latest_checkpoint(str(model_dir)) is None


def test_the_runtime_going_away_mid_run_exits_76_naming_the_step_and_the_checkpoint(pretrain_data, tmp_path,
                                                                                      monkeypatch, cli):
    """A peer or the TPU lost between two calls (here in the workers' agreement, where a multi-worker run's first
    collective after a call is; the real loss of a worker: tests/test_rehearsal.py): one line, exit 76, and the same
    command resumes from the last checkpoint."""
    agree = pretraining.agree

    def lose_the_peer_at_the_third_call(strategy, num_steps, save_now, stop_now):
        calls.append(num_steps)
        if len(calls) == 3:  # after the calls of steps 1, 2 and 3..4; the checkpoint of step 2 is written
            raise tf.errors.UnavailableError(None, None, "Graph execution error:\n\nCollective ops is aborted by: "
                                             "The following tasks are unhealthy (stopped sending heartbeats)")
        return agree(strategy, num_steps, save_now, stop_now)

    calls = []
    monkeypatch.setattr(pretraining, "agree", lose_the_peer_at_the_third_call)
    model_dir = tmp_path / "lost"
    code, _, err = cli("pretrain", *ph.pretrain_args(pretrain_data, model_dir))
    assert code == 76
    assert ph.error_lines(err) == [
        f"albert-tf pretrain: error: the TPU / runtime or a peer worker went away after step 4 "
        f"(UnavailableError: Collective ops is aborted by: The following tasks are unhealthy (stopped "
        f"sending heartbeats)); the last checkpoint is {model_dir}/ckpt-2: relaunch the same command to "
        f"resume from it"]
    assert not (model_dir / ".albert_tf.lock").exists()  # released
    monkeypatch.setattr(pretraining, "agree", agree)
    code, out, _ = cli("pretrain", *ph.pretrain_args(pretrain_data, model_dir))
    assert code == 0 and "resumed from " + str(model_dir / "ckpt-2") in out


def test_model_dir_with_a_different_config_is_refused(pretrain_data, tmp_path):
    model_dir = tmp_path / "other"
    model_dir.mkdir()
    TINY.replace(hidden_size=64).to_json_file(str(model_dir / "albert_config.json"))
    with pytest.raises(ValueError) as info:
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, model_dir))
    err = str(info.value)
    assert "holds a different config" in err and "hidden_size" in err and "albert_config.json" in err


def test_records_with_wrong_lengths_are_refused(pretrain_data, tmp_path):
    with pytest.raises(ValueError) as info:
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "m", max_seq_length=64))
    assert "train.tfrecord" in str(info.value) and "'input_ids' has length 32, expected 64" in str(info.value)
    with pytest.raises(ValueError, match="'masked_lm_positions' has length 5, expected 7"):
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "m", max_predictions=7))


def test_bad_streams_are_refused(pretrain_data, tmp_path):
    with pytest.raises(ValueError, match="--streams must be positive, got 0"):
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "m", streams=0))
    with pytest.raises(ValueError, match="--streams 3 does not divide the per-replica batch 16"):  # batch 16
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "m", streams=3))


def test_tpu_with_local_paths_is_refused(pretrain_data, tmp_path):
    with pytest.raises(ValueError) as info:
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "m", tpu="my-tpu"))
    err = str(info.value)
    assert "--train-data" in err and "gs://" in err


def eval_run_config(pretrain_data, directory):
    """4 steps with an eval set (checkpoints and evaluations at 2 and 4) and a vocabulary, into DIRECTORY/model."""
    return ph.pretrain_config(pretrain_data, directory / "model", steps=4, max_eval_steps=2,
                              eval_data=pretrain_data / "eval.tfrecord", spm_model=directory / "spm1000.model",
                              allow_unchecked_records=True)  # generated: no index


@pytest.fixture(scope="module")
def eval_run(pretrain_data, tmp_path_factory, tiny_spm_model):
    """A finished run of eval_run_config: (its directory, the PretrainResult). The tests that use it only read it
    (a re-run of a finished run writes nothing)."""
    directory = tmp_path_factory.mktemp("eval_run")
    ph.resize_spm(tiny_spm_model, TINY.vocab_size, str(directory / "spm1000.model"))
    with contextlib.redirect_stdout(io.StringIO()):
        return directory, albert_tf.pretrain(eval_run_config(pretrain_data, directory))


def test_init_loads_the_weights(pretrain_data, eval_run, tmp_path):
    init_dir = eval_run[0] / "model"  # eval_run_config: 4 steps
    model_dir = tmp_path / "from_init"
    # Learning rate 0: after one step the weights are still exactly the initial ones.
    result = albert_tf.pretrain(ph.pretrain_config(pretrain_data, model_dir, steps=1, init=init_dir, learning_rate=0))
    assert (result.status, result.step, result.exit_code) == ("done", 1, 0)
    init, got = ph.checkpoint_values(init_dir, 4), ph.checkpoint_values(model_dir, 1)
    model_names = [n for n in init if n.startswith("model/")]
    assert model_names
    for name in model_names:
        np.testing.assert_array_equal(got[name], init[name], err_msg=name)


def test_eval_and_summaries_are_written(eval_run):
    directory, result = eval_run
    model_dir = directory / "model"
    assert result.exit_code == 0
    rows = [json.loads(line) for line in open(model_dir / "metrics.jsonl", encoding="utf-8")]
    evals = [r for r in rows if r["split"] == "eval"]
    assert [r["step"] for r in evals] == [2, 4]  # at each checkpoint
    assert {"split": "eval", "step": 4, **result.eval_metrics} == evals[-1]  # the result holds the last row
    assert 0 <= evals[0]["sentence_order_accuracy"] <= 1 and evals[0]["masked_lm_loss"] > 0
    for key in ("masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy", "sentence_order_loss",
                "learning_rate", "examples_per_sec", "tokens_per_sec"):
        assert key in rows[0]
    assert (model_dir / "spm.model").exists() and (model_dir / "albert_config.json").exists()
    tags = set()
    for path in tf.io.gfile.glob(str(model_dir / "train" / "events*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(v.tag for v in event.summary.value)
    assert {"masked_lm_accuracy", "sentence_order_loss", "learning_rate", "tokens_per_sec"} <= tags


def test_dynamic_masking_masks_in_the_pipeline(pretrain_data, tmp_path):
    unmasked = tmp_path / "unmasked.tfrecord"
    ph.write_records(str(unmasked), 64, SEQ, PRED, seed=5, unmasked=True)
    model_dir = tmp_path / "dynamic"
    config = ph.pretrain_config(pretrain_data, model_dir, steps=2, dynamic_masking=True, train_data=unmasked)
    assert albert_tf.pretrain(config).exit_code == 0
    (row,) = ph.train_metrics(model_dir).values()
    assert row["masked_lm_loss"] > 1.0  # positions were masked and predicted (no weights → loss 0)
    # Masked records are refused with dynamic masking: they would be masked twice.
    config.train_data = str(pretrain_data / "train.tfrecord")
    with pytest.raises(ValueError):
        albert_tf.pretrain(config)


def test_masked_lm_prob_sets_the_pipelines_masking_budget(pretrain_data, tmp_path):
    from albert_tf.data import pretraining_input  # pylint: disable=import-outside-toplevel

    unmasked = ph.write_records(str(tmp_path / "unmasked.tfrecord"), 32, SEQ, PRED, seed=5, unmasked=True)
    config = AlbertConfig.from_json_file(str(pretrain_data / "albert_config.json"))

    def masked_per_row(prob, max_predictions):
        cfg = ph.pretrain_config(pretrain_data, tmp_path / "m", dynamic_masking=True, train_data=unmasked,
                                 masked_lm_prob=prob, max_predictions=max_predictions)
        fn = pretraining_input.make_dataset_fn(cfg, config, unmasked, 16, is_training=True)
        features = next(iter(fn(tf.distribute.InputContext())))
        lengths = features["input_mask"].numpy().sum(axis=1)
        return features["masked_lm_weights"].numpy().sum(axis=1), lengths

    # The budget per row, by hand: min(max_predictions, max(1, round(tokens * prob))); n-gram spans may stop
    # one short of it, never past it.
    masked_at = {}
    for prob, max_predictions in ((0.15, PRED), (0.5, SEQ)):
        masked, lengths = masked_at[prob, max_predictions] = masked_per_row(prob, max_predictions)
        budget = np.minimum(max_predictions, np.maximum(1, np.round(lengths * prob)))
        assert (masked <= budget).all() and (masked >= budget - 2).all() and masked.sum() >= 0.8 * budget.sum()
    low, _ = masked_per_row(0.15, SEQ)
    high, _ = masked_at[0.5, SEQ]
    assert high.sum() > 2.5 * low.sum()


def test_masked_lm_prob_is_checked(pretrain_data, tmp_path):
    with pytest.raises(ValueError, match=r"--masked-lm-prob must be in \(0, 1\], got 1.5"):
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "m", dynamic_masking=True,
                                              masked_lm_prob=1.5))
    with pytest.raises(ValueError, match="--masked-lm-prob 0.3 needs --dynamic-masking"):
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "m", masked_lm_prob=0.3))


# ------------------------------------------------------------------------------------------ the step under XLA
@pytest.mark.skipif(not host_xla.available(), reason="no XLA for the host in this TensorFlow (the TPU wheel)")
def test_train_step_has_static_shapes_and_compiles_with_xla_on_cpu(pretrain_data):
    import keras

    from albert_tf.data import pretraining_dataset
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.training import LAMB, WarmupPolynomialDecay
    from albert_tf.training.pretrain_step import make_train_step

    batch_size = 8
    dataset = pretraining_dataset(str(pretrain_data / "train.tfrecord"), seq_length=SEQ, max_predictions=PRED,
                                  batch_size=batch_size, is_training=True, seed=0)
    for spec in dataset.element_spec.values():
        assert spec.shape.is_fully_defined(), dataset.element_spec
    batch = next(iter(dataset))

    def run_steps(jit):
        keras.utils.set_random_seed(0)
        model = AlbertPretrainer(TINY)
        optimizer = LAMB(WarmupPolynomialDecay(0.01, 10, 0))
        optimizer.build(model.trainable_variables)
        step = tf.function(make_train_step(model, optimizer, batch_size), jit_compile=jit)
        sums = [step(batch, True) for _ in range(2)]
        if jit:  # XLA compiled the whole step — forward, backward, clipping and the LAMB update — in one module
            hlo = step.experimental_get_compiler_ir(batch, True)(stage="hlo")
            assert "ENTRY" in hlo and " dot(" in hlo and "rsqrt" in hlo or "sqrt" in hlo
        return [float(s["mlm_nll"]) for s in sums], [v.numpy() for v in model.trainable_variables]

    losses_xla, weights_xla = run_steps(True)
    losses_ref, weights_ref = run_steps(False)
    np.testing.assert_allclose(losses_xla, losses_ref, rtol=1e-4)
    assert losses_ref[0] != losses_ref[1]
    for a, b in zip(weights_xla, weights_ref):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


# ------------------------------------------------------------------------------------------ --sop-weight
def test_the_sop_weight_scales_the_sentence_order_term_of_the_loss():
    """pretraining_loss against numpy: Σ w·nll / (Σw + 1e-5) + W · Σ sop_nll / B for W 1, 0.4 and 0; the metric
    sums do not depend on W; at W 0 no gradient reaches the SOP logits."""
    from albert_tf.training.pretrain_step import pretraining_loss

    rng = np.random.default_rng(5)
    b, p, v = 4, 3, 7
    mlm_logits, sop_logits = rng.normal(size=[b, p, v]), rng.normal(size=[b, 2])
    ids, labels = rng.integers(0, v, [b, p]), rng.integers(0, 2, [b])
    weights = (rng.random([b, p]) < 0.7).astype(np.float64)
    batch = {"masked_lm_ids": tf.constant(ids, tf.int32), "masked_lm_weights": tf.constant(weights, tf.float32),
             "sentence_order_labels": tf.constant(labels, tf.int32)}

    def nll(logits, target):
        logits = logits - logits.max(-1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -np.take_along_axis(log_p, target[..., None], -1)[..., 0]

    mlm_term = (weights * nll(mlm_logits, ids)).sum() / (weights.sum() + 1e-5)
    sop_term = nll(sop_logits, labels).sum() / b
    all_sums = []
    for w in (1.0, 0.4, 0.0):
        sop = tf.Variable(sop_logits, dtype=tf.float32)
        with tf.GradientTape() as tape:
            loss, sums = pretraining_loss({"mlm_logits": tf.constant(mlm_logits, tf.float32), "sop_logits": sop},
                                          batch, b, tf.constant(weights.sum(), tf.float32), sop_weight=w)
        np.testing.assert_allclose(float(loss), mlm_term + w * sop_term, rtol=1e-6)
        grad = tape.gradient(loss, sop).numpy()
        assert (np.abs(grad).max() == 0) == (w == 0.0), (w, grad)
        all_sums.append({k: float(x) for k, x in sums.items()})
    assert all_sums[0] == all_sums[1] == all_sums[2]


def test_a_run_without_the_sop_term_leaves_the_sop_heads_bias_at_its_init(pretrain_data, tmp_path):
    """--sop-weight 0 reaches the train step: no gradient reaches the SOP head, so its bias (no weight decay in LAMB)
    stays at its initial zeros, while the run with the paper's weight moves it; the masked-LM side trains in both."""
    from albert_tf.checkpoints import pretrained
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    biases = {}
    for weight in (0.0, 1.0):
        model_dir = tmp_path / f"w{weight:g}"
        result = albert_tf.pretrain(ph.pretrain_config(pretrain_data, model_dir, steps=4, sop_weight=weight))
        assert result.exit_code == 0
        model = AlbertPretrainer(AlbertConfig.from_json_file(str(pretrain_data / "albert_config.json")))
        pretrained.restore(model, str(model_dir))
        biases[weight] = model.sop_head.dense.bias.numpy()
        rows = ph.train_metrics(model_dir)
        assert rows[4]["masked_lm_loss"] < rows[2]["masked_lm_loss"] + 1.0  # (a row each 2 steps, both trained)
    assert not biases[0.0].any(), biases[0.0]
    assert np.abs(biases[1.0]).max() > 1e-4, biases[1.0]


# ------------------------------------------------------------------------------------------ it learns
def test_tiny_model_learns_sentence_order_and_masked_tokens(tmp_path):
    # Records whose order is learnable (see helpers.make_example) over a 16-id alphabet.
    ph.write_records(str(tmp_path / "train.tfrecord"), 2048, SEQ, PRED, seed=3, alphabet=8)
    ph.write_records(str(tmp_path / "eval.tfrecord"), 256, SEQ, PRED, seed=4, alphabet=8)
    # A wider initializer than the paper's 0.02 lets a 2-layer, 32-wide model see [CLS]'s context early.
    TINY.replace(num_hidden_layers=2, initializer_range=0.2).to_json_file(str(tmp_path / "albert_config.json"))
    model_dir = tmp_path / "model"
    result = albert_tf.pretrain(ph.pretrain_config(
        tmp_path, model_dir, steps=300, eval_data=tmp_path / "eval.tfrecord", max_eval_steps=8, batch_size=32,
        num_warmup_steps=20, steps_per_loop=25, save_checkpoints_steps=300, learning_rate=0.005))
    assert result.exit_code == 0
    rows = [json.loads(line) for line in open(model_dir / "metrics.jsonl", encoding="utf-8")]
    first_loop = rows[0]
    final_eval = [r for r in rows if r["split"] == "eval"][-1]
    assert first_loop["step"] == 25 and final_eval["step"] == 300
    assert final_eval["sentence_order_accuracy"] >= 0.9, final_eval
    assert final_eval["masked_lm_accuracy"] >= first_loop["masked_lm_accuracy"] + 0.05, (first_loop, final_eval)
    assert final_eval["masked_lm_loss"] < first_loop["masked_lm_loss"] - 1.0


@pytest.mark.slow  # four short training runs in this process
def test_no_dropout_after_step_switches_dropout_off_at_that_step(pretrain_data, tmp_path, cli):
    """Dropout 0.3 in the config. Switching at step 2 in one run must equal a run to step 2 with dropout resumed
    with --no-dropout; switching at step 0 must equal --no-dropout; and dropout must really have been on before."""
    config = tmp_path / "dropout_config.json"
    TINY.replace(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3).to_json_file(str(config))

    def args(model_dir, steps=4, **extra):
        # one warm-up step, then a constant rate (--poly-power 0) in every run: the learning rate of a step does
        # not depend on --num-train-steps, so the split's first part (2 steps) is a prefix of the 4-step runs
        a = ph.pretrain_args(pretrain_data, tmp_path / model_dir, steps=steps, num_warmup_steps=1, poly_power=0.0,
                             **extra)
        a[a.index("--config") + 1] = str(config)
        return a

    assert cli("pretrain", *args("switch", no_dropout_after_step=2))[0] == 0
    assert cli("pretrain", *args("split", steps=2, no_dropout_after_step=4))[0] == 0  # steps 1..2 with dropout
    assert cli("pretrain", *args("split", steps=4, no_dropout=True))[0] == 0  # resumed at 2, steps 3..4 without
    ph.assert_same_checkpoint(tmp_path / "switch", tmp_path / "split", 4)
    assert cli("pretrain", *args("at_zero", no_dropout_after_step=0))[0] == 0
    assert cli("pretrain", *args("never", no_dropout=True))[0] == 0
    ph.assert_same_checkpoint(tmp_path / "at_zero", tmp_path / "never", 4)
    a, b = ph.checkpoint_values(tmp_path / "switch", 2), ph.checkpoint_values(tmp_path / "never", 2)
    assert max(np.abs(a[n] - b[n]).max() for n in a if "model" in n) > 1e-4  # dropout was on in steps 1..2


# ------------------------------------------------------------------------------------------ checked before writing
def test_vocabulary_disagreeing_with_the_config_is_refused_before_anything_is_written(pretrain_data, tmp_path, cli,
                                                                                      tiny_spm_model):
    model_dir = tmp_path / "m"
    code, _, err = cli("pretrain", *ph.pretrain_args(pretrain_data, model_dir, spm_model=tiny_spm_model))
    assert code == 2  # 300 pieces vs 1000
    assert "has 300 pieces but the config's vocab_size is 1,000" in err and len(err.strip().splitlines()) == 1
    assert not model_dir.exists()


def test_token_ids_past_the_vocabulary_are_refused_before_anything_is_written(pretrain_data, tmp_path):
    config = tmp_path / "small_vocab.json"
    TINY.replace(vocab_size=100).to_json_file(str(config))
    with pytest.raises(ValueError) as info:
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "m", config=config))
    err = str(info.value)
    assert "train.tfrecord" in err and "outside the config's vocab_size 100" in err
    assert not (tmp_path / "m").exists()


def test_truncated_records_are_refused_before_anything_is_written(pretrain_data, tmp_path, cli):
    cut = tmp_path / "cut.tfrecord"
    data = (pretrain_data / "train.tfrecord").read_bytes()
    cut.write_bytes(data[: len(data) - 100])
    args = ph.pretrain_args(pretrain_data, tmp_path / "m")
    args[args.index("--train-data") + 1] = str(cut)
    code, _, err = cli("pretrain", *args)
    assert code == 2
    assert "--train-data: " in err and "cut.tfrecord: truncated or corrupt TFRecord file" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "m").exists()


def file_bytes(directory):
    """{path under `directory`: its bytes} for every file below it."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


@pytest.mark.stack_agnostic  # Python above TensorFlow: covered on the TPU-side stacks by the tests around it
def test_rerunning_a_finished_run_says_it_is_complete(pretrain_data, eval_run, capsys):
    directory, first = eval_run  # 4 steps, evaluated
    assert first.status == "done" and first.metrics and first.eval_metrics
    written = (directory / "model" / "metrics.jsonl").read_text()
    files = file_bytes(directory / "model")
    capsys.readouterr()
    result = albert_tf.pretrain(eval_run_config(pretrain_data, directory))
    assert (result.status, result.step, result.exit_code) == ("complete", 4, 0)
    # the final metrics, as the run that trained them returned them (before: {}; README's example raised KeyError)
    assert result.metrics == pytest.approx(first.metrics) and result.eval_metrics == pytest.approx(first.eval_metrics)
    out = capsys.readouterr().out
    assert "already complete at step 4" in out and "train step" not in out
    assert (directory / "model" / "metrics.jsonl").read_text() == written  # no row added
    after = file_bytes(directory / "model")  # nothing written (eval_run's other tests read the same files)
    assert sorted(after) == sorted(files) and [name for name in files if after[name] != files[name]] == []


def test_rerunning_a_finished_run_whose_final_evaluation_is_missing_evaluates_it(pretrain_data, eval_run, tmp_path,
                                                                                  capsys):
    """A run whose process ended in its final evaluation (after the last checkpoint: a TPU lost there) is complete
    without the eval row of its last step: the same command evaluates that checkpoint and writes the row the run
    would have written (the same metrics as the original run's), then a re-run writes nothing."""
    directory, first = eval_run
    shutil.copytree(directory, tmp_path / "copy")
    metrics = tmp_path / "copy" / "model" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    kept = [row for row in rows if (row["split"], row["step"]) != ("eval", 4)]
    assert len(kept) == len(rows) - 1
    metrics.write_text("".join(json.dumps(row) + "\n" for row in kept))
    capsys.readouterr()
    result = albert_tf.pretrain(eval_run_config(pretrain_data, tmp_path / "copy"))
    assert (result.status, result.step) == ("complete", 4)
    assert "its evaluation at step 4 is missing" in capsys.readouterr().out
    assert result.eval_metrics == pytest.approx(first.eval_metrics, rel=1e-6)
    again = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert again[:-1] == kept and (again[-1]["split"], again[-1]["step"]) == ("eval", 4)
    assert {k: v for k, v in again[-1].items() if k not in ("split", "step")} == pytest.approx(first.eval_metrics,
                                                                                              rel=1e-6)
    files = file_bytes(tmp_path / "copy" / "model")
    assert albert_tf.pretrain(eval_run_config(pretrain_data, tmp_path / "copy")).status == "complete"
    assert "is missing" not in capsys.readouterr().out and file_bytes(tmp_path / "copy" / "model") == files


def test_a_resume_with_another_schedule_says_which_settings_changed(pretrain_data, eval_run, capsys):
    """The schedule is not kept on resume (a wsd run may be extended; a recipe's schedule may change between
    releases), so a resume that changes it says so in one line naming each setting with its started value; the
    same settings say nothing. (A finished run's re-run: it writes nothing, so eval_run stays as it was.)"""
    directory, _ = eval_run
    files = file_bytes(directory / "model")
    capsys.readouterr()
    albert_tf.pretrain(eval_run_config(pretrain_data, directory))
    assert "another learning-rate schedule" not in capsys.readouterr().err
    changed = dataclasses.replace(eval_run_config(pretrain_data, directory), schedule="wsd", decay_start=0.5,
                                  learning_rate=0.002)
    assert albert_tf.pretrain(changed).status == "complete"
    notes = [line for line in capsys.readouterr().err.splitlines() if "another learning-rate schedule" in line]
    assert notes == [f"albert-tf pretrain: note: {directory / 'model' / 'pretrain_config.json'}: resuming with another "
                     "learning-rate schedule than the run started with: learning_rate 0.002 (started 0.01), "
                     "schedule 'wsd' (started 'polynomial'), decay_start 0.5 (started 0.9); the rate follows it "
                     "from the resumed step (give the started values to keep the run's)"]
    assert file_bytes(directory / "model") == files


def test_a_batch_this_machine_cannot_hold_is_refused_with_what_fits(pretrain_data, tmp_path, capsys):

    args = PretrainConfig(config="albert_base", train_data="d", model_dir=str(tmp_path / "m"), batch_size=4096,
                          max_seq_length=512, max_predictions=20)
    base = AlbertConfig.from_preset("albert_base")
    one_replica = BatchPlan(global_batch=4096, replicas=1, accumulation_steps=1, streams=2, eval_global_batch=4096)

    def check(steps=1, total=16 * 2**30):
        batch = dataclasses.replace(one_replica, accumulation_steps=steps)
        pretraining.check_host_memory(args, base, batch, dtype="float32", total=total)

    with pytest.raises(ValueError) as info:
        check()
    message = str(info.value)
    assert "--batch-size 4096 at --max-seq-length 512 needs about" in message and "16.0 GiB" in message
    # what keeps the global batch comes first: the fewest accumulation steps that fit
    steps = int(message.split("(--gradient-accumulation-steps ")[1].split()[0])
    assert "same global batch" in message
    check(steps)  # the hint is true
    with pytest.raises(ValueError):
        check(steps // 2)  # and the least
    # a model too big for any batch: the smaller-batch advice
    with pytest.raises(ValueError, match="no batch fits"):
        check(total=2**30)


# ------------------------------------------------------------------------------------------ from Python
@pytest.mark.stack_agnostic  # Python above TensorFlow: covered on the TPU-side stacks by the tests around it
def test_pretrain_from_python_equals_the_cli_and_returns_its_result(pretrain_data, tmp_path, cli):
    """albert_tf.pretrain(config) trains exactly as `albert-tf pretrain` with the same flags (the CLI's run must
    agree, bit for bit), returns the last metrics row (the one metrics.jsonl holds), writes
    the config as the run record, and resumes against it: a different --batch-size is refused, naming it."""
    result = albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "py", steps=4))
    assert (result.status, result.step, result.exit_code) == ("done", 4, 0)
    assert result.checkpoint.endswith("ckpt-4") and result.model_dir == str(tmp_path / "py")
    assert {"split": "train", "step": 4, **result.metrics} == ph.train_metrics(tmp_path / "py")[4]
    assert cli("pretrain", *ph.pretrain_args(pretrain_data, tmp_path / "cli", steps=4))[0] == 0
    ph.assert_bit_exact(tmp_path / "py", tmp_path / "cli", 4)
    record = json.loads((tmp_path / "py" / "pretrain_config.json").read_text())
    assert (record["batch_size"], record["config_overrides"]) == (16, {})
    assert record["model_dir"] == str(tmp_path / "py") and record["train_data"] == str(pretrain_data / "train.tfrecord")
    assert record["dtype"] == "auto" and record["dtype_choice"]["dtype"] == "float32"  # tests fix auto's meaning
    assert "ALBERT_TF_AUTO_DTYPE" in record["dtype_choice"]["reason"]
    again = albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "py", steps=6))  # more steps: resumes
    assert (again.status, again.step) == ("done", 6)
    assert albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "py", steps=6)).status == "complete"
    with pytest.raises(ValueError, match=r"pretrain_config.json: the output directory holds a run with other "
                                         r"settings: batch_size 8 \(recorded 16\)"):
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "py", steps=8, batch_size=8))


@pytest.mark.slow
def test_bfloat16_trains_as_float32_does_within_tolerance(pretrain_data, tmp_path):
    """Mixed bfloat16 (matmuls and activations in bf16, variables float32) on the tiny config: the same run's
    losses within a few percent of float32's, and the choice recorded."""
    rows = {}
    for dtype in ("float32", "bfloat16"):
        albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / dtype, steps=4, dtype=dtype))
        rows[dtype] = ph.train_metrics(tmp_path / dtype)[4]
        record = json.loads((tmp_path / dtype / "pretrain_config.json").read_text())
        assert record["dtype_choice"] == {"dtype": dtype, "reason": "--dtype", "rates_gflops": None}
    for key in ("masked_lm_loss", "sentence_order_loss"):
        assert rows["bfloat16"][key] == pytest.approx(rows["float32"][key], rel=0.03), key


@pytest.mark.stack_agnostic  # Python above TensorFlow: covered on the TPU-side stacks by the tests around it
def test_pretrain_on_a_worker_thread_installs_no_signal_handler(pretrain_data, tmp_path):
    """From a thread (as a notebook's background job runs it) the run installs no handler: Python allows them on
    the main thread only. The handlers seen during the run are the process's own."""
    import threading

    import albert_tf
    from albert_tf.training import run

    seen, results = [], []
    original = run.write_scalar_summary

    def spy(name, value):
        seen.append((signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)))
        return original(name, value)

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    run.write_scalar_summary = spy
    try:
        worker = threading.Thread(target=lambda: results.append(albert_tf.pretrain(ph.pretrain_config(
            pretrain_data, tmp_path / "thread", steps=2))))
        worker.start()
        worker.join(timeout=300)
    finally:
        run.write_scalar_summary = original
    assert results and results[0].status == "done" and seen and set(seen) == {before}


def test_old_flag_spellings_work_with_a_one_line_notice(pretrain_data, tmp_path, cli):
    args = ph.pretrain_args(pretrain_data, tmp_path / "old", steps=2)
    args[args.index("--batch-size")] = "--train-batch-size"
    code, _, err = cli("pretrain", *args, "--init-checkpoint", tmp_path / "missing")
    assert code == 2  # parsed as --init
    err = err.splitlines()
    assert err[0] == ("albert-tf pretrain: note: --train-batch-size is deprecated and will be removed in the next "
                      "release; use --batch-size")
    assert err[1].startswith("albert-tf pretrain: note: --init-checkpoint is deprecated") and err[1].endswith("--init")
    assert err[2].startswith(f"albert-tf pretrain: error: --init {tmp_path / 'missing'}") and len(err) == 3


# ------------------------------------------------------------------------------------------ the data: one run, intact
def write_shards(directory, prefix, total, indexed, records=24, seed=0):
    """create-data's layout without create-data: PREFIX-SSSSS-of-TOTAL.tfrecord, and its record-count index when
    `indexed`. Returns the paths."""
    from albert_tf.data import record_index  # pylint: disable=import-outside-toplevel

    paths = [ph.write_records(str(directory / f"{prefix}-{i:05d}-of-{total:05d}.tfrecord"), records, SEQ, PRED,
                              seed=seed + i) for i in range(total)]
    if indexed:
        record_index.write_index(record_index.index_path(str(directory / prefix)),
                                 {os.path.basename(p): (records, os.path.getsize(p)) for p in paths})
    return paths


def test_a_glob_mixing_two_create_data_runs_is_refused_naming_them(pretrain_data, tmp_path, cli):
    """An earlier 4-shard run's files beside a later 2-shard run's (whose index lists only its own): the glob over
    the prefix is refused with one line naming both runs, and the earlier run's shards alone as not listed."""
    data = tmp_path / "data"
    data.mkdir()
    old = write_shards(data, "train", 4, indexed=False, seed=10)
    new = write_shards(data, "train", 2, indexed=True)
    args = ph.pretrain_args(pretrain_data, tmp_path / "m")
    args[args.index("--train-data") + 1] = str(data / "train-*")
    assert cli("pretrain", *args)[::2] == (2, (
        f"albert-tf pretrain: error: --train-data matches the shards of 2 create-data runs of {data / 'train'}: "
        f"2 of 2 shards ({new[0]}, {new[1]}); 4 of 4 shards ({old[0]}, {old[1]}, {old[2]} and 1 more); delete the "
        "stale ones (create-data --overwrite removes them) or narrow the pattern\n"))
    args[args.index("--train-data") + 1] = str(data / "train-*-of-00004.tfrecord")
    assert cli("pretrain", *args)[::2] == (2, (
        f"albert-tf pretrain: error: --train-data matches 4 file(s) that {data / '.train.record_counts.json'}, the "
        f"record-count index of the last create-data run of {data / 'train'}, does not list: {old[0]}, {old[1]}, "
        f"{old[2]} and 1 more; they are an earlier run's: delete them or narrow the pattern\n"))
    assert not (tmp_path / "m").exists()
    # other data sets beside them are not judged: two prefixes, and a file of no create-data name
    from albert_tf.data import record_index  # pylint: disable=import-outside-toplevel

    (tmp_path / "other").mkdir()
    wiki = write_shards(tmp_path / "other", "wiki", 3, indexed=True)
    record_index.check_one_run(new + wiki + [str(pretrain_data / "train.tfrecord")], "--train-data")


@pytest.mark.slow
def test_start_up_line_gives_files_and_records_per_pipeline_and_progress_goes_to_stderr(pretrain_data, tmp_path):
    """stdout holds the run's record (the start-up lines, metrics rows, the done line), stderr its progress."""
    data = tmp_path / "data"
    data.mkdir()
    write_shards(data, "train", 2, indexed=True)
    args = ph.pretrain_args(pretrain_data, tmp_path / "m", steps=2)
    args[args.index("--train-data") + 1] = str(data / "train-*")
    proc = ph.run_cli("pretrain", args)
    out, err = proc.stdout.splitlines(), proc.stderr.splitlines()
    assert "input pipeline 1/1: 2 train file(s) (files 0::1 of the 2 sorted), 48 records" in out
    assert [line.split(":")[0] for line in out if line.startswith(("train step", "done"))] == ["train step 2", "done"]
    assert any(line.startswith("progress: step 1/2 ") for line in err), proc.stderr
    assert not [line for line in out if line.startswith("progress:")]
    # no index: not counted
    unindexed = ph.run_cli("pretrain", ph.pretrain_args(pretrain_data, tmp_path / "m2", steps=1)).stdout
    assert ("input pipeline 1/1: 1 train file(s) (files 0::1 of the 1 sorted), records not counted (no record-count "
            "index beside the files)") in unindexed.splitlines()


def test_data_error_lines_name_the_file_without_the_assertions_brackets():
    from albert_tf.data.pretraining_input import data_error  # pylint: disable=import-outside-toplevel

    message = ("assertion failed: [/d/train.tfrecord: truncated or corrupt TFRecord file (read 5680340 of 1088974 "
               "bytes: the file grew after the run started)]\n\t [[{{node Assert/Assert}}]] [Op:__inference_loop_9]")
    assert data_error(tf.errors.InvalidArgumentError(None, None, message)) == (
        "/d/train.tfrecord: truncated or corrupt TFRecord file (read 5680340 of 1088974 bytes: the file grew after "
        "the run started)")
    assert data_error(tf.errors.InvalidArgumentError(None, None, "Incompatible shapes")) is None


@pytest.mark.slow  # two pretraining processes of about 160 steps (two to three minutes on this shared machine)
def test_data_changed_mid_run_saves_the_last_completed_step_and_names_the_file(tmp_path):
    """The data file grows under a running pretrain (records appended once the first call has read its first
    records). The run stops with one line naming the file and its sizes at start and now, after saving the last
    completed step, whose weights equal those of an undisturbed run at that step (a second process)."""
    path = tmp_path / "train.tfrecord"
    ph.write_records(str(path), 2000, SEQ, PRED, seed=0)
    original = path.read_bytes()
    TINY.to_json_file(str(tmp_path / "albert_config.json"))

    def args(model_dir, save_every=10):
        return ph.pretrain_args(tmp_path, model_dir, steps=1000, batch_size=64, steps_per_loop=10,
                         save_checkpoints_steps=save_every)

    changed = tmp_path / "changed"
    proc = ph.spawn("pretrain", *args(changed))
    proc.wait_until(proc.has("progress: step 1/", "stderr"))
    with open(path, "ab") as f:  # the file grows: a second run of a tool appending to it, say
        f.write(original[: len(original) // 4])
    _, out, err = proc.finish(timeout=600)
    assert proc.returncode == 2, out + err
    step = int(tf.train.latest_checkpoint(str(changed)).rsplit("-", 1)[1])
    assert 1 < step < 1000 and step % 10 != 0, step  # past the last periodic checkpoint: saved at the error
    assert err.strip().splitlines()[-1] == (
        f"albert-tf pretrain: error: --train-data: {path} changed during the run: {len(original):,} bytes at "
        f"start, {len(original) + len(original) // 4:,} bytes now; saved step {step}, the last completed one, first "
        f"({changed}/ckpt-{step}). Put the data back as it was and run the same command to resume, or train on new "
        "data in a new --model-dir")
    path.write_bytes(original)
    undisturbed = tmp_path / "undisturbed"  # the same run (same schedule), its first checkpoint at that step
    ph.run_cli_killed_when("pretrain", args(undisturbed, save_every=step), str(undisturbed / "checkpoint"))
    ph.assert_bit_exact(undisturbed, changed, step)


def test_a_bfloat16_run_leaves_the_global_dtype_policy_as_it_was(pretrain_data, tmp_path):
    """pretrain sets Keras' global policy to its compute dtype while it runs and restores it after: a notebook's (or
    a test's) later models are not built in bfloat16."""
    import keras  # pylint: disable=import-outside-toplevel

    before = keras.mixed_precision.global_policy().name
    assert before != "mixed_bfloat16"
    result = albert_tf.pretrain(ph.pretrain_config(pretrain_data, tmp_path / "m", steps=1, dtype="bfloat16"))
    assert result.exit_code == 0
    record = json.loads((tmp_path / "m" / "pretrain_config.json").read_text())
    assert record["dtype_choice"]["dtype"] == "bfloat16"
    assert keras.mixed_precision.global_policy().name == before


@pytest.mark.stack_agnostic  # Python above TensorFlow: covered on the TPU-side stacks by the tests around it
def test_step_saves_are_kept_apart_from_the_rotation(pretrain_data, tmp_path):
    """--keep-checkpoint-max 1 keeps one checkpoint in the model dir, while the saves of every
    --save-checkpoints-steps step stay in MODEL_DIR/steps (all of them, or the newest N, or none with 0); each is a
    checkpoint of its own step."""
    def steps_kept(directory):
        return sorted(int(p.split("-")[-1].split(".")[0]) for p in glob.glob(os.path.join(directory, "ckpt-*.index")))

    for keep, expected in ((None, [2, 4, 6]), (2, [4, 6]), (0, [])):
        model_dir = tmp_path / f"keep_{keep}"
        config = ph.pretrain_config(pretrain_data, model_dir, steps=6, keep_checkpoint_max=1,
                                    keep_step_checkpoints=keep)
        assert albert_tf.pretrain(config).exit_code == 0
        assert steps_kept(model_dir) == [6]
        assert steps_kept(model_dir / "steps") == expected
    reader = tf.train.load_checkpoint(str(tmp_path / "keep_None" / "steps" / "ckpt-4"))
    assert reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == 4

"""The pod rehearsal on CPU (albert_tf.training.rehearsal): 2 local workers under MultiWorkerMirroredStrategy, each
with a slice's devices per host as CPU replicas, run the same `albert-tf pretrain`, a SIGTERM to one stops both at
one saved step, the rerun resumes, and the final weights equal a one-process run with as many CPU replicas, each
pipeline's replicas fed as its worker's are; a worker SIGKILLed mid-run ends the others and the relaunch resumes.
The slow ones: two workers of one replica stop, resume and equal the one-process run; a slice of 4 devices per host
(v4-32 on 2 of its hosts; v5litepod-16 scaled to 4 chips per host has the same shape) loses a host. The stop, resume
and equality at 2 hosts x 4 devices (`python -m albert_tf.training.rehearsal --topology v5litepod-16 ...`, 418 s
here) stays out of CI for its time; the fast test below checks 2 workers x 2 replicas against the reference. Plus its
small parts."""
import json

import pytest
import tensorflow as tf

import helpers as ph
from albert_tf.training import distribute, rehearsal

SEQ, PRED, FILES = 32, 5, 4
# The host-loss test's shape, from the device table: v4-32 (4 hosts x 4 chips) on 2 hosts.
V4_SHAPE = rehearsal.rehearsal_shape("v4-32")


def write_config(directory):
    """The slow tests' model: helpers' one-layer PRETRAIN_TINY, written as DIRECTORY/albert_config.json (its path).
    albert_tiny's two groups of layers cost every worker a longer first call (tracing and compiling the step on
    each replica), and what these tests check is the workers, not the model."""
    path = str(directory / "albert_config.json")
    ph.PRETRAIN_TINY.to_json_file(path)
    return path


@pytest.mark.slow  # five TensorFlow processes (a reference alongside 2 workers, then 2 workers): ~3-5 minutes
def test_two_workers_stop_together_resume_and_equal_the_one_process_run(tmp_path):
    """2 workers of one replica: stopped together, resumed, equal to one process of 2 replicas, each fed as its
    worker is; the eval split over 2 pipelines counting every record once."""
    workers, replicas = 2, 1
    for f in range(FILES):
        ph.write_records(str(tmp_path / f"train-{f}.tfrecord"), 64, SEQ, PRED, seed=f)
    ph.write_records(str(tmp_path / "eval-0.tfrecord"), 21, SEQ, PRED, seed=99)  # one file, 2 workers: split by record
    args = ["--config", write_config(tmp_path), "--train-data", str(tmp_path / "train-*"), "--max-seq-length", SEQ,
            "--eval-data", str(tmp_path / "eval-*"), "--eval-batch-size", 8,
            "--max-predictions", PRED, "--batch-size", 8, "--num-train-steps", 24, "--num-warmup-steps", 2,
            "--steps-per-loop", 2, "--save-checkpoints-steps", 4, "--learning-rate", 0.01]
    report = rehearsal.rehearse(args, workers, str(tmp_path / "runs"), alongside=True, replicas=replicas)
    assert report["failures"] == [], report
    print(f"rehearsal: {json.dumps(report)}")
    stopped = report["stopped_at"][0]
    assert report["replicas"] == [2, 2]
    assert report["stopped_at"] == [stopped] * workers and 0 < stopped < 24  # stopped together, mid-run
    assert sorted(report["pipelines"]) == ["1/2", "2/2"] and report["leftovers"] == []
    assert report["final_checkpoint"] == "ckpt-24" and report["max_abs_diff"] <= 1e-5
    # eval on 2 hosts (one file, 21 records: split by record, the last batches padded) == eval on one
    # process
    assert 24 in report["eval_steps"] and report["eval_max_rel_diff"] <= 1e-5
    pod = tmp_path / "runs" / "pod"
    rows = [json.loads(line) for line in (pod / "metrics.jsonl").read_text().splitlines()]
    for split in ("train", "eval"):  # one row per (split, step): the chief's only
        steps = [r["step"] for r in rows if r["split"] == split]
        assert steps == sorted(set(steps)), (split, steps)
    assert {r["step"] for r in rows if r["split"] == "train"} >= {stopped, 24}


@pytest.mark.slow  # two launches of 2 workers (compiles of a minute or more each on this shared machine)
def test_a_v4_shaped_host_lost_mid_run_ends_the_others_with_76_and_the_relaunch_resumes(tmp_path):
    """2 workers x 4 CPU replicas (v4-32's 4 chips per host, on 2 hosts). SIGKILL to worker 1 (no handler runs: a
    host that goes away) 0.5 s after the chief's second checkpoint: the chief exits 76 within seconds (the
    coordination service's heartbeats; the collectives are bounded by --collective-timeout-secs besides); the
    relaunch of both workers resumes from the last checkpoint and finishes. Saves come every second by the clock
    and every 20 steps: the first is the clock's (after the first call, which compiles), and the second comes by
    step 20 however fast the machine, so the kill lands mid-run (by step 20 plus the steps of about a second, of
    160) without a run of thousands of steps to outlast a clock on a fast machine."""
    for f in range(FILES):
        ph.write_records(str(tmp_path / f"train-{f}.tfrecord"), 64, SEQ, PRED, seed=f)
    save_secs, save_steps, steps = 1, 20, 160
    args = ["--config", write_config(tmp_path), "--train-data", str(tmp_path / "train-*"), "--max-seq-length", SEQ,
            "--max-predictions", PRED, "--batch-size", 8, "--num-train-steps", steps, "--num-warmup-steps", 2,
            "--steps-per-loop", 10, "--save-checkpoints-steps", save_steps, "--save-checkpoints-secs", save_secs,
            "--learning-rate", 0.01, "--collective-timeout-secs", 30]
    workers, replicas = V4_SHAPE
    report = rehearsal.lose_a_worker([str(a) for a in args], workers, str(tmp_path / "runs"), kill_delay=0.5,
                                     exit_bound=60, replicas=replicas, after_second_save=True)
    print(f"worker loss: {json.dumps(report)}")
    assert report["failures"] == [], report
    assert (workers, replicas) == (2, 4) and report["replicas"] == [8, 8]
    assert report["exit_codes"] == [76, -9] and report["seconds_to_exit"][0] <= 60
    # the first save is the clock's (off the 20-step grid): saves by the clock bound the loss
    assert report["first_saved_step"] % save_steps != 0
    assert report["saved_step"] >= report["second_saved_step"] > report["first_saved_step"]
    assert report["checkpoint_age_at_kill_s"] <= save_secs + 10 and report["saved_step"] < steps
    assert report["resumed_step"] == report["saved_step"] and report["steps_lost"] >= 0


def test_lost_worker_logs_and_checkpoint_state(tmp_path):
    line = ("albert-tf pretrain: error: the TPU / runtime or a peer worker went away after step 30 (UnavailableError: "
            "...); the last checkpoint is m/ckpt-20: relaunch the same command to resume from it")
    assert rehearsal.lost_after_step(line) == 30 and rehearsal.lost_after_step("done: step 40") is None
    assert rehearsal.saved_step(str(tmp_path)) is None
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\nall_model_checkpoint_paths: "ckpt-10"\n'
                                         'all_model_checkpoint_paths: "ckpt-20"\n')
    assert rehearsal.saved_step(str(tmp_path)) == 20


# ---------------------------------------------------------------------------------------------- the parts
def test_free_ports_are_distinct_loopback_ports():
    ports = rehearsal.free_ports(4)
    assert len(set(ports)) == 4 and all(1024 <= p < 65536 for p in ports)
    config = json.loads(rehearsal.tf_config(ports, 1))
    assert config == {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": 1}}


def test_log_parsing_and_leftovers(tmp_path):
    logs = ["input pipeline 1/2: train files 0::2\na stop on another worker: saved step 6 (m/ckpt-6); exiting\n",
            "input pipeline 2/2: train files 1::2\nSIGTERM: saved step 6 (m/ckpt-6); exiting\n", "nothing\n"]
    assert rehearsal.stop_steps(logs) == [6, 6, None]
    assert rehearsal.input_pipelines(logs) == ["1/2", "2/2", None]
    for name in ("checkpoint", "ckpt-4.index", "metrics.jsonl", "albert_config.json", "train", "pretrain_config.json",
                 ".worker_1"):
        (tmp_path / name).write_text("")
    assert rehearsal.leftovers(str(tmp_path)) == [".worker_1"]


def test_input_pipelines_setting_is_checked():
    with pytest.raises(ValueError, match="ALBERT_TF_INPUT_PIPELINES=per-host: expected per-worker"):
        distribute.create_strategy(cpu_replicas=1, environ={"ALBERT_TF_INPUT_PIPELINES": "per-host"})


def test_the_reference_feeds_each_replica_its_own_pipeline():
    """PipelinesInputStrategy calls dataset_fn once per pipeline with that pipeline's InputContext."""
    devices = [d.name for d in tf.config.list_logical_devices("CPU")][:1]
    strategy = distribute.PipelinesInputStrategy(devices, 1)
    contexts = []

    def dataset_fn(context):
        contexts.append((context.input_pipeline_id, context.num_input_pipelines))
        return tf.data.Dataset.range(4).batch(context.get_per_replica_batch_size(2))

    batch = next(iter(strategy.distribute_datasets_from_function(dataset_fn)))
    assert contexts == [(0, 1)] and strategy.experimental_local_results(batch)[0].numpy().tolist() == [0, 1]


@pytest.mark.parametrize("topology, shape", [
    ("v5litepod-16", (2, 8)), ("v5litepod-256", (2, 8)),   # v5e: 8 chips per host, a device per chip
    ("v4-16", (2, 4)), ("v4-32", (2, 4)),                  # v4: 4 chips per host, a device per chip (4 hosts → 2)
    ("v5p-16", (2, 4)), ("v3-32", (2, 8)), ("v2-32", (2, 8))])  # v2/v3: 4 chips of 2 cores per host
def test_a_slice_is_rehearsed_as_two_hosts_of_its_devices_per_host(topology, shape):
    assert rehearsal.rehearsal_shape(topology) == shape


@pytest.mark.parametrize("topology, says", [
    ("v5litepod-8", "--topology v5litepod-8: one host (8 TensorFlow devices): no pod to rehearse"),
    ("v4-8", "--topology v4-8: one host (4 TensorFlow devices)"),
    ("v6e-16", "v6e-16: TPU v6e is refused"), ("v4-12", "v4-12: not a TPU v4 slice")])
def test_a_one_host_or_unknown_slice_is_refused(topology, says):
    with pytest.raises(ValueError) as raised:
        rehearsal.rehearsal_shape(topology)
    assert str(raised.value).startswith(says) and "\n" not in str(raised.value)


def test_replicas_in_sync_come_from_each_workers_plan_line():
    logs = ["dtype float32\nplan: 38.4K parameters, 8 replica(s) x 1 examples, 0.00 GiB per replica\n",
            "plan: 38.4K parameters, 16 replica(s) x 2 examples, 0.00 GiB per replica\n", "nothing\n"]
    assert rehearsal.replicas_in_sync(logs) == [8, 16, None]


HOSTS_SCRIPT = """
import json, os, sys
import tensorflow as tf
from albert_tf.training import distribute
strategy = distribute.create_strategy(cpu_replicas=int(sys.argv[1]), environ=os.environ)
contexts = []
def dataset_fn(context):  # pipeline i: 100 i, 100 i + 1, ...; per-replica batch 2
    contexts.append([context.input_pipeline_id, context.num_input_pipelines, context.num_replicas_in_sync])
    start = 100 * context.input_pipeline_id
    return tf.data.Dataset.range(start, start + 50).batch(context.get_per_replica_batch_size(2 * 4))
batch = next(iter(strategy.distribute_datasets_from_function(dataset_fn)))
step = tf.function(lambda b: strategy.run(
    lambda x: tf.distribute.get_replica_context().all_reduce("sum", tf.reduce_sum(x)), args=(b,)))
print(json.dumps({"replicas": strategy.num_replicas_in_sync, "contexts": contexts,
                  "batches": [x.numpy().tolist() for x in strategy.experimental_local_results(batch)],
                  "sums": [int(x) for x in strategy.experimental_local_results(step(batch))]}))
"""


def test_two_workers_of_two_cpu_replicas_feed_and_sum_as_the_reference_with_two_pipelines(tmp_path):
    """The rehearsal's shape: 2 workers (TF_CONFIG) of `--cpu-replicas 2` each are 4 replicas, one input pipeline
    per worker feeding its 2 replicas; the one-process reference (`--cpu-replicas 4`, ALBERT_TF_INPUT_PIPELINES=2)
    gives each pair of replicas the same pipeline's batches. Hand-computed: pipeline 0 yields 0,1 | 2,3 and pipeline
    1 yields 100,101 | 102,103; the all-reduced sum is 412 on every replica."""
    import os  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    script = tmp_path / "hosts.py"
    script.write_text(HOSTS_SCRIPT)
    ports = rehearsal.free_ports(2)
    base = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", distribute.PIPELINES_ENV)}
    base["TF_CPP_MIN_LOG_LEVEL"] = "2"
    runs = [subprocess.Popen([sys.executable, str(script), "2"], stdout=subprocess.PIPE, text=True,
                             env={**base, "TF_CONFIG": rehearsal.tf_config(ports, i)}) for i in range(2)]
    runs.append(subprocess.Popen([sys.executable, str(script), "4"], stdout=subprocess.PIPE, text=True,
                                 env={**base, distribute.PIPELINES_ENV: "2"}))
    outs = [json.loads(run.communicate(timeout=300)[0].strip().splitlines()[-1]) for run in runs]
    worker0, worker1, reference = outs
    assert [w["replicas"] for w in outs] == [4, 4, 4]
    assert worker0["contexts"] == [[0, 2, 4]] and worker1["contexts"] == [[1, 2, 4]]
    assert reference["contexts"] == [[0, 2, 4], [1, 2, 4]]
    assert worker0["batches"] + worker1["batches"] == reference["batches"] == [[0, 1], [2, 3], [100, 101], [102, 103]]
    assert worker0["sums"] == worker1["sums"] == [412, 412] and reference["sums"] == [412] * 4

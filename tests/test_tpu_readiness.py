"""What a TPU run needs, checked without a TPU: the runtime configurations Google's TF-on-TPU tests use (the
decision table of image kind x environment x --tpu), the multi-step training loop compiles as one XLA program at
the paper's shapes (seq 512, 20 predictions, bfloat16 compute), per-host input pipelines read disjoint files that
cover the data, only the chief writes, and `--tpu NAME` / `--tpu local` reach the resolver with gs:// paths."""
import contextlib
import os
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

import helpers as ph
from albert_tf import cli, files
from albert_tf.runtime import host_xla, lock
from albert_tf.config import AlbertConfig
from albert_tf.data import pretraining_dataset
from albert_tf.training import distribute

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


SEQ, PRED, STEPS = 512, 20, 2
NO_HOST_XLA = "this TensorFlow has no XLA for the host (the TPU wheel): nothing stands in for the TPU's compiler"


def _stacked_batches(batch_size, steps):
    """`steps` pretraining batches of the paper's shapes, stacked: {name: [steps, batch, ...]} (static shapes)."""
    rng = np.random.default_rng(0)
    b, n = steps * batch_size, SEQ
    mask = (np.arange(n)[None, :] < rng.integers(n // 2, n + 1, (b, 1))).astype(np.int32)
    batches = {
        "input_word_ids": rng.integers(5, 30000, (b, n)).astype(np.int32) * mask,
        "input_mask": mask,
        "input_type_ids": (np.arange(n)[None, :] >= n // 3).astype(np.int32) * mask,
        "masked_lm_positions": np.sort(rng.integers(1, n // 2, (b, PRED)), -1).astype(np.int32),
        "masked_lm_ids": rng.integers(5, 30000, (b, PRED)).astype(np.int32),
        "masked_lm_weights": (rng.random((b, PRED)) < 0.9).astype(np.float32),
        "sentence_order_labels": rng.integers(0, 2, (b,)).astype(np.int32),
    }
    return {k: tf.constant(v.reshape((steps, batch_size) + v.shape[1:])) for k, v in batches.items()}


@pytest.mark.slow  # XLA:CPU compiles the whole loop at seq 512: ~1 min (2 busy cores)
@pytest.mark.skipif(not host_xla.available(), reason=NO_HOST_XLA)
def test_the_multi_step_loop_compiles_as_one_xla_program_at_the_papers_shapes():
    """pretrain's loop body (strategy.run of the train step, the cross-replica sums of the metrics) for STEPS steps
    inside one tf.function(jit_compile=True), the CPU standing in for the TPU compiler: every op must have an XLA
    kernel and a static shape, nothing may go back to the host inside the loop, and the matmuls run in bfloat16."""
    from albert_tf.modeling.pretrainer import AlbertPretrainer  # pylint: disable=import-outside-toplevel
    from albert_tf.training import LAMB, WarmupPolynomialDecay  # pylint: disable=import-outside-toplevel
    from albert_tf.training.pretrain_step import SUM_KEYS, make_train_step  # pylint: disable=import-outside-toplevel

    config = AlbertConfig.from_preset("albert_tiny")
    config = AlbertConfig(**dict(config.to_dict(), vocab_size=30000, max_position_embeddings=SEQ))
    batch_size = 2
    strategy = tf.distribute.get_strategy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(0)
        model = AlbertPretrainer(config)
        optimizer = LAMB(WarmupPolynomialDecay(0.00176, 125000, 3125))
        optimizer.build(model.trainable_variables)
        train_step = make_train_step(model, optimizer, batch_size)
        before = [v.numpy() for v in model.trainable_variables]

        @tf.function(jit_compile=True)
        def train_loop(batches, training):
            sums = {k: tf.constant(0.0) for k in SUM_KEYS}
            for i in tf.range(STEPS):
                batch = {k: v[i] for k, v in batches.items()}
                per_replica = strategy.run(train_step, args=(batch, training))
                sums = {k: sums[k] + strategy.reduce("sum", per_replica[k], axis=None) for k in SUM_KEYS}
            return sums

        batches = _stacked_batches(batch_size, STEPS)
        hlo = train_loop.experimental_get_compiler_ir(batches, True)(stage="hlo")
        sums = {k: float(v) for k, v in train_loop(batches, True).items()}
    finally:
        keras.mixed_precision.set_global_policy("float32")

    assert hlo.count("ENTRY") == 1 and " while(" in hlo  # one program; the steps are an XLA loop, not the host's
    for host_op in (" send(", " recv(", " outfeed(", " infeed(", "host_compute", "py_func"):
        assert host_op not in hlo, host_op
    assert "bf16[" in hlo and any("bf16[" in line and " dot(" in line for line in hlo.splitlines())
    assert int(optimizer.iterations.numpy()) == STEPS
    assert sums["mlm_weight"] == pytest.approx(float(tf.reduce_sum(batches["masked_lm_weights"])))
    assert sums["sop_count"] == STEPS * batch_size and np.isfinite(sums["mlm_nll"]) and sums["mlm_nll"] > 0
    changed = [not np.array_equal(a, v.numpy()) for a, v in zip(before, model.trainable_variables)]
    assert all(changed)


# ---------------------------------------------------------------------------------------------- per-host input
@pytest.mark.parametrize("hosts", [pytest.param(2, marks=pytest.mark.stack_agnostic),  # 4 hosts cover the stacks
                                   pytest.param(3, marks=pytest.mark.stack_agnostic), 4])
def test_each_host_pipeline_reads_distinct_files_and_together_all(tmp_path, hosts):
    """TPUStrategy gives each host one InputContext (num_input_pipelines = hosts); 7 files over 2-4 hosts."""
    files = 7
    owner = {}
    for f in range(files):
        path = str(tmp_path / f"part-{f:02d}.tfrecord")
        ph.write_records(path, 4, 32, 5, seed=100 + f)
        for record in tf.data.TFRecordDataset(path):
            ids = tf.io.parse_single_example(record, {"input_ids": tf.io.FixedLenFeature([32], tf.int64)})
            owner[tuple(ids["input_ids"].numpy())] = f
    replicas_per_host = 8
    seen = []
    for host in range(hosts):
        context = tf.distribute.InputContext(num_input_pipelines=hosts, input_pipeline_id=host,
                                             num_replicas_in_sync=hosts * replicas_per_host)
        dataset = pretraining_dataset(str(tmp_path / "part-*.tfrecord"), seq_length=32, max_predictions=5,
                                      batch_size=hosts * replicas_per_host, is_training=True, seed=0,
                                      input_context=context)
        batches = list(dataset.take(40))  # training shards by file (eval shares records), per-replica batches of 1
        assert {b["input_word_ids"].shape[0] for b in batches} == {1}
        seen.append({owner[tuple(b["input_word_ids"].numpy()[0])] for b in batches})
    for a in range(hosts):
        for b in range(a + 1, hosts):
            assert not seen[a] & seen[b], (a, b, seen)
    assert set().union(*seen) == set(range(files))


# ---------------------------------------------------------------------------------------------- who writes
class _FakeTPUStrategy(tf.distribute.TPUStrategy):  # pylint: disable=abstract-method
    """A TPUStrategy type without a TPU; `cluster_resolver` as a pod's (worker tasks)."""

    def __init__(self, task_id):  # pylint: disable=super-init-not-called
        self._resolver = types.SimpleNamespace(task_type="worker", task_id=task_id)

    @property
    def cluster_resolver(self):
        return self._resolver


def _strategy(task_type, task_id):
    return types.SimpleNamespace(cluster_resolver=types.SimpleNamespace(task_type=task_type, task_id=task_id))


def test_only_the_chief_writes():
    """TPU: one client (the process on worker 0) drives every host, so it writes; multi-worker: the chief, or
    worker 0 where there is no chief task; everything else takes part in saves but keeps nothing."""
    assert distribute.is_chief(_FakeTPUStrategy(task_id=0))
    assert distribute.is_chief(tf.distribute.get_strategy())
    assert distribute.is_chief(_strategy("chief", 0))
    assert distribute.is_chief(_strategy("worker", 0))
    assert not distribute.is_chief(_strategy("worker", 1))
    assert not distribute.is_chief(_strategy("evaluator", 0))


# ---------------------------------------------------------------------------------------------- the runtime table
LIB = "/lib/libtpu.so"
PJRT = {"NEXT_PLUGGABLE_DEVICE_USE_C_API": "true", "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": LIB}
POD = {"TPU_LOAD_LIBRARY": "0"}


@pytest.mark.parametrize("image, tpu, env, problem", [
    # what Google's tests run (ml-auto-solutions dags/solutions_team/configs/tensorflow, docs/tpu_runtime.md)
    ("pjrt", "local", {"TPU_NAME": "local", **PJRT}, None),
    (None, "local", {"TPU_NAME": "local", **PJRT}, None),
    ("pod-pjrt", "pod", {"TPU_NAME": "pod", **POD}, None),
    (None, "pod", POD, None),
    ("se", "local", {"TPU_NAME": "local"}, None),
    (None, "local", {}, None),
    ("pod-se", "pod", {"TPU_NAME": "pod", **POD}, None),
    # a pod slice without TPU_LOAD_LIBRARY=0, or with the single-host PJRT variables
    ("pod-pjrt", "pod", {}, "--tpu pod (a pod slice): export TPU_LOAD_LIBRARY=0"),
    (None, "pod", {"TPU_LOAD_LIBRARY": "1"}, "--tpu pod (a pod slice): export TPU_LOAD_LIBRARY=0"),
    ("pod-pjrt", "pod", {**POD, **PJRT},
     "unset NEXT_PLUGGABLE_DEVICE_USE_C_API and TF_PLUGGABLE_DEVICE_LIBRARY_PATH"),
    (None, "pod", {**POD, "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": LIB}, "unset TF_PLUGGABLE_DEVICE_LIBRARY_PATH ("),
    ("pod-pjrt", "local", {**POD, **PJRT}, "--tpu local on a pod slice (image kind pod-pjrt"),
    # a single-host VM: --tpu local, the PJRT variables on a PJRT image, the runtime loaded
    ("pjrt", "my-vm", PJRT, "--tpu my-vm on a single-host TPU VM (image kind pjrt, from $ALBERT_TF_TPU_IMAGE): "
                            "use --tpu local"),
    ("pjrt", "local", {}, f"export NEXT_PLUGGABLE_DEVICE_USE_C_API=true TF_PLUGGABLE_DEVICE_LIBRARY_PATH={LIB}"),
    ("pjrt", "local", {"NEXT_PLUGGABLE_DEVICE_USE_C_API": "true"}, "TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/lib/libtpu.so"),
    ("pjrt", "local", {**PJRT, "NEXT_PLUGGABLE_DEVICE_USE_C_API": "false"}, "export NEXT_PLUGGABLE_DEVICE_USE_C_API"),
    (None, "local", {"TF_PLUGGABLE_DEVICE_LIBRARY_PATH": LIB}, "export NEXT_PLUGGABLE_DEVICE_USE_C_API=true"),
    ("pjrt", "local", {**PJRT, "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/nowhere/libtpu.so"},
     "TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/nowhere/libtpu.so: no such file"),
    ("pjrt", "local", {**PJRT, **POD}, "--tpu local: unset TPU_LOAD_LIBRARY"),
    (None, "local", POD, "--tpu local: unset TPU_LOAD_LIBRARY"),
    ("se", "local", PJRT, "unset NEXT_PLUGGABLE_DEVICE_USE_C_API and TF_PLUGGABLE_DEVICE_LIBRARY_PATH (a "
                          "StreamExecutor image"),
    # TPU_NAME (what TPUClusterResolver reads without an argument) naming another TPU
    (None, "pod", {"TPU_NAME": "other", **POD}, "--tpu pod: TPU_NAME=other names another TPU; export TPU_NAME=pod"),
    ("pjrt", "local", {"TPU_NAME": "pod", **PJRT}, "export TPU_NAME=local or unset it"),
])
def test_the_runtime_decision_table(image, tpu, env, problem):
    found = distribute.tpu_runtime_problem(tpu, env, image, libtpu=LIB, isfile=lambda p: p == LIB)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and "\n" not in found, found


def test_single_host_stream_executor_needs_a_runtime_to_load():
    found = distribute.tpu_runtime_problem("local", {}, "se", libtpu=None)
    assert found.startswith("--tpu local: no TPU runtime to load") and "libtpu" in found


@pytest.mark.parametrize("name, kind", [
    ("tpu-vm-tf-2.18.0-pjrt", "pjrt"), ("tpu-vm-tf-2.18.0-pod-pjrt", "pod-pjrt"), ("tpu-vm-tf-2.16.0-se", "se"),
    ("tpu-vm-tf-2.16.0-pod-se", "pod-se"), ("tpu-vm-tf-2.8.0", "se"), ("tpu-vm-tf-2.8.0-pod", "pod-se"),
    ("tpu-vm-tf-2.10.0-pod-v4", "pod-se"), ("tpu-vm-tf-nightly-pod", "pod-se"), ("v2-alpha-tpuv5", None),
    ("", None), (None, None), ("tpu-vm-tf-2.18.0-pjrt-v5p-and-below", "pjrt"), ("tpu-vm-tf-x-pod", None)])
def test_image_kind_from_the_runtime_version(name, kind):
    assert distribute.image_kind(name) == kind


def test_the_image_named_in_the_environment_decides(monkeypatch):
    """$ALBERT_TF_TPU_IMAGE (tpu/launch_pretrain.sh sets it) wins over what --tpu implies."""
    monkeypatch.setattr(distribute, "has_tpu_kernels", lambda: True)
    monkeypatch.setattr(distribute, "libtpu_path", lambda environ=None: LIB)
    with pytest.raises(ValueError, match="--tpu local on a pod slice"):
        distribute.check_tpu_support({"ALBERT_TF_TPU_IMAGE": "tpu-vm-tf-2.18.0-pod-pjrt", **PJRT}, tpu="local")
    distribute.check_tpu_support({"ALBERT_TF_TPU_IMAGE": "tpu-vm-tf-2.18.0-pod-pjrt", **POD}, tpu="pod")


# ---------------------------------------------------------------------------------------------- --tpu up to the resolver
@pytest.fixture
def resolver_calls(monkeypatch):
    """The TPU check passes; TPUClusterResolver records its argument and stops the run there."""
    calls = []
    monkeypatch.setattr(distribute, "has_tpu_kernels", lambda: True)
    monkeypatch.setattr(distribute, "libtpu_path", lambda environ=None: "/lib/libtpu.so")
    for name in ("TPU_LOAD_LIBRARY", "TPU_NAME", distribute.IMAGE_ENV) + distribute.PJRT_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    class StopAtResolver(Exception):
        pass

    def resolver(tpu=None):
        calls.append(tpu)
        raise StopAtResolver(tpu)

    def output_lock(directory, flag):  # the bucket is not reachable here: the lock records when it is taken
        calls.append(("lock", directory, flag))
        return contextlib.nullcontext()

    real_exists = files.exists

    def exists(path):  # the bucket probe of the flag checks (files.check_output_dir): recorded, answered "absent"
        if files.is_url(path):
            calls.append(("probe", os.fspath(path)))
            return False
        return real_exists(path)

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)
    monkeypatch.setattr(lock, "output_lock", output_lock)
    monkeypatch.setattr(files, "exists", exists)
    return calls, StopAtResolver


def _pretrain_args(tpu, **paths):
    # albert_tiny's 128 positions: --tpu's pod default (512) is refused before TensorFlow (jobs.pretrain.preflight)
    args = {"--config": "albert_tiny", "--train-data": "gs://bucket/data/train-*", "--model-dir": "gs://bucket/m",
            "--tpu": tpu, "--max-seq-length": 128}
    args.update(paths)
    return ["pretrain"] + [str(x) for kv in args.items() for x in kv]


@pytest.mark.parametrize("tpu", ["my-pod", "local"])
def test_pretrain_with_gs_paths_reaches_the_resolver_with_the_tpu_name(resolver_calls, monkeypatch, capsys, tpu):
    calls, stop = resolver_calls
    if tpu != "local":
        monkeypatch.setenv("TPU_LOAD_LIBRARY", "0")  # a pod slice's client, as Google's tests run it
    # the stand-in resolver stops the run: an unexpected error to the CLI (one line naming it, exit 1)
    assert cli.main(_pretrain_args(tpu, **{"--eval-data": "gs://bucket/data/eval-*"})) == 1
    assert f"{stop.__name__}: {tpu}" in capsys.readouterr().err
    # the flag checks probe the bucket, then the model dir's lock: a second client started by mistake must not
    # reach (and reset) the TPU
    assert calls[-2:] == [("lock", "gs://bucket/m", "--model-dir"), tpu]
    assert ("probe", "gs://bucket/m") in calls[:-2] and all(c[0] == "probe" for c in calls[:-2])


@pytest.mark.parametrize("flag", ["--train-data", "--model-dir", "--eval-data", "--init"])
def test_pretrain_with_a_local_path_stops_before_the_resolver(resolver_calls, monkeypatch, capsys, flag):
    calls, _ = resolver_calls
    monkeypatch.setenv("TPU_LOAD_LIBRARY", "0")
    assert cli.main(_pretrain_args("my-pod", **{flag: "/data/local"})) == 2
    err = capsys.readouterr().err
    assert f"{flag} /data/local: with --tpu" in err and "gs://" in err
    assert calls == []


def test_pretrain_on_a_tensorflow_without_tpu_support_says_what_to_install(resolver_calls, monkeypatch, capsys):
    calls, _ = resolver_calls
    monkeypatch.setattr(distribute, "has_tpu_kernels", lambda: False)
    assert cli.main(_pretrain_args("local")) == 2
    err = capsys.readouterr().err
    assert "--tpu: this TensorFlow" in err and "albert_tf[tpu]" in err and len(err.strip().splitlines()) == 1
    assert calls == []

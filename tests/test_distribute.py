"""Strategy selection from the flags; the TPU path up to the cluster resolver, with the resolver mocked; a failure
to reach the TPU told apart (may pass: exit 76; a bad name or setup: exit 2) through TensorFlow's own resolver and
Cloud TPU client, with only the API's HTTP answers faked."""
import functools
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.runtime.exit_codes import RuntimeLost
from albert_tf.training import distribute

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


class FakeResolver:
    instances = []

    def __init__(self, tpu=None):
        self.tpu = tpu
        FakeResolver.instances.append(self)


@pytest.fixture
def fake_tpu(monkeypatch):
    """A TensorFlow that passes check_tpu_support, with the resolver, connection, initialization and strategy
    recorded instead of run."""
    calls = []
    FakeResolver.instances = []
    monkeypatch.setattr(distribute, "has_tpu_kernels", lambda: True)
    monkeypatch.setattr(distribute, "libtpu_path", lambda environ=None: "/lib/libtpu.so")
    monkeypatch.delenv("TPU_LOAD_LIBRARY", raising=False)  # the TPU-stack CI job sets it for the TPU wheel
    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", FakeResolver)
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", lambda r: calls.append(("connect", r)))
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", lambda r: calls.append(("initialize", r)))

    class FakeTPUStrategy:
        def __init__(self, resolver):
            calls.append(("strategy", resolver))

    monkeypatch.setattr(tf.distribute, "TPUStrategy", FakeTPUStrategy)
    return calls, FakeTPUStrategy


def test_tpu_name_resolves_connects_initializes_then_builds_tpu_strategy(fake_tpu):
    calls, strategy_class = fake_tpu
    strategy = distribute.create_strategy(tpu="my-pod", environ={"TPU_LOAD_LIBRARY": "0"})
    assert isinstance(strategy, strategy_class)
    (resolver,) = FakeResolver.instances
    assert resolver.tpu == "my-pod"
    assert calls == [("connect", resolver), ("initialize", resolver), ("strategy", resolver)]


def test_tpu_local_skips_the_remote_connection(fake_tpu):
    calls, _ = fake_tpu
    distribute.create_strategy(tpu="local", environ={})
    assert [c[0] for c in calls] == ["initialize", "strategy"]
    assert FakeResolver.instances[0].tpu == "local"


def test_tpu_wins_over_tf_config_and_excludes_cpu_replicas(fake_tpu):
    calls, strategy_class = fake_tpu
    assert isinstance(distribute.create_strategy(tpu="t", environ={"TF_CONFIG": "{}", "TPU_LOAD_LIBRARY": "0"}),
                      strategy_class)
    with pytest.raises(ValueError, match="exclusive"):
        distribute.create_strategy(tpu="t", cpu_replicas=2)


def test_tf_config_selects_multi_worker_with_bounded_collectives(monkeypatch):
    made = []
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy",
                        lambda communication_options: made.append(communication_options) or "MWMS")
    assert distribute.create_strategy(environ={"TF_CONFIG": '{"cluster": {}}'}, collective_timeout_secs=30) == "MWMS"
    assert distribute.create_strategy(environ={"TF_CONFIG": '{"cluster": {}}'}, collective_timeout_secs=0) == "MWMS"
    assert [options.timeout_seconds for options in made] == [30, None]  # 0: no limit
    with pytest.raises(ValueError, match="TF_CONFIG: not valid JSON"):
        distribute.create_strategy(environ={"TF_CONFIG": "{oops"})


def test_no_flags_on_a_cpu_machine_is_the_default_strategy():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU: MirroredStrategy is the expected choice")
    assert distribute.create_strategy(environ={}) is tf.distribute.get_strategy()


def test_cloud_paths_check_names_the_flag():
    distribute.check_cloud_paths({"--train-data": "gs://b/train-*", "--eval-data": None})
    with pytest.raises(ValueError, match=r"--model-dir /tmp/m: with --tpu.*gs://"):
        distribute.check_cloud_paths({"--train-data": "gs://b/x", "--model-dir": "/tmp/m"})


# ---------------------------------------------------------------------------------------------- check_tpu_support
def test_a_tensorflow_without_tpu_kernels_is_refused_naming_what_to_install(monkeypatch):
    monkeypatch.setattr(distribute, "has_tpu_kernels", lambda: False)
    with pytest.raises(ValueError, match=r"not a TPU build.*pip install albert_tf, without the \[tf\] extra.*"
                                         r"albert_tf\[tpu\]"):
        distribute.check_tpu_support(environ={})


def test_tpu_kernels_without_libtpu_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(distribute, "has_tpu_kernels", lambda: True)
    monkeypatch.setattr(distribute, "LIBTPU_PATHS", (str(tmp_path / "absent.so"),))
    monkeypatch.setattr(distribute.importlib.util, "find_spec", lambda name: None)  # no libtpu package
    with pytest.raises(ValueError, match=r"no TPU runtime.*pip install \"libtpu>=0.0.14,<0.0.32\""):
        distribute.check_tpu_support(environ={})
    library = tmp_path / "libtpu.so"
    library.write_bytes(b"")
    distribute.check_tpu_support(environ={"TPU_LIBRARY_PATH": str(library)})  # passes
    with pytest.raises(ValueError, match="--tpu local: unset TPU_LOAD_LIBRARY"):
        distribute.check_tpu_support(environ={"TPU_LIBRARY_PATH": str(library), "TPU_LOAD_LIBRARY": "0"})
    # a pod slice's client loads no runtime: TPU_LOAD_LIBRARY=0 is what it needs, libtpu or not
    distribute.check_tpu_support(environ={"TPU_LOAD_LIBRARY": "0"}, tpu="my-pod")
    with pytest.raises(ValueError, match="export TPU_LOAD_LIBRARY=0"):
        distribute.check_tpu_support(environ={"TPU_LIBRARY_PATH": str(library)}, tpu="my-pod")


def test_create_strategy_checks_the_runtime_for_the_tpu_it_names(fake_tpu, monkeypatch):
    """The --tpu value reaches the runtime check: a pod name without TPU_LOAD_LIBRARY=0 stops before the resolver."""
    with pytest.raises(ValueError, match="my-pod \\(a pod slice\\): export TPU_LOAD_LIBRARY=0"):
        distribute.create_strategy(tpu="my-pod", environ={})
    assert FakeResolver.instances == []
    distribute.create_strategy(tpu="my-pod", environ={"TPU_LOAD_LIBRARY": "0", "TPU_NAME": "my-pod"})
    assert [r.tpu for r in FakeResolver.instances] == ["my-pod"]


def test_libtpu_is_found_in_the_libtpu_package(monkeypatch, tmp_path):
    (tmp_path / "libtpu").mkdir()
    (tmp_path / "libtpu" / "libtpu.so").write_bytes(b"")
    monkeypatch.setattr(distribute, "LIBTPU_PATHS", ())
    spec = types.SimpleNamespace(submodule_search_locations=[str(tmp_path / "libtpu")])
    monkeypatch.setattr(distribute.importlib.util, "find_spec", lambda name: spec if name == "libtpu" else None)
    assert distribute.libtpu_path(environ={}) == str(tmp_path / "libtpu" / "libtpu.so")


def test_the_tpu_check_runs_before_the_resolver(monkeypatch):
    monkeypatch.setattr(distribute, "has_tpu_kernels", lambda: False)
    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver",
                        lambda tpu=None: pytest.fail("resolver created before the TPU check"))
    with pytest.raises(ValueError, match="not a TPU build"):
        distribute.create_strategy(tpu="my-pod", environ={})


def test_this_tensorflow_has_tpu_kernels_exactly_when_it_is_the_tpu_wheel():
    from albert_tf.runtime import requirements
    assert distribute.has_tpu_kernels() == (requirements.installed_tensorflow()[0] == "tensorflow-tpu")


# ---------------------------------------------------------------------------------------------- --xla
@pytest.mark.parametrize("flag, on_tpu, use_gpu, host, want", [
    ("auto", False, False, True, False), ("auto", False, True, True, True), ("on", False, False, True, True),
    ("off", False, True, True, False), ("on", True, False, True, False), ("auto", False, True, False, False),
    ("off", False, False, False, False)])
def test_use_xla(flag, on_tpu, use_gpu, host, want):
    from albert_tf.runtime import host_xla
    with host_xla.override(host):
        assert distribute.use_xla(flag, on_tpu, use_gpu) is want


def test_xla_on_without_host_xla_is_refused():
    from albert_tf.runtime import host_xla
    with host_xla.override(False), pytest.raises(ValueError, match="--xla on: .*no host XLA.*--xla off"):
        distribute.use_xla("on", on_tpu=False, use_gpu=False)


# ---------------------------------------------------------------------------------------------- reaching the TPU
class HttpError(Exception):
    """An error as googleapiclient's HttpError prints itself (its status and the request)."""

    def __init__(self, status, reason):
        super().__init__(status, reason)
        self.status, self.reason = status, reason

    def __str__(self):
        return (f'<HttpError {self.status} when requesting https://tpu.googleapis.com/v1/projects/p/locations/z/nodes/'
                f'a-slice?alt=json returned "{self.reason}". Details: "{self.reason}">')


class FakeTpuApi:
    """The Cloud TPU API's `projects().locations().nodes().get(name=...).execute()`, answering `answer` (raised
    when it is an exception); the names asked for are kept in `calls`."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def projects(self):
        return self

    def locations(self):
        return self

    def nodes(self):
        return self

    def get(self, name):
        self.calls.append(name)
        return self

    def execute(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("answer, lost, says", [
    (HttpError(503, "The service is currently unavailable."), True, "the Cloud TPU API did not answer (<HttpError 503"),
    (HttpError(429, "Quota exceeded"), True, "the Cloud TPU API did not answer (<HttpError 429"),
    (TimeoutError("timed out"), True, "the Cloud TPU API did not answer (timed out)"),
    ({"state": "REPAIRING"}, True, 'TPU "a-slice" is not yet ready; state: "REPAIRING"; relaunch'),
    (HttpError(404, "Resource not found"), False, "the Cloud TPU API refused: <HttpError 404"),
    (HttpError(403, "Permission denied"), False, "the Cloud TPU API refused: <HttpError 403"),
])
def test_a_tpu_api_failure_that_may_pass_is_runtime_lost_not_a_bad_flag(answer, lost, says):
    """TensorFlow's TPUClusterResolver and Cloud TPU client, real, up to their first API call (`service=` takes the
    API object; nothing reaches the network): the client wraps every failure of that call in a ValueError, which
    the CLI would print as a bad flag (exit 2). A transient one (5xx, 429, a connection error, a TPU not READY) is
    RuntimeLost (exit 76: relaunch); a refusal that a retry cannot change (404, 403) stays a ValueError."""
    api = FakeTpuApi(answer)
    resolver = functools.partial(tf.distribute.cluster_resolver.TPUClusterResolver, zone="z", project="p",
                                 service=api)
    with pytest.raises(RuntimeLost if lost else ValueError) as info:
        distribute.connect_tpu("a-slice", make_resolver=resolver)
    assert isinstance(info.value, RuntimeLost) == lost and str(info.value).startswith(f"--tpu a-slice: {says}")
    assert api.calls == ["projects/p/locations/z/nodes/a-slice"]
    assert len(str(info.value).splitlines()) == 1


def test_a_missing_google_api_client_says_what_to_install():
    error = RuntimeError("Missing runtime dependency on the Google API client. Run `pip install cloud-tpu-client` "
                         "to fix.")
    mapped = distribute.tpu_connect_error("a-slice", error)
    assert type(mapped) is ValueError and 'pip install "albert_tf[cloud-tpu]"' in str(mapped)
    assert distribute.tpu_connect_error("a-slice", KeyError("x")) is None  # anything else is raised as it is


def test_error_summary_keeps_the_line_that_says_what_happened():
    message = ("Graph execution error:\n\nDetected at node CollectiveReduceV2 defined at (most recent call last):\n"
               '  File "/x/pretrain.py", line 9, in <module>\n\nCollective ops is aborted by: The following tasks '
               "are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\n"
               "\t [[{{node CollectiveReduceV2}}]]")
    summary = distribute.error_summary(tf.errors.UnavailableError(None, None, message))
    assert summary == ("UnavailableError: Collective ops is aborted by: The following tasks are unhealthy (stopped "
                       "sending heartbeats):")
    assert distribute.error_summary(tf.errors.InternalError(None, None, "x" * 500), limit=40) == (
        "InternalError: " + "x" * 22 + "...")


# ---------------------------------------------------------------------------------------------- which TPU runs
class _Client:
    """The Cloud TPU API's answer for a named slice (TensorFlow's client asks nodes.get): an accelerator type, or a
    failure."""

    def __init__(self, answer):
        self.answer = answer

    def accelerator_type(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _strategy(client):
    return types.SimpleNamespace(cluster_resolver=types.SimpleNamespace(_cloud_tpu_client=client),
                                 num_replicas_in_sync=16)


def test_the_accelerator_type_comes_from_the_environment_then_the_api_then_the_vm_metadata():
    asked = []

    def metadata(path):
        asked.append(path)
        return "v5litepod-16"

    api = _strategy(_Client("v4-32"))
    assert distribute.tpu_accelerator_type(api, {"TPU_ACCELERATOR_TYPE": "v3-32"}, metadata) == "v3-32"
    assert distribute.tpu_accelerator_type(api, {"ACCELERATOR_TYPE": "v5p-16"}, metadata) == "v5p-16"
    assert distribute.tpu_accelerator_type(api, {}, metadata) == "v4-32" and not asked
    failing = _strategy(_Client(RuntimeError("HttpError 503")))
    assert distribute.tpu_accelerator_type(failing, {}, metadata) == "v5litepod-16"
    assert asked == [distribute.METADATA_ACCELERATOR]
    assert distribute.tpu_accelerator_type(failing, {}, lambda path: None) is None


def test_tpu_local_asks_the_vm_metadata():
    """TensorFlow's own resolver for `--tpu local` holds a client without an API (no accelerator_type)."""
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
    strategy = types.SimpleNamespace(cluster_resolver=resolver, num_replicas_in_sync=4)
    assert distribute.tpu_accelerator_type(strategy, {}, lambda path: "v4-8") == "v4-8"
    running = distribute.running_tpu(strategy, {}, lambda path: "v4-8")
    assert running.slice.name == "v4-8" and running.hbm_per_device == 32 * 2 ** 30


def test_the_image_names_the_generation_when_nothing_else_does():
    running = distribute.running_tpu(_strategy(_Client(None)), {distribute.IMAGE_ENV: "tpu-vm-tf-2.18.0-pod-pjrt-"
                                                                "v5e-and-v6"}, lambda path: None)
    assert running.generation.name == "v5e" and running.slice is None and running.hbm_per_device == 16 * 2 ** 30


def test_the_vm_metadata_is_read_from_the_metadata_server_with_its_header():
    """A metadata server on loopback (GCE_METADATA_HOST, as TensorFlow's client allows) answers only requests that
    carry `Metadata-Flavor: Google`, as Google's does."""
    import http.server  # pylint: disable=import-outside-toplevel
    import threading  # pylint: disable=import-outside-toplevel

    class Metadata(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802  (the handler's name)
            ok = self.headers.get("Metadata-Flavor") == "Google" and self.path == f"/{distribute.METADATA_ACCELERATOR}"
            body = b"v5litepod-16" if ok else b"forbidden"
            self.send_response(200 if ok else 403)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Metadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        environ = {"GCE_METADATA_HOST": f"127.0.0.1:{server.server_port}"}
        assert distribute.vm_metadata(distribute.METADATA_ACCELERATOR, environ) == "v5litepod-16"
        assert distribute.vm_metadata("computeMetadata/v1/other", environ) is None  # a 403 is no answer
    finally:
        server.shutdown()
        server.server_close()
    assert distribute.vm_metadata(distribute.METADATA_ACCELERATOR, environ, timeout=0.5) is None  # nobody there


@pytest.mark.parametrize("value, replicas, pipelines", [
    ("per-worker", 8, 1), ("per-replica", 8, 8), ("2", 8, 2), ("4", 8, 4), ("1", 3, 1)])
def test_input_pipelines_of_a_cpu_replicas_run(value, replicas, pipelines):
    assert distribute.input_pipelines(value, replicas) == pipelines


@pytest.mark.parametrize("value", ["3", "0", "per-host", ""])
def test_input_pipelines_that_do_not_divide_the_replicas_are_refused(value):
    with pytest.raises(ValueError, match=f"ALBERT_TF_INPUT_PIPELINES={value}: expected per-worker"):
        distribute.input_pipelines(value, 8)


def test_cpu_replica_sums_do_not_depend_on_what_else_holds_the_values():
    """The `--cpu-replicas` reduction gives the same bits whichever of the replicas' values are still held
    elsewhere (here: function arguments) and which are fresh intermediates. TensorFlow's AddN, the default
    reduction's sum, adds first a fresh buffer it can reuse, so its bits change with that (checked here, so that
    the test can fail); in a training step what is still held depends on the timing of concurrent ops."""
    from tensorflow.python.distribute.values import PerReplica  # pylint: disable=import-outside-toplevel

    values = [tf.constant([v] * 4, tf.float32) for v in (1.0, 2.0 ** -24, 2.0 ** -24, 0.0)]  # rounding: order
    sums = {"ours": distribute.cpu_replica_sums(), "add_n": tf.distribute.ReductionToOneDevice()}

    def reduce_with(name, fresh):
        @tf.function(autograph=False)
        def run(*args):
            per_replica = PerReplica([tf.abs(a) if i in fresh else a for i, a in enumerate(args)])
            return sums[name].reduce(tf.distribute.ReduceOp.SUM, per_replica, "/cpu:0")
        return tuple(run(*values).numpy())

    arrangements = [(), (2, 3), (1, 2), (0, 3), (0, 1, 2, 3)]
    ours = {reduce_with("ours", fresh) for fresh in arrangements}
    assert ours == {tuple(np.sum(np.stack([v.numpy() for v in values]), axis=0, dtype=np.float32))}
    assert len({reduce_with("add_n", fresh) for fresh in arrangements}) > 1

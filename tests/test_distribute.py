"""Strategy selection from the flags; the TPU path up to the cluster resolver, with the resolver mocked."""
import types

import pytest
import tensorflow as tf

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


def test_tf_config_selects_multi_worker(monkeypatch):
    made = []
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", lambda: made.append("mwms") or "MWMS")
    assert distribute.create_strategy(environ={"TF_CONFIG": '{"cluster": {}}'}) == "MWMS"
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

"""Strategy selection from the flags; the TPU path up to the cluster resolver, with the resolver mocked."""
import pytest
import tensorflow as tf

from albert_tf.training import distribute


class FakeResolver:
    instances = []

    def __init__(self, tpu=None):
        self.tpu = tpu
        FakeResolver.instances.append(self)


@pytest.fixture
def fake_tpu(monkeypatch):
    calls = []
    FakeResolver.instances = []
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
    strategy = distribute.create_strategy(tpu="my-pod")
    assert isinstance(strategy, strategy_class)
    (resolver,) = FakeResolver.instances
    assert resolver.tpu == "my-pod"
    assert calls == [("connect", resolver), ("initialize", resolver), ("strategy", resolver)]


def test_tpu_local_skips_the_remote_connection(fake_tpu):
    calls, _ = fake_tpu
    distribute.create_strategy(tpu="local")
    assert [c[0] for c in calls] == ["initialize", "strategy"]
    assert FakeResolver.instances[0].tpu == "local"


def test_tpu_wins_over_tf_config_and_excludes_cpu_replicas(fake_tpu):
    calls, strategy_class = fake_tpu
    assert isinstance(distribute.create_strategy(tpu="t", environ={"TF_CONFIG": "{}"}), strategy_class)
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

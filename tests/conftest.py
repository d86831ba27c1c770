import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# --dtype auto means float32 in tests (albert_tf.runtime.precision): the same numbers whatever the machine measures
os.environ.setdefault("ALBERT_TF_AUTO_DTYPE", "float32")

import fake_gcloud  # noqa: E402  pylint: disable=wrong-import-position
import helpers  # noqa: E402  pylint: disable=wrong-import-position

# The longest slow tests (node ids under tests/, by prefix) and their minutes on a loaded 2-core machine (CONTRIBUTING.md,
# "What CI runs"). Under xdist they run first, longest first (pytest_collection_modifyitems): a worker takes the next
# test when it is free (`--dist loadgroup` holds at most a few tests per worker), so the run ends on short tests
# instead of one worker finishing a long one while the other idles. A slow test of several minutes belongs here; the
# figures only rank.
LONG_TESTS = {
    "test_remat_accumulation.py::test_cli_remat_and_accumulation_under_four_cpu_replicas": 8,
    "test_rehearsal.py::test_a_v4_shaped_host_lost_mid_run": 4,
    "test_finetune_dtype.py::test_bfloat16_fine_tune_reaches_the_float32_accuracy": 2.5,
    "test_finetune.py::test_briefly_pretrained_model": 2.2,
    "test_finetune_collapse.py::test_the_default_optimizer_does_not_collapse_where_the_original_does": 2.1,
    "test_pretraining_value.py::test_quick_run_prints_the_table_and_the_last_line": 4,
    "test_pretrain.py::test_one_replica_equals_four_cpu_replicas": 2.6,
    "test_glue.py::test_rows_without_text_b_are_served_as_trained": 2.2,
    "test_rehearsal.py::test_two_workers_stop_together": 1.5,
    "test_export.py::test_converted_release_serves_like_keras_model": 1.1,
}


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
    """Under xdist (a worker's collection: every worker sorts alike), LONG_TESTS first, longest first; the other
    tests keep their order after them. In one process the order is left alone (it changes no total, and a module's
    tests kept together build its fixtures once)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def minutes(item):
        name = item.nodeid.split("tests/", 1)[-1]
        return next((m for prefix, m in LONG_TESTS.items() if name.startswith(prefix)), 0)

    items.sort(key=lambda item: -minutes(item))


# Lines a test records with `record_property("summary", LINE)` (counts worth reading in a passing run, such as
# tests/test_hf_tokenizer.py's), printed after the run; xdist carries them from its workers.
_SUMMARIES = []


def pytest_runtest_logreport(report):
    if report.when == "call":
        _SUMMARIES.extend(value for name, value in report.user_properties if name == "summary")


def pytest_terminal_summary(terminalreporter):
    for line in _SUMMARIES:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def tiny_spm_model(tmp_path_factory):
    """Path to a tiny SentencePiece model (vocab 300) with ALBERT's special ids."""
    return helpers.train_tiny_spm(str(tmp_path_factory.mktemp("spm")))


@pytest.fixture
def corpus_file(tmp_path):
    """A small generated corpus in the original format."""
    return helpers.write_corpus(str(tmp_path / "corpus.txt"))


@pytest.fixture(scope="session")
def builtin_spm_model(tmp_path_factory):
    """Path to a 2000-piece SentencePiece model trained on the quickstart's built-in corpus (real English: the
    standard library's docstrings), as the quickstart and the fine-tuning benchmarks train it."""
    from albert_tf.data.builtin_corpus import write_builtin_corpus  # pylint: disable=import-outside-toplevel
    from albert_tf.data.vocab import train_vocab  # pylint: disable=import-outside-toplevel

    d = tmp_path_factory.mktemp("builtin_spm")
    write_builtin_corpus(str(d / "corpus.txt"))
    return train_vocab(str(d / "corpus.txt"), str(d / "spm"), vocab_size=2000).model


@pytest.fixture(scope="session")
def pretrain_data(tmp_path_factory):
    """A directory of pretraining records (256 train, 64 eval; helpers.PRETRAIN_SEQ x PRETRAIN_PRED) and the tiny
    config (helpers.PRETRAIN_TINY) as albert_config.json: helpers.pretrain_args / pretrain_config run on it."""
    return helpers.write_pretrain_data(tmp_path_factory.mktemp("pretrain_data"))


@pytest.fixture(scope="session")
def random_init(tmp_path_factory, tiny_spm_model):
    """A pretrained-model directory holding a randomly initialized albert_tiny of the tiny vocabulary."""
    import finetune_helpers as fh  # pylint: disable=import-outside-toplevel

    return fh.save_random_init(str(tmp_path_factory.mktemp("init")), tiny_spm_model)


@pytest.fixture
def cli(capsys):
    """Runs `albert-tf ARGV` in this process (albert_tf.cli.main): cli(*argv) -> (exit code, stdout, stderr) of that
    run (arguments str()-ed). For the CLI's own behaviour: flags, messages, exit codes; a fresh process is
    helpers.spawn."""
    from albert_tf import cli as albert_cli  # pylint: disable=import-outside-toplevel

    def run(*argv):
        capsys.readouterr()  # what came before is not this run's
        code = albert_cli.main([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    return run


@pytest.fixture
def keeper_worker_env(monkeypatch):
    """What the keeper's worker 0 install reads from the environment, set as its tests expect: INSTALL_CMD (a fake
    install command), and none of ALBERT_TF_SOURCE, ALBERT_TF, ALBERT_TF_PYTHON, TPU_PJRT_LIBRARY."""
    monkeypatch.setenv("INSTALL_CMD", "fake-install")
    for name in ("ALBERT_TF_SOURCE", "ALBERT_TF", "ALBERT_TF_PYTHON", "TPU_PJRT_LIBRARY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def clock():
    """The keeper's tests' fake clock (tests/fake_gcloud.py): sleep only moves the time on."""
    return fake_gcloud.FakeClock()


@pytest.fixture
def cloud(clock):  # pylint: disable=redefined-outer-name
    """The in-process fake gcloud (tests/fake_gcloud.py) on the fake clock; tests/test_keeper_cloud.py has its own
    `cloud`: the subprocess fake Google Cloud."""
    return fake_gcloud.FakeGcloud(clock)

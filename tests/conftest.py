import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# --dtype auto means float32 in tests (albert_tf.runtime.precision): the same numbers whatever the machine measures
os.environ.setdefault("ALBERT_TF_AUTO_DTYPE", "float32")

import helpers  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="session")
def tiny_spm_model(tmp_path_factory):
    """Path to a tiny SentencePiece model (vocab 300) with ALBERT's special ids."""
    return helpers.train_tiny_spm(str(tmp_path_factory.mktemp("spm")))


@pytest.fixture
def corpus_file(tmp_path):
    """A small generated corpus in the original format."""
    return helpers.write_corpus(str(tmp_path / "corpus.txt"))


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

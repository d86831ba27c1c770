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

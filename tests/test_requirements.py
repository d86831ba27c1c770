"""TensorFlow as an extra: what setup.py declares, and what `import tensorflow` says when none is installed."""
import importlib.metadata
import os
import re
import subprocess
import sys

import pytest
import setuptools

from albert_tf.runtime import requirements
from helpers import REPO

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


@pytest.fixture(scope="module")
def setup_kwargs():
    """The arguments setup.py passes to setuptools.setup (setup.py run with setup() recorded, not executed)."""
    recorded = {}
    original, cwd = setuptools.setup, os.getcwd()
    setuptools.setup = recorded.update
    try:
        os.chdir(REPO)
        with open("setup.py", encoding="utf-8") as f:
            exec(compile(f.read(), "setup.py", "exec"), {"__name__": "__main__"})  # pylint: disable=exec-used
    finally:
        setuptools.setup = original
        os.chdir(cwd)
    return recorded


def _names(requirements):
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements}


def test_no_tensorflow_distribution_is_a_hard_requirement(setup_kwargs):
    names = _names(setup_kwargs["install_requires"])
    assert names == {"keras", "numpy", "sentencepiece", "safetensors"}
    assert not any(n.startswith(("tensorflow", "tf-")) for n in names)


def test_extras_tf_tpu_and_dev(setup_kwargs):
    extras = setup_kwargs["extras_require"]
    assert _names(extras["tf"]) == {"tensorflow", "tensorflow-text"}
    # TPUClusterResolver(tpu=NAME) on a pod imports the Google API client (tests/test_tpu_client.py)
    assert _names(extras["cloud-tpu"]) == {"google-api-python-client", "oauth2client"}
    assert _names(extras["tpu"]) == {"tensorflow-tpu", "libtpu"} | _names(extras["cloud-tpu"])
    assert "libtpu>=0.0.14,<0.0.32" in extras["tpu"]  # 0.0.32 and later abort at `import tensorflow`
    assert set(extras["tf"]) <= set(extras["dev"])  # README's `pip install -e ".[dev,beam]"` gets TensorFlow
    assert {"pytest", "pytest-xdist"} <= _names(extras["test"]) <= _names(extras["dev"])


def test_keras_requires_no_tensorflow():
    """keras stays a hard requirement: it must not pull the CPU wheel either."""
    requires = importlib.metadata.requires("keras") or []
    assert not any(r.lower().startswith("tensorflow") for r in requires if "extra ==" not in r)


def test_import_tensorflow_without_tensorflow_says_what_to_install():
    """A Python without site-packages (-S): albert_tf imports (it needs only the standard library), and then
    `import tensorflow` fails with the install advice instead of the bare message."""
    code = f"import sys; sys.path.insert(0, {REPO!r}); import albert_tf; import tensorflow"
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: No module named 'tensorflow': albert_tf needs TensorFlow")
    assert 'pip install "albert_tf[tf]"' in last and 'pip install "albert_tf[tpu]"' in last


def test_asking_whether_tensorflow_is_installed_is_answered_none():
    """Other libraries ask importlib.util.find_spec (transformers asks about tensorflow_text when imported): without
    TensorFlow the answer is None, as from Python's own finders, not the advice, which only an import gets. Before,
    `import albert_tf` then `import transformers` failed on a machine without tensorflow-text."""
    code = (f"import sys, importlib.util; sys.path.insert(0, {REPO!r}); import albert_tf; "
            "print(importlib.util.find_spec('tensorflow'), importlib.util.find_spec('tensorflow_text')); "
            "import tensorflow_text")
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout == "None None\n"
    assert "No module named 'tensorflow_text': albert_tf needs TensorFlow" in result.stderr.strip().splitlines()[-1]


def test_the_hint_is_consulted_only_after_every_other_finder():
    meta_path = [object()]
    finder = requirements.install_import_hint(meta_path)
    assert meta_path[-1] is finder and requirements.install_import_hint(meta_path) is finder  # once
    assert len(meta_path) == 2
    assert finder.find_spec("numpy") is None  # anything else: not ours
    with pytest.raises(ModuleNotFoundError, match="tensorflow_text"):
        finder.find_spec("tensorflow_text")
    import tensorflow  # pylint: disable=import-outside-toplevel,unused-import  # a real one is found first


@pytest.mark.parametrize("found, want", [
    (("tensorflow", "2.18.1"), 'pip install "tensorflow-text==2.18.*"'),
    (("tensorflow-tpu", "2.20.0"), 'pip install --no-deps "tensorflow-text==2.20.*"'),
    (None, "albert_tf needs TensorFlow"),
])
def test_tensorflow_text_advice_matches_the_installed_tensorflow(monkeypatch, found, want):
    monkeypatch.setattr(requirements, "installed_tensorflow", lambda: found)
    assert want in requirements.tensorflow_text_advice()

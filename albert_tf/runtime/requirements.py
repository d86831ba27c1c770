"""TensorFlow is not a hard requirement of albert_tf (so that pip never installs the CPU `tensorflow` wheel over a
TPU VM's TensorFlow): it comes from an extra or from the machine. This module names what to install when it is
missing, without importing TensorFlow.

    pip install "albert_tf[tf]"     CPU / GPU: tensorflow + tensorflow-text
    pip install "albert_tf[tpu]"    a machine without TensorFlow that will drive TPUs: tensorflow-tpu + libtpu
    pip install albert_tf           a TPU VM image's TensorFlow is kept as it is

`install_import_hint()` (run by `import albert_tf`) puts a finder at the end of sys.meta_path that is consulted only
when Python finds no `tensorflow` / `tensorflow_text` module anywhere: it turns the bare "No module named
'tensorflow'" of an import into an error that says what to install (importlib.util.find_spec still answers None).
"""
import importlib.abc
import importlib.metadata
import importlib.util
import re
import sys

# The distributions that provide the `tensorflow` module (CPU/GPU wheels, the TPU wheel, nightlies).
TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tensorflow-tpu", "tf-nightly",
                    "tf-nightly-cpu")

NO_TENSORFLOW = (
    "albert_tf needs TensorFlow, and none is installed: on a CPU or GPU machine pip install \"albert_tf[tf]\" "
    "(tensorflow + tensorflow-text); on a TPU VM keep the image's TensorFlow, or pip install \"albert_tf[tpu]\" "
    "(tensorflow-tpu + libtpu)")


def installed_tensorflow():
    """(distribution name, version string) of the installed TensorFlow, read from its metadata, or None."""
    for name in TF_DISTRIBUTIONS:
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def tensorflow_version():
    """(major, minor) of the installed TensorFlow distribution, from its metadata (TensorFlow is not imported), or
    None when none is installed or its version does not parse."""
    found = installed_tensorflow()
    match = found and re.match(r"(\d+)\.(\d+)", found[1])  # "2.21.0", "2.22.0.dev20251120", "2.21.0rc1"
    return (int(match.group(1)), int(match.group(2))) if match else None


def tensorflow_text_advice():
    """What to install for `import tensorflow_text` next to the installed TensorFlow (same major.minor)."""
    found = installed_tensorflow()
    if found is None:
        return NO_TENSORFLOW
    name, version = found
    minor = ".".join(map(str, tensorflow_version() or ())) or version
    if name == "tensorflow":
        return (f"the in-graph tokenizer needs tensorflow-text: pip install \"tensorflow-text=={minor}.*\" "
                f"(or pip install \"albert_tf[tf]\")")
    # tensorflow-text requires the distribution `tensorflow`, which would replace this one (e.g. the TPU wheel).
    return (f"the in-graph tokenizer needs tensorflow-text, and every release of it requires the `tensorflow` "
            f"distribution, which would be installed over {name} {version}: pip install --no-deps "
            f"\"tensorflow-text=={minor}.*\"")


class _MissingTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: reached only when no other finder has the module. An import gets the advice; a
    library asking whether the module is installed (importlib.util.find_spec, as transformers asks about
    tensorflow_text when it is imported) gets None, as from Python's own finders."""

    MESSAGES = {"tensorflow": lambda: NO_TENSORFLOW, "tensorflow_text": tensorflow_text_advice}

    def find_spec(self, fullname, path=None, target=None):  # pylint: disable=unused-argument
        if fullname in self.MESSAGES and not _asked_by_find_spec():
            raise ModuleNotFoundError(f"No module named {fullname!r}: {self.MESSAGES[fullname]()}", name=fullname)
        return None


def _asked_by_find_spec():
    """Whether importlib.util.find_spec is on the stack (a question, not an import)."""
    frame, question = sys._getframe(1), importlib.util.find_spec.__code__  # pylint: disable=protected-access
    while frame is not None:
        if frame.f_code is question:
            return True
        frame = frame.f_back
    return False


def install_import_hint(meta_path=None):
    """Appends the finder to `meta_path` (default sys.meta_path) once; returns the finder."""
    meta_path = sys.meta_path if meta_path is None else meta_path
    for finder in meta_path:
        if isinstance(finder, _MissingTensorFlowFinder):
            return finder
    finder = _MissingTensorFlowFinder()
    meta_path.append(finder)
    return finder

"""The built-in corpus and tasks (albert_tf.data.builtin_corpus) are the same bytes in every process: they must not
depend on which other modules the process imported first (TensorFlow and Keras change what inherited docstrings
inspect.getdoc finds for some standard-library classes)."""
import hashlib
import os
import subprocess
import sys

from albert_tf.data import builtin_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WRITE_ALL = """
import sys
from albert_tf.data import builtin_corpus as b
out = sys.argv[1]
b.write_builtin_corpus(out + "/corpus.txt")
b.write_document_task(out + "/document", 0)
b.write_few_label_task(out + "/few_label")
"""


def _digests(directory):
    found = {}
    for base, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return found


def test_the_builtin_data_do_not_depend_on_what_the_process_imported(tmp_path):
    import keras  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    here, fresh = tmp_path / "here", tmp_path / "fresh"
    here.mkdir()
    fresh.mkdir()
    builtin_corpus.write_builtin_corpus(str(here / "corpus.txt"))
    builtin_corpus.write_document_task(str(here / "document"), 0)
    builtin_corpus.write_few_label_task(str(here / "few_label"))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-c", _WRITE_ALL, str(fresh)], check=True, env=env, timeout=300)
    assert "tensorflow" not in subprocess.run(
        [sys.executable, "-c", "import sys; from albert_tf.data import builtin_corpus; print(sorted(sys.modules))"],
        check=True, env=env, capture_output=True, text=True, timeout=300).stdout
    ours, theirs = _digests(here), _digests(fresh)
    assert sorted(ours) == ["corpus.txt", "document/dev.tsv", "document/train.tsv", "few_label/dev.tsv",
                            "few_label/train.tsv"]
    assert ours == theirs


def test_only_a_docstring_of_the_object_itself_is_read():
    class Base:
        def get(self):
            """Base's words, which a subclass's method must not inherit here."""

    class Child(Base):
        """Child's own words."""

        def get(self):
            pass

    assert builtin_corpus._own_doc(Child) == "Child's own words."  # pylint: disable=protected-access
    assert builtin_corpus._own_doc(Child.get) == ""  # pylint: disable=protected-access
    assert builtin_corpus._own_doc(Base.get).startswith("Base's words")  # pylint: disable=protected-access

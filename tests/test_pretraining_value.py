"""benchmarks/pretraining_value.py's text side (no TensorFlow): the reStructuredText prose extractor on a
hand-written file, the word-order task's invariants, and the bag-of-words baseline (learns a lexical label, cannot
tell a sentence from its swapped copy)."""
import os
import random
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import pretraining_value as pv  # noqa: E402  pylint: disable=wrong-import-position

RST = """\
:mod:`shutil` --- High-level file operations
============================================

.. module:: shutil
   :synopsis: High-level file operations, including copying.

The :mod:`shutil` module offers a number of high-level operations on files.  In
particular, functions are provided which support file copying and removal.

.. note::

   Even the :func:`~shutil.copy2` function cannot copy all **file metadata** here.

For example::

   >>> shutil.copy("a", "b")
   this line is code and must go

* A list item that reads as a full sentence of prose.

.. code-block:: python

   print("This is code that looks like a sentence.")

+------+------+
| a    | b    |
+------+------+

See `the tutorial <https://docs.python.org/>`_ for a longer text about it.
"""


def test_rst_prose_keeps_sentences_and_drops_markup_code_and_titles():
    got = [s for p in pv.rst_paragraphs(RST) for s in pv.sentences(p)]
    assert got == [
        "The shutil module offers a number of high-level operations on files.",
        "In particular, functions are provided which support file copying and removal.",
        "Even the copy2 function cannot copy all file metadata here.",
        "A list item that reads as a full sentence of prose.",
        "See the tutorial for a longer text about it.",
    ]


def _documents(count, seed=0):
    rng = random.Random(seed)
    words = "the a module function returns value file path list each when data into from".split()
    return [(f"doc{d}", [" ".join(rng.choice(words) for _ in range(rng.randint(8, 14))) + "."
                          for _ in range(12)]) for d in range(count)]


def test_word_order_task_swaps_two_inner_words_of_held_out_sentences_once():
    documents = _documents(40)
    task = pv.word_order_task(documents, 60, 40, seed=3)
    origin = {s: name for name, lines in documents for s in lines}
    used = {"train": set(), "dev": set()}
    for side, (texts, labels) in task.items():
        assert sorted(set(labels)) == [0, 1] and abs(sum(labels) - len(labels) / 2) <= 1  # balanced
        for text, label in zip(texts, labels):
            if label:
                source = text
            else:  # exactly two inner words exchanged, first and last in place, the bag unchanged
                candidates = [s for s in origin if sorted(s.split()) == sorted(text.split()) and s != text]
                assert candidates, text
                source = candidates[0]
                changed = [i for i, (x, y) in enumerate(zip(source.split(), text.split())) if x != y]
                assert len(changed) == 2 and 0 < changed[0] and changed[1] < len(text.split()) - 1
            assert source in origin and source not in used[side]
            used[side].add(source)
    docs = {side: {origin[s] for s in used[side]} for side in used}
    assert not docs["train"] & docs["dev"]  # no document on both sides


def test_bag_of_words_learns_words_but_not_their_order():
    rng = random.Random(1)
    filler = "the of and to in is was for on that with as by at from".split()

    def sentence(cue):
        words = [rng.choice(filler) for _ in range(8)]
        words[rng.randrange(1, 7)] = cue
        return " ".join(words)

    lexical = {split: ([], []) for split in ("train", "dev")}
    for split, count in (("train", 200), ("dev", 100)):
        for k in range(count):
            lexical[split][0].append(sentence("alpha" if k % 2 else "omega"))
            lexical[split][1].append(k % 2)
    assert pv.bag_of_words_accuracy(lexical["train"], lexical["dev"]) >= 0.95
    # each dev sentence beside its swapped copy (same bag, labels 1 and 0): exactly one of the two is right
    task = pv.word_order_task(_documents(40), 60, 40, seed=3)
    pairs = ([], [])
    for text in task["dev"][0][1::2]:
        pairs[0].extend([text, pv.swap_two_words(text, rng)])
        pairs[1].extend([1, 0])
    assert pv.bag_of_words_accuracy(task["train"], pairs) == pytest.approx(0.5)


def test_missing_docs_name_the_install_command(tmp_path):
    with pytest.raises(SystemExit, match="apt-get install python3-doc"):
        pv.find_docs(str(tmp_path / "absent"))

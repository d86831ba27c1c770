"""albert_tf.tasks.race: RACE's folders of JSON files (written here, tiny), the option pairing, the layout of the
model inputs and accuracy per level."""
import json
import os

import numpy as np
import pytest

from albert_tf.tasks import race
from albert_tf.text import AlbertTokenizer

MIDDLE = {
    "id": "middle12.txt",
    "article": "Tom lives in a small city by the river. He goes to school by bike every day.",
    "questions": ["Where does Tom live?", "Tom goes to school _ ."],
    "options": [["In a big city.", "By the river.", "On a mountain.", "In the school."],
                ["by bus", "on foot", "by bike", "by car"]],
    "answers": ["B", "C"],
}
HIGH = {
    "id": "high7.txt",
    "article": "Modern music has a long history.",
    "questions": ["The passage is mainly about _ history."],
    "options": [["music's", "city", "science", "river"]],
    "answers": ["A"],
}


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


@pytest.fixture
def race_dir(tmp_path):
    root = tmp_path / "RACE"
    _write(str(root / "dev" / "middle" / "12.txt"), MIDDLE)
    _write(str(root / "dev" / "middle" / "3.txt"), dict(MIDDLE, id="middle3.txt", answers=["A", "D"]))
    _write(str(root / "dev" / "high" / "7.txt"), HIGH)
    return str(root)


def test_read_examples_in_the_official_layout(race_dir):
    examples = race.read_examples(race_dir, "dev")
    assert [(e.example_id, e.level, e.label) for e in examples] == [
        ("dev/middle/middle12.txt#0", "middle", 1), ("dev/middle/middle12.txt#1", "middle", 2),
        ("dev/middle/middle3.txt#0", "middle", 0), ("dev/middle/middle3.txt#1", "middle", 3),
        ("dev/high/high7.txt#0", "high", 0)]
    first = examples[0]
    assert first.article == MIDDLE["article"] and first.question == "Where does Tom live?"
    assert first.options == ("In a big city.", "By the river.", "On a mountain.", "In the school.")
    # a question without a blank is followed by the option; a "_" blank is replaced by it
    assert first.endings[1] == "Where does Tom live? By the river."
    assert examples[1].endings == ("Tom goes to school by bus .", "Tom goes to school on foot .",
                                   "Tom goes to school by bike .", "Tom goes to school by car .")
    # the folder holding RACE/ works too; one level alone
    parent = os.path.dirname(race_dir)
    assert race.read_examples(parent, "dev") == examples
    assert [e.level for e in race.read_examples(race_dir, "dev", levels=("high",))] == ["high"]


def test_all_txt_json_lines(tmp_path):
    folder = tmp_path / "train" / "high"
    _write(str(folder / "all.txt"), json.dumps(HIGH) + "\n" + json.dumps(dict(HIGH, id="high8.txt")) + "\n")
    _write(str(folder / "7.txt"), HIGH)  # all.txt alone is read when present
    _write(str(tmp_path / "train" / "middle" / "1.txt"), MIDDLE)
    examples = race.read_examples(str(tmp_path), "train")
    assert [e.example_id for e in examples] == [
        "train/middle/middle12.txt#0", "train/middle/middle12.txt#1", "train/high/high7.txt#0",
        "train/high/high8.txt#0"]


@pytest.mark.parametrize("content, message", [
    (dict(MIDDLE, answers=["B", "E"]), r"12\.txt: question 1: answer 'E' is not one of A, B, C, D"),
    (dict(MIDDLE, options=[["a", "b", "c"], ["a", "b", "c", "d"]]), r"12\.txt: question 0: expected 4 option"),
    (dict(MIDDLE, answers=["B"]), r"12\.txt: questions, options and answers differ in length"),
    ({k: v for k, v in MIDDLE.items() if k != "article"}, r"12\.txt: expected an \"article\" string"),
    ('{"article": "x",\n "questions": [', r"12\.txt: invalid JSON at line 2 column"),
    (json.dumps(MIDDLE) + "\n" + '{"article": oops}' + "\n", r"12\.txt line 2: invalid JSON"),
    (json.dumps(MIDDLE) + "\n" + json.dumps(dict(MIDDLE, answers=["B", 3])) + "\n",
     r"12\.txt line 2: question 1: answer 3"),
])
def test_read_errors_name_the_file(tmp_path, content, message):
    _write(str(tmp_path / "dev" / "middle" / "12.txt"), content)
    _write(str(tmp_path / "dev" / "high" / "7.txt"), HIGH)
    with pytest.raises(ValueError, match=message):
        race.read_examples(str(tmp_path), "dev")


def test_read_errors_missing_folders(tmp_path, race_dir):
    with pytest.raises(FileNotFoundError, match=r"test/middle not found: RACE expects test/middle/\*\.txt"):
        race.read_examples(race_dir, "test")
    os.makedirs(tmp_path / "other" / "train" / "middle")
    with pytest.raises(FileNotFoundError, match=r"other/train/middle holds no \.txt files"):
        race.read_examples(str(tmp_path / "other"), "train")
    with pytest.raises(FileNotFoundError, match="RACE data directory"):
        race.read_examples(str(tmp_path / "nowhere"), "dev")
    with pytest.raises(ValueError, match="RACE has no split 'valid'"):
        race.read_examples(race_dir, "valid")


def test_compute_metrics_per_level(race_dir):
    examples = race.read_examples(race_dir, "dev")  # labels middle 1 2 0 3, high 0
    # middle: 2 of 4 right, high: 1 of 1, all: 3 of 5
    assert race.compute_metrics([1, 2, 1, 1, 0], examples) == {
        "accuracy_middle": 0.5, "accuracy_high": 1.0, "accuracy": 0.6}
    logits = np.eye(4)[[1, 0, 0, 3, 2]]  # middle 3 of 4, high 0 of 1
    assert race.compute_metrics(logits, examples) == {"accuracy_middle": 0.75, "accuracy_high": 0.0,
                                                      "accuracy": 0.6}
    assert race.compute_metrics([0], examples[-1:]) == {"accuracy_high": 1.0, "accuracy": 1.0}
    with pytest.raises(ValueError, match="do not match 5 examples"):
        race.compute_metrics([0, 1], examples)


def test_featurize_layout_and_truncation(tiny_spm_model, race_dir):
    tok = AlbertTokenizer(tiny_spm_model)
    examples = race.read_examples(race_dir, "dev")
    out = race.featurize(examples, tok, max_seq_length=64, max_qa_length=8)
    assert out["input_word_ids"].shape == (5, 4, 64) and out["input_word_ids"].dtype == np.int32
    assert out["labels"].tolist() == [1, 2, 0, 3, 0]
    for n, example in enumerate(examples):
        article = tok.encode(example.article)
        for c, ending in enumerate(example.endings):
            qa = tok.encode(ending)[-8:]  # the ending keeps its last 8 tokens
            context = article[:64 - 3 - len(qa)]
            tokens = [2] + context + [3] + qa + [3]
            row = out["input_word_ids"][n, c]
            assert row.tolist() == tokens + [0] * (64 - len(tokens))
            assert out["input_mask"][n, c].tolist() == [1] * len(tokens) + [0] * (64 - len(tokens))
            assert out["input_type_ids"][n, c].tolist() == ([0] * (len(context) + 2) + [1] * (len(qa) + 1)
                                                            + [0] * (64 - len(tokens)))
    # an article longer than the room left is cut from its end to fit exactly
    short = race.featurize(examples[:1], tok, max_seq_length=24, max_qa_length=8)
    assert short["input_mask"][0].sum(axis=-1).tolist() == [24] * 4
    assert short["input_word_ids"][0, 0, 1:6].tolist() == tok.encode(examples[0].article)[:5]

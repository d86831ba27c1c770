"""albert_tf.tasks.glue: the official GLUE TSV layouts (written here, tiny) and each task's metric."""
import math
import os

import numpy as np
import pytest

from albert_tf.tasks import glue

T = "\t"
MNLI_HEAD = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
             "sentence1_parse", "sentence2_parse", "sentence1", "sentence2"]


def _mnli_row(i, s1, s2, labels=()):
    return [str(i), "31193", f"{i}n", "government", "( ( bp ) )", "( ( bp ) )", "(ROOT (S))", "(ROOT (S))", s1,
            s2] + list(labels)


FILES = {
    # CoLA: train/dev without header: source, label, original annotation ("*" when unacceptable), sentence
    "CoLA/train.tsv": [["gj04", "1", "", "Our friends won't buy this analysis."],
                       ["gj04", "0", "*", "They drank the pub."]],
    "CoLA/dev.tsv": [["bc01", "1", "", "The sailors rode the breeze clear of the rocks."]],
    "CoLA/test.tsv": [["index", "sentence"], ["0", "Bill whistled past the house."]],
    "SST-2/train.tsv": [["sentence", "label"], ["hide new secretions from the parental units ", "0"],
                        ["the greatest musicians ", "1"]],
    "SST-2/dev.tsv": [["sentence", "label"], ["it 's a charming and often affecting journey . ", "1"]],
    "SST-2/test.tsv": [["index", "sentence"], ["0", "uneasy mishmash of styles and genres ."]],
    "MRPC/train.tsv": [["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                       ["1", "702876", "702977", "Amrozi accused his brother.", "Referring to him, he said."],
                       ["0", "2108705", "2108831", "Yucaipa owned Dominick 's.", "Yucaipa bought Dominick 's."]],
    "MRPC/dev.tsv": [["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], ["1", "1", "2", "He said.", "He did."]],
    "MRPC/test.tsv": [["index", "#1 ID", "#2 ID", "#1 String", "#2 String"], ["0", "1", "2", "PCCW 's chief.", "Its."]],
    "STS-B/train.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
                         "sentence2", "score"],
                        ["0", "main-captions", "MSRvid", "2012test", "0001", "none", "none", "A plane is taking off.",
                         "An air plane is taking off.", "5.000"],
                        ["1", "main-captions", "MSRvid", "2012test", "0004", "none", "none", "A man plays a flute.",
                         "A man plays a bamboo flute.", "3.800"]],
    "STS-B/dev.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
                       "sentence2", "score"],
                      ["0", "main-captions", "MSRvid", "2012test", "0000", "none", "none", "A man with a hard hat.",
                       "A man wearing a hard hat.", "0.000"]],
    # QQP: a row cut short (a question with a line break) is skipped, as the original readers do
    "QQP/train.tsv": [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                      ["133273", "213221", "213222", "How is the life of a math student?", "Which level?", "0"],
                      ["402555", "536040", "536041", "How do I control my horny emotions?"],
                      ["360472", "364011", "490273", 'What causes "stool color', "What is a stool?", "1"]],
    "QQP/dev.tsv": [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                    ["1", "2", "3", "Why?", "Why not?", "0"]],
    "QQP/test.tsv": [["id", "question1", "question2"], ["0", "Why do rockets look white?", "Why are they white?"]],
    # MNLI: train has one annotator column, dev five; the gold label is last; unbalanced quotes in the text
    "MNLI/train.tsv": [MNLI_HEAD + ["label1", "gold_label"],
                       _mnli_row(0, 'Conceptually cream "skimming has two dimensions.', "Product and geography.",
                                 ["neutral", "neutral"]),
                       _mnli_row(1, "you know during the season", "You lose the things.",
                                 ["entailment", "entailment"])],
    "MNLI/dev_matched.tsv": [MNLI_HEAD + [f"label{i}" for i in range(1, 6)] + ["gold_label"],
                             _mnli_row(0, "The new rights are nice enough", "Everyone really likes them",
                                       ["neutral", "entailment", "neutral", "neutral", "neutral", "neutral"])],
    "MNLI/dev_mismatched.tsv": [MNLI_HEAD + [f"label{i}" for i in range(1, 6)] + ["gold_label"],
                                _mnli_row(0, "Your contribution helped.", "It did not help.",
                                          ["contradiction"] * 6)],
    "MNLI/test_matched.tsv": [MNLI_HEAD, _mnli_row(0, "Hierbas is a liqueur.", "It is not a liqueur.")],
    "MNLI/test_mismatched.tsv": [MNLI_HEAD, _mnli_row(0, "What a day.", "It was a day.")],
    "QNLI/train.tsv": [["index", "question", "sentence", "label"],
                       ["0", "When did it start?", "It started in 1999.", "entailment"],
                       ["1", "Who?", "Nobody knows when.", "not_entailment"]],
    "QNLI/dev.tsv": [["index", "question", "sentence", "label"], ["0", "Why?", "Because.", "entailment"]],
    "RTE/train.tsv": [["index", "sentence1", "sentence2", "label"],
                      ["0", "No Weapons of Mass Destruction Found in Iraq Yet.", "Weapons Found.", "not_entailment"]],
    "RTE/dev.tsv": [["index", "sentence1", "sentence2", "label"], ["0", "A cat sat.", "A cat sat.", "entailment"]],
    "WNLI/train.tsv": [["index", "sentence1", "sentence2", "label"], ["0", "I stuck a pin.", "The pin stuck.", "1"]],
    "WNLI/dev.tsv": [["index", "sentence1", "sentence2", "label"], ["0", "The drain is clogged.", "It is.", "0"]],
}


def _write(path, rows, newline="\n"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("".join(T.join(row) + newline for row in rows))
    return path


@pytest.fixture(scope="module")
def glue_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue_data")
    for name, rows in FILES.items():
        _write(os.path.join(root, name), rows)
    return str(root)


def _triples(examples):
    return [(e.text_a, e.text_b, e.label) for e in examples]


def test_every_task_has_its_official_definition():
    assert set(glue.SPECS) == {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"}
    assert glue.SPECS["mnli"].dev_splits == ("dev_matched", "dev_mismatched")
    assert glue.SPECS["mnli"].labels == ("contradiction", "entailment", "neutral")
    assert glue.SPECS["stsb"].num_labels == 1 and glue.SPECS["stsb"].labels == ()
    assert glue.SPECS["cola"].metrics == ("mcc",)
    assert glue.SPECS["mrpc"].metrics == glue.SPECS["qqp"].metrics == ("accuracy", "f1")
    assert glue.SPECS["stsb"].metrics == ("pearson", "spearman")
    for task in glue.SPECS.values():
        assert task.num_labels == (len(task.labels) or 1)


def test_cola_has_no_header_in_train_and_dev(glue_root):
    examples = glue.read_examples(glue_root, "cola", "train")
    assert _triples(examples) == [("Our friends won't buy this analysis.", None, 1), ("They drank the pub.", None, 0)]
    assert [e.guid for e in examples] == ["train-0", "train-1"]
    assert _triples(glue.read_examples(glue_root, "cola", "test")) == [("Bill whistled past the house.", None, None)]


def test_single_and_pair_tasks(glue_root):
    assert _triples(glue.read_examples(glue_root, "sst2", "train")) == [
        ("hide new secretions from the parental units ", None, 0), ("the greatest musicians ", None, 1)]
    assert _triples(glue.read_examples(glue_root, "sst2", "test")) == [
        ("uneasy mishmash of styles and genres .", None, None)]
    assert _triples(glue.read_examples(glue_root, "mrpc", "train")) == [
        ("Amrozi accused his brother.", "Referring to him, he said.", 1),
        ("Yucaipa owned Dominick 's.", "Yucaipa bought Dominick 's.", 0)]
    assert _triples(glue.read_examples(glue_root, "mrpc", "test")) == [("PCCW 's chief.", "Its.", None)]
    assert _triples(glue.read_examples(glue_root, "qnli", "train")) == [
        ("When did it start?", "It started in 1999.", 0), ("Who?", "Nobody knows when.", 1)]
    assert _triples(glue.read_examples(glue_root, "rte", "train")) == [
        ("No Weapons of Mass Destruction Found in Iraq Yet.", "Weapons Found.", 1)]
    assert _triples(glue.read_examples(glue_root, "wnli", "dev")) == [("The drain is clogged.", "It is.", 0)]


def test_stsb_scores_are_floats(glue_root):
    examples = glue.read_examples(glue_root, "stsb", "train")
    assert _triples(examples) == [("A plane is taking off.", "An air plane is taking off.", 5.0),
                                  ("A man plays a flute.", "A man plays a bamboo flute.", 3.8)]
    assert isinstance(examples[1].label, float)


def test_qqp_skips_rows_with_missing_fields(glue_root):
    examples = glue.read_examples(glue_root, "qqp", "train")
    assert _triples(examples) == [("How is the life of a math student?", "Which level?", 0),
                                  ('What causes "stool color', "What is a stool?", 1)]
    assert [e.guid for e in examples] == ["train-0", "train-1"]
    assert _triples(glue.read_examples(glue_root, "qqp", "test")) == [
        ("Why do rockets look white?", "Why are they white?", None)]


def test_mnli_train_dev_and_test_layouts(glue_root):
    assert _triples(glue.read_examples(glue_root, "mnli", "train")) == [
        ('Conceptually cream "skimming has two dimensions.', "Product and geography.", 2),
        ("you know during the season", "You lose the things.", 1)]
    # dev: the gold label (last of 16 columns), not the first annotator's
    assert _triples(glue.read_examples(glue_root, "mnli", "dev_matched")) == [
        ("The new rights are nice enough", "Everyone really likes them", 2)]
    assert _triples(glue.read_examples(glue_root, "mnli", "dev_mismatched"))[0][2] == 0
    assert _triples(glue.read_examples(glue_root, "mnli", "test_matched")) == [
        ("Hierbas is a liqueur.", "It is not a liqueur.", None)]


def test_task_folder_itself_crlf_and_byte_order_mark(glue_root, tmp_path):
    direct = glue.read_examples(os.path.join(glue_root, "RTE"), "rte", "train")
    assert direct == glue.read_examples(glue_root, "rte", "train")
    _write(str(tmp_path / "SST-2" / "dev.tsv"), FILES["SST-2/dev.tsv"], newline="\r\n")
    assert glue.read_examples(str(tmp_path), "sst2", "dev") == glue.read_examples(glue_root, "sst2", "dev")
    rows = [list(r) for r in FILES["MRPC/train.tsv"]]
    rows[0][0] = "\ufeff" + rows[0][0]  # a byte-order mark before the header
    _write(str(tmp_path / "MRPC" / "train.tsv"), rows)
    assert glue.read_examples(str(tmp_path), "mrpc", "train") == glue.read_examples(glue_root, "mrpc", "train")


def _one_file(tmp_path, name, rows):
    _write(str(tmp_path / name), rows)
    return str(tmp_path)


def test_error_short_row_names_file_and_line(tmp_path):
    root = _one_file(tmp_path, "RTE/train.tsv", [["index", "sentence1", "sentence2", "label"],
                                                 ["0", "a", "b", "entailment"], ["1", "only one sentence"]])
    with pytest.raises(ValueError, match=r"RTE/train\.tsv line 3: 2 tab-separated fields, expected at least 4"):
        glue.read_examples(root, "rte", "train")
    root = _one_file(tmp_path, "CoLA/dev.tsv", [["gj04", "1", "", "fine"], ["gj04", "1 no tabs here"]])
    with pytest.raises(ValueError, match=r"CoLA/dev\.tsv line 2: 2 tab-separated fields, expected at least 4"):
        glue.read_examples(root, "cola", "dev")


def test_error_label_outside_the_task_set(tmp_path):
    root = _one_file(tmp_path, "MNLI/dev_matched.tsv",
                     [MNLI_HEAD + ["label1", "gold_label"], _mnli_row(0, "a", "b", ["neutral", "-"])])
    with pytest.raises(ValueError, match=r"dev_matched\.tsv line 2: label '-' is not one of mnli's labels "
                                         r"contradiction, entailment, neutral"):
        glue.read_examples(root, "mnli", "dev_matched")
    root = _one_file(tmp_path, "SST-2/train.tsv", [["sentence", "label"], ["good", "1"], ["bad", "positive"]])
    with pytest.raises(ValueError, match=r"SST-2/train\.tsv line 3: label 'positive'"):
        glue.read_examples(root, "sst2", "train")
    head = FILES["STS-B/dev.tsv"][0]
    root = _one_file(tmp_path, "STS-B/train.tsv", [head, ["0"] * 7 + ["a", "b", "5.5"]])
    with pytest.raises(ValueError, match=r"STS-B/train\.tsv line 2: score '5\.5' is not a similarity score"):
        glue.read_examples(root, "stsb", "train")
    root = _one_file(tmp_path, "STS-B/dev.tsv", [head, ["0"] * 7 + ["a", "b", "high"]])
    with pytest.raises(ValueError, match=r"STS-B/dev\.tsv line 2: score 'high'"):
        glue.read_examples(root, "stsb", "dev")


def test_error_header_missing_a_column(tmp_path):
    root = _one_file(tmp_path, "QNLI/dev.tsv", [["index", "question", "text", "label"], ["0", "a", "b", "entailment"]])
    with pytest.raises(ValueError, match=r"QNLI/dev\.tsv line 1: header has no column 'sentence'"):
        glue.read_examples(root, "qnli", "dev")
    root = _one_file(tmp_path, "WNLI/dev.tsv", [["index", "sentence1", "sentence2"], ["0", "a", "b"]])
    with pytest.raises(ValueError, match=r"WNLI/dev\.tsv line 1: header has no column 'label'"):
        glue.read_examples(root, "wnli", "dev")


def test_error_missing_file_empty_file_unknown_names(tmp_path, glue_root):
    with pytest.raises(FileNotFoundError, match=r"dev\.tsv not found: qnli expects dev\.tsv"):
        glue.read_examples(str(tmp_path), "qnli", "dev")
    with pytest.raises(FileNotFoundError, match="GLUE data directory"):
        glue.read_examples(str(tmp_path / "nowhere"), "qnli", "dev")
    root = _one_file(tmp_path, "SST-2/dev.tsv", [])
    with pytest.raises(ValueError, match=r"SST-2/dev\.tsv is empty"):
        glue.read_examples(root, "sst2", "dev")
    root = _one_file(tmp_path, "SST-2/train.tsv", [["sentence", "label"]])
    with pytest.raises(ValueError, match=r"SST-2/train\.tsv has no sst2 examples"):
        glue.read_examples(root, "sst2", "train")
    with pytest.raises(ValueError, match="unknown GLUE task 'mnli-mm'"):
        glue.read_examples(glue_root, "mnli-mm", "dev")
    with pytest.raises(ValueError, match="mnli has no split 'dev'"):
        glue.read_examples(glue_root, "mnli", "dev")


def test_compute_metrics_per_task():
    labels = [1, 0, 0, 1, 1, 0]
    predictions = [1, 1, 0, 0, 1, 0]
    assert glue.compute_metrics("cola", predictions, labels) == {"mcc": pytest.approx(1 / 3)}
    assert glue.compute_metrics("mrpc", predictions, labels) == {"accuracy": pytest.approx(4 / 6),
                                                                 "f1": pytest.approx(2 / 3)}
    assert set(glue.compute_metrics("qqp", predictions, labels)) == {"accuracy", "f1"}
    for name in ("sst2", "mnli", "qnli", "rte", "wnli"):
        assert glue.compute_metrics(name, predictions, labels) == {"accuracy": pytest.approx(4 / 6)}
    # logits are arg-maxed
    logits = np.eye(2)[predictions] * 3.0 - 1.0
    assert glue.compute_metrics("mrpc", logits, labels) == glue.compute_metrics("mrpc", predictions, labels)
    result = glue.compute_metrics("stsb", [1.0, 2.0, 2.0, 3.0], [1.0, 3.0, 2.0, 4.0])
    assert result["spearman"] == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert result["pearson"] == pytest.approx(np.corrcoef([1, 2, 2, 3], [1, 3, 2, 4])[0, 1])
    assert glue.compute_metrics("stsb", [[1.0], [2.0], [4.0]], [1.0, 2.0, 3.0])["spearman"] == pytest.approx(1.0)


def test_readers_take_tf_filesystem_urls():
    """GLUE, SQuAD and RACE files behind a URL (here TensorFlow's ram://, as gs:// on a TPU VM) read as local
    ones."""
    import json  # pylint: disable=import-outside-toplevel

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.tasks import race, squad  # pylint: disable=import-outside-toplevel

    root = "ram://task_files"

    def put(name, text):
        tf.io.gfile.makedirs(os.path.dirname(f"{root}/{name}"))
        with tf.io.gfile.GFile(f"{root}/{name}", "w") as f:
            f.write(text)

    put("glue/MNLI/dev_matched.tsv", "\ufeff" + "".join(T.join(r) + "\n" for r in FILES["MNLI/dev_matched.tsv"]))
    assert _triples(glue.read_examples(f"{root}/glue", "mnli", "dev_matched")) == [
        ("The new rights are nice enough", "Everyone really likes them", 2)]
    with pytest.raises(FileNotFoundError, match=r"ram://task_files/glue/MNLI/dev_mismatched\.tsv not found"):
        glue.read_examples(f"{root}/glue", "mnli", "dev_mismatched")
    context = "The Café naïve stood by the river."
    put("dev-v1.1.json", json.dumps({"data": [{"paragraphs": [{"context": context, "qas": [
        {"id": "q", "question": "What?", "answers": [{"text": "Café naïve", "answer_start": 4}]}]}]}]}))
    assert squad.read_examples(f"{root}/dev-v1.1.json")[0].answers == (("Café naïve", 4),)
    race_json = {"article": "A.", "questions": ["Q _ ."], "options": [["a", "b", "c", "d"]], "answers": ["C"]}
    put("RACE/dev/middle/1.txt", json.dumps(race_json))
    put("RACE/dev/high/2.txt", json.dumps(race_json))
    assert [(e.example_id, e.label) for e in race.read_examples(root, "dev")] == [
        ("dev/middle/1.txt#0", 2), ("dev/high/2.txt#0", 2)]


# ------------------------------------------------------------------- an empty second sentence is none
EMPTY_B_QQP = [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
               ["1", "2", "3", "How do I learn?", "", "0"],
               ["4", "5", "6", "Why is the sky blue?", "What makes the sky blue?", "1"],
               ["7", "8", "9", "Is it?", " ", "0"]]


def test_empty_text_b_is_none(tmp_path):
    """The reader gives None for "" (the original's `if example.text_b:`) and " " as it is (packed as none too: see
    test_finetune_packs_an_empty_text_b_as_a_single_sentence)."""
    _write(str(tmp_path / "QQP" / "train.tsv"), EMPTY_B_QQP)
    _write(str(tmp_path / "MNLI" / "train.tsv"), [MNLI_HEAD + ["label1", "gold_label"],
                                                  _mnli_row(0, "A sentence.", "", ["neutral", "neutral"])])
    assert _triples(glue.read_examples(str(tmp_path), "qqp", "train")) == [
        ("How do I learn?", None, 0), ("Why is the sky blue?", "What makes the sky blue?", 1), ("Is it?", " ", 0)]
    assert _triples(glue.read_examples(str(tmp_path), "mnli", "train")) == [("A sentence.", None, 2)]


def test_finetune_packs_an_empty_text_b_as_a_single_sentence(tmp_path, tiny_spm_model):
    """`finetune`'s GLUE pipeline (tf.data, in-graph) and its sample inputs: [CLS] a [SEP] for the empty and the
    whitespace-only text_b (the original's `if tokens_b:` after preprocess_text), [CLS] a [SEP] b [SEP] (types 1
    on b) for the other, from the Python ids of each text."""
    import types  # pylint: disable=import-outside-toplevel

    from albert_tf.tasks.glue.finetune import GlueFinetune  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    _write(str(tmp_path / "QQP" / "train.tsv"), EMPTY_B_QQP)
    _write(str(tmp_path / "QQP" / "dev.tsv"), EMPTY_B_QQP)
    tokenizer = AlbertTokenizer(tiny_spm_model)
    task = GlueFinetune(str(tmp_path), "qqp")
    seq = 40
    expected = np.zeros([3, 3, seq], np.int32)  # [row, (words, mask, types), L]
    for row, example in enumerate(task.train):
        a = [tokenizer.cls_id] + tokenizer.encode(example.text_a) + [tokenizer.sep_id]
        b = tokenizer.encode(example.text_b or "")
        b = b + [tokenizer.sep_id] if b else []
        expected[row, 0, :len(a) + len(b)] = a + b
        expected[row, 1, :len(a) + len(b)] = 1
        expected[row, 2, len(a):len(a) + len(b)] = 1
    assert expected[0, 1].sum() == len(tokenizer.encode("How do I learn?")) + 2  # no second [SEP]
    assert expected[2, 1].sum() == len(tokenizer.encode("Is it?")) + 2  # " ": no second [SEP] either
    task.budget = types.SimpleNamespace(max_seq_length=seq, batch_size=3, length_bucket=0)
    features, labels = next(iter(task.train_dataset(tokenizer, np.arange(3, dtype=np.int64))))
    names = ("input_word_ids", "input_mask", "input_type_ids")
    got = np.stack([features[k].numpy() for k in names], axis=1)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(labels.numpy(), [0, 1, 0])
    sample = task.sample_inputs(tokenizer, 3)
    np.testing.assert_array_equal(np.stack([sample[k] for k in names], axis=1), expected)


# ----------------------------------------------- trained ids == served ids for a row without a second sentence
PAIR_TASKS = [name for name, spec in glue.SPECS.items() if spec.text_b]
LONG_A = " ".join(["the river runs past the old city"] * 4)  # longer than L: a keeps L - 2 ids, not L - 3


def _rows_without_text_b(spec, rows):
    """The task's train.tsv rows (FILES) plus one row with text_b "" and one with text_b " ", text_a LONG_A."""
    header = rows[0]
    a, b = header.index(spec.text_a), header.index(spec.text_b)
    extra = []
    for text_b in ("", " "):
        row = list(rows[-1])
        row[a], row[b] = LONG_A, text_b
        extra.append(row)
    return rows + extra


def _export_rows_without_text_b(task, directory, tiny_spm_model):
    """A pair task's train.tsv with two rows without text_b (`_rows_without_text_b`), read and batched by the task's
    training pipeline, and a tiny classifier's export of the task: {"text_b": the reader's text_b of the two rows,
    "trained": the pipeline's ids of them, "packed": AlbertTokenizer.pack's of their text_a alone, "want": the
    model's answers to "trained", "old": its answer to the old serving packing [CLS] a [SEP] [SEP], "path": the
    export, "calls": the requests for serve_in_fresh_process, "output": the output to compare}."""
    import types  # pylint: disable=import-outside-toplevel

    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf import AlbertClassifier, AlbertConfig, configs_dir  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf.tasks.glue.finetune import GlueFinetune  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    spec = glue.SPECS[task]
    for name, rows in FILES.items():
        if name.startswith(spec.folder + "/"):
            _write(str(directory / name), _rows_without_text_b(spec, rows) if name.endswith("train.tsv") else rows)
    finetune = GlueFinetune(str(directory / spec.folder), task)
    tokenizer = AlbertTokenizer(tiny_spm_model)
    finetune.budget = types.SimpleNamespace(max_seq_length=16, batch_size=2, length_bucket=0)
    order = np.arange(len(finetune.train) - 2, len(finetune.train), dtype=np.int64)
    trained, _ = next(iter(finetune.train_dataset(tokenizer, order)))
    trained = {k: v.numpy() for k, v in trained.items()}

    keras.utils.set_random_seed(0)
    config = AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(
        vocab_size=tokenizer.vocab_size, initializer_range=0.2)  # 10x the usual: outputs that tell ids apart
    model = AlbertClassifier(AlbertEncoder(config), spec.num_labels, dropout=0.0)
    path = finetune.export(model, tokenizer, {}, str(directory / "export"))

    def answer(inputs):
        logits = np.asarray(model(inputs, training=False))
        return logits[:, 0] if spec.num_labels == 1 else np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)

    ids = [tokenizer.cls_id] + tokenizer.encode(LONG_A)[:13] + [tokenizer.sep_id] * 2  # pair packing, empty b
    old = {"input_word_ids": np.array([ids], np.int32), "input_mask": np.ones([1, 16], np.int32),
           "input_type_ids": np.array([[0] * 15 + [1]], np.int32)}
    calls = {"given": ("tf1", "serving_default", {"text_a": np.array([LONG_A] * 2), "text_b": np.array(["", " "])}),
             "omitted": ("tf1", "serving_default", {"text_a": np.array([LONG_A] * 2)})}  # the SignatureDef's default
    return {"text_b": [e.text_b for e in finetune.train[-2:]], "trained": trained,
            "packed": tokenizer.pack(LONG_A, seq_length=16)["input_word_ids"], "want": answer(trained),
            "old": answer(old), "path": path, "calls": calls, "output": "score" if spec.num_labels == 1 else
            "probabilities"}


ROWS_TASKS = ("qqp", "mnli", "stsb")  # the default suite's: two and three classes, regression; the others: slow


@pytest.fixture(scope="module")
def rows_served(tmp_path_factory, tiny_spm_model):
    """{task: (_export_rows_without_text_b's dict, {call: outputs})} for ROWS_TASKS, whose exports one fresh
    process serves (TensorFlow imported once)."""
    import helpers  # pylint: disable=import-outside-toplevel

    directory = tmp_path_factory.mktemp("rows_without_text_b")
    made = {task: _export_rows_without_text_b(task, directory / task, tiny_spm_model) for task in ROWS_TASKS}
    calls = {f"{task}.{name}": call for task, m in made.items() for name, call in m["calls"].items()}
    served = helpers.serve_in_fresh_process({key: made[key.split(".")[0]]["path"] for key in calls}, calls,
                                            str(directory))
    return {task: (m, {name: served[f"{task}.{name}"] for name in m["calls"]}) for task, m in made.items()}


@pytest.mark.parametrize("task", [t if t in ROWS_TASKS else pytest.param(t, marks=pytest.mark.slow)
                                  for t in PAIR_TASKS])
def test_rows_without_text_b_are_served_as_trained(task, request, tmp_path, tiny_spm_model):
    """A pair task's export (loaded as TF Serving loads it: a TF1 session in a fresh process) answers a row whose
    text_b is "", " " or omitted (the signature's default) exactly as the fine-tuned model answers the ids the
    training pipeline made for that row; [CLS] a [SEP] [SEP] (the old serving packing) would answer otherwise.
    ROWS_TASKS are served together (rows_served); another task in a fresh process of its own."""
    import helpers  # pylint: disable=import-outside-toplevel

    if task in ROWS_TASKS:
        made, served = request.getfixturevalue("rows_served")[task]
    else:
        made = _export_rows_without_text_b(task, tmp_path, tiny_spm_model)
        served = helpers.serve_in_fresh_process(made["path"], made["calls"], str(tmp_path))
    assert made["text_b"] == [None, " "]
    np.testing.assert_array_equal(made["trained"]["input_word_ids"], np.stack([made["packed"]] * 2))
    want = made["want"]
    assert np.abs(made["old"][0] - want[0]).max() > 1e-3  # 100x the tolerance below
    for name in made["calls"]:
        np.testing.assert_allclose(served[name][made["output"]], want, atol=1e-5, rtol=0, err_msg=name)

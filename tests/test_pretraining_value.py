"""benchmarks/pretraining_value.py: its pure parts without TensorFlow (the reStructuredText prose extractor on a
hand-written file, the task builder's guarantees, the label draws and splits, PPMI-SVD against a hand-computed
example and numpy's SVD, the logistic regression against its optimality condition) and, marked slow, `--quick`
end to end on a corpus and a library reference this test writes (no apt package needed)."""
import gzip
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.settings.pretrain_config import DECAY_LENGTH, DECAY_START

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


def _library(directory, per_module=24):
    """A library reference laid out as python3-doc's: index → chapters (GROUPS' names) → two module files each,
    whose sentences draw on their group's own words and on shared ones."""
    os.makedirs(directory, exist_ok=True)
    chapters = [group[1][0] for group in pv.GROUPS]
    shared = "the this function returns value when each object module data".split()
    files = {"index.rst.txt": "Library\n=======\n\n.. toctree::\n   :maxdepth: 2\n\n" +
             "".join(f"   {c}.rst\n" for c in ["intro", *chapters])}
    for label, chapter in enumerate(chapters):
        files[f"{chapter}.rst.txt"] = (f"{chapter}\n{'*' * len(chapter)}\n\n.. toctree::\n\n"
                                       f"   {chapter}_a.rst\n   {chapter}_b.rst\n")
        own = [f"{chapter}{k}" for k in range(6)]
        for module in ("a", "b"):
            rng = np.random.default_rng([label, ord(module)])
            lines = [" ".join([*rng.choice(shared, 5), *rng.choice(own, 2), str(k), module]).capitalize() + "."
                     for k in range(per_module)]
            files[f"{chapter}_{module}.rst.txt"] = f"{module}\n===\n\n" + "\n\n".join(lines) + "\n"
    for name, text in files.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write(text)
    return directory


def test_the_task_follows_the_library_index_and_never_holds_a_corpus_sentence(tmp_path):
    library = _library(str(tmp_path / "library"))
    documents = pv.module_documents(library, per_passage=1)
    assert sorted(documents) == list(range(len(pv.GROUPS)))
    assert [sorted(name for name, _ in documents[label]) for label in (0, 7)] == [["text_a", "text_b"],
                                                                                ["python_a", "python_b"]]
    in_corpus = documents[3][0][1][0]  # one sentence of the corpus: left out of the task
    shared = "Shared sentence that two groups both hold."
    documents[1][0][1].append(shared)
    documents[2][0][1].append(shared)
    task = pv.build_task(documents, {pv.normalized(in_corpus)}, seed=5)
    texts = [t for t, _ in task["pool"] + task["dev"]]
    assert pv.normalized(in_corpus) not in {pv.normalized(t) for t in texts} and shared not in texts
    assert len(texts) == len(set(texts)) and task["dropped"] == 3
    origin = {s: name for docs in documents.values() for name, lines in docs for s in lines}
    train, dev = {origin[t] for t, _ in task["pool"]}, {origin[t] for t, _ in task["dev"]}
    assert train and dev and not train & dev  # no module file on both sides
    labels = {origin[t]: y for t, y in task["pool"] + task["dev"]}
    assert all(labels[name] == int(name.startswith(("datatypes", ))) for name in labels if
               name.startswith(("text", "datatypes")))


def test_passages_join_consecutive_sentences(tmp_path):
    library = _library(str(tmp_path / "library"), per_module=5)
    one, two = pv.module_documents(library, 1), pv.module_documents(library, 2)
    first = dict(one[0])["text_a"]
    assert dict(two[0])["text_a"] == [f"{first[0]} {first[1]}", f"{first[2]} {first[3]}", first[4]]


def test_label_draws_are_balanced_seeded_and_split_stratified():
    pool = [(f"text {c} {k}", c) for c in range(8) for k in range(40)]
    drawn = pv.sample_labels(pool, 32, seed=1)
    assert [sum(1 for _, y in drawn if y == c) for c in range(8)] == [4] * 8
    assert drawn == pv.sample_labels(pool, 32, seed=1) and drawn != pv.sample_labels(pool, 32, seed=2)
    fit, select = pv.selection_split(drawn)
    assert sorted(fit + select) == sorted(drawn) and not set(fit) & set(select)
    assert [sum(1 for _, y in select if y == c) for c in range(8)] == [1] * 8  # a quarter of 4, each class
    fit, select = pv.selection_split(pv.sample_labels(pool, 128, seed=1))
    assert len(select) == 32 and len(fit) == 96


def test_cooccurrence_and_ppmi_against_a_hand_computed_example():
    # sentences "a b" and "b c" (a=0, b=1, c=2), window 1: pairs a-b and b-c, each both ways; none across sentences
    counts = pv.cooccurrence([[0, 1], [1, 2]], 3, window=1)
    assert counts.tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    # P(a,b) = 1/4, P(a) = 1/4, P(b) = 2/4: PMI = log((1/4) / (1/4 · 2/4)) = log 2 for every pair seen
    assert np.allclose(pv.ppmi(counts, alpha=1.0), math.log(2) * counts)
    # window 2 reaches a-c in "a b c"; an out-of-vocabulary word (-1) keeps its place but is not counted
    assert pv.cooccurrence([[0, 1, 2]], 3, window=2)[0, 2] == 1
    assert pv.cooccurrence([[0, -1, 2]], 3, window=1).sum() == 0
    # smoothing (alpha 0.75): Pα(b) = 2^0.75 / (1 + 2^0.75 + 1), so PMI(a, b) = log(P(a,b) / (P(a)·Pα(b)))
    smoothed = pv.ppmi(counts, alpha=0.75)
    p_b = 2 ** 0.75 / (1 + 2 ** 0.75 + 1)
    assert smoothed[0, 1] == pytest.approx(math.log((1 / 4) / (1 / 4 * p_b)))


def test_truncated_svd_matches_numpys_svd():
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal([60, 8]) @ np.diag([9, 7, 5, 4, 3, 2, 1, 0.5]) @ rng.standard_normal([8, 50])
    u, s = pv.truncated_svd(matrix, 4, seed=1)
    reference_u, reference_s, _ = np.linalg.svd(matrix)
    assert np.allclose(s, reference_s[:4], rtol=1e-6)
    assert np.allclose(np.abs(u.T @ reference_u[:, :4]), np.eye(4), atol=1e-6)  # the same directions, up to sign


def test_logistic_regression_reaches_its_optimum():
    """At the returned weights the penalised loss's gradient vanishes (a numpy check of the optimality condition)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal([80, 5])
    y = (x[:, 0] + 0.5 * rng.standard_normal(80) > 0).astype(int) + (x[:, 1] > 1).astype(int)
    l2 = 0.05
    w = pv.fit_softmax(x, y, 3, l2, steps=3000)
    xb = np.hstack([x, np.ones([80, 1])])
    p = np.exp(xb @ w)
    p /= p.sum(1, keepdims=True)
    gradient = xb.T @ (p - np.eye(3)[y]) / 80 + l2 * np.vstack([w[:-1], np.zeros([1, 3])])
    assert np.abs(gradient).max() < 1e-6
    assert pv.softmax_accuracy(w, x, y) > 0.7


def test_selection_folds_are_stratified_and_cover_every_example_once():
    labels = [c for c in range(3) for _ in range(8)] + [0, 1]  # 9, 9, 8 of the three classes
    splits = pv.selection_folds(labels, 4)
    assert len(splits) == 4
    for fit, select in splits:
        assert sorted(fit + select) == list(range(len(labels))) and not set(fit) & set(select)
        assert [sum(1 for i in select if labels[i] == c) for c in range(3)] in ([3, 3, 2], [2, 2, 2])
    assert sorted(i for _, select in splits for i in select) == list(range(len(labels)))


def test_the_probe_chooses_the_l2_with_the_best_selection_score_and_refits_on_all():
    """The chosen L2 and the dev accuracy against the same choice made by hand: trained on `fit`, scored on
    `select` (folds=1), or the mean over 4 folds that each hold out every 4th example of each class; on data where
    the two ways choose differently."""
    rng = np.random.default_rng(34)
    classes, grid = 3, (1e-3, 1e-2, 1e-1, 1.0)
    train = [(f"t{i}", i % classes) for i in range(24)]
    dev = [(f"t{100 + i}", i % classes) for i in range(30)]
    table = {text: rng.standard_normal(12) + np.eye(classes, 12)[c] for text, c in train + dev}

    def features(texts):
        return np.stack([table[t] for t in texts])

    fit, select = pv.selection_split(train)
    ordered = fit + select
    x, y = features([t for t, _ in ordered]), np.array([c for _, c in ordered])
    mean, scale = x.mean(0), x.std(0) + 1e-6
    x = (x - mean) / scale
    x_dev, y_dev = (features([t for t, _ in dev]) - mean) / scale, [c for _, c in dev]
    held_out = {1: [list(range(len(fit), len(ordered)))],
                4: [[i for c in range(classes) for i in [j for j in range(len(y)) if y[j] == c][f::4]]
                    for f in range(4)]}
    expected = {}
    for folds, held in held_out.items():
        scores = [np.mean([pv.softmax_accuracy(pv.fit_softmax(x[[i for i in range(len(y)) if i not in h]],
                                                              y[[i for i in range(len(y)) if i not in h]], classes,
                                                              l2), x[h], y[h]) for h in held]) for l2 in grid]
        expected[folds] = grid[max(i for i in range(len(grid)) if scores[i] == max(scores))]  # ties: stronger
        accuracy, chosen = pv.linear_probe(features, fit, select, dev, classes=classes, grid=grid, folds=folds)
        assert chosen == expected[folds]
        assert accuracy == pv.softmax_accuracy(pv.fit_softmax(x, y, classes, chosen), x_dev, y_dev)
    assert expected[1] != expected[4]  # the data tells the two ways apart


@pytest.mark.parametrize("argv, expected", [
    (["--probe-folds", "5"], "--probe-folds 5: expected 1 to 4 (the 32 labels' 4 per class)"),
    (["--probe-folds", "0"], "--probe-folds 0: expected 1 to 4"),
    (["--l2-grid", "0.1,x"], "--l2-grid 0.1,x: expected comma-separated numbers"),
    (["--l2-grid", "-1"], "--l2-grid -1: expected penalties >= 0"),
])
def test_bad_probe_selection_flags_are_refused(argv, expected, capsys):
    with pytest.raises(SystemExit) as stop:
        pv._parse_args(argv)
    assert stop.value.code == 2
    assert expected in capsys.readouterr().err.strip().splitlines()[-1]


def test_step_checkpoints_at_eighths_of_the_run(tmp_path):
    steps = tmp_path / "model" / "steps"
    steps.mkdir(parents=True)
    for step in range(50, 401, 50):
        (steps / f"ckpt-{step}.index").write_text("")
    assert [s for s, _ in pv.run_checkpoints(str(tmp_path / "model"))] == [50, 100, 200, 400]


def test_set_reaches_pretrains_model_over_the_recipe(tmp_path, capsys):
    """--set KEY=VALUE goes to `albert-tf pretrain` after the recipe's model: the CLI's own parser resolves the argv
    to the recipe's config with that key changed (and the rest of the recipe's kept)."""
    from albert_tf.cli import build_parser  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs.pretrain import config_from_args  # pylint: disable=import-outside-toplevel
    from albert_tf.settings.pretrain_config import CPU_SMALL_MODEL, PretrainConfig  # pylint: disable=import-outside-toplevel

    args = pv._parse_args(["--set", "num_hidden_layers=4", "--set", "intermediate_size=512"])
    argv = pv.pretraining_argv(str(tmp_path), 800, False, 0, args.set)
    config = config_from_args(build_parser(argv).parse_args(argv))
    capsys.readouterr()
    assert config.config_overrides == {**CPU_SMALL_MODEL, "num_hidden_layers": 4, "intermediate_size": 512}
    assert config.num_train_steps == 800 and config.num_warmup_steps == 50
    plain = pv.pretraining_argv(str(tmp_path), 800, False, 0)
    assert config_from_args(build_parser(plain).parse_args(plain)).config_overrides == CPU_SMALL_MODEL
    recipe = PretrainConfig.from_recipe("cpu_small", config="albert_base", train_data="d-*", model_dir="m")
    assert pv._parse_args([]).pretrain_steps == recipe.num_train_steps  # the default run is the recipe's


@pytest.mark.parametrize("text, expected", [
    ("num_layers=2", "'num_layers' is not an AlbertConfig key"),
    ("num_hidden_layers=two", "'num_hidden_layers': expected a positive integer, got 'two'"),
    ("num_hidden_layers", "expected KEY=VALUE"),
])
def test_a_bad_set_is_refused_before_any_work(text, expected, capsys):
    """Before the vocabulary and the records: pretrain itself would refuse it only after them."""
    with pytest.raises(SystemExit) as stop:
        pv._parse_args(["--set", text])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert expected in err and "--set" in err, err


def test_set_with_init_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        pv._parse_args(["--init", "run/model", "--set", "num_hidden_layers=2"])
    assert stop.value.code == 2 and "with --init run/model the model is that run's own" in capsys.readouterr().err


def test_missing_inputs_name_the_install_command(tmp_path):
    for what in ("kernel documentation", "Python library reference"):
        with pytest.raises(SystemExit, match=re.escape("apt-get install linux-doc-6.12 python3-doc")):
            pv.find_dir(str(tmp_path / "absent"), "/nonexistent/*", what)


def test_the_corpus_reads_gzipped_files_and_skips_translations(tmp_path):
    docs = tmp_path / "Documentation"
    (docs / "translations" / "it").mkdir(parents=True)
    (docs / "core").mkdir()
    text = RST.encode()
    with gzip.open(docs / "core" / "shutil.rst.gz", "wb") as f:
        f.write(text)
    (docs / "translations" / "it" / "shutil.rst").write_bytes(text)
    assert [os.path.relpath(p, docs) for p in pv.corpus_files(str(docs))] == [os.path.join("core", "shutil.rst.gz")]
    documents, lines, size = pv.write_corpus(str(docs), str(tmp_path / "corpus.txt"))
    corpus = pv.read_corpus_sentences(str(tmp_path / "corpus.txt"))
    assert documents == 1 and len(corpus[0]) == lines and size > 0
    assert "The shutil module offers a number of high-level operations on files." in corpus[0]
    assert 'print("This is code that looks like a sentence.")' in corpus[0]  # the dropped bodies' text is kept


@pytest.mark.slow
def test_quick_run_prints_the_table_and_the_last_line(tmp_path):
    """`--quick` end to end on the built-in corpus (Python's docstrings) and the library written above (the probes'
    L2 chosen by cross-validation: the default's quarter split is the unit tests'); one seed per arm (the table and
    the last line are what is checked: the seeds' loop is the same code for one or five)."""
    from albert_tf.data.builtin_corpus import write_builtin_corpus  # pylint: disable=import-outside-toplevel

    corpus = tmp_path / "Documentation"
    corpus.mkdir()
    write_builtin_corpus(str(corpus / "builtin.txt"))
    library = _library(str(tmp_path / "library"), per_module=48)
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                          "pretraining_value.py")
    result = subprocess.run([sys.executable, script, "--quick", "--corpus-dir", str(corpus), "--task-dir", library,
                             "--work-dir", str(tmp_path / "work"), "--probe-folds", "2", "--seeds", "1"], capture_output=True,
                            text=True, check=False, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.rstrip().splitlines()
    last = re.fullmatch(r"labels=128 pretrained=(\S+) random=(\S+) bag_of_words=(\S+) distributional=(\S+) "
                        r"min_paired_gain=(\S+) probe_min_gain=(\S+) probe_128=(\S+) bow_128=(\S+) "
                        r"probe_512=nan bow_512=nan", lines[-1])
    assert last, lines[-1]
    assert all(0 <= float(v) <= 1 for v in last.groups()[:4]) and -1 <= float(last.group(5)) <= 1
    table = [line for line in lines if line.startswith("| ")]
    assert lines[lines.index(table[0]) - 1].endswith("the probes' L2 of 0.0001,0.001,0.01,0.1 chosen by 2-fold "
                                                     "cross-validation")
    assert table[0] == "| arm | how | pretraining tokens | 32 labels | 128 labels |"
    arms = [tuple(cell.strip() for cell in row.split("|")[1:3]) for row in table[1:]]
    assert arms[:3] == [("bag_of_words", "probe"), ("distributional", "probe"), ("random", "probe")]
    assert arms.count(("pretrained", "probe")) == 4 and arms[-6:] == [
        ("random", "probe, all blocks"), ("pretrained", "probe, all blocks"), ("random", "probe, word embeddings"),
        ("pretrained", "probe, word embeddings"), ("random", "fine-tuned"), ("pretrained", "fine-tuned")]
    for row in table[1:]:
        for cell in row.split("|")[4:-1]:
            mean, spread = map(float, cell.split("±"))
            assert 0 <= mean <= 1 and spread >= 0
    assert any(line.startswith("pretraining wall time: ") for line in lines)
    assert sum(line.startswith("paired pretrained − random") for line in lines) == 8
    recorded = pv.recorded_pretraining_seconds(str(tmp_path / "work" / "model"))
    assert recorded > 0 and f"pretraining wall time: {recorded / 60:.1f} min;" in result.stdout


def test_encoder_features_average_the_real_tokens_of_the_last_block_every_block_and_the_word_table(
        tiny_spm_model):
    """Against a numpy mean over the input mask of the encoder's own outputs and of its word-embedding variable's
    rows, computed one text at a time."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel
    tokenizer = AlbertTokenizer(tiny_spm_model)
    config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=16, num_hidden_layers=3,
                          num_attention_heads=2, intermediate_size=32)
    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(config)
    weights = encoder.get_weights()
    table = next(np.asarray(v.numpy(), np.float64) for v in encoder.weights if v.path.endswith("word_embeddings"))
    encoder.set_weights([w + 1.0 for w in weights])  # `weights` must be the ones used, not the encoder's current
    last, blocks, words = pv.encoder_features(encoder, weights, tokenizer, batch_size=2)
    texts = ["the quick brown fox", "a much longer sentence than the first one, with a comma", "fox"]
    got_last, got_blocks, got_words = last(texts), blocks(texts), words(texts)
    assert got_last.shape == (3, 16) and got_blocks.shape == (3, 48) and got_words.shape == (3, 8)
    encoder.set_weights(weights)
    for row, text in enumerate(texts):
        x = tokenizer.pack([text], seq_length=pv.TASK_SEQ)
        outputs = encoder(x, training=False)["encoder_outputs"]
        real = x["input_mask"][0].astype(bool)
        expected = [np.asarray(block, np.float64)[0][real].mean(0) for block in outputs]
        assert np.allclose(got_blocks[row], np.concatenate(expected), atol=1e-5)
        assert np.allclose(got_last[row], expected[-1], atol=1e-5)
        assert np.allclose(got_words[row], table[x["input_word_ids"][0][real]].mean(0), atol=1e-6)


def test_the_pretraining_wall_time_is_read_back_beside_the_model_dir(tmp_path):
    assert pv.recorded_pretraining_seconds(str(tmp_path / "model")) is None
    (tmp_path / pv.TIME_RECORD).write_text('{"seconds": 3723.5, "steps": 3600}')
    assert pv.recorded_pretraining_seconds(str(tmp_path / "model")) == 3723.5


def test_the_last_line_from_hand_made_results():
    """summary_line against results written by hand: means, the smallest paired gains (fine-tuned and probe), and
    nan for a label count that was not run."""
    results = {("pretrained", "fine-tuned", 600, 128): [0.30, 0.20], ("random", "fine-tuned", None, 128): [0.25, 0.22],
               ("pretrained", "probe", 600, 128): [0.40, 0.30], ("random", "probe", None, 128): [0.20, 0.25],
               ("bag_of_words", "probe", None, 128): [0.10, 0.30], ("distributional", "probe", None, 128): [0.5, 0.5],
               ("pretrained", "probe", 300, 128): [0.9, 0.9]}
    assert pv.summary_line(results, 600, [32, 128]) == (
        "labels=128 pretrained=0.2500 random=0.2350 bag_of_words=0.2000 distributional=0.5000 "
        "min_paired_gain=-0.0200 probe_min_gain=0.0500 probe_128=0.3500 bow_128=0.2000 probe_512=nan bow_512=nan")
    del results[("pretrained", "fine-tuned", 600, 128)]
    assert pv.summary_line(results, 600, [128]).startswith("labels=128 pretrained=0.3500 random=0.2250 ")



def test_the_runs_end_is_its_latest_checkpoint_when_past_the_last_kept_one(tmp_path):
    """A lever's run of 146 steps saves every 18: its kept step checkpoints end at 144, its last checkpoint is 146."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = tmp_path / "model"
    (model / "steps").mkdir(parents=True)
    for step in range(18, 145, 18):
        (model / "steps" / f"ckpt-{step}.index").write_text("")
    tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(model / "ckpt-146"))
    (model / "checkpoint").write_text('model_checkpoint_path: "ckpt-146"\nall_model_checkpoint_paths: "ckpt-146"\n')
    assert [s for s, _ in pv.run_checkpoints(str(model))] == [18, 36, 72, 146]


@pytest.mark.parametrize("lever", sorted(pv.LEVERS))
def test_each_lever_reaches_pretrain_on_the_recipe_runs_tokens(lever, tmp_path, capsys):
    """A lever's argv, parsed by pretrain's own CLI parser and settings: the recipe with the lever's flags, into
    WORK/model-LEVER, on the tokens of the recipe's run of 800 steps (the phases: 32:0.9,64:0.1 over
    --budget-tokens, the step count pretrain decides; every kept checkpoint an eighth of it)."""
    from albert_tf.cli import build_parser  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs.pretrain import config_from_args  # pylint: disable=import-outside-toplevel
    from albert_tf.settings.run_length import tokens_of  # pylint: disable=import-outside-toplevel

    argv = pv.pretraining_argv(str(tmp_path), 800, False, 0, (), lever)
    config = config_from_args(build_parser(argv).parse_args(argv))
    capsys.readouterr()
    assert config.model_dir == str(tmp_path / ("model" if lever == "recipe" else f"model-{lever}"))
    assert config.batch_size == 128 and config.max_seq_length == 64
    phases = config.run_phases()
    assert tokens_of(phases, config.num_train_steps, 128) >= 800 * 128 * 64
    assert tokens_of(phases, config.num_train_steps - 1, 128) < 800 * 128 * 64
    assert config.num_train_steps == pv.lever_steps(lever, 800, 128)
    assert config.num_warmup_steps == round(config.num_train_steps * 412 / 6600)
    assert config.save_checkpoints_steps == config.num_train_steps // 8
    expected = {"linear": ("schedule", "linear"), "one-cycle": ("schedule", "one-cycle"),
                "wsd": ("schedule", "wsd"), "mask25": ("masked_lm_prob", 0.25), "mask30": ("masked_lm_prob", 0.3),
                "no-sop": ("sop_weight", 0.0)}
    if lever in expected:
        field, value = expected[lever]
        assert getattr(config, field) == value
    # the recipe's schedule (the paper's polynomial decay) unless the lever names another; "wsd-..." over wsd
    schedule = "wsd" if lever.startswith("wsd") else expected[lever][1] if lever in ("linear", "one-cycle") else (
        "polynomial")
    assert (config.schedule, config.decay_start, config.decay_length) == (
        (schedule, 0.8, 0.2) if schedule == "wsd" else (schedule, DECAY_START, DECAY_LENGTH))
    if lever in ("phases", "wsd-phases"):
        assert [(p.seq_length, p.fraction) for p in phases] == [(32, 0.9), (64, 0.1)]
        assert config.num_train_steps == 1455  # 800 * 64 / (0.9 * 32 + 0.1 * 64) = 1454.5
    elif lever == "wsd-ramp":  # the same length, batches 32, 64, 128 for a quarter, a quarter, a half of the steps
        assert [(p.seq_length, p.fraction, p.batch_size) for p in phases] == [(64, 0.25, 32), (64, 0.25, 64),
                                                                              (64, 0.5, 128)]
        assert config.num_train_steps == 1164  # 800 * 128 / (0.25 * 32 + 0.25 * 64 + 0.5 * 128) = 1163.6
        assert config.phase_data == {}
    else:
        assert config.num_train_steps == 800 and len(phases) == 1
    assert pv.tokens_at(lever, config.num_train_steps, 128) == tokens_of(phases, config.num_train_steps, 128)


def test_a_lever_with_init_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        pv._parse_args(["--init", "somewhere", "--lever", "linear"])
    assert stop.value.code == 2 and "--lever linear" in capsys.readouterr().err

"""The raw-text SQuAD and RACE SavedModels (albert_tf.tasks.squad.squad_export, tasks.race.race_export), loaded in a
fresh process (TensorFlow and TF Text only), answer as the in-process Keras model + the Python featurizer and
post-processing (albert_tf.tasks) do."""
import json
import os
import random

import numpy as np
import pytest

import helpers
from albert_tf.serving.saved_model import TASK_CONFIG_ASSET
from albert_tf.tasks.race.race_export import export_race
from albert_tf.tasks.race.finetune import race_dataset
from albert_tf.tasks.race.in_graph import race_inputs
from albert_tf.tasks.squad.squad_export import export_squad
from albert_tf.tasks.squad.in_graph import featurize_squad, squad_answers, squad_windows
from albert_tf.text import in_graph
from albert_tf.tasks import race, squad
from albert_tf.text import AlbertTokenizer

SEQ, STRIDE, QUERY = 64, 16, 16   # tiny windows: the long context needs several
CAFE = "In the old town, the Café naïve stood by the river. It was built in 1999, before the city grew."
SQUAD_CASES = [  # (question, context)
    ("What stood by the river?", CAFE),
    ("Where is the river of the ancient city of modern music and science?",
     " ".join(helpers.make_sentence(random.Random(3)) for _ in range(25))),   # several windows
    ("who?", "``Quoted'' text '' ``  runs \t of\u00a0whitespace,  ÜBER İstanbul ﬁne ① ΟΔΟΣ ΑΣ. e\u0301 3.0, 7,5, 42,"),
    ("", "中文字符 and 日本語のテキスト, 한국어 emoji 😀👍🏽 ok"),
    ("Is there an answer?", ""),
    ("What is the number?", "  It costs 3.0, or 7,5, or 42, and 1999,   "),
]


def _config(tokenizer):
    from albert_tf import AlbertConfig, configs_dir  # pylint: disable=import-outside-toplevel

    return AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(
        vocab_size=tokenizer.vocab_size, max_position_embeddings=SEQ)


@pytest.fixture(scope="module")
def tokenizer(tiny_spm_model):
    return AlbertTokenizer(tiny_spm_model)


# ------------------------------------------------------------------------------------ in-graph offsets
# Digit-comma pieces (with and without "▁") and powers of "=" (equal-score ties that TF Text's SentencePiece
# orders differently from pip's): both in-graph rearrangements of the token spans.
RICH_PIECES = [("\u25813.0,", 0.0), ("5,", 0.0), ("7,", 0.0), ("\u258142,", 0.0), ("\u25811999,", 0.0),
               ("==", -3.0), ("====", -6.0), ("=", -1.5)]


@pytest.mark.parametrize("vocabulary", ["uncased", "cased", "rich"])
def test_in_graph_encode_with_offsets_equals_python(tiny_spm_model, vocabulary, tmp_path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    spm_model = tiny_spm_model
    if vocabulary == "rich":
        spm_model = helpers.add_spm_pieces(tiny_spm_model, RICH_PIECES, str(tmp_path / "rich.model"))
    tokenizer = AlbertTokenizer(spm_model, lower_case=vocabulary != "cased")
    if vocabulary == "rich":  # the rich vocabulary does exercise both
        assert len(tokenizer.digit_comma_ids) == 5
        assert [tokenizer.id_to_piece(i) for i in tokenizer.encode("======")] == ["\u2581", "==", "===="]
    texts = helpers.EQUALITY_TEXTS + [c for _, c in SQUAD_CASES] + [
        "x ,3.0, ''``'''", " ¨ a\u0301\u0301 ﬁ,", "a ====== b ==== x5, 7,5, 42,42, =======, 1999,"]
    encoder = in_graph.make_offset_encoder(tokenizer)
    ids, starts, ends = encoder.encode_with_offsets(tf.constant(texts))
    for row, text in enumerate(texts):
        want_ids, want_spans = tokenizer.encode_with_offsets(text)
        assert ids[row].numpy().tolist() == want_ids, text
        got = list(zip(starts[row].numpy().tolist(), ends[row].numpy().tolist()))
        assert got == [tuple(s) for s in want_spans], text


# ------------------------------------------------------------------------------------ SQuAD
def _squad_examples():
    return [squad.SquadExample(f"q{i}", q, c, ()) for i, (q, c) in enumerate(SQUAD_CASES)]


def _squad_python(tokenizer, start_logits, end_logits, features, v2, threshold):
    return squad.postprocess(_squad_examples(), features, start_logits, end_logits, version_2_with_negative=v2,
                             null_score_diff_threshold=threshold)


def _check_windows(windows, features):
    """In-graph windows == squad.featurize's (ids, mask, types, example, spans, max context)."""
    arrays = squad.features_to_arrays(features)
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(windows[name], arrays[name], err_msg=name)
    np.testing.assert_array_equal(windows["example_index"], [f.example_index for f in features])
    spans = np.stack([f.token_spans for f in features])
    np.testing.assert_array_equal(windows["token_start"], spans[:, :, 0])
    np.testing.assert_array_equal(windows["token_end"], spans[:, :, 1])
    np.testing.assert_array_equal(windows["token_is_max_context"], np.stack([f.token_is_max_context
                                                                             for f in features]))
    assert max(f.doc_span_index for f in features) >= 3  # the long context took several windows


def _check_answers(served, want, v2):
    """Served answers == squad.postprocess's: text, its character span in the context, score, null diff."""
    examples = _squad_examples()
    answers = [want.answers[e.qas_id] for e in examples]
    assert [a.decode("utf-8") if isinstance(a, bytes) else a for a in served["answer"].tolist()] == answers
    for (_, context), answer, start, end in zip(SQUAD_CASES, answers, served["start"], served["end"]):
        assert (context[start:end], start >= 0) == (answer, bool(answer))
    for row, answer in enumerate(answers):
        if answer:  # score: the answer's start + end logit
            best = [e for e in want.nbest[examples[row].qas_id] if e["text"] == answer][0]
            assert served["score"][row] == pytest.approx(best["start_logit"] + best["end_logit"], abs=1e-4)
    if v2:
        np.testing.assert_allclose(served["null_score_diff"], [want.null_score_diff[e.qas_id] for e in examples],
                                   atol=1e-4, rtol=0)
    else:
        assert "null_score_diff" not in served
    return answers


@pytest.fixture(scope="module")
def squad_features(tokenizer):
    return squad.featurize(_squad_examples(), tokenizer, max_seq_length=SEQ, doc_stride=STRIDE,
                           max_query_length=QUERY)


def _squad_training_examples():
    """Answerable (several windows, shared contexts, accents), unanswerable, and one whose answer is a space (it
    covers no token: featurize skips the question)."""
    examples = []
    for n, (question, context) in enumerate(SQUAD_CASES):
        words = context.split()
        if words:
            answer = words[len(words) // 2]
            examples.append(squad.SquadExample(f"a{n}", question, context, ((answer, context.index(answer)),)))
            examples.append(squad.SquadExample(f"b{n}", question + "?", context, ((words[-1], context.rindex(
                words[-1])),)))
        examples.append(squad.SquadExample(f"i{n}", question, context, (), is_impossible=True))
    examples.append(squad.SquadExample("space", "Where?", CAFE, ((" ", CAFE.index(" ")),)))
    return examples


@pytest.mark.parametrize("is_training", [False, True])
def test_featurize_squad_in_tf_data_equals_python(tokenizer, is_training):
    examples = _squad_training_examples()
    want = squad.featurize(examples, tokenizer, max_seq_length=SEQ, doc_stride=STRIDE, max_query_length=QUERY,
                           is_training=is_training)
    got = featurize_squad(examples, tokenizer, max_seq_length=SEQ, doc_stride=STRIDE,
                                      max_query_length=QUERY, is_training=is_training, examples_per_batch=3)
    assert len(got) == len(want) and len(want) > len(examples)
    if is_training:  # the space answer's question is skipped; some windows hold the answer, some do not
        assert "space" not in {examples[f.example_index].qas_id for f in want}
        assert {f.is_impossible for f in want} == {True, False}
    for g, w in zip(got, want):
        for name in ("unique_id", "example_index", "doc_span_index", "start_position", "end_position",
                     "is_impossible"):
            assert getattr(g, name) == getattr(w, name), name
        for name in ("input_word_ids", "input_mask", "input_type_ids", "token_spans", "token_is_max_context"):
            np.testing.assert_array_equal(getattr(g, name), getattr(w, name), err_msg=name)
    with pytest.raises(ValueError, match="question q has no answer to train on"):
        featurize_squad([squad.SquadExample("q", "What?", CAFE, ())], tokenizer, is_training=True)


# Powers of "=" whose equal-score ties pip sentencepiece breaks against the canonical order ("===" "==" for
# "x =====", float32 path sums): the Python featurizer must still equal the in-graph one.
TIE_PIECES = [("==", -4.5), ("===", -4.9)]


@pytest.mark.parametrize("is_training", [False, True])
def test_featurize_squad_equals_python_on_tie_text(tiny_spm_model, tmp_path, is_training):
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    tie_model = helpers.add_spm_pieces(tiny_spm_model, TIE_PIECES, str(tmp_path / "ties.model"))
    tokenizer = AlbertTokenizer(tie_model)
    rng = random.Random(4)
    examples = []
    for n in range(6):
        words = [rng.choice(["x =====", "==========", "=" * rng.randint(4, 19), helpers.make_sentence(rng)])
                 for _ in range(rng.randint(4, 9))]
        context = " ".join(words) + " the end"
        answer = "the end" if n % 2 else words[1]
        examples.append(squad.SquadExample(f"t{n}", "Where is the ===== border?", context,
                                           ((answer, context.rindex(answer) if n % 2 else context.index(answer)),)))
    raw = spm.SentencePieceProcessor(model_proto=tokenizer.model_proto).encode([e.context for e in examples])
    assert raw != tokenizer.encode([e.context for e in examples])  # the ties are there
    want = squad.featurize(examples, tokenizer, max_seq_length=SEQ, doc_stride=STRIDE, max_query_length=QUERY,
                           is_training=is_training)
    got = featurize_squad(examples, tokenizer, max_seq_length=SEQ, doc_stride=STRIDE, max_query_length=QUERY,
                          is_training=is_training, examples_per_batch=4)
    assert len(got) == len(want) > len(examples)
    for g, w in zip(got, want):
        for name in ("example_index", "doc_span_index", "start_position", "end_position", "is_impossible"):
            assert getattr(g, name) == getattr(w, name), name
        for name in ("input_word_ids", "input_type_ids", "token_spans", "token_is_max_context"):
            np.testing.assert_array_equal(getattr(g, name), getattr(w, name), err_msg=name)


def test_answers_strip_edge_whitespace_python_and_in_graph(tiny_spm_model, tmp_path):
    """A lone "▁" piece's span is empty and sits after (or inside) a whitespace run: a span ending (starting) on
    it takes whitespace along, which the answer text drops (str.strip(), no-break space included), offsets moved."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tokenizer = AlbertTokenizer(helpers.add_spm_pieces(tiny_spm_model, [("\u2581laptops,", 0.0)],
                                                       str(tmp_path / "laptops.model")))
    contexts = ["Laptops,\u00a0qz", "Laptops,  ,q"]
    pieces = [[tokenizer.id_to_piece(i) for i in tokenizer.encode(c)] for c in contexts]
    assert [p[:3] for p in pieces] == [["\u2581laptops,", "\u2581", "<unk>"], ["\u2581laptops,", "\u2581", ","]]
    examples = [squad.SquadExample(f"s{i}", "What?", c, ()) for i, c in enumerate(contexts)]
    features = squad.featurize(examples, tokenizer, max_seq_length=SEQ, doc_stride=STRIDE, max_query_length=QUERY)
    first = int(np.argmax(features[0].token_spans[:, 0] >= 0))  # "▁laptops," in both windows
    spans = [f.token_spans[first:first + 3].tolist() for f in features]
    assert spans == [[[0, 8], [9, 9], [9, 11]], [[0, 8], [9, 9], [10, 11]]]  # "▁" empty at 9 (a space in the 2nd)
    # peaked logits: "▁laptops," .. "▁" (context[0:9] == "Laptops, " / "Laptops,\xa0"), then "▁" .. "," (" ,")
    cases = [((first, first + 1), ["Laptops,", "Laptops,"], [0, 0], [8, 8]),
             ((first + 1, first + 2), ["qz", ","], [9, 10], [11, 11])]
    encoder = in_graph.make_offset_encoder(tokenizer)
    windows = squad_windows(encoder, tokenizer, tf.constant(["What?"] * 2), tf.constant(contexts), SEQ, STRIDE,
                            QUERY)
    for (start, end), texts, starts, ends in cases:
        start_logits, end_logits = np.zeros([2, SEQ], np.float32), np.zeros([2, SEQ], np.float32)
        start_logits[:, start], end_logits[:, end] = 9.0, 9.0
        python = squad.postprocess(examples, features, start_logits, end_logits)
        assert [python.answers[e.qas_id] for e in examples] == texts
        got = squad_answers(windows, tf.constant(start_logits), tf.constant(end_logits), tf.constant(contexts), 2)
        assert [a.decode() for a in got["answer"].numpy()] == texts
        assert got["start"].numpy().tolist() == starts and got["end"].numpy().tolist() == ends
        assert [c[s:e] for c, s, e in zip(contexts, starts, ends)] == texts


def test_strip_answer_hand_computed():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.tasks.squad.in_graph import strip_answer  # pylint: disable=import-outside-toplevel

    answers = ["Laptops, ", "\u00a0\u3000é x\t\n", "", "ok", "\u2029 "]
    start, end = tf.constant([4, 10, -1, 0, 7], tf.int64), tf.constant([13, 17, -1, 2, 9], tf.int64)
    text, s, e = strip_answer(tf.constant(answers), start, end)
    assert [t.decode() for t in text.numpy()] == [a.strip() for a in answers] == ["Laptops,", "é x", "", "ok", ""]
    assert s.numpy().tolist() == [4, 12, -1, 0, 9] and e.numpy().tolist() == [12, 15, -1, 2, 9]


def test_in_graph_squad_windows_and_answers_equal_python(tokenizer, squad_features):
    """Featurization and post-processing alone (no model): random logits with ties and a peaked span."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    encoder = in_graph.make_offset_encoder(tokenizer)
    question, context = tf.constant([q for q, _ in SQUAD_CASES]), tf.constant([c for _, c in SQUAD_CASES])
    windows = squad_windows(encoder, tokenizer, question, context, SEQ, STRIDE, QUERY)
    _check_windows({k: v.numpy() for k, v in windows.items()}, squad_features)
    rng = np.random.default_rng(0)
    shape = windows["input_word_ids"].shape
    for trial in range(6):
        start_logits = rng.normal(size=shape).astype(np.float32)
        end_logits = rng.normal(size=shape).astype(np.float32)
        if trial % 2:  # ties: logits on a coarse grid
            start_logits, end_logits = np.round(start_logits), np.round(end_logits)
        start_logits[:, 0] += trial - 2  # "no answer" more or less likely
        for v2, threshold in ((False, 0.0), (True, 0.0), (True, 1.5)):
            want = _squad_python(tokenizer, start_logits, end_logits, squad_features, v2, threshold)
            got = squad_answers(windows, tf.constant(start_logits), tf.constant(end_logits), context,
                                            tf.size(context), version_2_with_negative=v2,
                                            null_score_diff_threshold=threshold)
            answers = _check_answers({k: v.numpy() for k, v in got.items()}, want, v2)
            assert any(answers[:4])


@pytest.fixture(scope="module")
def squad_export(tokenizer, squad_features, tmp_path_factory):
    """(Keras logits of the Python features, the v2 threshold, the v2 export's path) for SQUAD_CASES."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf import AlbertSpanQA  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(7)
    model = AlbertSpanQA(AlbertEncoder(_config(tokenizer), dropout=False), version_2_with_negative=True)
    logits = {k: np.asarray(v) for k, v in model(squad.features_to_arrays(squad_features), training=False).items()}
    # the threshold between two questions' null score differences: some answered, some not
    diffs = sorted(_squad_python(tokenizer, logits["start_logits"], logits["end_logits"], squad_features, True,
                                 0.0).null_score_diff.values())
    finite = [d for d in diffs if np.isfinite(d)]
    threshold = float((finite[len(finite) // 2 - 1] + finite[len(finite) // 2]) / 2)
    path = export_squad(model, tokenizer, str(tmp_path_factory.mktemp("squad") / "v2"), SEQ, STRIDE,
                                    QUERY, version_2_with_negative=True, null_score_diff_threshold=threshold)
    return logits, threshold, path


@pytest.mark.slow
def test_squad_export_answers_as_keras_and_python_in_a_fresh_process(squad_export, squad_features, tmp_path):
    logits, threshold, path = squad_export
    request = {"question": [q for q, _ in SQUAD_CASES], "context": [c for _, c in SQUAD_CASES]}
    served = helpers.serve_in_fresh_process(path, {  # TF Serving's loader (TF1 session) too
        "answers": ("tf2", "serving_default", request), "windows": ("tf2", "windows", request),
        "tf1": ("tf1", "serving_default", request)}, str(tmp_path))
    _check_windows(served["windows"], squad_features)
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(served["windows"][key], logits[key], atol=1e-5, rtol=0)
    want = _squad_python(None, logits["start_logits"], logits["end_logits"], squad_features, True, threshold)
    answers = _check_answers(served["answers"], want, True)
    assert any(answers) and "" in answers[:4]  # a v2 "no answer" on a non-empty context
    tf1, served = served["tf1"], served["answers"]
    np.testing.assert_array_equal(tf1["answer"], np.array(answers))
    for key in ("start", "end"):
        np.testing.assert_array_equal(tf1[key], served[key])
    np.testing.assert_allclose(tf1["score"], served["score"], atol=1e-5, rtol=0)
    # the export's files: ops every TF Serving >= 2.20 registers, the parameters
    ops = helpers.op_types(path)
    assert "SentencepieceTokenizeOp" in ops
    assert not helpers.unregistered_ops(ops), f"ops a TF Serving build may lack: {helpers.unregistered_ops(ops)}"
    with open(os.path.join(path, "assets.extra", TASK_CONFIG_ASSET), encoding="utf-8") as f:
        config = json.load(f)
    assert (config["doc_stride"], config["max_query_length"], config["max_seq_length"]) == (STRIDE, QUERY, SEQ)
    assert config["null_score_diff_threshold"] == threshold and config["version_2_with_negative"]


@pytest.mark.slow
def test_squad_export_refuses_unequal_batches(squad_export):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = tf.saved_model.load(squad_export[2])
    with pytest.raises(tf.errors.InvalidArgumentError, match="question and context must have the same length"):
        model.signatures["serving_default"](question=tf.constant(["a", "b"]), context=tf.constant(["a"]))


# ------------------------------------------------------------------------------------ RACE
RACE_CASES = [  # (article, question, options)
    ("The Café naïve stood by the river. " * 3, "Where did the café stand?", ["by the river", "in a town", "", "Ü"]),
    (" ".join(helpers.make_sentence(random.Random(5)) for _ in range(20)),   # longer than the window
     "The river _ the city.", ["runs past", "is far from", "_ of", "中文 😀"]),
    ("", "__ two blanks _", ["a", "b", "c", "3.0,"]),
    ("An article.", "", ["", " ", "x", "y"]),   # an empty ending: still [CLS] article [SEP] [SEP], as the original
]


@pytest.fixture(scope="module")
def race_export(tokenizer, tmp_path_factory):
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf import AlbertMultipleChoice  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(11)
    model = AlbertMultipleChoice(AlbertEncoder(_config(tokenizer), dropout=False), race.NUM_CHOICES)
    path = export_race(model, tokenizer, str(tmp_path_factory.mktemp("race") / "base"), SEQ,
                                   max_qa_length=24)
    return model, path


def _race_arrays(tokenizer):
    examples = [race.RaceExample(f"e{i}", "high", a, q, tuple(o), 0) for i, (a, q, o) in enumerate(RACE_CASES)]
    arrays = race.featurize(examples, tokenizer, max_seq_length=SEQ, max_qa_length=24)
    arrays.pop("labels")
    return arrays


def test_in_graph_race_packing_equals_python(tokenizer):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    arrays = _race_arrays(tokenizer)
    assert arrays["input_mask"][1].sum(-1).tolist() == [SEQ] * 4  # the long article was cut to fit
    packed = race_inputs(tokenizer, tf.constant([a for a, _, _ in RACE_CASES]),
                                     tf.constant([q for _, q, _ in RACE_CASES]),
                                     tf.constant([o for _, _, o in RACE_CASES]), SEQ, 24)
    for name, value in packed.items():
        np.testing.assert_array_equal(value.numpy(), arrays[name], err_msg=name)


def test_race_training_dataset_equals_python_featurize(tokenizer):
    """finetune's RACE input pipeline (tf.data, in-graph) == race.featurize on the examples in the order given."""

    examples = [race.RaceExample(f"e{n}", "high", a, q, tuple(o), n % 4) for n, (a, q, o) in enumerate(RACE_CASES)]
    examples.append(race.RaceExample("shared", "middle", RACE_CASES[1][0], "Why?", ("x", "y", "z", "w"), 3))
    order = np.asarray([3, 1, 0, 1, 2, 3], np.int64)
    want = race.featurize([examples[i] for i in order], tokenizer, max_seq_length=SEQ, max_qa_length=24)
    batches = list(race_dataset(examples, tokenizer, SEQ, 24, order, batch_size=2))
    assert len(batches) == 3
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(np.concatenate([x[name].numpy() for x, _ in batches]), want[name],
                                      err_msg=name)
    assert np.concatenate([y.numpy() for _, y in batches]).tolist() == want["labels"].tolist()
    trimmed = list(race_dataset(examples, tokenizer, SEQ, 24, order[:2], 2, labels=False, length_bucket=8))
    longest = int(want["input_mask"][:2].sum(-1).max())
    assert trimmed[0]["input_word_ids"].shape == (2, 4, -(-longest // 8) * 8)
    np.testing.assert_array_equal(trimmed[0]["input_word_ids"].numpy(),
                                  want["input_word_ids"][:2, :, :trimmed[0]["input_word_ids"].shape[-1]])


@pytest.mark.slow
def test_race_export_equals_keras_model_in_a_fresh_process(tokenizer, race_export, tmp_path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model, path = race_export
    request = {"article": [a for a, _, _ in RACE_CASES], "question": [q for _, q, _ in RACE_CASES],
               "options": [o for _, _, o in RACE_CASES]}
    served = helpers.serve_in_fresh_process(path, {  # TF Serving's loader (TF1 session) too
        "tf2": ("tf2", "serving_default", request), "tf1": ("tf1", "serving_default", request)}, str(tmp_path))
    probabilities = tf.nn.softmax(model(_race_arrays(tokenizer), training=False)).numpy()
    np.testing.assert_allclose(served["tf2"]["probabilities"], probabilities, atol=1e-5, rtol=0)
    np.testing.assert_array_equal(served["tf2"]["label"], probabilities.argmax(-1))
    np.testing.assert_allclose(served["tf1"]["probabilities"], probabilities, atol=1e-5, rtol=0)
    ops = helpers.op_types(path)
    assert not helpers.unregistered_ops(ops), f"ops a TF Serving build may lack: {helpers.unregistered_ops(ops)}"

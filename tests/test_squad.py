"""albert_tf.tasks.squad: the official JSON (v1.1 / v2.0, written here, tiny), windows and offsets, answer
extraction, and the official metrics against hand-computed values."""
import collections
import json
import random
import re
import string

import numpy as np
import pytest

import helpers
from albert_tf.tasks import squad
from albert_tf.text import AlbertTokenizer, normalize

CAFE = "In the old town, the Café naïve stood by the river. It was built in 1999, before the city grew."


@pytest.fixture(scope="module")
def tokenizer(tiny_spm_model):
    return AlbertTokenizer(tiny_spm_model)


def _qa(qas_id, question, context, answer=None, impossible=None, extra_answers=()):
    qa = {"id": qas_id, "question": question, "answers": []}
    if answer is not None:
        qa["answers"] = [{"text": answer, "answer_start": context.index(answer)}]
        qa["answers"] += [{"text": a, "answer_start": context.index(a)} for a in extra_answers]
    if impossible is not None:
        qa["is_impossible"] = impossible
        if impossible:
            qa["plausible_answers"] = [{"text": "river", "answer_start": context.index("river")}]
    return qa


def _write_squad(path, paragraphs, version="1.1"):
    data = {"version": version, "data": [{"title": "Town", "paragraphs": paragraphs}]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _long_context(seed=0, sentences=30):
    rng = random.Random(seed)
    return " ".join(helpers.make_sentence(rng) for _ in range(sentences))


# ---------------------------------------------------------------------------------------------------- reading
def test_read_v1_and_v2(tmp_path):
    v1 = _write_squad(tmp_path / "dev-v1.1.json", [{"context": CAFE, "qas": [
        _qa("q1", "What stood by the river?", CAFE, "Café naïve", extra_answers=["the Café naïve"]),
        _qa("q2", "When was it built?", CAFE, "1999")]}])
    examples = squad.read_examples(v1)
    assert [e.qas_id for e in examples] == ["q1", "q2"]
    assert examples[0].answers == (("Café naïve", 21), ("the Café naïve", 17)) and not examples[0].is_impossible
    assert examples[0].context == CAFE and examples[1].question == "When was it built?"
    v2 = _write_squad(tmp_path / "train-v2.0.json", [{"context": CAFE, "qas": [
        _qa("q1", "What stood by the river?", CAFE, "Café naïve", impossible=False),
        _qa("q3", "What stood by the sea?", CAFE, impossible=True)]}], version="v2.0")
    examples = squad.read_examples(v2, version_2_with_negative=True)
    assert [(e.qas_id, e.answers, e.is_impossible) for e in examples] == [
        ("q1", (("Café naïve", 21),), False), ("q3", (), True)]


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=22),
     r"question q1: answer 'Café naïve' does not match the context at answer_start 22 \(found 'afé naïve '\)"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=500),
     r"question q1: answer 'Café naïve' does not match the context at answer_start 500 \(found None\)"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start="21"),
     r"question q1: each answer must have a \"text\" string and an integer \"answer_start\""),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("question"), r"question q1: expected a \"question\""),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("id"), r"data\[0\]\.paragraphs\[0\]\.qas\[0\]: "),
    (lambda d: d["data"][0]["paragraphs"][0].pop("context"), r"data\[0\]\.paragraphs\[0\]: expected an object"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"].append(d["data"][0]["paragraphs"][0]["qas"][0]),
     r"question q1: duplicate id"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(is_impossible=True),
     r"question q1: is_impossible in a file read as SQuAD v1\.1"),
    (lambda d: d.pop("data"), r"top level: expected an object with a \"data\" list"),
])
def test_read_errors_name_file_and_question(tmp_path, mutate, message):
    data = {"version": "1.1", "data": [{"title": "Town", "paragraphs": [{"context": CAFE, "qas": [
        _qa("q1", "What stood by the river?", CAFE, "Café naïve")]}]}]}
    mutate(data)
    path = tmp_path / "dev-v1.1.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"dev-v1\.1\.json: " + message):
        squad.read_examples(str(path))


def test_read_errors_invalid_json_missing_file_v2_without_answer(tmp_path):
    path = tmp_path / "train-v1.1.json"
    path.write_text('{"data": [\n  {"paragraphs": [}\n]}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"train-v1\.1\.json: invalid JSON at line 2 column 19"):
        squad.read_examples(str(path))
    with pytest.raises(FileNotFoundError, match=r"SQuAD file .*nothing\.json not found"):
        squad.read_examples(str(tmp_path / "nothing.json"))
    v2 = _write_squad(tmp_path / "dev-v2.0.json", [{"context": CAFE, "qas": [
        _qa("q9", "What?", CAFE, impossible=False)]}])
    with pytest.raises(ValueError, match=r"dev-v2\.0\.json: question q9: no answers and not \"is_impossible\""):
        squad.read_examples(v2, version_2_with_negative=True)


# -------------------------------------------------------------------------------------------------- featurize
def test_doc_windows_hand_computed():
    assert squad.doc_windows(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert squad.doc_windows(7, 4, 5) == [(0, 4), (4, 3)]  # stride capped at the window's length
    assert squad.doc_windows(5, 8, 2) == [(0, 5)]
    assert squad.doc_windows(0, 8, 2) == [(0, 0)]


def test_max_context_hand_computed(tokenizer):
    context = " ".join(["the"] * 10)
    assert tokenizer.encode(context) == [tokenizer.piece_to_id("\u2581the")] * 10  # one token a word
    example = squad.SquadExample("q", "the", context, (("the", 0),))
    features = squad.featurize([example], tokenizer, max_seq_length=8, doc_stride=3, max_query_length=1)
    # windows (0,4) (3,4) (6,4); score = min(left, right) + 0.01·4, ties to the earlier window
    assert [f.token_is_max_context[3:7].tolist() for f in features] == [
        [True, True, True, True], [False, True, True, True], [False, True, True, True]]
    assert [f.token_spans[3:7, 0].tolist() for f in features] == [[0, 4, 8, 12], [12, 16, 20, 24],
                                                                   [24, 28, 32, 36]]
    assert not any(f.token_is_max_context[:3].any() or f.token_is_max_context[7:].any() for f in features)


def test_windows_cover_the_context_and_map_back_to_it(tokenizer):
    context = _long_context()
    question = "Where is the river of the ancient city of modern music?"
    example = squad.SquadExample("q", question, context, ())
    features = squad.featurize([example], tokenizer, max_seq_length=64, doc_stride=16, max_query_length=8)
    context_ids = tokenizer.encode(context)
    query = tokenizer.encode(question)[:8]
    windows = squad.doc_windows(len(context_ids), 64 - len(query) - 3, 16)
    assert len(features) == len(windows) > 3
    offset = len(query) + 2
    for index, (feature, (start, length)) in enumerate(zip(features, windows)):
        assert (feature.unique_id, feature.example_index, feature.doc_span_index) == (index, 0, index)
        words = feature.input_word_ids
        assert words.dtype == np.int32 and words.shape == (64,)
        assert words[:offset].tolist() == [2] + query + [3]
        assert words[offset:offset + length].tolist() == context_ids[start:start + length]
        assert words[offset + length] == 3 and not words[offset + length + 1:].any()
        assert feature.input_mask.tolist() == [1] * (offset + length + 1) + [0] * (64 - offset - length - 1)
        assert feature.input_type_ids.tolist() == [0] * offset + [1] * (length + 1) + [0] * (63 - offset - length)
        spans = feature.token_spans
        assert (spans[:offset] == -1).all() and (spans[offset + length:] == -1).all()
        # the window's pieces are exactly the normalized text between its first and last span
        first, last = spans[offset, 0], spans[offset + length - 1, 1]
        pieces = "".join(tokenizer.id_to_piece(i) for i in words[offset:offset + length]).replace("\u2581", "")
        assert pieces == normalize(context[first:last]).replace(" ", "")
    # every context token is some window's max-context token exactly once
    counts = np.zeros(len(context_ids), int)
    for feature, (start, length) in zip(features, windows):
        counts[start:start + length] += feature.token_is_max_context[offset:offset + length]
    assert (counts == 1).all()


@pytest.mark.parametrize("lower_case", [True, False])
def test_training_positions_give_back_the_original_answer(tiny_spm_model, lower_case):
    tok = AlbertTokenizer(tiny_spm_model, lower_case=lower_case)
    context = _long_context(1, 12) + " " + CAFE + " " + _long_context(2, 12)
    answer = "Café naïve"
    example = squad.SquadExample("q", "What stood by the river?", context, ((answer, context.index(answer)),))
    features = squad.featurize([example], tok, max_seq_length=48, doc_stride=12, max_query_length=10,
                               is_training=True)
    inside = [f for f in features if not f.is_impossible]
    assert inside and len(inside) < len(features)
    for f in features:
        if f.is_impossible:
            assert f.start_position == f.end_position == 0
        else:
            start, end = f.token_spans[f.start_position, 0], f.token_spans[f.end_position, 1]
            assert context[start:end] == answer
            assert f.input_type_ids[f.start_position] == 1
    arrays = squad.features_to_arrays(features, is_training=True)
    assert arrays["input_word_ids"].shape == (len(features), 48) and arrays["input_word_ids"].dtype == np.int32
    assert arrays["start_positions"].tolist() == [f.start_position for f in features]
    assert set(squad.features_to_arrays(features)) == {"input_word_ids", "input_mask", "input_type_ids"}


def test_unanswerable_training_windows_point_at_cls(tokenizer):
    example = squad.SquadExample("q", "What stood by the sea?", CAFE, (), is_impossible=True)
    features = squad.featurize([example], tokenizer, max_seq_length=24, doc_stride=8, is_training=True,
                               max_query_length=8)
    assert len(features) > 1
    assert all(f.is_impossible and f.start_position == f.end_position == 0 for f in features)
    with pytest.raises(ValueError, match="question q has no answer to train on"):
        squad.featurize([squad.SquadExample("q", "What?", CAFE, ())], tokenizer, is_training=True)
    with pytest.raises(ValueError, match="max_seq_length 40 leaves no room"):
        squad.featurize([example], tokenizer, max_seq_length=40, max_query_length=64)


# ------------------------------------------------------------------------------------------------ postprocess
def _single_window(tokenizer, question="What stood by the river?", context=CAFE, qas_id="q"):
    example = squad.SquadExample(qas_id, question, context, ())
    features = squad.featurize([example], tokenizer, max_seq_length=96)
    assert len(features) == 1
    return example, features


def _token_at(feature, char_index):
    """The window position of the context token whose (non-empty) span starts at char_index."""
    spans = feature.token_spans
    (positions,) = np.nonzero((spans[:, 0] == char_index) & (spans[:, 1] > spans[:, 0]))
    return int(positions[0])


def test_postprocess_returns_the_original_substring(tokenizer):
    example, features = _single_window(tokenizer)
    f = features[0]
    start = _token_at(f, CAFE.index("Café"))
    end = max(p for p in range(96) if f.token_spans[p, 1] == CAFE.index("naïve") + len("naïve"))
    starts, ends = np.full([1, 96], -10.0), np.full([1, 96], -10.0)
    starts[0, start], ends[0, end] = 5.0, 5.0
    ends[0, start] = 4.0  # the best one-token span
    starts[0, 1], ends[0, 2] = 9.0, 9.0  # question tokens: never an answer
    ends[0, start - 1] = 7.0  # an end before the start: skipped
    result = squad.postprocess([example], features, starts, ends)
    assert result.answers == {"q": "Café naïve"} and result.null_score_diff == {}
    nbest = result.nbest["q"]
    assert nbest[0]["text"] == "Café naïve" and nbest[0]["start_logit"] == 5.0 and nbest[0]["end_logit"] == 5.0
    assert len({e["text"] for e in nbest}) == len(nbest) <= 20
    assert sum(e["probability"] for e in nbest) == pytest.approx(1.0)
    assert [e["probability"] for e in nbest] == sorted((e["probability"] for e in nbest), reverse=True)
    # spans longer than max_answer_length are skipped: the best is then the one-token span at `start`
    short = squad.postprocess([example], features, starts, ends, max_answer_length=1)
    assert short.answers["q"] == CAFE[f.token_spans[start, 0]:f.token_spans[start, 1]] == "C"
    assert short.nbest["q"][0]["end_logit"] == 4.0


def test_postprocess_v2_null_score_and_threshold(tokenizer):
    example, features = _single_window(tokenizer)
    f = features[0]
    start = _token_at(f, CAFE.index("1999"))
    starts, ends = np.full([1, 96], -10.0), np.full([1, 96], -10.0)
    starts[0, start], ends[0, start] = 5.0, 4.0
    starts[0, 0], ends[0, 0] = 2.0, 1.0  # null score 3, best span 9: difference -6
    text = CAFE[f.token_spans[start, 0]:f.token_spans[start, 1]]
    result = squad.postprocess([example], features, starts, ends, version_2_with_negative=True)
    assert result.null_score_diff == {"q": -6.0} and result.answers == {"q": text}
    assert result.best_span_answers == {"q": text}
    assert "" in [e["text"] for e in result.nbest["q"]]
    result = squad.postprocess([example], features, starts, ends, version_2_with_negative=True,
                               null_score_diff_threshold=-6.5)
    assert result.answers == {"q": ""} and result.best_span_answers == {"q": text}


def test_postprocess_picks_across_windows_by_max_context(tokenizer):
    context = " ".join(["the"] * 10)
    example = squad.SquadExample("q", "the", context, ())
    features = squad.featurize([example], tokenizer, max_seq_length=8, doc_stride=3, max_query_length=1)
    starts, ends = np.full([3, 8], -10.0), np.full([3, 8], -10.0)
    # window 0, position 6 = token 3 (max context there); window 1, position 3 = token 3 again (not max context)
    starts[1, 3], ends[1, 3] = 9.0, 9.0
    starts[0, 6], ends[0, 6] = 4.0, 4.0
    starts[2, 4], ends[2, 5] = 3.0, 3.0  # tokens 7..8 in window 2
    result = squad.postprocess([example], features, starts, ends)
    assert result.answers == {"q": "the"} and result.nbest["q"][0]["start_logit"] == 4.0
    assert result.nbest["q"][1]["text"] == "the the" and result.nbest["q"][1]["start_logit"] == 3.0


# ---------------------------------------------------------------------------------------------------- metrics
@pytest.mark.parametrize("text, expected", [
    ("The  Café, a cat!", "café cat"),
    ("An apple a day", "apple day"),
    ("theatre then", "theatre then"),  # articles only as whole words
    ("Hello,world", "helloworld"),  # punctuation removed, not replaced by a space
    ("(a) the-end", "theend"),
    ("«quoted»", "«quoted»"),  # only ASCII punctuation
])
def test_normalize_answer(text, expected):
    assert squad.normalize_answer(text) == expected


def test_exact_and_f1_hand_computed():
    assert squad.exact_match("the cat", "Cat.") == 1
    assert squad.exact_match("cat", "cats") == 0
    # gold (big, red, dog), prediction (red, dog, barked): common 2, precision = recall = 2/3
    assert squad.f1_score("the big red dog", "a red dog barked") == pytest.approx(2 / 3)
    # repeated tokens count once per match: gold (dog, dog), prediction (dog): p 1, r 1/2
    assert squad.f1_score("dog dog", "dog") == pytest.approx(2 / 3)
    assert squad.f1_score("", "") == 1.0 and squad.f1_score("", "a dog") == 0.0 and squad.f1_score("the", "") == 1.0


def _example(qas_id, answers, impossible=False):
    return squad.SquadExample(qas_id, "?", "context", tuple((a, 0) for a in answers), impossible)


def test_evaluate_v1_takes_the_best_gold_answer():
    examples = [_example("a", ["Denver Broncos", "The Denver Broncos"]), _example("b", ["red dog"]),
                _example("c", ["1999"])]
    result = squad.evaluate(examples, {"a": "the denver broncos!", "b": "dog", "c": "in 2000", "zzz": "extra"})
    # exact 1, 0, 0; f1 1, 2/3 (p 1, r 1/2), 0
    assert result == {"exact": pytest.approx(100 / 3), "f1": pytest.approx(100 * (1 + 2 / 3) / 3), "total": 3.0}


# The official evaluation scripts' rules, written out here as the reference (evaluate-v1.1.py, evaluate-v2.0.py).
def _official_normalize(text):
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _official_f1(gold, prediction, v2):
    if v2:  # v2.0's get_tokens: "" -> no tokens; one side empty -> 1 only if both are
        gold_tokens = _official_normalize(gold).split() if gold else []
        prediction_tokens = _official_normalize(prediction).split() if prediction else []
        if not gold_tokens or not prediction_tokens:
            return float(gold_tokens == prediction_tokens)
    else:  # v1.1: no special case
        gold_tokens, prediction_tokens = _official_normalize(gold).split(), _official_normalize(prediction).split()
    same = sum((collections.Counter(gold_tokens) & collections.Counter(prediction_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(prediction_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _official_scores(examples, predictions, v2):
    """(exact %, f1 %): v1.1 keeps every gold answer; v2.0 drops those normalizing to '' (none left -> ['']);
    a missing prediction scores 0 and counts in the total."""
    exact = f1 = 0.0
    for ex in examples:
        if ex.qas_id not in predictions:
            continue
        golds = [a for a, _ in ex.answers]
        if v2:
            golds = [a for a in golds if _official_normalize(a)] or [""]
        prediction = predictions[ex.qas_id]
        exact += max(float(_official_normalize(g) == _official_normalize(prediction)) for g in golds)
        f1 += max(_official_f1(g, prediction, v2) for g in golds)
    return 100 * exact / len(examples), 100 * f1 / len(examples)


EMPTY_GOLD_EXAMPLES = [_example("the", ["the"]), _example("a", ["A", "an"]), _example("dots", ["..."]),
                       _example("beatles", ["The Beatles", "the"]), _example("mixed", ["the", "red dog"]),
                       _example("plain", ["Paris"]), _example("gone", ["Rome"])]
EMPTY_GOLD_PREDICTIONS = {"the": "the", "a": "", "dots": "dots", "beatles": "The", "mixed": "a red dog",
                          "plain": "paris!"}  # "gone" has none


def test_evaluate_v1_and_v2_rules_on_golds_that_normalize_to_nothing(capsys):
    # by hand, question by question (exact, f1):
    #   v1.1: the (1, 0): '' == '' but no common token; a (1, 0); dots (0, 0); beatles (1 against "the", f1 0:
    #         "The" normalizes to '' too); mixed (1 "red dog", 1); plain (1, 1); gone (0, 0: no prediction)
    #   v2.0: the: gold '' vs '' -> (1, 1); a (1, 1); dots (0, 0); beatles ("the beatles" -> "beatles" vs '' ->
    #         (0, 0)); mixed (1, 1); plain (1, 1); gone (0, 0)
    hand = {False: (100 * 5 / 7, 100 * 2 / 7), True: (100 * 4 / 7, 100 * 4 / 7)}
    for v2 in (False, True):
        result = squad.evaluate(EMPTY_GOLD_EXAMPLES, EMPTY_GOLD_PREDICTIONS, version_2_with_negative=v2)
        assert (result["exact"], result["f1"]) == pytest.approx(hand[v2])
        assert hand[v2] == pytest.approx(_official_scores(EMPTY_GOLD_EXAMPLES, EMPTY_GOLD_PREDICTIONS, v2))
        assert result["total"] == 7.0
        assert "1 of 7 SQuAD questions have no prediction and score 0 (first: gone)" in capsys.readouterr().err
    assert squad.f1_score("the", "the", version_2_with_negative=False) == 0.0 and squad.f1_score("the", "the") == 1


def test_evaluate_matches_the_official_rules_on_random_golds():
    rng = random.Random(2)
    words = ["the", "a", "An", "dog", "Dog.", "red", "...", "", " ", "cat's", "the dog", "red-dog"]
    examples = [_example(f"q{i}", [" ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))
                                   for _ in range(rng.randint(1, 3))]) for i in range(300)]
    predictions = {ex.qas_id: " ".join(rng.choice(words) for _ in range(rng.randint(0, 3))) for ex in examples}
    for v2 in (False, True):
        result = squad.evaluate(examples, predictions, version_2_with_negative=v2)
        assert (result["exact"], result["f1"]) == pytest.approx(_official_scores(examples, predictions, v2))


def test_evaluate_v1_refuses_questions_without_gold():
    with pytest.raises(ValueError, match="v1.1 question q3 has no gold answer"):
        squad.evaluate(V2_EXAMPLES, V2_PREDICTIONS)
    with pytest.raises(ValueError, match="na_probs is a SQuAD v2.0"):
        squad.evaluate(EMPTY_GOLD_EXAMPLES, EMPTY_GOLD_PREDICTIONS, na_probs={})


V2_EXAMPLES = [_example("q1", ["Paris"]), _example("q2", ["red dog"]), _example("q3", [], True),
               _example("q4", [], True)]
V2_PREDICTIONS = {"q1": "Paris", "q2": "dog", "q3": "something", "q4": ""}
V2_NA = {"q1": 0.1, "q2": 0.5, "q3": 0.8, "q4": 0.2}


def test_evaluate_v2_splits_and_best_thresholds_hand_computed():
    # raw exact 1, 0, 0, 1; raw f1 1, 2/3, 0, 1
    result = squad.evaluate(V2_EXAMPLES, V2_PREDICTIONS, version_2_with_negative=True)
    assert result == pytest.approx({
        "exact": 50.0, "f1": 100 * (1 + 2 / 3 + 1) / 4, "total": 4.0,
        "HasAns_exact": 50.0, "HasAns_f1": 100 * (1 + 2 / 3) / 2, "HasAns_total": 2.0,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2.0})
    result = squad.evaluate(V2_EXAMPLES, V2_PREDICTIONS, na_probs=V2_NA, version_2_with_negative=True)
    # by na_prob: q1 (+1), q4 (0: predicted ""), q2 (+0 exact, +2/3 f1), q3 (-1: predicted an answer), from 2
    assert result["exact"] == 50.0  # nothing above the default threshold 1.0
    assert result["best_exact"] == pytest.approx(75.0) and result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4) and result["best_f1_thresh"] == 0.5
    # threshold 0.3: q2 and q3 count as "no answer" -> q2 0, q3 1
    result = squad.evaluate(V2_EXAMPLES, V2_PREDICTIONS, na_probs=V2_NA, na_prob_thresh=0.3,
                            version_2_with_negative=True)
    assert result["exact"] == 75.0 and result["f1"] == 75.0 and result["NoAns_exact"] == 100.0
    with pytest.raises(ValueError, match=r"na_probs lacks 1 of 4 questions \(first: q4\)"):
        squad.evaluate(V2_EXAMPLES, V2_PREDICTIONS, na_probs={"q1": 0, "q2": 0, "q3": 0},
                       version_2_with_negative=True)


def test_v2_threshold_in_evaluate_equals_threshold_in_postprocess(tokenizer):
    rng = np.random.default_rng(0)
    contexts = [_long_context(s, 3) for s in range(6)]
    examples = [squad.SquadExample(f"q{i}", "What is the river?", c, ((c[:9], 0),) if i % 2 else (), i % 2 == 0)
                for i, c in enumerate(contexts)]
    features = squad.featurize(examples, tokenizer, max_seq_length=40, doc_stride=10, max_query_length=8)
    starts, ends = rng.normal(size=[2, len(features), 40]) * 3
    diffs = squad.postprocess(examples, features, starts, ends, version_2_with_negative=True).null_score_diff
    for threshold in np.quantile(list(diffs.values()), [0.25, 0.5, 0.75]):
        result = squad.postprocess(examples, features, starts, ends, version_2_with_negative=True,
                                   null_score_diff_threshold=threshold)
        thresholded = squad.evaluate(examples, result.best_span_answers, na_probs=result.null_score_diff,
                                     na_prob_thresh=threshold, version_2_with_negative=True)
        plain = squad.evaluate(examples, result.answers, version_2_with_negative=True)
        assert plain == {k: thresholded[k] for k in plain}
        assert 0 < sum(not a for a in result.answers.values()) < len(examples)  # the threshold splits them


def test_tasks_modules_do_not_import_tensorflow():
    code = ("import sys; from albert_tf.tasks import glue, squad, race, metrics; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    result = helpers.run_python(code)
    assert result.returncode == 0, result.stderr


def test_round_trip_file_to_metrics_with_oracle_logits(tmp_path, tokenizer):
    """read -> featurize (training positions) -> logits peaked there -> postprocess -> evaluate: every answer comes
    back as written, and every unanswerable question as ""."""
    rng = random.Random(5)
    paragraphs = []
    for p in range(4):
        context = _long_context(10 + p, 8) + " " + CAFE + " " + _long_context(20 + p, 4)
        words = context.split(" ")
        qas = [_qa(f"p{p}-cafe", "What stood by the river?", context, "Café naïve", impossible=False),
               _qa(f"p{p}-none", "What stood by the sea?", context, impossible=True)]
        for q in range(3):
            i = rng.randrange(len(words) - 3)
            answer = " ".join(words[i:i + rng.randint(1, 3)])
            start = len(" ".join(words[:i])) + (1 if i else 0)
            qas.append({"id": f"p{p}-{q}", "question": helpers.make_sentence(rng), "is_impossible": False,
                        "answers": [{"text": answer, "answer_start": start}]})
        paragraphs.append({"context": context, "qas": qas})
    examples = squad.read_examples(_write_squad(tmp_path / "dev-v2.0.json", paragraphs), True)
    features = squad.featurize(examples, tokenizer, max_seq_length=64, doc_stride=16, max_query_length=12,
                               is_training=True)
    assert len(features) > 2 * len(examples)  # several windows per question
    starts, ends = np.full([2, len(features), 64], -5.0)
    for row, f in enumerate(features):
        starts[row, f.start_position] = ends[row, f.end_position] = 5.0
    result = squad.postprocess(examples, features, starts, ends, version_2_with_negative=True)
    for example in examples:
        assert result.answers[example.qas_id] == (example.answers[0][0] if example.answers else "")
    scores = squad.evaluate(examples, result.answers, version_2_with_negative=True)
    assert scores["exact"] == scores["f1"] == 100.0 and scores["NoAns_total"] == 4.0

"""SQuAD v1.1 / v2.0: the official JSON files, sliding-window featurization, answer extraction, official metrics.

  read_examples(path, version_2_with_negative)   train-v1.1.json, dev-v1.1.json, train-v2.0.json, dev-v2.0.json
  featurize(examples, tokenizer, ...)            [CLS] question [SEP] context window [SEP], doc stride 128
  features_to_arrays(features)                   the model inputs (and targets) as stacked int32 arrays
  postprocess(examples, features, start_logits, end_logits, ...)   n-best spans -> answer text (v2: or "")
  evaluate(examples, predictions, na_probs)      exact / f1 as the official v2.0 evaluation script computes them

Answers are returned as substrings of the original context: every token carries the span of the context it comes
from (`AlbertTokenizer.encode_with_offsets`, through lower casing, NFKD, removed accents and SentencePiece), so a
predicted span of tokens is cut from the context as the user wrote it ("Café", not "cafe").
"""
import collections
import dataclasses
import json
import os
import re
import string

import numpy as np

from albert_tf.tasks import _files


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question.

    Attributes:
      qas_id: the question's "id".
      question: the question text.
      context: the paragraph's "context".
      answers: tuple of (text, answer_start) pairs (answer_start a character offset into context); () for
        unanswerable questions (v2's "plausible_answers" are not read).
      is_impossible: v2's flag (False in v1 files).
    """
    qas_id: str
    question: str
    context: str
    answers: tuple
    is_impossible: bool = False


def _expect(condition, path, where, message):
    if not condition:
        raise ValueError(f"{path}: {where}: {message}")


def read_examples(path, version_2_with_negative=False):
    """Reads an official SQuAD JSON file.

    Args:
      path: train-v1.1.json, dev-v1.1.json, train-v2.0.json, dev-v2.0.json or a file of the same format.
      version_2_with_negative: read v2's "is_impossible" (a v1 reading of a file with unanswerable questions fails).
    Returns:
      list[SquadExample] in file order.
    Raises:
      FileNotFoundError: no such file. ValueError (naming the file and the question id, or the article/paragraph
      position): invalid JSON, a missing or mistyped field, a duplicate id, an answer whose text is not the
      context's text at its answer_start, an unanswerable question read as v1.
    """
    path = os.fspath(path)
    if not _files.isfile(path):
        raise FileNotFoundError(f"SQuAD file {path} not found")
    try:
        dataset = json.loads(_files.read_text(path))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    _expect(isinstance(dataset, dict) and isinstance(dataset.get("data"), list), path, "top level",
            'expected an object with a "data" list (the SQuAD format)')
    examples, seen = [], set()
    for a, article in enumerate(dataset["data"]):
        _expect(isinstance(article, dict) and isinstance(article.get("paragraphs"), list), path,
                f"data[{a}]", 'expected an object with a "paragraphs" list')
        for p, paragraph in enumerate(article["paragraphs"]):
            where = f"data[{a}].paragraphs[{p}]"
            _expect(isinstance(paragraph, dict) and isinstance(paragraph.get("context"), str)
                    and isinstance(paragraph.get("qas"), list), path, where,
                    'expected an object with a "context" string and a "qas" list')
            context = paragraph["context"]
            for q, qa in enumerate(paragraph["qas"]):
                examples.append(_read_question(path, f"{where}.qas[{q}]", qa, context, version_2_with_negative))
                _expect(examples[-1].qas_id not in seen, path, f"question {examples[-1].qas_id}",
                        "duplicate id")
                seen.add(examples[-1].qas_id)
    return examples


def _read_question(path, where, qa, context, version_2_with_negative):
    _expect(isinstance(qa, dict) and isinstance(qa.get("id"), str), path, where,
            'expected an object with an "id" string')
    where = f"question {qa['id']}"
    _expect(isinstance(qa.get("question"), str), path, where, 'expected a "question" string')
    _expect(isinstance(qa.get("answers"), list), path, where, 'expected an "answers" list')
    is_impossible = qa.get("is_impossible", False)
    _expect(isinstance(is_impossible, bool), path, where, '"is_impossible" must be true or false')
    _expect(version_2_with_negative or not is_impossible, path, where,
            "is_impossible in a file read as SQuAD v1.1 (read it with version_2_with_negative)")
    answers = []
    for answer in qa["answers"]:
        _expect(isinstance(answer, dict) and isinstance(answer.get("text"), str)
                and isinstance(answer.get("answer_start"), int) and not isinstance(answer["answer_start"], bool),
                path, where, 'each answer must have a "text" string and an integer "answer_start"')
        text, start = answer["text"], answer["answer_start"]
        _expect(text.strip(), path, where, "an answer's text is empty")
        found = context[start:start + len(text)] if 0 <= start <= len(context) else None
        _expect(found == text, path, where,
                f"answer {text!r} does not match the context at answer_start {start} (found {found!r})")
        answers.append((text, start))
    _expect(is_impossible or answers or not version_2_with_negative, path, where,
            'no answers and not "is_impossible"')
    return SquadExample(qa["id"], qa["question"], context, tuple(answers), is_impossible)


# ------------------------------------------------------------------------------------------------- featurize
@dataclasses.dataclass
class SquadFeature:
    """One window of one example, packed as [CLS] question [SEP] context window [SEP] + padding (length L).

    Attributes:
      unique_id: position in the list `featurize` returns.
      example_index: index of its example in the list given to `featurize`.
      doc_span_index: which window of the example (0, 1, ...).
      input_word_ids, input_mask, input_type_ids: int32 [L] (type 1 for the window and its [SEP]).
      token_spans: int32 [L, 2], (start, end) character offsets into the example's context of each window token,
        (-1, -1) for [CLS], the question, [SEP] and padding.
      token_is_max_context: bool [L], True where this window gives the token its most context (the window in which
        min(left, right) context + 0.01 * window length is largest), the only place an answer may start.
      start_position, end_position: the answer's first/last token in this window; 0 ([CLS]) when the question is
        unanswerable or the answer is not wholly inside the window (training only; 0 otherwise).
      is_impossible: no answer in this window (training only).
    """
    unique_id: int
    example_index: int
    doc_span_index: int
    input_word_ids: np.ndarray
    input_mask: np.ndarray
    input_type_ids: np.ndarray
    token_spans: np.ndarray
    token_is_max_context: np.ndarray
    start_position: int = 0
    end_position: int = 0
    is_impossible: bool = False


def doc_windows(num_tokens, max_tokens, doc_stride):
    """The (start, length) windows over num_tokens context tokens: each at most max_tokens long, each starting
    doc_stride after the previous (or right after it when shorter), the last one reaching the end."""
    windows, start = [], 0
    while True:
        length = min(num_tokens - start, max_tokens)
        windows.append((start, length))
        if start + length >= num_tokens:
            return windows
        start += min(length, doc_stride)


def max_context_windows(num_tokens, windows):
    """For each of num_tokens context tokens, the index of the window that gives it the most context: the largest
    min(tokens left of it, tokens right of it in the window) + 0.01 * window length, the earliest on a tie.

    Returns int [num_tokens].
    """
    best_score = np.full([num_tokens], -np.inf)
    best_window = np.zeros([num_tokens], np.int64)
    for index, (start, length) in enumerate(windows):
        position = np.arange(length)
        score = np.minimum(position, length - 1 - position) + 0.01 * length
        better = score > best_score[start:start + length]
        best_score[start:start + length][better] = score[better]
        best_window[start:start + length][better] = index
    return best_window


def _answer_tokens(spans, answer_start, answer_end):
    """First and last token whose span ([K, 2]) overlaps [answer_start, answer_end) of the context, or None."""
    (overlapping,) = np.nonzero((spans[:, 0] < answer_end) & (spans[:, 1] > answer_start))
    return (int(overlapping[0]), int(overlapping[-1])) if overlapping.size else None


def check_window_sizes(max_seq_length, doc_stride, max_query_length):
    """ValueError unless a window has room for the context after the question and doc_stride is positive."""
    if max_seq_length < max_query_length + 4:
        raise ValueError(f"max_seq_length {max_seq_length} leaves no room for the context after a question of "
                         f"up to {max_query_length} tokens (need max_seq_length >= max_query_length + 4)")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be positive, got {doc_stride}")


def training_answer_span(example):
    """(start, end): the character span in the context of an answerable example's first answer, which training
    targets. ValueError for an example with no answer that is not is_impossible."""
    if not example.answers:
        raise ValueError(f"question {example.qas_id} has no answer to train on (and is not is_impossible)")
    text, start = example.answers[0]
    return start, start + len(text)


def featurize(examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64, is_training=False):
    """Turns examples into model windows, as the original BERT/ALBERT SQuAD code does, with character offsets.

    The question is cut to its first max_query_length tokens; the context is covered by windows of
    max_seq_length - len(question) - 3 tokens, each starting doc_stride tokens after the previous.

    Args:
      examples: list[SquadExample].
      tokenizer: an AlbertTokenizer (Python; its ids equal the in-graph tokenizer's).
      max_seq_length: L.
      doc_stride: tokens between window starts.
      max_query_length: question tokens kept.
      is_training: fill start/end positions from each example's first answer. Training examples whose answer
        covers no token at all (only characters the tokenizer drops) are skipped, as the original code does.
    Returns:
      list[SquadFeature], windows in example order.
    """
    check_window_sizes(max_seq_length, doc_stride, max_query_length)
    features = []
    context, context_ids, context_spans = None, None, None
    for example_index, example in enumerate(examples):
        if example.context != context:  # consecutive questions of one paragraph share its tokenization
            context = example.context
            context_ids, context_spans = tokenizer.encode_with_offsets(context)
            context_spans = np.asarray(context_spans, np.int32).reshape(-1, 2)
        query_ids = tokenizer.encode(example.question)[:max_query_length]
        answer = None
        if is_training and not example.is_impossible:
            answer = _answer_tokens(context_spans, *training_answer_span(example))
            if answer is None:
                continue
        windows = doc_windows(len(context_ids), max_seq_length - len(query_ids) - 3, doc_stride)
        best_window = max_context_windows(len(context_ids), windows)
        offset = len(query_ids) + 2  # window token k sits at position offset + k
        for window_index, (start, length) in enumerate(windows):
            words = np.zeros([max_seq_length], np.int32)
            mask = np.zeros([max_seq_length], np.int32)
            types = np.zeros([max_seq_length], np.int32)
            spans = np.full([max_seq_length, 2], -1, np.int32)
            max_context = np.zeros([max_seq_length], bool)
            tokens = [tokenizer.cls_id] + query_ids + [tokenizer.sep_id] + context_ids[start:start + length] + [
                tokenizer.sep_id]
            words[:len(tokens)] = tokens
            mask[:len(tokens)] = 1
            types[offset:len(tokens)] = 1
            spans[offset:offset + length] = context_spans[start:start + length]
            max_context[offset:offset + length] = best_window[start:start + length] == window_index
            feature = SquadFeature(len(features), example_index, window_index, words, mask, types, spans,
                                   max_context)
            if is_training:
                if answer is not None and start <= answer[0] and answer[1] < start + length:
                    feature.start_position = answer[0] - start + offset
                    feature.end_position = answer[1] - start + offset
                else:
                    feature.is_impossible = True
            features.append(feature)
    return features


def features_to_arrays(features, is_training=False):
    """Stacks features into model inputs: dict of int32 [N, L] `input_word_ids`, `input_mask`, `input_type_ids`,
    and with is_training int32 [N] `start_positions`, `end_positions`."""
    if not features:
        raise ValueError("no SQuAD features to stack")
    out = {name: np.stack([getattr(f, name) for f in features])
           for name in ("input_word_ids", "input_mask", "input_type_ids")}
    if is_training:
        out["start_positions"] = np.asarray([f.start_position for f in features], np.int32)
        out["end_positions"] = np.asarray([f.end_position for f in features], np.int32)
    return out


# ----------------------------------------------------------------------------------------------- postprocess
@dataclasses.dataclass
class SquadPredictions:
    """What `postprocess` returns.

    Attributes:
      answers: {qas_id: answer text}, "" where v2 predicts no answer.
      null_score_diff: {qas_id: null score − best non-null span score} (v2 only, else {}): the `na_probs` to give
        `evaluate` to find the best threshold on dev (its best_f1_thresh is the null_score_diff_threshold to use).
      best_span_answers: {qas_id: text of the best non-null span} (the answer with an infinite threshold).
      nbest: {qas_id: list of dicts text, probability, start_logit, end_logit}, best first.
    """
    answers: dict
    null_score_diff: dict
    best_span_answers: dict
    nbest: dict


def _softmax(scores):
    scores = np.asarray(scores, np.float64)
    exp = np.exp(scores - scores.max())
    return exp / exp.sum()


def postprocess(examples, features, start_logits, end_logits, n_best=20, max_answer_length=30,
                version_2_with_negative=False, null_score_diff_threshold=0.0):
    """Picks each question's answer from its windows' logits, as the original BERT/ALBERT SQuAD code does.

    Candidate spans: the n_best highest start and end logits of every window, with start and end inside the
    window's context, start <= end, at most max_answer_length tokens, and start where the window gives the token
    its most context; scored start + end logit. v2 also scores "no answer" as the lowest [CLS] start + end logit
    over the windows, and answers "" when that exceeds the best span's score by more than the threshold.

    Args:
      examples: the list[SquadExample] given to `featurize`.
      features: its list[SquadFeature] (possibly a subset, e.g. one batch of examples' windows).
      start_logits, end_logits: float [num_features, L], row i for features[i].
      n_best, max_answer_length, version_2_with_negative, null_score_diff_threshold: as in the original.
    Returns:
      SquadPredictions for every example that has at least one feature.
    """
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)
    if start_logits.shape != end_logits.shape or start_logits.shape[0] != len(features):
        raise ValueError(f"start_logits {start_logits.shape} and end_logits {end_logits.shape} must both be "
                         f"[{len(features)} features, seq_length]")
    by_example = collections.defaultdict(list)
    for row, feature in enumerate(features):
        by_example[feature.example_index].append(row)
    result = SquadPredictions({}, {}, {}, {})
    for example_index, rows in by_example.items():
        example = examples[example_index]
        candidates, null_score, null_logits = [], None, None
        for row in rows:
            feature, starts, ends = features[row], start_logits[row], end_logits[row]
            if version_2_with_negative:
                score = starts[0] + ends[0]
                if null_score is None or score < null_score:
                    null_score, null_logits = score, (starts[0], ends[0])
            top_starts = np.argsort(-starts, kind="stable")[:n_best]
            top_ends = np.argsort(-ends, kind="stable")[:n_best]
            for s in top_starts:
                if feature.token_spans[s, 0] < 0 or not feature.token_is_max_context[s]:
                    continue
                for e in top_ends:
                    if feature.token_spans[e, 0] < 0 or e < s or e - s + 1 > max_answer_length:
                        continue
                    char_start, char_end = feature.token_spans[s, 0], feature.token_spans[e, 1]
                    text = example.context[char_start:char_end]
                    if text:
                        candidates.append((starts[s] + ends[e], starts[s], ends[e], text))
        candidates.sort(key=lambda c: -c[0])
        entries, seen = [], set()
        for score, start, end, text in candidates:
            if text not in seen:
                seen.add(text)
                entries.append({"text": text, "score": score, "start_logit": start, "end_logit": end})
            if len(entries) == n_best:
                break
        best_span = entries[0] if entries else None
        if version_2_with_negative:  # "no answer" takes its rank among the n best, or is added after them
            null = {"text": "", "score": null_score, "start_logit": null_logits[0], "end_logit": null_logits[1]}
            entries = sorted(entries + [null], key=lambda c: -c["score"])[:n_best]
            if null not in entries:
                entries.append(null)
        if not entries:
            entries = [{"text": "", "score": 0.0, "start_logit": 0.0, "end_logit": 0.0}]
        probabilities = _softmax([e["score"] for e in entries])
        qas_id = example.qas_id
        result.nbest[qas_id] = [{"text": e["text"], "probability": float(p), "start_logit": float(e["start_logit"]),
                                 "end_logit": float(e["end_logit"])} for e, p in zip(entries, probabilities)]
        result.best_span_answers[qas_id] = best_span["text"] if best_span else ""
        if not version_2_with_negative:
            result.answers[qas_id] = result.best_span_answers[qas_id]
            continue
        if best_span is None:  # no valid span at all: only "no answer" is left
            diff = float("inf")
        else:
            diff = float(null_score - best_span["score"])
        result.null_score_diff[qas_id] = diff
        result.answers[qas_id] = "" if diff > null_score_diff_threshold else best_span["text"]
    return result


# -------------------------------------------------------------------------------------------------- evaluate
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
    """The official scripts' answer normalization: lowercase, drop ASCII punctuation, replace the articles a, an,
    the (whole words) by a space, collapse whitespace."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _tokens(text):
    return normalize_answer(text).split() if text else []


def exact_match(gold, prediction):
    """1 when the normalized texts are equal, else 0."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_score(gold, prediction):
    """Token-overlap F1 of the normalized texts (v2.0 script: 1 if both are empty, 0 if only one is)."""
    gold_tokens, prediction_tokens = _tokens(gold), _tokens(prediction)
    if not gold_tokens or not prediction_tokens:
        return float(gold_tokens == prediction_tokens)
    common = sum((collections.Counter(gold_tokens) & collections.Counter(prediction_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _best_threshold(has_answer, predictions, scores, na_probs):
    """The official find_best_thresh: answer the questions with na_prob <= t, predict none for the rest; the best
    total score (%) and its t, scanning t over the na_probs in increasing order from "none everywhere"."""
    current = best = sum(not h for h in has_answer.values())
    threshold = 0.0
    for qas_id in sorted(na_probs, key=lambda k: na_probs[k]):
        if qas_id not in scores:
            continue
        if has_answer[qas_id]:
            current += scores[qas_id]
        elif predictions[qas_id]:
            current -= 1
        if current > best:
            best, threshold = current, na_probs[qas_id]
    return 100.0 * best / len(scores), float(threshold)


def evaluate(examples, predictions, na_probs=None, na_prob_thresh=1.0):
    """SQuAD's exact match and F1, as the official v2.0 evaluation script computes them (on v1.1 data the v1.1
    script's numbers, but for gold answers that normalize to nothing, which v2.0 drops).

    Each prediction is scored against every gold answer (normalized: see `normalize_answer`), keeping the best;
    a question with no (non-empty) gold answer has the gold answer "". With na_probs, a question whose na_prob
    exceeds na_prob_thresh counts as answered "no answer".

    Args:
      examples: list[SquadExample] (read_examples of the dev file).
      predictions: {qas_id: answer text}, one per example ("" = no answer); extra ids are ignored.
      na_probs: optional {qas_id: no-answer score} (postprocess's null_score_diff); gives the best_* entries.
      na_prob_thresh: the script's --na-prob-thresh (1.0). With best_span_answers as predictions, the
        null_score_diff as na_probs and the threshold used in postprocess, exact/f1 equal postprocess's answers'.
    Returns:
      dict of floats: exact, f1 (percent), total; with unanswerable questions in examples (v2) also HasAns_exact,
      HasAns_f1, HasAns_total, NoAns_exact, NoAns_f1, NoAns_total; with na_probs also best_exact,
      best_exact_thresh, best_f1, best_f1_thresh.
    """
    if not examples:
        raise ValueError("no SQuAD examples to evaluate")
    missing = [ex.qas_id for ex in examples if ex.qas_id not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} of {len(examples)} questions have no prediction (first: {missing[0]})")
    if na_probs is not None:
        missing = [ex.qas_id for ex in examples if ex.qas_id not in na_probs]
        if missing:
            raise ValueError(f"na_probs lacks {len(missing)} of {len(examples)} questions (first: {missing[0]})")
    exact, f1 = {}, {}
    for ex in examples:
        golds = [text for text, _ in ex.answers if normalize_answer(text)] or [""]
        prediction = predictions[ex.qas_id]
        exact[ex.qas_id] = max(exact_match(g, prediction) for g in golds)
        f1[ex.qas_id] = max(f1_score(g, prediction) for g in golds)

    has_answer = {ex.qas_id: bool(ex.answers) for ex in examples}

    def thresholded(scores):  # the script's apply_no_ans_threshold
        if na_probs is None:
            return scores
        return {k: (float(not has_answer[k]) if na_probs[k] > na_prob_thresh else v) for k, v in scores.items()}

    def summary(prefix, ids):
        return {f"{prefix}exact": 100.0 * sum(exact_t[k] for k in ids) / len(ids),
                f"{prefix}f1": 100.0 * sum(f1_t[k] for k in ids) / len(ids), f"{prefix}total": float(len(ids))}

    exact_t, f1_t = thresholded(exact), thresholded(f1)
    result = summary("", list(exact))
    if any(ex.is_impossible or not ex.answers for ex in examples):
        answered = [k for k, h in has_answer.items() if h]
        unanswerable = [k for k, h in has_answer.items() if not h]
        if answered:
            result.update(summary("HasAns_", answered))
        if unanswerable:
            result.update(summary("NoAns_", unanswerable))
    if na_probs is not None:
        result["best_exact"], result["best_exact_thresh"] = _best_threshold(has_answer, predictions, exact, na_probs)
        result["best_f1"], result["best_f1_thresh"] = _best_threshold(has_answer, predictions, f1, na_probs)
    return result

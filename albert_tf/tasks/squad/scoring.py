"""SQuAD answers and scores: n-best spans -> answer text (`postprocess`), and exact / F1 as the official evaluation
scripts compute them (`evaluate`).
"""
import collections
import dataclasses
import re
import string

import numpy as np

from albert_tf import messages

#: Answer extraction as the original run_squad.py does it by default (its --n_best_size and --max_answer_length):
#: the N_BEST highest start and end logits of each window pair into spans of at most MAX_ANSWER_LENGTH tokens.
#: The Python `postprocess`, the in-graph `squad_answers`, the export and fine-tuning all take these.
N_BEST = 20
MAX_ANSWER_LENGTH = 30

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


def postprocess(examples, features, start_logits, end_logits, n_best=N_BEST, max_answer_length=MAX_ANSWER_LENGTH,
                version_2_with_negative=False, null_score_diff_threshold=0.0):
    """Picks each question's answer from its windows' logits, as the original BERT/ALBERT SQuAD code does.

    Candidate spans: the n_best highest start and end logits of every window, with start and end inside the
    window's context, start <= end, at most max_answer_length tokens, and start where the window gives the token
    its most context; scored start + end logit. A span's text is the context's characters from its first token's
    start to its last token's end, edge whitespace stripped (str.strip(), as the original's final text). v2 also scores "no answer" as the lowest [CLS] start + end logit
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
                    text = example.context[char_start:char_end].strip()  # the original's final text
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
    """1 when the normalized texts are equal, else 0 (both official scripts)."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_score(gold, prediction, version_2_with_negative=True):
    """Token-overlap F1 of the normalized texts.

    The v2.0 script: 1 if both normalize to no token, 0 if only one does. The v1.1 script has no such rule: no
    token in common (which includes either side empty) gives 0, so a gold answer that normalizes to '' ("the")
    scores 0 whatever the prediction.
    """
    gold_tokens, prediction_tokens = _tokens(gold), _tokens(prediction)
    if version_2_with_negative and (not gold_tokens or not prediction_tokens):
        return float(gold_tokens == prediction_tokens)
    common = sum((collections.Counter(gold_tokens) & collections.Counter(prediction_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _question_scores(examples, predictions, version_2_with_negative):
    """{qas_id: exact}, {qas_id: f1} of the questions that have a prediction, best over the gold answers.

    v1.1 script: every gold answer as given (a question without one is an error). v2.0 script: only the gold answers
    that normalize to something; none left (unanswerable) -> the gold answer "".
    """
    exact, f1 = {}, {}
    for ex in examples:
        if ex.qas_id not in predictions:
            continue
        if version_2_with_negative:
            golds = [text for text, _ in ex.answers if normalize_answer(text)] or [""]
        elif ex.answers:
            golds = [text for text, _ in ex.answers]
        else:
            raise ValueError(f"SQuAD v1.1 question {ex.qas_id} has no gold answer (v2.0 data: score it with "
                             "version_2_with_negative=True)")
        prediction = predictions[ex.qas_id]
        exact[ex.qas_id] = max(exact_match(g, prediction) for g in golds)
        f1[ex.qas_id] = max(f1_score(g, prediction, version_2_with_negative) for g in golds)
    return exact, f1


def _warn_missing(examples, predictions):
    missing = [ex.qas_id for ex in examples if ex.qas_id not in predictions]
    if missing:
        messages.say("warning", f"{len(missing)} of {len(examples)} SQuAD questions have no prediction and score 0 "
                                f"(first: {missing[0]})")


def _best_threshold(has_answer, predictions, scores, na_probs):
    """The official find_best_thresh: answer the questions with na_prob <= t, predict none for the rest; the best
    total score (%) and its t, scanning t over the na_probs in increasing order from "none everywhere". scores
    holds the questions with a prediction; the others count 0 (in the total)."""
    current = best = sum(not has_answer[k] for k in scores)
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
    return 100.0 * best / len(has_answer), float(threshold)


def evaluate(examples, predictions, na_probs=None, na_prob_thresh=1.0, version_2_with_negative=False):
    """SQuAD's exact match and F1 as the official evaluation script of the data's version computes them.

    Each prediction is scored against every gold answer (normalized: see `normalize_answer`), keeping the best.
    v1.1 (version_2_with_negative False, the v1.1 script): all gold answers as given, F1 without the empty-answer
    rule (see `f1_score`). v2.0 (the v2.0 script): gold answers that normalize to nothing are dropped, a question
    left without one has the gold answer "", and empty vs empty scores 1; with na_probs, a question whose na_prob
    exceeds na_prob_thresh counts as answered "no answer". A question without a prediction scores 0 (counted in
    the totals) with a warning on stderr, as the v1.1 script does (the v2.0 script warns and leaves it out).

    Args:
      examples: list[SquadExample] (read_examples of the dev file).
      predictions: {qas_id: answer text}, one per example ("" = no answer); extra ids are ignored.
      na_probs: optional {qas_id: no-answer score} (postprocess's null_score_diff), v2.0 only; gives best_*.
      na_prob_thresh: the v2.0 script's --na-prob-thresh (1.0). With best_span_answers as predictions, the
        null_score_diff as na_probs and the threshold used in postprocess, exact/f1 equal postprocess's answers'.
      version_2_with_negative: score by the v2.0 script's rules (else v1.1's).
    Returns:
      dict of floats: exact, f1 (percent), total; with unanswerable questions in examples (v2) also HasAns_exact,
      HasAns_f1, HasAns_total, NoAns_exact, NoAns_f1, NoAns_total; with na_probs also best_exact,
      best_exact_thresh, best_f1, best_f1_thresh.
    """
    if not examples:
        raise ValueError("no SQuAD examples to evaluate")
    if na_probs is not None:
        if not version_2_with_negative:
            raise ValueError("na_probs is a SQuAD v2.0 evaluation input (version_2_with_negative=True)")
        missing = [ex.qas_id for ex in examples if ex.qas_id not in na_probs]
        if missing:
            raise ValueError(f"na_probs lacks {len(missing)} of {len(examples)} questions (first: {missing[0]})")
    _warn_missing(examples, predictions)
    exact, f1 = _question_scores(examples, predictions, version_2_with_negative)
    has_answer = {ex.qas_id: bool(ex.answers) for ex in examples}

    def thresholded(scores):  # the script's apply_no_ans_threshold; then 0 for the questions without prediction
        if na_probs is not None:
            scores = {k: (float(not has_answer[k]) if na_probs[k] > na_prob_thresh else v) for k, v in scores.items()}
        return {ex.qas_id: scores.get(ex.qas_id, 0) for ex in examples}

    def summary(prefix, ids):
        return {f"{prefix}exact": 100.0 * sum(exact_t[k] for k in ids) / len(ids),
                f"{prefix}f1": 100.0 * sum(f1_t[k] for k in ids) / len(ids), f"{prefix}total": float(len(ids))}

    exact_t, f1_t = thresholded(exact), thresholded(f1)
    result = summary("", list(exact_t))
    if version_2_with_negative and any(ex.is_impossible or not ex.answers for ex in examples):
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

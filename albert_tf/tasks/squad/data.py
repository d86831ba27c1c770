"""SQuAD v1.1 / v2.0: the official JSON files and the Python sliding-window featurization.

  read_examples(path, version_2_with_negative)   train-v1.1.json, dev-v1.1.json, train-v2.0.json, dev-v2.0.json
  featurize(examples, tokenizer, ...)            [CLS] question [SEP] context window [SEP], doc stride 128
  features_to_arrays(features)                   the model inputs (and targets) as stacked int32 arrays
  doc_windows, max_context_windows               the windows over a context and which one gives a token most context
  check_window_sizes, training_answer_span       the checks and the answer span shared with the in-graph featurizer

Answer extraction and the official metrics (`postprocess`, `evaluate`) are in scoring.py.

Answers are returned as substrings of the original context: every token carries the span of the context it comes
from (`AlbertTokenizer.encode_with_offsets`, through lower casing, NFKD, removed accents and SentencePiece), so a
predicted span of tokens is cut from the context as the user wrote it ("Café", not "cafe").
"""
import dataclasses
import json
import os

import numpy as np

from albert_tf import files


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
    if not files.isfile(path):
        raise FileNotFoundError(f"SQuAD file {path} not found")
    try:
        dataset = json.loads(files.read_text(path))
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


# -------------------------------------------------------------------------------------------------- evaluate



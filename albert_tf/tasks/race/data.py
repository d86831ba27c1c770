"""RACE: the official download's JSON files, the original ALBERT question/option pairing, and accuracy per level.

Layout: DATA_DIR/{train,dev,test}/{middle,high}/*.txt (DATA_DIR may also be the folder holding RACE/). Each file is
one JSON object: "article", "questions" [Q], "options" [Q][4], "answers" [Q] letters A-D ("id" optional). A level
folder holding "all.txt" (the original ALBERT preprocessing: the files concatenated, one JSON object a line) is read
from that file alone.

Each question becomes one RaceExample; its four candidate second segments (`RaceExample.endings`) are built as the
original ALBERT RACE code builds them: a question with a "_" (a cloze blank) has the blank replaced by the option,
any other question is followed by a space and the option.
"""
import dataclasses
import json
import os

import numpy as np

from albert_tf import files
from albert_tf.tasks import metrics as metrics_lib

LEVELS = ("middle", "high")
SPLITS = ("train", "dev", "test")
NUM_CHOICES = 4


@dataclasses.dataclass(frozen=True)
class RaceExample:
    """One RACE question.

    Attributes:
      example_id: "split/level/file#question index", e.g. "dev/high/1234.txt#0".
      level: "middle" or "high".
      article: the passage.
      question: the question (may hold a "_" blank).
      options: tuple of 4 option strings.
      label: index of the right option (A = 0 ... D = 3).
    """
    example_id: str
    level: str
    article: str
    question: str
    options: tuple
    label: int

    @property
    def endings(self):
        """The four second segments: the blank filled with the option, or question + " " + option."""
        if "_" in self.question:
            return tuple(self.question.replace("_", option) for option in self.options)
        return tuple(f"{self.question} {option}" for option in self.options)


def _split_dir(data_dir, split):
    if split not in SPLITS:
        raise ValueError(f"RACE has no split {split!r}; expected one of {', '.join(SPLITS)}")
    data_dir = os.fspath(data_dir)
    if not files.isdir(data_dir):
        raise FileNotFoundError(f"RACE data directory {data_dir} not found")
    nested = os.path.join(data_dir, "RACE")
    return os.path.join(nested if files.isdir(nested) else data_dir, split)


def _is_json(text):
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def _load_objects(path):
    """The JSON objects of one file: the whole file as one object, or (all.txt) one object a line."""
    content = files.read_text(path)
    try:
        return [(None, json.loads(content))]
    except json.JSONDecodeError as whole_error:
        lines = [(n, line) for n, line in enumerate(content.splitlines(), start=1) if line.strip()]
        if len(lines) < 2 or not _is_json(lines[0][1]):  # not JSON lines either: report the whole file's error
            raise ValueError(f"{path}: invalid JSON at line {whole_error.lineno} column {whole_error.colno}: "
                             f"{whole_error.msg}") from None
    objects = []
    for number, line in lines:
        try:
            objects.append((number, json.loads(line)))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} line {number}: invalid JSON ({e.msg} at column {e.colno})") from None
    return objects


def _examples_of(path, line, data, split, level):
    where = path if line is None else f"{path} line {line}"

    def expect(condition, message):
        if not condition:
            raise ValueError(f"{where}: {message}")

    expect(isinstance(data, dict), "expected a JSON object with article, questions, options, answers")
    for key in ("questions", "options", "answers"):
        expect(isinstance(data.get(key), list), f'expected a "{key}" list')
    expect(isinstance(data.get("article"), str), 'expected an "article" string')
    counts = {key: len(data[key]) for key in ("questions", "options", "answers")}
    expect(len(set(counts.values())) == 1, f"questions, options and answers differ in length {counts}")
    name = data.get("id") if isinstance(data.get("id"), str) else os.path.basename(path)
    examples = []
    for i, (question, options, answer) in enumerate(zip(data["questions"], data["options"], data["answers"])):
        expect(isinstance(question, str), f"question {i} is not a string")
        expect(isinstance(options, list) and len(options) == NUM_CHOICES
               and all(isinstance(o, str) for o in options), f"question {i}: expected 4 option strings")
        expect(answer in ("A", "B", "C", "D"), f"question {i}: answer {answer!r} is not one of A, B, C, D")
        examples.append(RaceExample(f"{split}/{level}/{name}#{i}", level, data["article"], question,
                                    tuple(options), "ABCD".index(answer)))
    return examples


def read_examples(data_dir, split, levels=LEVELS):
    """Reads one split of RACE.

    Args:
      data_dir: the RACE folder (holding train/ dev/ test/) or its parent.
      split: "train", "dev" or "test".
      levels: the levels to read ("middle", "high" or both); a level folder that does not exist is an error.
    Returns:
      list[RaceExample]: middle first, files in name order, questions in file order.
    Raises:
      FileNotFoundError: a missing folder, or no .txt file. ValueError: invalid JSON, a missing field, options
      that are not 4 strings, an answer other than A-D, unequal list lengths — naming the file (and line).
    """
    split_dir = _split_dir(data_dir, split)
    examples = []
    for level in levels:
        if level not in LEVELS:
            raise ValueError(f"RACE has no level {level!r}; expected middle or high")
        folder = os.path.join(split_dir, level)
        if not files.isdir(folder):
            raise FileNotFoundError(f"{folder} not found: RACE expects {split}/{level}/*.txt under {data_dir}")
        all_file = os.path.join(folder, "all.txt")
        paths = [all_file] if files.isfile(all_file) else files.glob(os.path.join(folder, "*.txt"))
        if not paths:
            raise FileNotFoundError(f"{folder} holds no .txt files (RACE's {split}/{level} questions)")
        for path in paths:
            for line, data in _load_objects(path):
                examples.extend(_examples_of(path, line, data, split, level))
    return examples


def check_qa_length(max_qa_length, max_seq_length):
    """ValueError unless [CLS] article [SEP] ending [SEP] leaves the article room after max_qa_length tokens."""
    if max_qa_length > max_seq_length - 3:
        raise ValueError(f"max_qa_length {max_qa_length} leaves no room in max_seq_length {max_seq_length}")


def featurize(examples, tokenizer, max_seq_length=512, max_qa_length=128):
    """The model inputs for multiple choice, laid out as the original ALBERT RACE code does.

    For each option: [CLS] article [SEP] ending [SEP], where the ending (see RaceExample.endings) keeps its last
    max_qa_length tokens and the article is cut from its end to fit.

    Args:
      examples: list[RaceExample].
      tokenizer: an AlbertTokenizer.
      max_seq_length: L.
      max_qa_length: most tokens of the ending kept.
    Returns:
      dict of int32 arrays: input_word_ids, input_mask, input_type_ids [N, 4, L]; labels [N].
    """
    check_qa_length(max_qa_length, max_seq_length)
    shape = [len(examples), NUM_CHOICES, max_seq_length]
    words, mask, types = (np.zeros(shape, np.int32) for _ in range(3))
    article, article_ids = None, None
    for n, example in enumerate(examples):
        if example.article != article:
            article, article_ids = example.article, tokenizer.encode(example.article)
        for c, ending in enumerate(example.endings):
            ending_ids = tokenizer.encode(ending)[-max_qa_length:] if max_qa_length else []
            context_ids = article_ids[:max_seq_length - 3 - len(ending_ids)]
            first = [tokenizer.cls_id] + context_ids + [tokenizer.sep_id]
            tokens = first + ending_ids + [tokenizer.sep_id]
            words[n, c, :len(tokens)] = tokens
            mask[n, c, :len(tokens)] = 1
            types[n, c, len(first):len(tokens)] = 1
    labels = np.asarray([example.label for example in examples], np.int32)
    return {"input_word_ids": words, "input_mask": mask, "input_type_ids": types, "labels": labels}


def compute_metrics(predictions, examples):
    """Accuracy per level and overall.

    Args:
      predictions: [N] option indices, or [N, 4] scores (arg-maxed).
      examples: the N RaceExamples predicted.
    Returns:
      {"accuracy_middle", "accuracy_high", "accuracy"} (a level without examples is left out).
    """
    predictions = np.asarray(predictions)
    if predictions.ndim == 2:
        predictions = np.argmax(predictions, axis=-1)
    if predictions.shape != (len(examples),):
        raise ValueError(f"predictions {predictions.shape} do not match {len(examples)} examples")
    labels = np.asarray([example.label for example in examples])
    levels = np.asarray([example.level for example in examples])
    result = {}
    for level in LEVELS:
        chosen = levels == level
        if chosen.any():
            result[f"accuracy_{level}"] = metrics_lib.accuracy(predictions[chosen], labels[chosen])
    result["accuracy"] = metrics_lib.accuracy(predictions, labels)
    return result

"""GLUE: the official TSV files as `download_glue_data.py` lays them out, and each task's official metric.

Layout (`data_dir` is either the GLUE root holding the task folders, or one task's folder itself):

  task  folder  files (train.tsv, dev*.tsv, test*.tsv)          text_a / text_b / label columns (train and dev)
  cola  CoLA    no header in train/dev: source, label, *, text  3 / - / 1           labels 0 1
  sst2  SST-2   header "sentence  label"                        sentence / - / label
  mrpc  MRPC    header "Quality  #1 ID  #2 ID  #1 String  #2 String"
  stsb  STS-B   10 columns, "... sentence1  sentence2  score"   score a float in [0, 5]
  qqp   QQP     "id qid1 qid2 question1 question2 is_duplicate" rows with missing fields are skipped (as the
                                                                original BERT/ALBERT readers do)
  mnli  MNLI    dev_matched.tsv, dev_mismatched.tsv, test_matched.tsv, test_mismatched.tsv; sentence1, sentence2,
                gold_label (the last column: 12 columns in train, 16 in dev)   contradiction entailment neutral
  qnli  QNLI    "index question sentence label"                 entailment not_entailment
  rte   RTE     "index sentence1 sentence2 label"               entailment not_entailment
  wnli  WNLI    "index sentence1 sentence2 label"               labels 0 1

Test files have a header naming their text columns (CoLA's "index sentence" included) and no labels. Columns are
found by the header's names; fields are split on tabs only, with no quoting (MNLI and QQP hold unbalanced quotes).
Labels are indices into the task's `labels` tuple, in the order the original BERT/ALBERT processors list them. Each
task's layout (GlueTask: folder, columns, labels, metrics) is its row of the task registry
(albert_tf/settings/task_registry.py); SPECS reads them from there.
"""
import dataclasses
import os

import numpy as np

from albert_tf import files
from albert_tf.settings.task_registry import Column, GlueTask
from albert_tf.tasks import metrics as metrics_lib


#: {GLUE task: GlueTask}: the layout and metrics of each registered GLUE task (a live view of the task registry,
#: albert_tf/settings/task_registry.py, where a task is added).
SPECS = Column("glue", family="glue")

# CoLA's train and dev files have no header: source, label, original annotation, sentence.
_COLA_COLUMNS = {"text_a": 3, "label": 1}
_COLA_FIELDS = 4


@dataclasses.dataclass(frozen=True)
class Example:
    """One GLUE example: guid "split-N" (N counts the data rows from 0), the texts, and the label (an int index
    into the task's labels, a float for stsb, None in test files). text_b is None for single-sentence tasks and
    for a pair whose second sentence is empty; packing treats None, "" and a text_b of only whitespace alike: no
    second segment, [CLS] a [SEP], as the original (albert_tf.text.segments)."""
    guid: str
    text_a: str
    text_b: object
    label: object


def get_task(task):
    """A GlueTask by name (or the GlueTask itself); ValueError naming the known tasks otherwise."""
    if isinstance(task, GlueTask):
        return task
    if task not in SPECS:
        raise ValueError(f"unknown GLUE task {task!r}; expected one of {', '.join(SPECS)}")
    return SPECS[task]


def task_file(data_dir, task, split):
    """The path of `split` of `task` under `data_dir` (the GLUE root or the task's own folder).

    Raises FileNotFoundError naming the path looked for when it does not exist.
    """
    task = get_task(task)
    if split not in task.splits:
        raise ValueError(f"{task.name} has no split {split!r}; expected one of {', '.join(task.splits)}")
    data_dir = os.fspath(data_dir)
    if not files.isdir(data_dir):
        raise FileNotFoundError(f"GLUE data directory {data_dir} not found")
    folder = os.path.join(data_dir, task.folder)
    path = os.path.join(folder if files.isdir(folder) else data_dir, split + ".tsv")
    if not files.isfile(path):
        raise FileNotFoundError(
            f"{path} not found: {task.name} expects {split}.tsv in {data_dir} or in {folder} (the official "
            "GLUE layout)")
    return path


def _rows(path):
    """Yields (line number, fields) for each non-empty line, split on tabs (no quoting)."""
    with files.open_text(path) as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if number == 1:
                line = line.lstrip("\ufeff")  # a byte-order mark
            if line.strip():
                yield number, line.split("\t")


def _columns(task, path, header, labeled):
    """Header names -> (field positions for text_a, text_b and the label when labeled, fields a row needs)."""
    wanted = [task.text_a] + ([task.text_b] if task.text_b else []) + ([task.label] if labeled else [])
    for name in wanted:
        if name not in header:
            raise ValueError(f"{path} line 1: header has no column {name!r} (got {header}); expected the "
                             f"official {task.folder} layout")
    positions = {"text_a": header.index(task.text_a)}
    if task.text_b:
        positions["text_b"] = header.index(task.text_b)
    needed = max(positions.values()) + 1
    if labeled:
        # The label is the last column in every official file; such a label is read from the row's end, as the
        # original readers do (MNLI's train and dev have different numbers of annotator columns).
        index = header.index(task.label)
        positions["label"] = index - len(header) if index == len(header) - 1 else index
        needed = max(needed, index + 1)
    return positions, needed


def _parse_label(task, value, path, number):
    if task.is_regression:
        try:
            score = float(value)
        except ValueError:
            score = float("nan")
        if not 0.0 <= score <= 5.0:
            raise ValueError(f"{path} line {number}: {task.label} {value!r} is not a similarity score in [0, 5]")
        return score
    if value not in task.labels:
        raise ValueError(f"{path} line {number}: label {value!r} is not one of {task.name}'s labels "
                         f"{', '.join(task.labels)}")
    return task.labels.index(value)


def read_examples(data_dir, task, split):
    """Reads one split of a GLUE task from the official files.

    Args:
      data_dir: the GLUE root (holding CoLA/, SST-2/, ...) or the task's folder.
      task: a name in SPECS (or a GlueTask).
      split: "train", one of the task's dev_splits, or one of its test_splits.
    Returns:
      list[Example] in file order; label an int index (classification), a float (stsb), None (test files).
    Raises:
      FileNotFoundError: the file is missing. ValueError: a row with too few fields, a missing header column, a
      label outside the task's set, an empty file — each naming the file and line.
    """
    task = get_task(task)
    path = task_file(data_dir, task, split)
    rows = _rows(path)
    labeled = split not in task.test_splits
    if task.name == "cola" and labeled:
        positions, needed = _COLA_COLUMNS, _COLA_FIELDS
    else:
        first = next(rows, None)
        if first is None:
            raise ValueError(f"{path} is empty; expected a header and {task.name} rows")
        positions, needed = _columns(task, path, first[1], labeled)
    examples = []
    for number, fields in rows:
        if len(fields) < needed:
            if task.skip_short_rows:
                continue
            raise ValueError(f"{path} line {number}: {len(fields)} tab-separated fields, expected at least "
                             f"{needed} ({task.folder} {split})")
        label = None
        if "label" in positions:
            label = _parse_label(task, fields[positions["label"]].strip(), path, number)
        # an empty second sentence is none (the original's `if example.text_b:`); see albert_tf.text.segments
        text_b = (fields[positions["text_b"]] or None) if "text_b" in positions else None
        examples.append(Example(f"{split}-{len(examples)}", fields[positions["text_a"]], text_b, label))
    if not examples:
        raise ValueError(f"{path} has no {task.name} examples")
    return examples


def compute_metrics(task, predictions, labels):
    """The task's official dev metrics.

    Args:
      task: a name in SPECS (or a GlueTask).
      predictions: [N] class ids (or [N, num_labels] logits/probabilities, arg-maxed); [N] floats for stsb.
      labels: [N] class ids; [N] floats for stsb.
    Returns:
      dict: cola {"mcc"}; mrpc, qqp {"accuracy", "f1"} (F1 of class 1); stsb {"pearson", "spearman"}; the others
      {"accuracy"} — as sklearn.metrics / scipy.stats compute them (see albert_tf.tasks.metrics).
    """
    task = get_task(task)
    predictions = np.asarray(predictions)
    if task.is_regression:
        predictions = predictions.reshape(predictions.shape[0], -1)[:, 0] if predictions.ndim == 2 else predictions
    elif predictions.ndim == 2:
        predictions = np.argmax(predictions, axis=-1)
    functions = {"mcc": metrics_lib.matthews_corrcoef, "accuracy": metrics_lib.accuracy, "f1": metrics_lib.f1,
                 "pearson": metrics_lib.pearson, "spearman": metrics_lib.spearman}
    return {name: functions[name](predictions, labels) for name in task.metrics}

"""The fine-tuning tasks, each registered once: a row names the task, its family (glue, squad, race), its adapter (an
import path, so that nothing here imports TensorFlow), the paper's hyperparameters for it and, for a GLUE task, the
layout of its files and its metrics. No TensorFlow.

Every list of tasks is read from this table, never written again:

    settings.finetune_config.TASKS     `finetune --task`'s choices (the table's names, a live view)
    tasks.budget.PAPER_DEFAULTS        {task: Hyperparameters}, the defaults of a run's budget
    tasks.adapters.make_task           the task's adapter, imported from `adapter` when a run starts
    tasks.glue.data.SPECS              {GLUE task: GlueTask}, what the GLUE reader reads and scores

A new task is one `register(TaskRow(...))` (a new family also needs its adapter, albert_tf.tasks.base.FinetuneTask).
"""
import collections.abc
import dataclasses

FAMILIES = ("glue", "squad", "race")


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    """One row of the paper's fine-tuning table."""
    learning_rate: float
    batch_size: int
    train_steps: int
    warmup_steps: int
    max_seq_length: int
    albert_dropout: float        # dropout inside the encoder ("ALBERT DR")
    classifier_dropout: float    # dropout on the pooled output ("Classifier DR")


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task's files and metrics (albert_tf.tasks.glue.data reads them).

    Attributes:
      name: our name (cola, sst2, ...).
      folder: the folder name in the official download (CoLA, SST-2, ...).
      num_labels: number of classes; 1 for the regression task (stsb).
      labels: the label strings as written in the files, index = class id; () for stsb.
      metrics: the names `compute_metrics` returns.
      dev_splits: the splits to evaluate on (file stem = split name).
      test_splits: the unlabeled test splits.
      text_a, text_b, label: header names of the columns (text_b None for single-sentence tasks).
      skip_short_rows: rows with too few fields are skipped instead of rejected (QQP, as the original readers).
    """
    name: str
    folder: str
    num_labels: int
    labels: tuple
    metrics: tuple
    dev_splits: tuple
    text_a: str
    text_b: str
    label: str
    test_splits: tuple = ("test",)
    skip_short_rows: bool = False

    @property
    def is_regression(self):
        return self.num_labels == 1

    @property
    def splits(self):
        return ("train",) + self.dev_splits + self.test_splits


@dataclasses.dataclass(frozen=True)
class TaskRow:
    """One fine-tuning task. `adapter`: "module:Class" of its albert_tf.tasks.base.FinetuneTask, built as
    `Class(data_dir, name)`; `paper`: its Hyperparameters; `glue`: its GlueTask for a GLUE task, else None."""
    name: str
    family: str
    adapter: str
    paper: Hyperparameters
    glue: GlueTask | None = None

    def problems(self):
        """What makes the row inconsistent, as phrases (none: it can be registered)."""
        found = []
        if self.family not in FAMILIES:
            found.append(f"family {self.family!r} is not one of {', '.join(FAMILIES)}")
        module, _, name = self.adapter.partition(":")
        if not (module.startswith("albert_tf.") and name.isidentifier()):
            found.append(f"adapter {self.adapter!r} is not albert_tf.MODULE:CLASS")
        if (self.family == "glue") != (self.glue is not None):
            found.append("a GLUE task, and only a GLUE task, has a GlueTask")
        if self.glue is not None and self.glue.name != self.name:
            found.append(f"its GlueTask is named {self.glue.name!r}")
        if not isinstance(self.paper, Hyperparameters):
            found.append("paper is not a Hyperparameters row")
        return found


#: {task name: TaskRow}, in registration order.
REGISTRY = {}


def register(row):
    """Adds `row` (a TaskRow) to REGISTRY and returns it; ValueError in one line when the name is taken or the row
    is inconsistent (TaskRow.problems)."""
    problems = row.problems() + ([f"the name {row.name!r} is registered already"] if row.name in REGISTRY else [])
    if problems:
        raise ValueError(f"task {row.name!r}: {'; '.join(problems)}")
    REGISTRY[row.name] = row
    return row


class Column(collections.abc.Mapping):
    """A live read-only view of one attribute of the registered rows, {task name: row.ATTRIBUTE}, over the rows of
    one `family` (None: every row), in registration order: a row registered later is in it."""

    def __init__(self, attribute, family=None):
        self.attribute, self.family = attribute, family

    def _rows(self):
        return {name: row for name, row in REGISTRY.items() if self.family in (None, row.family)}

    def __getitem__(self, name):
        return getattr(self._rows()[name], self.attribute)

    def __iter__(self):
        return iter(self._rows())

    def __len__(self):
        return len(self._rows())

    def __repr__(self):
        return f"Column({self.attribute!r}, {dict(self)!r})"


# ---------------------------------------------------------------------------------------------- the tasks
# The paper's values: the ALBERT paper (Lan et al., ICLR 2020), appendix A.4, Table 16 "Hyperparameters for ALBERT in
# downstream tasks": LR, batch size (BSZ), training steps (TS), warm-up steps (WS), max sequence length (MSL), ALBERT
# dropout (ALBERT DR), classifier dropout (Classifier DR), in Hyperparameters' order. The GLUE rows are also the
# arguments of google-research/albert's run_glue.sh (warm-up, LR, steps, batch per task). Every value can be
# overridden by a flag.
# GLUE's layouts: albert_tf/tasks/glue/data.py's docstring; labels in the order the original BERT/ALBERT processors
# list them.
_GLUE_ADAPTER = "albert_tf.tasks.glue.finetune:GlueFinetune"
_BINARY = ("0", "1")
_ENTAIL = ("entailment", "not_entailment")
_ACC = ("accuracy",)


def _glue(paper, *spec, **options):
    """The row of a GLUE task: `spec` and `options` are its GlueTask's."""
    glue = GlueTask(*spec, **options)
    return register(TaskRow(glue.name, "glue", _GLUE_ADAPTER, Hyperparameters(*paper), glue))


_glue((1e-5, 16, 5336, 320, 512, 0.0, 0.1), "cola", "CoLA", 2, _BINARY, ("mcc",), ("dev",), "sentence", None, "label")
_glue((1e-5, 32, 20935, 1256, 512, 0.0, 0.1), "sst2", "SST-2", 2, _BINARY, _ACC, ("dev",), "sentence", None, "label")
_glue((2e-5, 32, 800, 200, 512, 0.0, 0.1), "mrpc", "MRPC", 2, _BINARY, ("accuracy", "f1"), ("dev",), "#1 String",
      "#2 String", "Quality")
_glue((2e-5, 16, 3598, 214, 512, 0.0, 0.1), "stsb", "STS-B", 1, (), ("pearson", "spearman"), ("dev",), "sentence1",
      "sentence2", "score")
_glue((5e-5, 128, 14000, 1000, 512, 0.1, 0.1), "qqp", "QQP", 2, _BINARY, ("accuracy", "f1"), ("dev",), "question1",
      "question2", "is_duplicate", skip_short_rows=True)
_glue((3e-5, 128, 10000, 1000, 512, 0.0, 0.1), "mnli", "MNLI", 3, ("contradiction", "entailment", "neutral"), _ACC,
      ("dev_matched", "dev_mismatched"), "sentence1", "sentence2", "gold_label",
      test_splits=("test_matched", "test_mismatched"))
_glue((1e-5, 32, 33112, 1986, 512, 0.0, 0.1), "qnli", "QNLI", 2, _ENTAIL, _ACC, ("dev",), "question", "sentence",
      "label")
_glue((3e-5, 32, 800, 200, 512, 0.1, 0.1), "rte", "RTE", 2, _ENTAIL, _ACC, ("dev",), "sentence1", "sentence2", "label")
_glue((2e-5, 16, 2000, 250, 512, 0.1, 0.1), "wnli", "WNLI", 2, _BINARY, _ACC, ("dev",), "sentence1", "sentence2",
      "label")
register(TaskRow("squad1", "squad", "albert_tf.tasks.squad.finetune:SquadFinetune",
                 Hyperparameters(5e-5, 48, 3649, 365, 384, 0.0, 0.1)))
register(TaskRow("squad2", "squad", "albert_tf.tasks.squad.finetune:SquadFinetune",
                 Hyperparameters(3e-5, 48, 8144, 814, 512, 0.0, 0.1)))
register(TaskRow("race", "race", "albert_tf.tasks.race.finetune:RaceFinetune",
                 Hyperparameters(2e-5, 32, 12000, 1000, 512, 0.1, 0.1)))

__all__ = ["REGISTRY", "TaskRow", "Hyperparameters", "GlueTask", "Column", "register", "FAMILIES"]

"""Fine-tuning tasks: each in its own package, behind one small interface (`base.FinetuneTask`).

    glue/     GLUE's TSVs (cola sst2 mrpc stsb qqp mnli qnli rte wnli): reader, metrics, classifier export, adapter
    squad/    SQuAD v1.1 / v2.0: reader, featurizer (Python and in-graph), answers and official scores, export, adapter
    race/     RACE: reader, featurizer (Python and in-graph), accuracy per level, export, adapter
    metrics   accuracy, F1, MCC, Pearson, Spearman in numpy
    pipelines fine-tuning's tf.data pipelines, shared by the adapters
    base      FinetuneTask, the interface `albert-tf finetune` calls

Readers, featurizers and metrics are Python + numpy (+ sentencepiece through AlbertTokenizer): `from albert_tf.tasks
import squad` imports no TensorFlow; in_graph, export, finetune and pipelines do.
"""
import os

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
TASKS = GLUE_TASKS + ("squad1", "squad2", "race")


def _adapter_class(task):
    # pylint: disable=import-outside-toplevel
    if task in GLUE_TASKS:
        from albert_tf.tasks.glue.finetune import GlueFinetune
        return GlueFinetune
    if task == "race":
        from albert_tf.tasks.race.finetune import RaceFinetune
        return RaceFinetune
    if task in ("squad1", "squad2"):
        from albert_tf.tasks.squad.finetune import SquadFinetune
        return SquadFinetune
    raise ValueError(f"--task {task!r}: expected one of {', '.join(TASKS)}")


def make_task(task, data_dir, max_train_examples=None):
    """The fine-tuning adapter for `task` (a name in TASKS), its files read from `data_dir`; `max_train_examples`
    keeps a prefix of the training set. FileNotFoundError / ValueError name the file when they are missing or
    malformed."""
    from albert_tf import files  # pylint: disable=import-outside-toplevel

    if not files.isdir(data_dir):
        if files.exists(data_dir):
            raise ValueError(f"--data-dir {data_dir} is a file; expected the directory holding the {task} files")
        raise FileNotFoundError(f"--data-dir {data_dir}: no such directory")
    if not (files.glob(os.path.join(data_dir, "*"))):
        raise FileNotFoundError(f"--data-dir {data_dir}: the directory is empty (expected the {task} files as "
                                "downloaded)")
    adapter = _adapter_class(task)(data_dir, task)
    if max_train_examples:
        adapter.train = adapter.train[:max_train_examples]
    if not adapter.train:
        raise ValueError(f"--data-dir {data_dir}: no training examples")
    return adapter

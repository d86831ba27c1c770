"""The fine-tuning adapter of a task name (albert_tf.tasks.TASKS): GLUE's, SQuAD's or RACE's `finetune.py` class,
behind base.FinetuneTask. Imports the adapters, hence TensorFlow: `albert-tf finetune` calls it."""
import os

from albert_tf import files
from albert_tf.tasks import GLUE_TASKS, TASKS
from albert_tf.tasks.glue.finetune import GlueFinetune
from albert_tf.tasks.race.finetune import RaceFinetune
from albert_tf.tasks.squad.finetune import SquadFinetune


def _adapter_class(task):
    if task in GLUE_TASKS:
        return GlueFinetune
    if task == "race":
        return RaceFinetune
    if task in ("squad1", "squad2"):
        return SquadFinetune
    raise ValueError(f"--task {task!r}: expected one of {', '.join(TASKS)}")


def make_task(task, data_dir, max_train_examples=None):
    """The fine-tuning adapter for `task` (a name in TASKS), its files read from `data_dir`; `max_train_examples`
    keeps a prefix of the training set. FileNotFoundError / ValueError name the file when they are missing or
    malformed."""
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

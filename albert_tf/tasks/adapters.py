"""The fine-tuning adapter of a task name: the class its row of the task registry names
(albert_tf/settings/task_registry.py: GLUE's, SQuAD's or RACE's `finetune.py` class, behind base.FinetuneTask),
imported when it is made, hence TensorFlow: `albert-tf finetune` calls it."""
import importlib
import os

from albert_tf import files
from albert_tf.settings.task_registry import REGISTRY


def adapter_class(task):
    """The FinetuneTask subclass of `task` (a registered name), imported from its row's "module:Class"."""
    if task not in REGISTRY:
        raise ValueError(f"--task {task!r}: expected one of {', '.join(REGISTRY)}")
    module, _, name = REGISTRY[task].adapter.partition(":")
    return getattr(importlib.import_module(module), name)


def check_data_dir(task, data_dir):
    """Refuses a --data-dir that is missing, a file or empty, in one line (no TensorFlow for a local path)."""
    if not files.isdir(data_dir):
        if files.exists(data_dir):
            raise ValueError(f"--data-dir {data_dir} is a file; expected the directory holding the {task} files")
        raise FileNotFoundError(f"--data-dir {data_dir}: no such directory")
    if not (files.glob(os.path.join(data_dir, "*"))):
        raise FileNotFoundError(f"--data-dir {data_dir}: the directory is empty (expected the {task} files as "
                                "downloaded)")


def make_task(task, data_dir, max_train_examples=None):
    """The fine-tuning adapter for `task` (a registered name), its files read from `data_dir`; `max_train_examples`
    keeps a prefix of the training set. FileNotFoundError / ValueError name the file when they are missing or
    malformed."""
    check_data_dir(task, data_dir)
    adapter = adapter_class(task)(data_dir, task)
    if max_train_examples:
        adapter.train = adapter.train[:max_train_examples]
    if not adapter.train:
        raise ValueError(f"--data-dir {data_dir}: no training examples")
    return adapter

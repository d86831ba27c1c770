"""The fine-tuning budget: a run's resolved steps, epochs, batch, sequence length, dropout and optimizer (`Budget`),
the config over the paper's per-task hyperparameters (its Table 16: the rows of the task registry,
albert_tf/settings/task_registry.py). Made once per run, held by the task (`FinetuneTask.budget`), which the
fine-tuning run, its callbacks and its run record read. No TensorFlow.

    max_seq_length(cfg, max_position_embeddings)   the run's sequence length (SQuAD's windows depend on it)
    make_budget(cfg, num_train_examples, seq, length_bucket)   → Budget
"""
import dataclasses
import math

from albert_tf import messages
from albert_tf.settings.finetune_config import OPTIMIZERS, FinetuneConfig
from albert_tf.settings.task_registry import Column

#: {task: Hyperparameters}: the paper's row of each registered task (a live view of the task registry).
PAPER_DEFAULTS = Column("paper")


@dataclasses.dataclass
class Budget:
    """The resolved hyperparameters of a run: the config over the paper's values, the steps and epochs."""
    learning_rate: float
    batch_size: int
    max_seq_length: int
    epochs: int
    steps_per_epoch: int
    warmup_steps: int
    albert_dropout: float
    classifier_dropout: float
    length_bucket: int = 0  # 0: batches at max_seq_length; N: at their longest example rounded up to N
    optimizer: str = OPTIMIZERS[0]  # albert_tf.training.optimizers.make_optimizer's name

    @property
    def total_steps(self):
        return self.epochs * self.steps_per_epoch


def resolve_length_bucket(flag, on_tpu):
    """--length-bucket resolved: 16 by default, 0 on TPU (static shapes). FinetuneConfig refuses a negative value
    and a positive one with --tpu."""
    if flag is None:
        return 0 if on_tpu else 16
    return flag


def max_seq_length(cfg: FinetuneConfig, max_position_embeddings):
    """The run's tokens per example: --max-seq-length, else the paper's for the task capped by the encoder's
    max_position_embeddings; a --max-seq-length beyond that is refused."""
    if cfg.max_seq_length is None:
        return min(PAPER_DEFAULTS[cfg.task].max_seq_length, max_position_embeddings)
    if cfg.max_seq_length > max_position_embeddings:
        raise ValueError(f"--max-seq-length {cfg.max_seq_length} exceeds the config's max_position_embeddings "
                         f"{max_position_embeddings}")
    return cfg.max_seq_length


def make_budget(cfg: FinetuneConfig, num_train_examples, seq_length, length_bucket=0):
    """The config `cfg` (its ranges checked when it was made) over the paper's defaults, for `num_train_examples`
    model examples per pass (SQuAD: windows) of `seq_length` tokens (`max_seq_length`) batched at `length_bucket`
    (resolve_length_bucket). A Keras epoch is one pass over the training data (the examples that fill whole
    batches); the paper's step count is rounded up to whole passes."""
    paper = PAPER_DEFAULTS[cfg.task]
    batch = cfg.batch_size or paper.batch_size
    steps_per_epoch = num_train_examples // batch
    if steps_per_epoch < 1:
        raise ValueError(f"--data-dir {cfg.data_dir}: {num_train_examples} training examples, fewer than one "
                         f"batch of {batch} (lower --batch-size)")
    if cfg.epochs is not None:
        epochs = max(1, math.ceil(cfg.epochs))
    else:
        epochs = max(1, math.ceil(paper.train_steps / steps_per_epoch))
    proportion = (cfg.warmup_proportion if cfg.warmup_proportion is not None
                  else paper.warmup_steps / paper.train_steps)
    return Budget(
        learning_rate=cfg.learning_rate or paper.learning_rate, batch_size=batch, max_seq_length=seq_length,
        epochs=epochs, steps_per_epoch=steps_per_epoch,
        warmup_steps=int(round(proportion * epochs * steps_per_epoch)),
        albert_dropout=paper.albert_dropout if cfg.albert_dropout is None else cfg.albert_dropout,
        classifier_dropout=(paper.classifier_dropout if cfg.classifier_dropout is None
                            else cfg.classifier_dropout),
        length_bucket=length_bucket, optimizer=cfg.optimizer)


#: More passes over the training data than this, from the paper's step count, get a warning (a small task).
MANY_EPOCHS = 20


def many_epochs_warning(cfg: FinetuneConfig, budget, num_train_examples):
    """One line when the paper's step count (no --epochs given) means more than MANY_EPOCHS passes over the given
    training data, naming the flag that sets the passes; None otherwise."""
    if cfg.epochs is not None or budget.epochs <= MANY_EPOCHS:
        return None
    paper = PAPER_DEFAULTS[cfg.task]
    return messages.line("warning", f"the paper's {paper.train_steps} steps for {cfg.task} at batch "
                                    f"{budget.batch_size} make {budget.epochs} passes over these {num_train_examples} "
                                    "training examples (a small task overfits); --epochs N sets the number of passes",
                         "finetune")

"""The fine-tuning budget: the paper's per-task hyperparameters (its Table 16) and a run's resolved steps, epochs,
batch, sequence length, dropout and optimizer (`Budget`), which the task adapters, the fine-tuning run and its
run record share. No TensorFlow.
"""
import dataclasses
import math

from albert_tf import messages

from albert_tf.settings.finetune_config import OPTIMIZERS  # noqa: F401  (its one home)


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



# The ALBERT paper (Lan et al., ICLR 2020), appendix A.4, Table 16 "Hyperparameters for ALBERT in downstream tasks":
# LR, batch size (BSZ), ALBERT dropout (ALBERT DR), classifier dropout (Classifier DR), training steps (TS),
# warm-up steps (WS), max sequence length (MSL). The GLUE rows are also the arguments of google-research/albert's
# run_glue.sh (warm-up, LR, steps, batch per task). Every value can be overridden by a flag.
PAPER_DEFAULTS = {
    "cola": Hyperparameters(1e-5, 16, 5336, 320, 512, 0.0, 0.1),
    "stsb": Hyperparameters(2e-5, 16, 3598, 214, 512, 0.0, 0.1),
    "sst2": Hyperparameters(1e-5, 32, 20935, 1256, 512, 0.0, 0.1),
    "mnli": Hyperparameters(3e-5, 128, 10000, 1000, 512, 0.0, 0.1),
    "qnli": Hyperparameters(1e-5, 32, 33112, 1986, 512, 0.0, 0.1),
    "qqp": Hyperparameters(5e-5, 128, 14000, 1000, 512, 0.1, 0.1),
    "rte": Hyperparameters(3e-5, 32, 800, 200, 512, 0.1, 0.1),
    "mrpc": Hyperparameters(2e-5, 32, 800, 200, 512, 0.0, 0.1),
    "wnli": Hyperparameters(2e-5, 16, 2000, 250, 512, 0.1, 0.1),
    "squad1": Hyperparameters(5e-5, 48, 3649, 365, 384, 0.0, 0.1),
    "squad2": Hyperparameters(3e-5, 48, 8144, 814, 512, 0.0, 0.1),
    "race": Hyperparameters(2e-5, 32, 12000, 1000, 512, 0.1, 0.1),
}



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
    """--length-bucket resolved: 16 by default, 0 on TPU (static shapes); a positive value on TPU is refused."""
    if flag is None:
        return 0 if on_tpu else 16
    if flag < 0:
        raise ValueError(f"--length-bucket must be 0 or positive, got {flag}")
    if flag and on_tpu:
        raise ValueError(f"--length-bucket {flag}: a TPU's compiled step needs static shapes; use 0 (the default "
                         "on TPU)")
    return flag



def make_budget(cfg, num_train_examples, max_position_embeddings):
    """The config (a FinetuneConfig) over the paper's defaults. A Keras epoch is one pass over the training data (the
    examples that fill whole batches); the paper's step count is rounded up to whole passes."""
    paper = PAPER_DEFAULTS[cfg.task]
    batch = cfg.batch_size or paper.batch_size
    seq = cfg.max_seq_length or min(paper.max_seq_length, max_position_embeddings)
    if seq > max_position_embeddings:
        raise ValueError(f"--max-seq-length {seq} exceeds the config's max_position_embeddings "
                         f"{max_position_embeddings}")
    for flag, value in (("--batch-size", batch), ("--max-seq-length", seq)):
        if value <= 0:
            raise ValueError(f"{flag} must be positive, got {value}")
    steps_per_epoch = num_train_examples // batch
    if steps_per_epoch < 1:
        raise ValueError(f"--data-dir {cfg.data_dir}: {num_train_examples} training examples, fewer than one "
                         f"batch of {batch} (lower --batch-size)")
    if cfg.epochs is not None:
        if cfg.epochs <= 0:
            raise ValueError(f"--epochs must be positive, got {cfg.epochs}")
        epochs = max(1, math.ceil(cfg.epochs))
    else:
        epochs = max(1, math.ceil(paper.train_steps / steps_per_epoch))
    proportion = cfg.warmup_proportion if cfg.warmup_proportion is not None else \
        paper.warmup_steps / paper.train_steps
    if not 0 <= proportion < 1:
        raise ValueError(f"--warmup-proportion must be in [0, 1), got {proportion}")
    for flag, value in (("--albert-dropout", cfg.albert_dropout), ("--classifier-dropout", cfg.classifier_dropout)):
        if value is not None and not 0 <= value < 1:
            raise ValueError(f"{flag} must be in [0, 1), got {value}")
    return Budget(
        learning_rate=cfg.learning_rate or paper.learning_rate, batch_size=batch, max_seq_length=seq,
        epochs=epochs, steps_per_epoch=steps_per_epoch,
        warmup_steps=int(round(proportion * epochs * steps_per_epoch)),
        albert_dropout=paper.albert_dropout if cfg.albert_dropout is None else cfg.albert_dropout,
        classifier_dropout=paper.classifier_dropout if cfg.classifier_dropout is None else cfg.classifier_dropout,
        optimizer=cfg.optimizer)



#: More passes over the training data than this, from the paper's step count, get a warning (a small task).
MANY_EPOCHS = 20



def many_epochs_warning(cfg, budget, num_train_examples):
    """One line when the paper's step count (no --epochs given) means more than MANY_EPOCHS passes over the given
    training data, naming the flag that sets the passes; None otherwise."""
    if cfg.epochs is not None or budget.epochs <= MANY_EPOCHS:
        return None
    paper = PAPER_DEFAULTS[cfg.task]
    return messages.line("warning", f"the paper's {paper.train_steps} steps for {cfg.task} at batch "
                                    f"{budget.batch_size} make {budget.epochs} passes over these {num_train_examples} "
                                    "training examples (a small task overfits); --epochs N sets the number of passes",
                         "finetune")

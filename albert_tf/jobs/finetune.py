"""`albert-tf finetune`: its settings as one typed config, `FinetuneConfig`, the call `finetune(config)` and what a
run returns, `FinetuneResult`. The run itself is albert_tf/training/finetuning.py (imported when the call runs, so
`albert-tf finetune --help` builds its flags from these fields without TensorFlow).

    config = FinetuneConfig(task="sst2", data_dir="glue/SST-2", init="work/model", output="work/sst2", epochs=3)
    result = albert_tf.finetune(config)
    result.metrics["dev"]["accuracy"], result.export

A setting left None takes the paper's value for the task (albert_tf.tasks.budget.PAPER_DEFAULTS). The output
directory records the config with the resolved step and epoch budget (layout.FINETUNE_RECORD_FILE); a run started
again must agree with it.
"""
import dataclasses

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.tasks import TASKS
from albert_tf.tasks.budget import OPTIMIZERS
from albert_tf.text import vocabulary


@dataclasses.dataclass
class FinetuneConfig:  # pylint: disable=too-many-instance-attributes
    """Every setting of a fine-tuning run (see each field's help; `albert-tf finetune --help` shows the same)."""
    task: str = option(help="the task (its data layout, head and metric)", choices=TASKS, same_on_resume=True)
    data_dir: str = option(help="the task's files as downloaded (GLUE task folder, SQuAD json dir, RACE)")
    init: str = option(help="the pretrained encoder: a pretrained-model directory (`pretrain`'s, `convert`'s: "
                            "albert_config.json, checkpoint, spm.model), an `albert-tf export` BASE/N or BASE "
                            "(newest), a released model's name (albert_base_v2, hf:OWNER/NAME) or a Hugging Face "
                            "ALBERT directory", same_on_resume=True)
    output: str = option(help="output directory: checkpoints, TensorBoard logs, best model, results")
    spm_model: str | None = option(None, "SentencePiece model (default: --init's spm.model)")
    cased: bool | None = vocabulary.cased_option()
    epochs: float | None = option(None, "passes over the training data (default: the paper's step count for the "
                                        "task, rounded up to passes)")
    learning_rate: float | None = option(None, "peak learning rate (default: the paper's, per task)")
    batch_size: int | None = option(None, "global batch (default: the paper's, per task)")
    max_seq_length: int | None = option(None, "tokens per example (default: the paper's, per task, capped by the "
                                              "config)")
    warmup_proportion: float | None = option(None, "fraction of the steps spent warming up (default: the paper's "
                                                   "warm-up/steps ratio for the task)")
    albert_dropout: float | None = option(None, "dropout inside the encoder (default: the paper's)")
    classifier_dropout: float | None = option(None, "dropout before the head (default: the paper's)")
    seed: int = option(12345, "seeds the head's init, the data order and dropout", same_on_resume=True)
    optimizer: str = option(
        OPTIMIZERS[0], "adamw-keras (default): Keras AdamW, bias-corrected, whose step is the learning rate from "
                       "the first step on; adamw-original: the original's AdamWeightDecay (no bias correction: its "
                       "first few hundred steps are 3 to 6.5 times the rate; short runs can collapse), to reproduce "
                       "the paper's runs. Both: weight decay 0.01 except LayerNorm and biases, clip-norm 1.0",
        choices=OPTIMIZERS)
    dtype: str = option(
        "auto", "compute dtype of training; variables, the heads' logits, the loss and the metrics stay float32, and "
                "the evaluation and the export run in float32. auto: bfloat16 on TPU and on GPUs of compute "
                "capability >= 8.0; on a CPU whichever a short matmul probe finds faster (kept per machine)",
        choices=("auto", "float32", "bfloat16"))
    collapsed_init: str = option(
        "keep", "when the --init encoder maps every input to nearly the same output (a too briefly pretrained "
                "model, docs/fine-tuning.md, 'Collapsed init'): keep its weights and warn (default), or zero its biases and "
                "LayerNorm betas before fine-tuning (reset-biases). Weights change only when asked",
        choices=("keep", "reset-biases"))
    tpu: str | None = option(None, "TPU name or address (`local` on a TPU VM); paths must be gs://")
    cpu_replicas: int | None = option(None, "split the CPU into N replicas (tests the distributed path)")
    steps_per_execution: int = option(1, "training steps per compiled call (Keras)")
    xla: str = option("auto", "jit-compile the step on GPU/CPU (a TPU always compiles); auto: on for GPU, off for "
                              "CPU", choices=("auto", "on", "off"))
    length_bucket: int | None = option(
        None, "pad each batch only to its longest example, rounded up to a multiple of N (fewer FLOPs on short "
              "text; outputs unchanged); 0: every batch at --max-seq-length. Default: 16, and 0 on TPU, whose "
              "compiled steps need static shapes")
    log_every: int = option(100, "when stdout is not a terminal (a log), print a progress line every N steps and at "
                                 "least every 30 s; on a terminal Keras' progress bar shows instead")
    max_train_examples: int | None = option(None, "train on the first N training examples (quick runs)",
                                            hidden=True)

    def __post_init__(self):
        run_config.check_fields(self)


@dataclasses.dataclass
class FinetuneResult:
    """What `albert_tf.finetune` returns.

    status: "done" (trained and exported), "complete" (the output directory already held the finished run) or
      "stopped" (a signal: the last whole epoch is kept, the same config resumes).
    epoch: the best epoch (its model is OUTPUT/best and the export); epochs: the run's epochs.
    metrics: the best epoch's official dev metrics ({split: {metric: value}}, as OUTPUT/eval_results.json).
    export: the fine-tuned raw-text SavedModel (OUTPUT/export/N), None unless done or complete.
    exit_code: the CLI's (albert_tf.runtime.exit_codes: 0; 75 after SIGTERM, 130 after SIGINT).
    """
    status: str
    output: str
    epoch: int = 0
    epochs: int = 0
    metrics: dict = dataclasses.field(default_factory=dict)
    export: str | None = None
    exit_code: int = 0


def finetune(config):
    """Fine-tunes as `config` (a FinetuneConfig) says. Returns a FinetuneResult. Usable from a notebook or a
    script: progress as the CLI prints it, errors as ValueError / FileNotFoundError (nothing written before the
    checks pass), and on the main thread SIGINT / SIGTERM (a notebook's interrupt) stop at the next step boundary,
    keeping the last whole epoch (status "stopped"; the same config resumes)."""
    return FinetuneResult(**_finetuning().run(config, exits=False))


def _finetuning():
    """albert_tf.training.finetuning, imported when a run starts (it imports TensorFlow)."""
    from albert_tf.training import finetuning  # pylint: disable=import-outside-toplevel

    return finetuning


def cli(config):
    """`albert-tf finetune`: the run, where a second SIGINT aborts the process at once. Returns the exit code."""
    return _finetuning().run(config, exits=True)["exit_code"]


__all__ = ["FinetuneConfig", "FinetuneResult", "finetune"]

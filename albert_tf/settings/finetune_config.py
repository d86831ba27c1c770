"""`albert-tf finetune`'s settings and result: `FinetuneConfig`, `FinetuneResult` (the call:
albert_tf/jobs/finetune.py; the run: albert_tf/training/finetuning.py), and the names its choices come from: the
tasks (registered in albert_tf/settings/task_registry.py) and the optimizers. No TensorFlow.

A setting left None takes the paper's value for the task (its row of the task registry; albert_tf.tasks.budget makes
the run's budget). Every range and combination of settings is checked when the config is made (ValueError, one line
naming the flag); what needs the files (the task's data, --init's config) is checked when the run reads them. The
output directory records the config with the resolved step and epoch budget (layout.FINETUNE_RECORD_FILE); a run
started again must agree with it.
"""
import dataclasses

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.settings.casing import cased_option
from albert_tf.settings.defaults import SEED
from albert_tf.settings.runtime_options import RuntimeOptions
from albert_tf.settings.task_registry import REGISTRY

#: `finetune --task`'s choices: the registered tasks' names (a live view of the task registry).
TASKS = REGISTRY.keys()
#: The fine-tuning optimizers by `finetune --optimizer` name; the first is the default
#: (albert_tf.training.optimizers.make_optimizer builds them). The bias-corrected one is the default: the original's
#: first few hundred steps are 3 to 6.5 times its rate, which sent short runs to a constant prediction
#: (docs/fine-tuning-quality.md, "Collapse").
PATH_FIELDS = ("data_dir", "init", "output")  # with --tpu: on Cloud Storage
OPTIMIZERS = ("adamw-keras", "adamw-original")


@dataclasses.dataclass
class FinetuneConfig(RuntimeOptions):  # pylint: disable=too-many-instance-attributes
    """Every setting of a fine-tuning run (see each field's help; `albert-tf finetune --help` shows the same)."""
    task: str = option(help="the task (its data layout, head and metric)", choices=TASKS, same_on_resume=True)
    data_dir: str = option(help="the task's files as downloaded (GLUE task folder, SQuAD json dir, RACE)")
    init: str = option(help="the pretrained encoder: a pretrained-model directory (`pretrain`'s, `convert`'s: "
                            "albert_config.json, checkpoint, spm.model), an `albert-tf export` BASE/N or BASE "
                            "(newest), a released model's name (albert_base_v2, hf:OWNER/NAME) or a Hugging Face "
                            "ALBERT directory", same_on_resume=True)
    output: str = option(help="output directory: checkpoints, TensorBoard logs, best model, results")
    spm_model: str | None = option(None, "SentencePiece model (default: --init's spm.model)")
    cased: bool | None = cased_option()
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
    seed: int = option(SEED, "seeds the head's init, the data order and dropout", same_on_resume=True)
    optimizer: str = option(
        OPTIMIZERS[0], "adamw-keras (default): Keras AdamW, bias-corrected, whose step is the learning rate from "
                       "the first step on; adamw-original: the original's AdamWeightDecay (no bias correction: its "
                       "first few hundred steps are 3 to 6.5 times the rate; short runs can collapse), to reproduce "
                       "the paper's runs. Both: weight decay 0.01 except LayerNorm and biases, clip-norm 1.0",
        choices=OPTIMIZERS)
    collapsed_init: str = option(
        "keep", "when the --init encoder maps every input to nearly the same output (a too briefly pretrained "
                "model, docs/fine-tuning.md, 'Collapsed init'): keep its weights and warn (default), or zero its "
                "biases and LayerNorm betas before fine-tuning (reset-biases). Weights change only when asked",
        choices=("keep", "reset-biases"))
    steps_per_execution: int = option(1, "training steps per compiled call (Keras)")
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
        run_config.check_range(self, ("batch_size", "max_seq_length", "epochs", "learning_rate",
                                      "steps_per_execution", "log_every"), *run_config.POSITIVE)
        run_config.check_range(self, ("warmup_proportion", "albert_dropout", "classifier_dropout"),
                               *run_config.FRACTION)
        run_config.check_range(self, ("length_bucket",), lambda value: value >= 0, "0 or positive")
        if self.length_bucket and self.tpu:
            raise ValueError(f"{run_config.flag_for(self, 'length_bucket')} {self.length_bucket}: a TPU's compiled "
                             "step needs static shapes; use 0 (the default on TPU)")
        self.check_runtime({run_config.flag_for(self, name): getattr(self, name) for name in PATH_FIELDS})


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


__all__ = ["FinetuneConfig", "FinetuneResult", "TASKS", "OPTIMIZERS"]

"""`albert-tf quickstart`'s settings and result: `QuickstartConfig`, `QuickstartResult` (the call:
albert_tf/jobs/quickstart.py). No TensorFlow."""
import dataclasses

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.settings.defaults import SEED


@dataclasses.dataclass
class QuickstartConfig:
    """Every setting of `albert-tf quickstart` (see each field's help; `--help` shows the same)."""
    output: str = option("albert_quickstart", "working directory")
    num_train_steps: int = option(300, "pretraining steps", aliases=("--steps",))
    finetune_epochs: int = option(4, "fine-tuning passes over the task (at batch 16: a tiny model sits at chance "
                                     "for its first 60-100 steps)")
    seed: int = option(SEED, "seeds every step")

    def __post_init__(self):
        run_config.check_fields(self, QuickstartConfig.check)

    def check(self):
        """The ranges the steps' own configs would refuse later: positive steps and epochs, a seed >= 0
        (create-data's)."""
        run_config.check_minimum(self, ("num_train_steps", "finetune_epochs"), 1, "positive")
        run_config.check_minimum(self, ("seed",), 0, ">= 0")


@dataclasses.dataclass
class QuickstartResult:
    """What `albert_tf.quickstart` returns: the pretrained-model directory, the fine-tuned export (BASE/N), its dev
    accuracy, the request's label and probabilities, and the CLI's exit code (a failed step's)."""
    model_dir: str
    export: str | None = None
    dev_accuracy: float | None = None
    label: int | None = None
    probabilities: list = dataclasses.field(default_factory=list)
    exit_code: int = 0


__all__ = ["QuickstartConfig", "QuickstartResult"]

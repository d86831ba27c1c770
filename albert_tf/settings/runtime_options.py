"""The settings both training jobs share (`pretrain`, `finetune`): where the run goes and how it computes. Declared
once here; `PretrainConfig` and `FinetuneConfig` embed them (their base class), so the flags, their choices and their
help are the same in both. No TensorFlow.

    RuntimeOptions(tpu=None, cpu_replicas=None, dtype="auto", xla="auto")
"""
import dataclasses

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.runtime import precision

#: `--xla`: jit-compile the training step on GPU/CPU (training.distribute reads it; a TPU always compiles).
XLA_CHOICES = ("auto", "on", "off")


@dataclasses.dataclass(kw_only=True)
class RuntimeOptions:
    """The runtime block of a training run: the TPU (or CPU replicas) it runs on, its compute dtype and XLA."""
    block = True  # an embedded block: its flags come after the command's own (run_config.fields_of)
    tpu: str | None = option(None, "TPU name or address (`local` on a TPU VM); every path must then be gs://")
    cpu_replicas: int | None = option(None, "split the CPU into N replicas (tests the distributed path)")
    dtype: str = option(
        "auto", "compute dtype of training; variables stay float32 (fine-tuning also keeps its heads' logits, the "
                "loss, the metrics, the evaluation and the export in float32). auto: bfloat16 on TPU and on GPUs of "
                "compute capability >= 8.0; on a CPU whichever a short matmul probe finds faster (kept per machine)",
        choices=precision.CHOICES)
    xla: str = option("auto", "jit-compile the training step on GPU/CPU (a TPU always compiles); auto: on for GPU, "
                              "off for CPU", choices=XLA_CHOICES)

    def check_runtime(self, paths=None):
        """The block's own checks (called by the embedding config's `__post_init__`): --cpu-replicas' range, --tpu
        without --cpu-replicas, and with --tpu every one of `paths` ({flag: path or glob or None}, the embedding
        config's) on Cloud Storage (check_cloud_paths)."""
        run_config.check_minimum(self, ("cpu_replicas",), 1, ">= 1")
        if self.tpu and self.cpu_replicas:
            raise ValueError("--tpu and --cpu-replicas are exclusive")
        if self.tpu:
            check_cloud_paths(paths or {})


def check_cloud_paths(paths):
    """With --tpu the TPU workers read and write Cloud Storage only; refuses anything else.

    Args:
      paths: {flag name: path or glob or None}.
    """
    for flag, path in paths.items():
        if path and not str(path).startswith("gs://"):
            raise ValueError(
                f"{flag} {path}: with --tpu, data and the model dir must be on Cloud Storage (gs://...), "
                f"because the TPU hosts cannot read this machine's local files")


__all__ = ["RuntimeOptions", "XLA_CHOICES", "check_cloud_paths"]

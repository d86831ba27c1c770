"""`albert-tf finetune`: the call `finetune(config)` (a FinetuneConfig in, a FinetuneResult out: both in
albert_tf/settings/finetune_config.py). The run itself is albert_tf/training/finetuning.py, imported when the call
runs, so `albert-tf finetune --help` builds its flags from the config's fields without TensorFlow.

    config = FinetuneConfig(task="sst2", data_dir="glue/SST-2", init="work/model", output="work/sst2", epochs=3)
    result = albert_tf.finetune(config)
    result.metrics["dev"]["accuracy"], result.export
"""
from albert_tf.settings.finetune_config import FinetuneConfig, FinetuneResult


def finetune(config):
    """Fine-tunes as `config` (a FinetuneConfig) says. Returns a FinetuneResult. Usable from a notebook or a
    script: progress as the CLI prints it, errors as ValueError / FileNotFoundError (nothing written before the
    checks pass), and on the main thread SIGINT / SIGTERM (a notebook's interrupt) stop at the next step boundary,
    keeping the last whole epoch (status "stopped"; the same config resumes)."""
    return _finetuning().run(config, exits=False)


def _finetuning():
    """albert_tf.training.finetuning, imported when a run starts (it imports TensorFlow)."""
    from albert_tf.training import finetuning  # pylint: disable=import-outside-toplevel

    return finetuning


def cli(config):
    """`albert-tf finetune`: the run, where a second SIGINT aborts the process at once. Returns the exit code."""
    return _finetuning().run(config, exits=True).exit_code


__all__ = ["FinetuneConfig", "FinetuneResult", "finetune"]

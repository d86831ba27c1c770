"""`albert-tf finetune`: the call `finetune(config)` (a FinetuneConfig in, a FinetuneResult out: both in
albert_tf/settings/finetune_config.py). The run itself is albert_tf/training/finetuning.py, imported when the call
runs, so `albert-tf finetune --help` builds its flags from the config's fields without TensorFlow.

    config = FinetuneConfig(task="sst2", data_dir="glue/SST-2", init="work/model", output="work/sst2", epochs=3)
    result = albert_tf.finetune(config)
    result.metrics["dev"]["accuracy"], result.export
"""
from albert_tf import files
from albert_tf.checkpoints import releases
from albert_tf.settings.finetune_config import FinetuneConfig, FinetuneResult
from albert_tf.tasks import adapters
from albert_tf.text import vocabulary


def preflight(config):
    """What fine-tuning checks of its inputs that needs no TensorFlow (local paths), run first: the output is not a
    file, --init names a directory or a release, --spm-model is a file, --data-dir holds files."""
    if files.is_local(config.output):
        files.check_output_dir(config.output, "--output")
    if files.is_local(config.init):
        releases.check_handle(config.init)
    if config.spm_model and files.is_local(config.spm_model):
        files.check_input_file(config.spm_model, "--spm-model", vocabulary.SPM_FILE)
    if files.is_local(config.data_dir):
        adapters.check_data_dir(config.task, config.data_dir)


def finetune(config):
    """Fine-tunes as `config` (a FinetuneConfig) says. Returns a FinetuneResult. Usable from a notebook or a
    script: progress as the CLI prints it, errors as ValueError / FileNotFoundError (nothing written before the
    checks pass), and on the main thread SIGINT / SIGTERM (a notebook's interrupt) stop at the next step boundary,
    keeping the last whole epoch (status "stopped"; the same config resumes)."""
    preflight(config)
    return _finetuning().run(config, exits=False)


def _finetuning():
    """albert_tf.training.finetuning, imported when a run starts (it imports TensorFlow)."""
    from albert_tf.training import finetuning  # pylint: disable=import-outside-toplevel

    return finetuning


def cli(config):
    """`albert-tf finetune`: the run, where a second SIGINT aborts the process at once. Returns the exit code."""
    return _finetuning().run(config, exits=True).exit_code


__all__ = ["FinetuneConfig", "FinetuneResult", "finetune", "preflight"]

"""`albert-tf pretrain`: the call `pretrain(config)` (a PretrainConfig in, a PretrainResult out: both in
albert_tf/settings/pretrain_config.py, with the recipes) and the command line's extras (`--recipe`). The run itself is
albert_tf/training/pretraining.py, imported when the call runs, so `albert-tf pretrain --help` builds its flags from
the config's fields without TensorFlow.

    result = albert_tf.pretrain(albert_tf.PretrainConfig(config="albert_base", train_data="data/train-*",
                                                         model_dir="model", batch_size=256))

    albert-tf pretrain --recipe paper_v2 --config albert_base --train-data 'gs://b/records/train-*' \\
        --model-dir gs://b/models/albert_base --tpu NAME [any flag, which wins over the recipe]
"""
import shlex

from albert_tf import files, run_config
from albert_tf.checkpoints import releases
from albert_tf.settings.pretrain_config import (LENGTH_FIELDS, RECIPES, WSD_FIELDS, PretrainConfig, PretrainResult,
                                                over_recipe, read_recipe, replaced_in_recipe)
from albert_tf.text import vocabulary


# ---------------------------------------------------------------------------------------------- the call
def preflight(config):
    """What pretraining checks of its inputs that needs no TensorFlow (local paths), run first: the model dir is
    not a file, --spm-model is a file, --config (with --set) against --max-seq-length, every records pattern
    matches a file, --init names a directory or a release."""
    if files.is_local(config.model_dir):
        files.check_output_dir(config.model_dir, "--model-dir")
    if config.spm_model and files.is_local(config.spm_model):
        files.check_input_file(config.spm_model, "--spm-model", vocabulary.SPM_FILE)
    if files.is_local(config.config, config.spm_model):
        model_config = vocabulary.model_config(config.config, config.config_overrides, config.spm_model)
        model_config.check_seq_length(config.max_seq_length)
    patterns = {"--train-data": config.train_data, "--eval-data": config.eval_data,
                **{f"--phase-data {seq}": pattern for seq, pattern in config.phase_data.items()}}
    for flag, pattern in patterns.items():
        if pattern and files.is_local(*files.split_patterns(pattern)):
            files.match_files(pattern, flag=flag)
    if config.init and files.is_local(config.init):
        releases.check_handle(config.init)


def pretrain(config):
    """Pretrains as `config` (a PretrainConfig, whose ranges were checked when it was made) says: the TPU and the
    output dir checked, the output lock, prepare (strategy, the inputs' checks, batch plan), build and restore,
    train. Returns a PretrainResult. Usable from a notebook or a script: progress lines as the CLI prints them,
    errors as ValueError / FileNotFoundError (nothing written before the checks pass), the
    model dir held by another run as LockHeld, the TPU / runtime or a peer worker gone as RuntimeLost (both in
    albert_tf.runtime.exit_codes: the same config resumes), and on the main thread SIGINT / SIGTERM (a notebook's
    interrupt) stop at the end of the compiled call in flight with a checkpoint (status "stopped"; the same config
    resumes)."""
    preflight(config)
    return _pretraining().run(config, exits=False)


def _pretraining():
    """albert_tf.training.pretraining, imported when a run starts (it imports TensorFlow)."""
    from albert_tf.training import pretraining  # pylint: disable=import-outside-toplevel

    return pretraining


# ---------------------------------------------------------------------------------------------- the command line
def add_extra_arguments(parser):
    """`--recipe` (after the command's own flags): where settings come from, not a setting."""
    parser.add_argument("--recipe", default=None,
                        help=f"a pretraining recipe to start from: {', '.join(RECIPES)} or a recipe .json file; "
                             "flags given on the command line win (default: none)")


def recipe_and_typed(args):
    """(the recipe's values, the fields the user typed) of parsed flags."""
    base = read_recipe(args.recipe) if getattr(args, "recipe", None) else {}
    return base, run_config.given(PretrainConfig, args)


def config_from_args(args):
    """The PretrainConfig of parsed flags: the recipe's values, then the typed flags; prints the recipe's line
    (the values it set that no flag overrides; a length it set that a typed length replaces is named)."""
    base, typed = recipe_and_typed(args)
    replaced = replaced_in_recipe(base, typed)
    applied = {k: v for k, v in base.items() if (k not in typed and k not in replaced) or k == "config_overrides"}
    if "config_overrides" in applied:  # the recipe's keys that no --set changed
        applied["config_overrides"] = {k: v for k, v in applied["config_overrides"].items()
                                       if k not in typed.get("config_overrides", {})}
    words = run_config.argv_of(PretrainConfig, {k: v for k, v in applied.items() if v is not False})
    line = shlex.join(words)
    notes = []
    for fields, why in ((LENGTH_FIELDS, "replaced by the length typed"),
                        (WSD_FIELDS, f"dropped: --schedule {typed.get('schedule')} has no wsd decay")):
        named = [shlex.join(run_config.argv_of(PretrainConfig, {k: base[k]})) for k in fields if k in replaced]
        if named:
            notes.append(f"its {', '.join(named)} {why}")
    if notes:  # the recipe's length replaced by a typed one; its wsd decay under another schedule typed
        line += " (" + "; ".join(notes) + ")"
    if line:
        print(f"recipe {args.recipe}: {line.strip()}", flush=True)
    return PretrainConfig(**over_recipe(base, typed))


def cli(config):
    """`albert-tf pretrain`: the run, with the CLI's signal handling (SIGTERM and SIGINT stop it cleanly: before
    the first step has finished at once, nothing to save; afterwards at the end of the compiled call in flight, with
    a checkpoint; exit 75 after SIGTERM, 130 after SIGINT; a second SIGINT aborts). Returns the exit code."""
    return _pretraining().run(config, exits=True).exit_code


__all__ = ["PretrainConfig", "PretrainResult", "pretrain", "preflight", "RECIPES", "read_recipe", "over_recipe"]

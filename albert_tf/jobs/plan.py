"""`albert-tf plan`: parameters, per-device memory, FLOPs and time of a pretraining run, before renting a TPU (the
cost model: albert_tf/training/costs.py; the devices: albert_tf/runtime/devices.py). No TensorFlow.

    result = albert_tf.plan(albert_tf.jobs.plan.from_recipe("paper_v2", config="albert_xxlarge", topology="v3-512"))
    result.plan["fits"], result.pretrain_config      # the estimate; the recommended run as a PretrainConfig

Its flags are `albert-tf pretrain`'s (the same PretrainConfig fields: --batch-size, --max-seq-length, --recipe,
--set, ...), so a plan's command line pastes into pretrain's and back; the recommended command is printed from a
PretrainConfig (run_config.to_argv). `--topology cpu` plans a run on this machine: its memory holds every replica
(`--cpu-replicas`), with the overhead and slack `pretrain` checks it against.
"""
import dataclasses
import json
import shlex

from albert_tf import config as albert_config
from albert_tf import run_config
from albert_tf.runtime import devices
from albert_tf.settings.plan_config import PLAN_PRETRAIN_FIELDS, PlanConfig, PlanResult, from_recipe, plan_cores
from albert_tf.settings.pretrain_config import PretrainConfig, paper_warmup, read_recipe
from albert_tf.training import costs

# The recommended command's stand-ins for what a plan does not know: the data and the model dir.
CPU_PLACES = {"train_data": "data/train-*", "model_dir": "model"}
# What `--topology cpu` without a recipe points to: the recipe sized for one machine.
CPU_RECIPE_NOTE = ("note: for a pretraining this machine can do in about an hour, plan and run --recipe cpu_small "
                   "(2 layers, 256 wide, seq 64, batch 128, dynamic masking; docs/fine-tuning-quality.md measures "
                   "what it buys)")
TPU_PLACES = {"tpu": "TPU_NAME", "train_data": "gs://BUCKET/records/train-*", "model_dir": "gs://BUCKET/model"}


def _planned_dtype(flag, auto):
    """The dtype the plan assumes for pretrain's --dtype `flag` (auto: `auto`, the device's)."""
    return flag if flag in ("float32", "bfloat16") else auto


def topology_setup(cfg):
    """(devices, peak FLOP/s per device, memory per device, usable fraction, dtype) of the plan's --topology (the
    device table's row of its generation, or --cpu-replicas on this machine's CPU)."""
    cores = plan_cores(cfg)
    if cfg.topology == devices.CPU_TOPOLOGY:
        total = costs.host_total_bytes()
        # auto on a CPU is measured when pretrain starts; the plan takes float32 (the larger activations)
        return (cores, None, total // cores, costs.host_usable_fraction(total), _planned_dtype(cfg.dtype, "float32"))
    generation = devices.parse_topology(cfg.topology).generation
    return (cores, generation.peak_per_device, generation.hbm_per_device, devices.HBM_USABLE_FRACTION,
            _planned_dtype(cfg.dtype, "bfloat16"))


def recommended_config(cfg, plan, option, recipe_values=None):
    """The recommended run as a PretrainConfig: the recipe's values (`recipe_values`, read_recipe's), the plan's
    pretrain settings, the option's flags, and stand-ins for the data and the model dir (gs:// and --tpu on a TPU
    topology); a warm-up (the recipe's or the default) as long as the run becomes the paper's share of it."""
    values = {**(recipe_values or {}), **{name: getattr(cfg, name) for name in PLAN_PRETRAIN_FIELDS}}
    fields = {run_config.flag_of(f): f.name for f in dataclasses.fields(PretrainConfig)}
    values.update({fields[flag]: value for flag, value in option["flags"].items()})
    warmup = values.get("num_warmup_steps", run_config.default_for(PretrainConfig, "num_warmup_steps"))
    if warmup >= cfg.num_train_steps:  # pretrain would refuse it: the paper's share of this run instead
        values["num_warmup_steps"] = paper_warmup(cfg.num_train_steps)
    places = CPU_PLACES if plan["topology"] == devices.CPU_TOPOLOGY else TPU_PLACES
    return PretrainConfig(**values, **places)


def pretrain_command(config, recipe=None, recipe_values=None):
    """`albert-tf pretrain ...` of a PretrainConfig: --recipe (its values: `recipe_values`, read_recipe's), then
    what differs from them (to_argv), the TPU, the data and the model dir last."""
    return shlex.join(["albert-tf", "pretrain", *(["--recipe", recipe] if recipe else []),
                       *run_config.to_argv(config, recipe_values if recipe else None,
                                           last=("tpu", "train_data", "model_dir"))])


def plan(config):
    """Plans the pretraining run `config` (a PlanConfig) describes. Returns a PlanResult; prints nothing."""
    cfg = config
    cores, peak, memory, usable, dtype = topology_setup(cfg)
    model = albert_config.resolve(cfg.config, cfg.config_overrides)
    estimate = costs.estimate(
        model, cfg.batch_size, cfg.max_seq_length, cfg.max_predictions, cores=cores, dtype=dtype, remat=cfg.remat,
        steps=cfg.num_train_steps, mfu=cfg.mfu, peak_flops_per_core=peak, memory_per_core=memory,
        topology=cfg.topology, usable_fraction=usable, accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate)
    recommended = None
    if estimate["recommended"] is not None:
        recipe_values = read_recipe(cfg.recipe) if cfg.recipe else {}  # read once for both
        recommended = recommended_config(cfg, estimate, estimate["recommended"], recipe_values)
        estimate["pretrain_command"] = pretrain_command(recommended, cfg.recipe, recipe_values)
    if cfg.topology == devices.CPU_TOPOLOGY and not cfg.recipe:
        estimate["note"] = CPU_RECIPE_NOTE
    return PlanResult(estimate, recommended)


def cli(config):
    """`albert-tf plan`: prints the plan (text, or one JSON object with --json)."""
    result = plan(config)
    if "note" in result.plan and not config.json:
        print(result.plan["note"])  # first: the last line stays the command to paste
    print(json.dumps(result.plan, indent=2, sort_keys=True) if config.json else costs.report(result.plan))
    return result.exit_code


def config_from_args(args):
    """The PlanConfig of parsed flags: --recipe's values, then the typed flags."""
    typed = run_config.given(PlanConfig, args)
    return from_recipe(typed.pop("recipe", None), **typed)


__all__ = ["PlanConfig", "PlanResult", "plan", "from_recipe"]

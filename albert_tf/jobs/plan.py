"""`albert-tf plan`: parameters, per-device memory, FLOPs and time of a pretraining run, before renting a TPU (the
cost model: albert_tf/training/costs.py; the devices: albert_tf/runtime/devices.py). No TensorFlow.

    result = albert_tf.plan(albert_tf.jobs.plan.from_recipe("paper_v2", config="albert_xxlarge", topology="v3-512"))
    result.plan["fits"], result.pretrain_config      # the estimate; the recommended run as a PretrainConfig

A run's length and phases are pretrain's (--num-train-steps, --budget-tokens, --budget-hours at the estimated step
time, --phases); --price-per-chip-hour adds chip-hours and cost, --compare RECIPE a second run beside it
(albert_tf/training/run_costs.py). Its flags are `albert-tf pretrain`'s (the same PretrainConfig fields: --batch-size,
--max-seq-length, --recipe, --set, ...), so a plan's command line pastes into pretrain's and back; the recommended
command is printed from a PretrainConfig (run_config.to_argv). `--topology cpu` plans a run on this machine: its
memory holds every replica (`--cpu-replicas`), with the overhead and slack `pretrain` checks it against.
"""
import dataclasses
import json
import shlex

from albert_tf import config as albert_config
from albert_tf import run_config
from albert_tf.runtime import devices
from albert_tf.settings.plan_config import (COMPARE_KEEPS, PLAN_PRETRAIN_FIELDS, PlanConfig, PlanResult, from_recipe,
                                            plan_cores)
from albert_tf.settings.pretrain_config import PretrainConfig, paper_warmup, read_recipe
from albert_tf.settings.run_length import run_phases
from albert_tf.training import costs, run_costs

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
    pretrain settings, the option's flags (with --phases its memory flags only), and stand-ins for the data (each
    shorter phase's too) and the model dir (gs:// and --tpu on a TPU topology); a warm-up (the recipe's or the
    default) as long as the run becomes the paper's share of it."""
    values = {**(recipe_values or {}), **{name: getattr(cfg, name) for name in PLAN_PRETRAIN_FIELDS}}
    fields = {run_config.flag_of(f): f.name for f in dataclasses.fields(PretrainConfig)}
    phased_flags = ("--batch-size", "--max-seq-length") if cfg.phases else ()  # (--phases holds them)
    values.update({fields[flag]: value for flag, value in option["flags"].items() if flag not in phased_flags})
    warmup = values.get("num_warmup_steps", run_config.default_for(PretrainConfig, "num_warmup_steps"))
    if warmup >= cfg.num_train_steps:  # pretrain would refuse it: the paper's share of this run instead
        values["num_warmup_steps"] = paper_warmup(cfg.num_train_steps)
    places = dict(CPU_PLACES if plan["topology"] == devices.CPU_TOPOLOGY else TPU_PLACES)
    places["phase_data"] = {str(p["seq_length"]): places["train_data"].replace("train-*", f"train-{p['seq_length']}-*")
                            for p in plan["phases"] if p["seq_length"] != cfg.max_seq_length}
    return PretrainConfig(**values, **places)


def pretrain_command(config, recipe=None, recipe_values=None):
    """`albert-tf pretrain ...` of a PretrainConfig: --recipe (its values: `recipe_values`, read_recipe's), then
    what differs from them (to_argv), the TPU, the data and the model dir last."""
    base = recipe_values if recipe else None
    if config.budget_tokens is not None:  # the steps are the budget's: --budget-tokens says them
        base = {**(base or {}), "num_train_steps": config.num_train_steps}
    return shlex.join(["albert-tf", "pretrain", *(["--recipe", recipe] if recipe else []),
                       *run_config.to_argv(config, base, last=("tpu", "train_data", "model_dir"))])


def estimate_run(cfg):
    """The plan's dict of the run `cfg` (a PlanConfig) describes: run_costs.estimate_run over its phases (one without
    --phases), each phase estimated by costs.estimate on the plan's topology."""
    cores, peak, memory, usable, dtype = topology_setup(cfg)
    model = albert_config.resolve(cfg.config, cfg.config_overrides)

    def estimate_phase(phase, remat, accumulation_steps, steps):
        return costs.estimate(
            model, phase.batch_size, phase.seq_length, cfg.max_predictions, cores=cores, dtype=dtype,
            remat=cfg.remat if remat is None else remat, steps=steps, mfu=cfg.mfu, peak_flops_per_core=peak,
            memory_per_core=memory, topology=cfg.topology, usable_fraction=usable,
            accumulation_steps=accumulation_steps or cfg.gradient_accumulation_steps, learning_rate=cfg.learning_rate)

    phases = run_phases(cfg.phases, cfg.max_seq_length, cfg.batch_size)
    return run_costs.estimate_run(phases, estimate_phase, None if cfg.budget_hours else cfg.num_train_steps,
                                  cfg.budget_hours, cfg.price_per_chip_hour)


def compare_config(cfg):
    """The PlanConfig of --compare's recipe on `cfg`'s model, slice and assumptions (COMPARE_KEEPS); its errors name
    --compare."""
    try:
        return from_recipe(cfg.compare, **{name: getattr(cfg, name) for name in COMPARE_KEEPS}, compare=None)
    except (ValueError, FileNotFoundError) as e:
        raise ValueError(f"--compare {cfg.compare}: {e}") from None


def plan(config):
    """Plans the pretraining run `config` (a PlanConfig) describes, and --compare's beside it. Returns a PlanResult;
    prints nothing."""
    cfg = config
    estimate = estimate_run(cfg)
    recommended = None
    option = estimate["recommended"]
    if option is not None and (len(estimate["phases"]) == 1 or option["keeps_global_batch"]):
        recipe_values = read_recipe(cfg.recipe) if cfg.recipe else {}  # read once for both
        recommended = recommended_config(cfg, estimate, option, recipe_values)
        estimate["pretrain_command"] = pretrain_command(recommended, cfg.recipe, recipe_values)
    if cfg.topology == devices.CPU_TOPOLOGY and not cfg.recipe:
        estimate["note"] = CPU_RECIPE_NOTE
    if cfg.compare:
        estimate["compare"] = [run_costs.compare_row(cfg.recipe, estimate),
                               run_costs.compare_row(cfg.compare, estimate_run(compare_config(cfg)))]
    return PlanResult(estimate, recommended)


def report(plan_dict):
    """The plan as text: costs.report with the run's lines (phases, steps, tokens, chip-hours, cost) and the
    side-by-side table (--compare) before the command to paste."""
    extra = run_costs.run_lines(plan_dict)
    if "compare" in plan_dict:
        extra += run_costs.compare_lines(plan_dict["compare"])
    return costs.report(plan_dict, extra)


def cli(config):
    """`albert-tf plan`: prints the plan (text, or one JSON object with --json)."""
    result = plan(config)
    if "note" in result.plan and not config.json:
        print(result.plan["note"])  # first: the last line stays the command to paste
    print(json.dumps(result.plan, indent=2, sort_keys=True) if config.json else report(result.plan))
    return result.exit_code


def config_from_args(args):
    """The PlanConfig of parsed flags: --recipe's values, then the typed flags."""
    typed = run_config.given(PlanConfig, args)
    return from_recipe(typed.pop("recipe", None), **typed)


__all__ = ["PlanConfig", "PlanResult", "plan", "from_recipe"]

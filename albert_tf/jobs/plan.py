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
from albert_tf.settings.pretrain_config import PretrainConfig, at_pod_defaults, paper_warmup, read_recipe
from albert_tf.settings.run_length import run_phases, steps_for_hours
from albert_tf.training import costs, run_costs

# The recommended command's stand-ins for what a plan does not know: the data and the model dir.
CPU_PLACES = {"train_data": "data/train-*", "model_dir": "model"}
# What `--topology cpu` without a recipe points to: the recipe sized for one machine.
CPU_RECIPE_NOTE = ("note: for a pretraining this machine can do in about an hour, plan and run --recipe cpu_small "
                   "(2 layers, 256 wide, seq 64, batch 128, dynamic masking; docs/fine-tuning-quality.md measures "
                   "what it buys)")
TPU_PLACES = {"tpu": "TPU_NAME", "train_data": "gs://BUCKET/records/train-*", "model_dir": "gs://BUCKET/model"}
# What `--topology cpu` at the pod recipe's batch and steps (which pretrain refuses on a CPU) recommends instead: the
# largest power-of-two batch up to CPU_LARGEST_BATCH that fits without accumulation, for about CPU_RUN_HOURS.
CPU_LARGEST_BATCH, CPU_RUN_HOURS = 256, 1.0


def _planned_dtype(flag, auto):
    """The dtype the plan assumes for pretrain's --dtype `flag` (auto: `auto`, the device's)."""
    return flag if flag in ("float32", "bfloat16") else auto


def topology_setup(cfg):
    """(devices, peak FLOP/s per device, memory per device, usable fraction, dtype) of the plan's --topology (the
    device table's row of its generation, or --cpu-replicas on this machine's CPU)."""
    cores = plan_cores(cfg)
    if cfg.topology == devices.CPU_TOPOLOGY:
        total = costs.host_total_bytes()
        # auto on a CPU is measured when pretrain starts; the plan takes float32 (the larger activations, the float32
        # matmul rate: the replicas share this machine's)
        return (cores, _host_matmul_flops() / cores, total // cores, costs.host_usable_fraction(total),
                _planned_dtype(cfg.dtype, "float32"))
    generation = devices.parse_topology(cfg.topology).generation
    return (cores, generation.peak_per_device, generation.hbm_per_device, devices.HBM_USABLE_FRACTION,
            _planned_dtype(cfg.dtype, "bfloat16"))


_MEASURED = {}


def _host_matmul_flops():
    """This machine's float32 matmul rate (costs.host_matmul_flops), measured once per process."""
    if "rate" not in _MEASURED:
        _MEASURED["rate"] = costs.host_matmul_flops()
    return _MEASURED["rate"]


def cpu_sized(cfg, estimate):
    """For `cfg` (a PlanConfig on --topology cpu) left at the pod recipe's batch and steps, which pretrain refuses
    on a CPU, a PlanConfig of a run of about CPU_RUN_HOURS that fits this machine: the largest power-of-two global
    batch up to CPU_LARGEST_BATCH whose memory (costs.host_need_bytes, pretrain's rule) fits without accumulation
    (--remat as given), the learning rate square-root scaled to it unless one was given, as many steps as the hours
    hold at its estimated step time. None when not even one example per replica fits. `estimate`: cfg's plan (its
    dtype)."""
    model = albert_config.resolve(cfg.config, cfg.config_overrides)
    replicas, total = plan_cores(cfg), costs.host_total_bytes()
    batch = CPU_LARGEST_BATCH
    while batch >= replicas and (batch % replicas or costs.host_need_bytes(
            model, batch, cfg.max_seq_length, cfg.max_predictions, replicas=replicas, dtype=estimate["dtype"],
            remat=cfg.remat) > total):
        batch //= 2
    if batch < replicas:
        return None
    values = {"batch_size": batch, "gradient_accumulation_steps": 1, "budget_tokens": None, "phases": None}
    if cfg.learning_rate == run_config.default_for(PretrainConfig, "learning_rate"):
        values["learning_rate"] = float(f"{costs.learning_rate_for(batch):.2g}")
    one_step = estimate_run(dataclasses.replace(cfg, **values, num_train_steps=1))
    steps = max(1, steps_for_hours(CPU_RUN_HOURS, one_step["step_time_s"]))
    return dataclasses.replace(cfg, **values, num_train_steps=steps)


def cpu_note(cfg, estimate, sized):
    """The note of a plan at the pod recipe's batch and steps on --topology cpu: what pretrain says of them, how
    long they take here, and the run printed instead (`sized`, cpu_sized's; None: nothing fits)."""
    said = (f"note: pretrain refuses the pod recipe's --batch-size {cfg.batch_size} and --num-train-steps "
            f"{cfg.num_train_steps:,} on a CPU ({costs.total_text(estimate['run_time_s'])} here, estimated)")
    if sized is None:
        return said + "; not one example fits this machine: use a smaller --config or a shorter --max-seq-length"
    scaled = ", the learning rate square-root scaled to it" if sized.learning_rate != cfg.learning_rate else ""
    return (f"{said}; the command at the end is a run of about {CPU_RUN_HOURS:g} h here: --batch-size "
            f"{sized.batch_size}{scaled}, --num-train-steps {sized.num_train_steps:,} at the estimated step time "
            "(edit both to taste; or plan and run --recipe cpu_small, a model sized for one machine)")


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
    sized, sized_estimate = cfg, estimate  # the run the printed command is of
    if cfg.topology == devices.CPU_TOPOLOGY and at_pod_defaults(cfg):
        sized = cpu_sized(cfg, estimate)
        sized_estimate = sized and estimate_run(sized)
        estimate["note"] = cpu_note(cfg, estimate, sized)
        option = sized_estimate and sized_estimate["recommended"]
        estimate["recommended"] = option and {**option, "keeps_global_batch": False, "steps": sized.num_train_steps,
                                              "heading": f"a run of about {CPU_RUN_HOURS:g} h on this machine"}
    elif cfg.topology == devices.CPU_TOPOLOGY and not cfg.recipe:
        estimate["note"] = CPU_RECIPE_NOTE
    elif cfg.topology != devices.CPU_TOPOLOGY and (pods := devices.pod_note(devices.parse_topology(cfg.topology))):
        estimate["note"] = pods  # a slice of a generation whose pods others report broken
    recommended = None
    option = sized_estimate and sized_estimate["recommended"]
    if option and (len(sized_estimate["phases"]) == 1 or option["keeps_global_batch"]):
        recipe_values = read_recipe(cfg.recipe) if cfg.recipe else {}  # read once for both
        recommended = recommended_config(sized, sized_estimate, option, recipe_values)
        estimate["pretrain_command"] = pretrain_command(recommended, cfg.recipe, recipe_values)
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

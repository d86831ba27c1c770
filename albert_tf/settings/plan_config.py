"""`albert-tf plan`'s settings and result: `PlanConfig` (pretrain's fields that a plan reads, with the same flags and
checks, the length and phases among them; the topology, the MFU, the price of a chip-hour, a recipe to compare),
`PlanResult`, and `from_recipe`. The call: albert_tf/jobs/plan.py. No TensorFlow."""
import dataclasses
import typing

from albert_tf import run_config
from albert_tf.runtime import devices
from albert_tf.settings import defaults
from albert_tf.settings.pretrain_config import (RECIPES, PretrainConfig, check_phase_lengths, check_predictions,
                                                decide_length, over_recipe, read_recipe)

# The PretrainConfig fields a plan reads (its flags are pretrain's: a plan's flags paste into pretrain's command).
PLAN_PRETRAIN_FIELDS = ("config", "config_overrides", "batch_size", "max_seq_length", "max_predictions",
                        "num_train_steps", "budget_tokens", "budget_hours", "phases", "learning_rate", "dtype",
                        "remat", "gradient_accumulation_steps", "cpu_replicas")
# What --compare RECIPE keeps of the plan: the model, the slice and the assumptions (the rest is the recipe's).
COMPARE_KEEPS = ("config", "config_overrides", "topology", "dtype", "cpu_replicas", "mfu", "price_per_chip_hour")


def _plan_fields():
    """PlanConfig's fields: pretrain's (the same flag, type, default and help), the plan's own, and --recipe."""
    hints = typing.get_type_hints(PretrainConfig)
    old = {"max_seq_length": ("--seq-length",), "num_train_steps": ("--steps",)}  # the plan's earlier spellings
    borrowed = {f.name: (f.name, hints[f.name], dataclasses.field(
        default=f.default, default_factory=f.default_factory,
        metadata={**f.metadata, "aliases": f.metadata["aliases"] + old.get(f.name, ())}))
        for f in dataclasses.fields(PretrainConfig)}
    return [
        borrowed["config"],
        ("topology", str, run_config.option(help=f"a Cloud TPU slice as Google names it: "
                                                 f"{devices.TOPOLOGY_GRAMMAR}; or {devices.CPU_TOPOLOGY} (this "
                                                 "machine: its memory, --cpu-replicas replicas)")),
        *(borrowed[name] for name in PLAN_PRETRAIN_FIELDS[1:]),
        ("mfu", float, run_config.option(defaults.MFU, "fraction of the peak FLOP/s sustained")),
        ("price_per_chip_hour", float | None, run_config.option(
            None, "the price of one chip for one hour (any currency): the plan adds the chip-hours' cost")),
        ("compare", str | None, run_config.option(
            None, "a second recipe (a name or a .json file, as --recipe) planned on the same --config, --set, "
                  "--topology, --dtype, --mfu and price, printed beside this run: steps, tokens, hours, chip-hours, "
                  "cost")),
        ("json", bool, run_config.option(False, "print one JSON object instead of text")),
        ("recipe", str | None, run_config.option(None, "the pretraining recipe the run starts from, as pretrain's "
                                                       "--recipe (its values, then the flags)")),
    ]


# The plan's fields checked when a PlanConfig is made (pretrain's messages: the flags are pretrain's).
PLAN_POSITIVE_FIELDS = ("batch_size", "max_seq_length", "max_predictions", "num_train_steps",
                        "gradient_accumulation_steps")


def check_split(global_batch, cores, accumulation_steps, topology=None):
    """Refuses a global batch that `cores` replicas (of `topology`, a name for the line) do not divide evenly, and
    accumulation steps that do not divide the per-core batch: one line naming the flag."""
    if global_batch % cores:
        raise ValueError(f"--batch-size {global_batch} is not divisible by the {cores} cores "
                         f"{'of ' + topology + ' ' if topology else ''}(every core takes an equal share)")
    if (global_batch // cores) % accumulation_steps:
        raise ValueError(f"--gradient-accumulation-steps {accumulation_steps} does not divide the per-core batch "
                         f"{global_batch // cores}")


def check_fraction(flag, value):
    """Refuses a fraction (--mfu) outside (0, 1]."""
    if not 0 < value <= 1:
        raise ValueError(f"{flag} {value}: expected a fraction in (0, 1]")


def plan_cores(config):
    """The replicas a PlanConfig's --topology has: a slice's TensorFlow devices (the device table's), or
    --cpu-replicas (default 1) on this machine's CPU. One-line ValueError for a slice that does not exist or is
    refused."""
    if config.topology == devices.CPU_TOPOLOGY:
        return config.cpu_replicas or 1
    try:
        return devices.parse_topology(config.topology).devices
    except ValueError as e:
        raise ValueError(f"--topology {e}") from None


def _check(config):
    """PlanConfig's ranges and combinations (none reads a file): pretrain's positive sizes, --max-predictions within
    --max-seq-length, --phases and the budgets as pretrain checks them (--budget-tokens sets --num-train-steps),
    --budget-hours on a TPU only, --cpu-replicas >= 1, --mfu a fraction, a price >= 0, a --compare recipe's name,
    a known --topology whose cores split the batch."""
    run_config.check_minimum(config, PLAN_POSITIVE_FIELDS, 1, "positive")
    run_config.check_minimum(config, ("cpu_replicas",), 1, ">= 1")
    check_predictions(config)
    if config.phases:
        check_phase_lengths(config)
    decide_length(config)
    if config.budget_hours is not None and config.topology == devices.CPU_TOPOLOGY:
        raise ValueError(f"--budget-hours with --topology {devices.CPU_TOPOLOGY}: the plan turns hours into steps at "
                         "its estimated step time, which on a CPU rests on a matmul rate measured in a moment, too "
                         "rough to fix a run's length by (pretrain measures this machine's step)")
    check_fraction("--mfu", config.mfu)
    if config.price_per_chip_hour is not None and not config.price_per_chip_hour >= 0:
        raise ValueError(f"--price-per-chip-hour {config.price_per_chip_hour}: expected a price >= 0")
    if config.compare is not None and config.compare not in RECIPES and not config.compare.endswith(".json"):
        raise ValueError(f"--compare {config.compare!r}: unknown; expected one of {', '.join(RECIPES)} or a .json "
                         "file")
    if config.topology:  # (a missing --topology is refused after the ranges)
        check_split(config.batch_size, plan_cores(config), config.gradient_accumulation_steps, config.topology)


def _post_init(config):
    """Checks a PlanConfig when it is made (its fields' types and choices, then _check)."""
    run_config.check_fields(config, _check)


# __post_init__ given to make_dataclass: the generated __init__ calls it only if the class has it when made
PlanConfig = dataclasses.make_dataclass("PlanConfig", _plan_fields(), namespace={"__post_init__": _post_init})
PlanConfig.__module__ = __name__  # Python 3.10 has no make_dataclass(module=)
PlanConfig.__doc__ = ("The settings of `albert-tf plan`: pretrain's that a plan reads (a --recipe's values under the "
                      "typed ones), the topology and the MFU; checked when made.")


@dataclasses.dataclass
class PlanResult:
    """What `albert_tf.plan` returns. plan: the estimate (training.run_costs.estimate_run's dict: costs.estimate's
    of the phase with the most memory, the run's phases, steps, tokens, hours, chip-hours and cost, `compare` with
    --compare, `pretrain_command` when an option fits); pretrain_config: the recommended run as a PretrainConfig
    (None when nothing fits); exit_code: 0."""
    plan: dict
    pretrain_config: PretrainConfig | None = None
    exit_code: int = 0


def from_recipe(recipe, **values):
    """A PlanConfig of `recipe` (a name or a .json file, as pretrain's --recipe; None: none) with `values` over the
    recipe's values."""
    recipe_values = read_recipe(recipe) if recipe else {}
    return PlanConfig(**over_recipe({k: v for k, v in recipe_values.items() if k in PLAN_PRETRAIN_FIELDS}, values),
                      recipe=recipe)


__all__ = ["PlanConfig", "PlanResult", "from_recipe", "PLAN_PRETRAIN_FIELDS", "COMPARE_KEEPS", "check_split",
           "check_fraction", "plan_cores"]

"""Pretraining recipes: the paper's flag sets for `albert-tf pretrain`, so that nobody retypes them.

    albert-tf pretrain --recipe paper_v2 --config albert_base --train-data 'gs://b/records/train-*' \\
        --model-dir gs://b/models/albert_base --tpu NAME [any flag, which wins over the recipe]

A recipe is a set of pretrain flags. `paper_v2` is the paper's setup (Lan et al., 2020, §4.1, and the v2 release):
global batch 4096, LAMB learning rate 0.00176, 125,000 steps with 3,125 warm-up steps, sequences of 512 tokens with
20 masked positions, and no dropout (the v2 models; paper §4.7). `paper_v1` is the same with the config's dropout
(the v1 models). `--recipe FILE.json` reads your own: {"description": "...", "flags": {"learning-rate": 0.001, ...}}
with pretrain's flag names (without the leading dashes).

Flags given on the command line always win: `add_arguments` marks every default of the parser, so `apply_recipe`
can tell a default from a value the user typed (even one equal to the default).
"""
import argparse
import json
import os

RECIPES = {
    "paper_v2": {
        "description": "the ALBERT paper's pretraining (v2 models: no dropout)",
        "flags": {"train-batch-size": 4096, "learning-rate": 0.00176, "num-train-steps": 125000,
                  "num-warmup-steps": 3125, "max-seq-length": 512, "max-predictions": 20, "no-dropout": True},
    },
    "paper_v1": {
        "description": "the ALBERT paper's pretraining (v1 models: the config's dropout)",
        "flags": {"train-batch-size": 4096, "learning-rate": 0.00176, "num-train-steps": 125000,
                  "num-warmup-steps": 3125, "max-seq-length": 512, "max-predictions": 20},
    },
}


class _DefaultInt(int):
    pass


class _DefaultFloat(float):
    pass


class _DefaultStr(str):
    pass


_MARKERS = {int: _DefaultInt, float: _DefaultFloat, str: _DefaultStr}


def add_arguments(parser):
    """Adds `--recipe` and marks the parser's defaults (call it after the command's own flags)."""
    parser.add_argument("--recipe", default=None,
                        help=f"a flag set to start from: {', '.join(RECIPES)} or a recipe .json file; "
                             "flags given on the command line win")
    marked = {action.dest: _MARKERS[type(action.default)](action.default) for action in parser._actions
              if type(action.default) in _MARKERS and action.default != argparse.SUPPRESS}  # pylint: disable=W0212
    parser.set_defaults(**marked)


def load_recipe(recipe):
    """The flags of a recipe (a name in RECIPES or a path to a .json file) as {flag name: value}."""
    if recipe in RECIPES:
        return dict(RECIPES[recipe]["flags"])
    if not recipe.endswith(".json"):
        raise ValueError(f"--recipe {recipe!r}: unknown; expected one of {', '.join(RECIPES)} or a .json file")
    if not os.path.exists(recipe):
        raise FileNotFoundError(f"--recipe {recipe}: no such file")
    with open(recipe, encoding="utf-8") as f:
        try:
            values = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{recipe}: not valid JSON ({e})") from None
    if not isinstance(values, dict) or not isinstance(values.get("flags"), dict):
        raise ValueError(f"{recipe}: field 'flags': expected an object of pretrain flags, e.g. "
                         '{"flags": {"learning-rate": 0.00176}}')
    unknown = sorted(set(values) - {"description", "flags"})
    if unknown:
        raise ValueError(f"{recipe}: unknown field(s) {', '.join(unknown)}; expected 'description' and 'flags'")
    return dict(values["flags"])


def _given(value):
    """Whether a parsed value was typed by the user (not a marked default, not an unset None/False)."""
    return not (type(value) in _MARKERS.values() or value is None or value is False)


def _same_kind(value, current):
    """Whether a recipe value suits a flag whose current value is `current` (None: any value)."""
    if current is None:
        return True
    if isinstance(current, bool) or isinstance(value, bool):
        return isinstance(current, bool) and isinstance(value, bool)
    if isinstance(current, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(current).__mro__[1] if type(current) in _MARKERS.values() else type(current))


def apply_recipe(args, parser=None):
    """Fills the flags the user did not give from `args.recipe` (if any), then turns the marked defaults back into
    plain values. Returns {flag: value} of what the recipe set. `parser` is accepted for symmetry and unused."""
    del parser
    applied = {}
    source = getattr(args, "recipe", None)
    flags = load_recipe(source) if source else {}
    for flag, value in flags.items():
        dest = flag.lstrip("-").replace("-", "_")
        if not hasattr(args, dest):
            raise ValueError(f"--recipe {source}: flag '{flag}' is not a flag of this command")
        current = getattr(args, dest)
        if not _same_kind(value, current):
            raise ValueError(f"--recipe {source}: flag '{flag}': expected a value like {current!r}, got {value!r}")
        if not _given(current):
            setattr(args, dest, value)
            applied[flag] = value
    for dest, value in list(vars(args).items()):
        if type(value) in _MARKERS.values():
            setattr(args, dest, type(value).__mro__[1](value))
    return applied


def recipe_arguments(recipe):
    """A recipe as command-line words (["--train-batch-size", "4096", ..., "--no-dropout"]), e.g. for scripts."""
    words = []
    for flag, value in load_recipe(recipe).items():
        if value is True:
            words.append(f"--{flag}")
        elif value is not False:
            words += [f"--{flag}", str(value)]
    return words


def describe(recipe):
    """One line: the recipe's name and its flags."""
    return f"recipe {recipe}: {' '.join(recipe_arguments(recipe))}"


__all__ = ["RECIPES", "add_arguments", "apply_recipe", "load_recipe", "recipe_arguments", "describe"]

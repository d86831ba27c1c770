"""Typed run configs and the command line made from them: one definition per setting, so that `--help`, the CLI
and the Python API cannot drift. No TensorFlow here.

A run config is a dataclass whose fields are made with `option(...)`: each carries its type (the annotation), its
default and its help text, and optionally its flag's spelling, the old spellings that still work (with a one-line
notice on stderr), choices and whether a resumed run must keep it (`same_on_resume`).

    add_fields_as_arguments(parser, cls)   one flag per field: --field-name (or the field's own `flag`)
    config_from_args(cls, args, base)      the fields the user typed (argparse saw them) over `base` or defaults
    values_from_mapping(cls, mapping, where)   a JSON object of flag or field names → checked field values
    run_record / check_record / write_record   a config as a run record's JSON; a resumed run checked against it
    check_range / check_minimum              a range check of a config's constructor, one line naming the flag

A flag is "given" exactly when argparse saw it: every generated flag's parser default is argparse.SUPPRESS, so an
unset flag leaves no attribute, and a typed value equal to the default still wins over a recipe.
"""
import argparse
import dataclasses
import difflib
import json
import os
import sys
import types
import typing

from albert_tf import files, messages

MISSING = dataclasses.MISSING


class _Required:
    """The placeholder default of a required field, so that a config made without it reaches its own checks (a
    notebook's `PretrainConfig(batch_size=0)` is told about the batch size) before check_fields refuses it, one line
    naming the missing flags. False as a truth value; `default_of` gives MISSING for it."""

    def __bool__(self):
        return False

    def __repr__(self):
        return "<required>"


REQUIRED = _Required()


def option(default=MISSING, help="", *, default_factory=MISSING, flag=None,  # pylint: disable=redefined-builtin
           aliases=(), choices=None, metavar=None, negative=None, negative_help="", same_on_resume=False,
           hidden=False, parse=None):
    """A run-config field. `default` MISSING: required. `flag`: the flag's spelling (default --name-with-dashes);
    `aliases`: old spellings, accepted with a deprecation notice; `negative`: for an optional bool, the flag that
    sets it False (`--cased` / `--uncased`), with `negative_help`; `same_on_resume`: a resumed run must have the
    recorded value; `hidden`: a flag left out of --help; `parse`: for a field of two kinds (`int | str`, such as
    vocab --vocab-size 8000 | auto), the function that reads the flag's text (argparse.ArgumentTypeError on bad
    text) and checks a Python value given as text."""
    if default is MISSING and default_factory is MISSING:
        default = REQUIRED
    metadata = {"help": help, "flag": flag, "aliases": tuple(aliases), "choices": choices, "metavar": metavar,
                "negative": negative, "negative_help": negative_help, "same_on_resume": same_on_resume,
                "hidden": hidden, "parse": parse}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def fields_of(cls):
    """The fields of run config `cls` (a class or an instance) in flag order: its own, in declaration order, then
    those of the blocks it embeds (base classes marked `block = True`, such as settings.RuntimeOptions), so that
    `--help`, `to_argv` and the messages list a command's own settings first."""
    own, embedded = [], []
    blocks = [base for base in type.mro(cls if isinstance(cls, type) else type(cls))[1:]
              if dataclasses.is_dataclass(base) and base.__dict__.get("block")]
    block_fields = {f.name for base in blocks for f in dataclasses.fields(base)}
    for field in dataclasses.fields(cls):
        (embedded if field.name in block_fields else own).append(field)
    return own + embedded


def flag_of(field):
    """The field's flag: its own `flag` or --name-with-dashes."""
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def default_of(field):
    """The field's default value (MISSING for a required field)."""
    if field.default_factory is not MISSING:
        return field.default_factory()
    return MISSING if field.default is REQUIRED else field.default


def field_named(cls, name):
    """The field `name` of run config `cls` (a class or an instance)."""
    return next(f for f in fields_of(cls) if f.name == name)


def default_for(cls, name):
    """The default of the field `name` of run config `cls` (a class or an instance)."""
    return default_of(field_named(cls, name))


def flag_for(cls, name):
    """The flag of the field `name` of run config `cls` (a class or an instance): `batch_size` → --batch-size."""
    return flag_of(field_named(cls, name))


def check_range(config, names, ok, expected):
    """Refuses the first of the fields `names` of run config `config` whose value is set (None, an unset optional
    field, passes) and not `ok(value)`, with one line naming its flag: "--batch-size must be positive, got 0"
    (`expected`: how the line puts the range)."""
    for name in names:
        value = getattr(config, name)
        if value is not None and not ok(value):
            raise ValueError(f"{flag_for(config, name)} must be {expected}, got {value}")


def check_minimum(config, names, minimum, said):
    """check_range with the range "at least `minimum`", said as `said` ("positive", ">= 0", "at least 1")."""
    check_range(config, names, lambda value: value >= minimum, said)


POSITIVE = (lambda value: value > 0, "positive")  # check_range's (ok, expected) of a positive number
FRACTION = (lambda value: 0 <= value < 1, "in [0, 1)")  # ... of a fraction below 1 (a dropout, a warm-up share)


def base_type(cls, field):
    """(type, optional): the field's annotation without `| None` (a dict stays dict)."""
    annotation = typing.get_type_hints(cls)[field.name]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        return next(a for a in args if a is not type(None)), True
    return typing.get_origin(annotation) or annotation, False


def parse_key_value(text):
    """"KEY=VALUE" → (KEY, VALUE), VALUE read as JSON when it is (8000, 0.1, true) and as a string otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


class _UpdateDict(argparse.Action):
    """`--set KEY=VALUE`, repeatable: each adds KEY to the dict."""

    def __call__(self, parser, namespace, values, option_string=None):
        current = dict(getattr(namespace, self.dest, None) or {})
        key, value = values
        current[key] = value
        setattr(namespace, self.dest, current)


class _Once(argparse._StoreAction):  # pylint: disable=protected-access,too-few-public-methods
    """A flag's value, given once: a repeated flag (`--input a --input b`, where argparse would keep only the last)
    is refused with one line that names it."""

    def __call__(self, parser, namespace, values, option_string=None):
        if hasattr(namespace, self.dest):
            parser.error(f"{option_string} given more than once ({getattr(namespace, self.dest)!r}, then "
                         f"{values!r}); give it once")
        setattr(namespace, self.dest, values)


def _deprecated(action_class, new_flag):
    """`action_class` that first prints one line on stderr: the old spelling works, the new one is `new_flag`."""

    class Deprecated(action_class):  # pylint: disable=too-few-public-methods
        def __call__(self, parser, namespace, values, option_string=None):
            print(f"{parser.prog}: note: {option_string} is deprecated and will be removed in the next release; "
                  f"use {new_flag}", file=sys.stderr, flush=True)
            super().__call__(parser, namespace, values, option_string)

    return Deprecated


def _help_text(field, default):
    """The help with the default appended once (none for a required or hidden flag)."""
    text = field.metadata["help"]
    if field.metadata["hidden"]:
        return argparse.SUPPRESS
    if default is MISSING or "default" in text.lower():
        return text
    shown = "none" if default in (None, {}) else default
    return f"{text} (default: {shown})"


def _argument_kwargs(cls, field):
    """add_argument's keyword arguments for `field` (its parser default is SUPPRESS: unset leaves no attribute)."""
    kind, _ = base_type(cls, field)
    default = default_of(field)
    kwargs = {"dest": field.name, "default": argparse.SUPPRESS, "help": _help_text(field, default)}
    if field.metadata.get("parse"):
        kind = field.metadata["parse"]
    if default is MISSING:
        kwargs["required"] = True
    if kind is bool:
        kwargs["action"] = "store_true"
    elif kind is list:  # repeatable: each use adds one word
        kwargs.update(action="append", metavar=field.metadata["metavar"])
    elif kind is dict:
        kwargs.update(action=_UpdateDict, type=parse_key_value, metavar=field.metadata["metavar"] or "KEY=VALUE")
    else:
        kwargs.update(action=_Once, type=kind, choices=field.metadata["choices"], metavar=field.metadata["metavar"])
    return kwargs


def add_fields_as_arguments(parser, cls, required=True):
    """Adds one flag per field of the dataclass `cls` to `parser`, plus each field's deprecated aliases (hidden).
    `required` False: no flag is required (a parser of some of the flags, whose config is completed elsewhere)."""
    for field in fields_of(cls):
        kwargs = _argument_kwargs(cls, field)
        if not required:
            kwargs.pop("required", None)
        target = parser
        if field.metadata["negative"]:
            target = parser.add_mutually_exclusive_group()
        elif kwargs.get("required") and field.metadata["aliases"]:  # the flag or an old spelling of it
            target = parser.add_mutually_exclusive_group(required=True)
            kwargs["required"] = False
        action = target.add_argument(flag_of(field), **kwargs)
        if field.metadata["negative"]:
            target.add_argument(field.metadata["negative"], dest=field.name, action="store_false",
                                default=argparse.SUPPRESS, help=field.metadata["negative_help"])
        for alias in field.metadata["aliases"]:
            add_alias(target, action, alias)


def add_alias(parser, action, alias):
    """Adds `alias`, an old spelling of the flag of `action` (what add_argument returned): hidden from --help,
    storing into the same place, after a one-line notice on stderr that names the new spelling."""
    kwargs = {"dest": action.dest, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS,
              "action": _deprecated(type(action), action.option_strings[0])}
    if not isinstance(action, argparse._StoreConstAction):  # pylint: disable=protected-access  (store_true: no value)
        kwargs.update(type=action.type, choices=action.choices, metavar=action.metavar, nargs=action.nargs)
    parser.add_argument(alias, **kwargs)


def _argv_words(field, value):
    """The words that set `field` to `value` on the command line."""
    flag = flag_of(field)
    if isinstance(value, bool):
        return [flag] if value else ([field.metadata["negative"]] if field.metadata["negative"] else [])
    if isinstance(value, (list, tuple)):  # a repeatable flag: once per item
        return [w for item in value for w in _flag_value(flag, item)]
    if isinstance(value, dict):
        return [w for key, item in value.items()
                for w in ("--set" if flag == "--set" else flag,
                          f"{key}={item if isinstance(item, str) else json.dumps(item)}")]
    return _flag_value(flag, value)


def argv_of(cls, values):
    """The command-line words that set {field: value} of run config class `cls` (in the mapping's order)."""
    fields = {f.name: f for f in fields_of(cls)}
    return [word for name, value in values.items() for word in _argv_words(fields[name], value)]


def _flag_value(flag, value):
    """[flag, value], or [flag=value] for a value that starts with '-' (argparse would read it as a flag)."""
    return [f"{flag}={value}"] if str(value).startswith("-") else [flag, str(value)]


def to_argv(config, base=None, last=()):
    """The command-line words of `config` (a run config), the inverse of parsing: every field whose value differs
    from `base` ({field: value}; default: the fields' defaults), in field order, the fields named in `last` at the
    end (in that order). A field set back to None where its base is not None cannot be said on the command line:
    ValueError names it."""
    fields = {f.name: f for f in fields_of(config)}
    words = []
    for field in [f for f in fields.values() if f.name not in last] + [fields[name] for name in last]:
        value = getattr(config, field.name)
        default = default_of(field)
        before = (base or {}).get(field.name, None if default is MISSING else default)
        if field.name in (base or {}) or default is not MISSING:
            if value == before:
                continue
        if value is None:
            raise ValueError(f"{type(config).__name__}.{field.name}: None cannot be given as a flag "
                             f"(it is {before!r} before the flags)")
        if isinstance(value, bool) and not value and not field.metadata["negative"]:
            raise ValueError(f"{type(config).__name__}.{field.name}: False cannot be given as a flag")
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if (before or {}).get(k, object()) != v}
        words += _argv_words(field, value)
    return words


def given(cls, args):
    """{field: value} of the fields the user typed (argparse set them: their parser default is SUPPRESS)."""
    names = {f.name for f in fields_of(cls)}
    return {k: v for k, v in vars(args).items() if k in names}


def config_from_args(cls, args, base=None):
    """The run config: `base` (a dict of field values: a preset or file's), then what the user typed."""
    return cls(**{**(base or {}), **given(cls, args)})


_KINDS = {bool: ("true or false", lambda v: isinstance(v, bool)),
          int: ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
          float: ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
          str: ("a string", lambda v: isinstance(v, str)),
          dict: ("an object of KEY: VALUE", lambda v: isinstance(v, dict)),
          list: ("a list of strings", lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v))}


def _check_value(cls, field, value, where, name):
    """`value` checked against the field: its type (None where the field is optional; an int where a float is
    wanted; a path where a string is), its choices. Returns it as the field holds it."""
    kind, optional = base_type(cls, field)
    if value is None and (optional or field.default is None):
        return value
    if field.metadata.get("parse"):
        try:
            return field.metadata["parse"](value if isinstance(value, str) else str(value))
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"{where}: {name}: {e}") from None
    if kind is str and isinstance(value, os.PathLike):
        value = os.fspath(value)
    expected, ok = _KINDS[kind]
    choices = field.metadata["choices"]
    if choices:
        expected = f"one of {', '.join(map(str, choices))}"
    if not ok(value) or (choices and value not in choices):
        raise ValueError(f"{where}: {name}: expected {expected}, got {value!r}")
    if kind is list:
        return list(value)
    return float(value) if kind is float else value


def check_fields(config, check=None):
    """Checks every field of a run config (a dataclass of `option`s) against its type and choices, as the CLI's
    parser would: a notebook's `batch_size="32"` is refused with one line. Paths become strings. Then `check`, the
    config's own ranges and combinations (called with the config; each refusal one line naming the flag), then that
    every required field was given. A config's `__post_init__` calls it."""
    cls = type(config)
    for field in fields_of(cls):
        value = getattr(config, field.name)
        if value is not REQUIRED:
            setattr(config, field.name, _check_value(cls, field, value, cls.__name__, field.name))
    if check is not None:
        check(config)
    missing = [f for f in fields_of(cls) if getattr(config, f.name) is REQUIRED]
    if missing:
        raise ValueError(f"{cls.__name__}: {', '.join(f.name for f in missing)} required (the command line's "
                         f"{', '.join(flag_of(f) for f in missing)})")


def values_from_mapping(cls, mapping, where):
    """A JSON object of settings (flag names without dashes, `learning-rate`, or field names, `learning_rate`; a
    deprecated spelling with its notice) → {field: value}, each checked against its field. An unknown name is refused
    with one line naming it and `where` (the file)."""
    by_name = {}
    for field in fields_of(cls):
        by_name[field.name] = (field, None)
        by_name[flag_of(field).lstrip("-").replace("-", "_")] = (field, None)
        for alias in field.metadata["aliases"]:
            by_name[alias.lstrip("-").replace("-", "_")] = (field, alias)
    values = {}
    for key, value in mapping.items():
        field, alias = by_name.get(str(key).lstrip("-").replace("-", "_"), (None, None))
        if field is None:
            raise ValueError(f"{where}: unknown setting {key!r}; expected one of "
                             f"{', '.join(flag_of(f).lstrip('-') for f in fields_of(cls))}")
        if alias:
            messages.say("note", f"{where}: {key!r} is deprecated and will be removed in the next release; use "
                                 f"{flag_of(field).lstrip('-')!r}")
        values[field.name] = _check_value(cls, field, value, where, repr(key))
    return values


# ---------------------------------------------------------------------------------------------- the run record
# A training run's output directory holds its run record (layout: ModelDir.run_record, FinetuneDir.run_record): the
# config's fields, the sections decided from them (fine-tuning's budget) and the compute dtype chosen. Pretraining and
# fine-tuning both read, check and write it here, with these signatures.
_UNREAD = object()


def run_record(config, **sections):
    """The run record of `config` (a run config: PretrainConfig, FinetuneConfig): its fields as a JSON-ready dict,
    and `sections`, each a dict of values decided from them (the fine-tuning budget: `budget=...`)."""
    return {**dataclasses.asdict(config), **sections}


def resume_names(config, **sections):
    """The fields of a run record that a resumed run must keep: the config's `same_on_resume` fields and every key
    of each section ("budget.epochs": check_record compares those of "budget" key by key)."""
    return same_on_resume(type(config)) + [f"{name}.{key}" for name, values in sections.items() for key in values]


def _flat(values, prefix=""):
    """{"a": 1, "budget": {"b": 2}} → {"a": 1, "budget.b": 2}."""
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict) and key == "budget":
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def read_record(path):
    """The run record at `path` (a dict), or None when there is none yet."""
    if not files.exists(path):
        return None
    try:
        return json.loads(files.read_text(path))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e}); delete it or use a new output directory") from None


def differing(recorded, current, names):
    """[(name, current value, recorded value)] of the `names` (resume_names' form) whose values in `current`
    (run_record, compared as it would read back from JSON) differ from those of the run record `recorded`; a name
    one of them lacks is not compared."""
    flat, now = _flat(recorded), _flat(json.loads(json.dumps(current)))
    return [(n, now[n], flat[n]) for n in names if n in flat and n in now and flat[n] != now[n]]


def check_record(path, current, names, flag, recorded=_UNREAD):
    """Refuses a run whose values `current` (run_record) differ from the run record at `path` (read here unless
    given as `recorded`; None: no record yet, a new run). `names`: what must agree (resume_names; "budget.x": the key
    x of the record's "budget" object). One line for both jobs, each differing field with both values:

        PATH: the output directory holds a run with other settings: batch_size 8 (recorded 16); use a new FLAG or
        the same settings

    Returns the record (None for a new run)."""
    if recorded is _UNREAD:
        recorded = read_record(path)
    if recorded is None:
        return None
    diff = differing(recorded, current, names)
    if diff:
        said = ", ".join(f"{n} {now!r} (recorded {then!r})" for n, now, then in diff)
        raise ValueError(f"{path}: the output directory holds a run with other settings: {said}; use a new {flag} "
                         "or the same settings")
    return recorded


def write_record(path, current, dtype_choice=None):
    """Writes the run record `current` (run_record) to `path` atomically, with `dtype_choice`
    (albert_tf.runtime.precision.DtypeChoice: the compute dtype and why), unless a record is there already."""
    if not files.exists(path):
        values = {**current, "dtype_choice": dtype_choice and dtype_choice.to_record()}
        files.atomic_write_text(path, json.dumps(values, indent=2, sort_keys=True) + "\n")


def add_to_record(path, **values):
    """Sets `values` (keys of the run record at `path`, e.g. fine-tuning's collapse finding) in place, atomically;
    nothing without a record or when they are there already."""
    recorded = read_record(path)
    if recorded is not None and any(recorded.get(k) != v for k, v in values.items()):
        files.atomic_write_text(path, json.dumps({**recorded, **values}, indent=2, sort_keys=True) + "\n")


def same_on_resume(cls):
    """The fields a resumed run must keep (`same_on_resume`)."""
    return [f.name for f in fields_of(cls) if f.metadata.get("same_on_resume")]


def did_you_mean(words, flags):
    """"; did you mean --x?" for the first of `words` that is a flag (--name or --name=value) close to one of
    `flags` (difflib's closest, cutoff 0.6), else "": what a parser's "unrecognized arguments" line ends with."""
    for word in words:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=", 1)[0], flags, n=1, cutoff=0.6)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


__all__ = ["did_you_mean", "option", "to_argv", "add_fields_as_arguments", "add_alias", "config_from_args", "given",
           "values_from_mapping", "check_fields", "run_record", "resume_names", "read_record", "write_record",
           "check_record", "differing", "add_to_record", "same_on_resume", "flag_of", "flag_for", "field_named",
           "default_of", "default_for", "check_minimum", "check_range", "POSITIVE", "FRACTION", "parse_key_value",
           "fields_of", "REQUIRED"]

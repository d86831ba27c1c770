"""A default of a config field is written once: in albert_tf/settings/ (the field's own definition, or the one
constant it names, such as settings/defaults.py's PAPER or SEED), never again elsewhere in albert_tf/.

For every field of every config and result class in albert_tf.settings whose default is distinctive (a string, a
float or an int other than None, a bool, 0, 1, "" or 0.0/1.0), the source of albert_tf/ is read with `ast` (nothing
is imported from it but the settings) for the same literal under the field's name:

    a keyword argument      Settings(poll=300.0), f(max_predictions=20)
    a dict value            {"batch_size": 4096}, {"batch-size": 4096}
    an assignment           max_restarts: int = 10 (also `= option(10, ...)`), PAPER_BATCH_SIZE = 4096
    a parameter default     def f(seed=12345)

Inside albert_tf/settings/ one writing of each is the home; two (e.g. two configs' `seed = option(12345, ...)`)
fail. Outside, every one fails, unless ALLOWED says why it is another thing of the same name and value.
"""
import ast
import dataclasses
import functools
import importlib
import inspect
import os
import pkgutil

import albert_tf.settings
from tests import helpers

PACKAGE = os.path.join(helpers.REPO, "albert_tf")
SETTINGS = os.path.join("albert_tf", "settings")

# (path, field, value): why the same name with the same value there is not the setting's default written again.
ALLOWED = {
    ("albert_tf/config.py", "vocab_size", 30000):
        "AlbertConfig's own default (the released albert_config.json's), a model key, not vocab's --vocab-size",
    ("albert_tf/tasks/race/data.py", "max_seq_length", 512):
        "RACE's sequence length (the original run_race.py's), not pretraining's --max-seq-length",
    ("albert_tf/jobs/quickstart.py", "optimizer", "adamw-keras"):
        "quickstart pins the optimizer its learning rate was tuned with: it must not follow finetune's default",
    ("albert_tf/checkpoints/to_keras_hub.py", "dtype", "float32"): "a Keras model's dtype, not export's --dtype",
    ("albert_tf/training/lamb.py", "dtype", "float32"): "a slot variable's dtype, not export's --dtype",
    ("albert_tf/training/finetuning.py", "dtype", "float32"):
        "fine-tuning's resolved compute dtype (a precision choice), not export's --dtype",
    ("albert_tf/training/costs.py", "dtype", "float32"):
        "the compute dtype of a cost estimate given none (plan passes its --dtype), not export's --dtype",
}

def _distinctive(value):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return False
    return value not in ("", 0, 1)


def _key(name, value):
    """300 and 300.0 are two defaults (Python's == would make them one)."""
    return name, type(value).__name__, value


def setting_defaults():
    """{(field name, type, default): the config classes declaring it} for every distinctive default in settings/."""
    found = {}
    for info in pkgutil.iter_modules(albert_tf.settings.__path__):
        module = importlib.import_module(f"albert_tf.settings.{info.name}")
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__:
                for field in dataclasses.fields(cls):
                    if _distinctive(field.default):
                        found.setdefault(_key(field.name, field.default), set()).add(f"{info.name}.{name}")
    return found


def _constant(node):
    """The literal `node` is (the first argument of a call such as option(10, ...) counts), or None."""
    if isinstance(node, ast.Call) and node.args:
        node = node.args[0]
    if isinstance(node, ast.Constant) and _distinctive(node.value):
        return node.value
    return None


def _keyed_values(tree):
    """(line, name, literal) of every literal written under a name: keywords, dict entries, assignments (a
    CONSTANT_NAME ending in a field's name counts under the field's), parameter defaults."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg:
            yield node.value.lineno, node.arg, _constant(node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield value.lineno, key.value.replace("-", "_"), _constant(value)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                name = getattr(target, "id", None) or getattr(target, "attr", None)
                if name:
                    yield node.lineno, name, _constant(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            for arg, value in pairs:
                yield value.lineno, arg.arg, _constant(value)


def _field_of(name, fields):
    """The field `name` stands for: itself, or the field a CONSTANT_NAME ends with (PAPER_BATCH_SIZE)."""
    if name in fields:
        return name
    if name.isupper():
        return next((f for f in fields if name == f.upper() or name.endswith("_" + f.upper())), None)
    return None


def _matches(tree, wanted):
    """(line, field, value) of every setting default in `tree` (parsed source) written under the field's name."""
    fields = {name for name, _, _ in wanted}
    for line, name, value in _keyed_values(tree):
        field = _field_of(name, fields)
        if value is not None and field and _key(field, value) in wanted:
            yield line, field, value


def writings():
    """{(field, default): [(path, line)]}: every place in albert_tf/ a setting's default is written."""
    wanted = setting_defaults()
    found = {}
    for root, _, names in os.walk(PACKAGE):
        for file_name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(root, file_name)
            relative = os.path.relpath(path, helpers.REPO).replace(os.sep, "/")
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for line, field, value in _matches(tree, wanted):
                found.setdefault((field, value), []).append((relative, line))
    return found


@functools.lru_cache(maxsize=None)
def _second_writings():
    """[(path, line, field, value)] of every writing beyond the home: a second one in settings/, any outside."""
    extra = []
    for (field, value), places in writings().items():
        inside = [p for p in places if p[0].startswith(SETTINGS.replace(os.sep, "/") + "/")]
        outside = [p for p in places if p not in inside]
        extra += [(path, line, field, value) for path, line in inside[1:] + outside]
    return tuple(extra)


def _unexpected(extra):
    return [e for e in extra if (e[0], e[2], e[3]) not in ALLOWED]


def test_every_setting_default_is_written_once():
    extra = _unexpected(_second_writings())
    assert not extra, "a setting's default written again (use the setting's, or say why in ALLOWED):\n" + "\n".join(
        f"  {path}:{line}: {field}={value!r}" for path, line, field, value in extra)


def test_the_scan_finds_a_re_typed_default():
    """The scan itself: a keyword, a dict value, an annotated field, a constant and a parameter default of a
    setting's default are each found; another value under the same name (61.0, 300 for 300.0) is not."""
    source = ("Settings(poll=300.0, wait=61.0)\nPOD = {'batch-size': 4096}\nclass S:\n    max_restarts: int = 10\n"
              "PAPER_LEARNING_RATE = 0.00176\ndef f(seed=12345, poll=300):\n    pass\n")
    assert sorted(_matches(ast.parse(source), setting_defaults())) == [
        (1, "poll", 300.0), (2, "batch_size", 4096), (4, "max_restarts", 10), (5, "learning_rate", 0.00176),
        (6, "seed", 12345)]


def test_allowed_and_known_entries_still_match_a_place():
    """An entry whose place no longer writes the value is stale: remove it."""
    extra = _second_writings()
    places = {(e[0], e[2], e[3]) for e in extra}
    assert not set(ALLOWED) - places, f"stale ALLOWED entries: {sorted(set(ALLOWED) - places)}"

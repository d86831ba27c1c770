"""The package's layers: imports run down, and function-level (lazy) imports stay few. Reads the source with `ast`
(nothing is imported), so it runs in a second without TensorFlow.

The layers, top to bottom (a package may import only from layers below its own, never sideways):

    __main__                               `python -m albert_tf`
    cli, albert_tf/__init__.py             the entry points: the command line and the public API
    jobs                                   one module per command
    training, cloud                        the pretraining and fine-tuning drivers and their library; the pod keeper
    tasks, checkpoints                     GLUE / SQuAD / RACE; pretrained-model directories, loading any handle
                                           (an export included), conversion, releases
    serving, data                          SavedModel writing and reading, signatures; records and tf.data
    modeling                               the Keras layers and models
    settings                               every job's XConfig and XResult, checked when made (read by all above)
    text                                   normalization, SentencePiece, in-graph tokenization, vocabulary files
    runtime, config, run_config            the process around a job; AlbertConfig; option() fields → flags
    files, layout, messages                local / gs:// file access; run-directory names; the message prefix

checkpoints sits above serving because it loads encoders from exports (`load_encoder`), which serving writes; the
export driver (serving/encoder_export.py) reads a model dir's config through `albert_tf.config`. The one upward arrow
allowed is modeling → checkpoints: `from_pretrained` / `save_pretrained` (modeling/base.py, modeling/task_model.py),
through checkpoints.handles and checkpoints.pretrained, which import no modeling code. Reading the package
root's `__version__` is no arrow (Python runs albert_tf/__init__.py before any of its modules).

Lazy imports (inside functions) exist where a light path must not import TensorFlow (`albert-tf COMMAND --help`,
`albert-tf plan`, `import albert_tf`, the task readers, create-data's workers), for optional dependencies, and in
the job modules, which import their TensorFlow driver when called. Modules only ever imported with TensorFlow
import it, and the package, at their top.
"""
import ast
import os

from tests import helpers

PACKAGE = "albert_tf"
LAYERS = (
    ("__main__",),
    ("cli", "__init__"),
    ("jobs",),
    ("training", "cloud"),
    ("tasks", "checkpoints"),
    ("serving", "data"),
    ("modeling",),
    ("settings",),
    ("text",),
    ("runtime", "config", "run_config"),
    ("files", "layout", "messages"),
)
ALLOWED_UPWARD = {("modeling", "checkpoints")}
MAX_LAZY_IMPORTS = 59  # the layout issue's bound: under 60


def _modules():
    """{dotted module name: path} of every module of the package."""
    root = os.path.join(helpers.REPO, PACKAGE)
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                dotted = os.path.relpath(path[:-3], helpers.REPO).replace(os.sep, ".")
                found[dotted[: -len(".__init__")] if dotted.endswith(".__init__") else dotted] = path
    return found


def _unit(module):
    """The package (or top-level module) of albert_tf that `module` belongs to: albert_tf.data.dataset → data."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(modules, module, path):
    """(imported module of the package, line, inside a function) for each import in `module`; `from albert_tf
    import __version__` names the package root."""
    package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, True)
                continue
            targets = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - child.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in child.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target:
                    found.append((target, child.lineno, in_function))
            visit(child, in_function)

    with open(path, encoding="utf-8") as f:
        visit(ast.parse(f.read()), False)
    return found


def test_every_package_has_a_layer():
    placed = {unit for layer in LAYERS for unit in layer}
    missing = sorted({_unit(m) for m in _modules()} - placed)
    assert not missing, f"place {missing} in LAYERS (tests/test_layering.py) and in the docstring's order"


def test_imports_run_down_the_layers():
    level = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
    modules = _modules()
    wrong = []
    for module, path in sorted(modules.items()):
        source = _unit(module)
        for target, line, _ in _imports(modules, module, path):
            into = _unit(target)
            if into == source or target == PACKAGE or (source, into) in ALLOWED_UPWARD:
                continue
            if level.get(into, -1) <= level.get(source, -1):
                direction = "sideways" if level.get(into) == level.get(source) else "upward"
                wrong.append(f"{os.path.relpath(path, helpers.REPO)}:{line}: {source} → {into} ({direction}: "
                             f"imports {target})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_root_is_imported_only_for_its_version():
    modules = _modules()
    readers = []
    for module, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == PACKAGE and not node.level:
                readers += [f"{module}: {a.name}" for a in node.names
                            if f"{PACKAGE}.{a.name}" not in modules and a.name != "__version__"]
    assert not readers, f"names read from the package root besides __version__: {readers}"


def test_few_lazy_imports():
    """Import statements inside functions (TensorFlow, optional packages, the package's own modules), counted as
    `grep -rc import-outside-toplevel albert_tf` counts them when each carries its pylint pragma."""
    modules = _modules()
    count = _count_function_level_imports(modules.values())
    own = sorted(f"{os.path.relpath(path, helpers.REPO)}:{line} {target}" for module, path in modules.items()
                 for target, line, in_function in _imports(modules, module, path) if in_function)
    assert count <= MAX_LAZY_IMPORTS, (
        f"{count} imports inside functions (at most {MAX_LAZY_IMPORTS}): a module that only runs with TensorFlow "
        "imports it, and the package, at its top. Those of the package's own modules:\n" + "\n".join(own))


def _count_function_level_imports(paths):
    """Import statements (of anything) inside a function or method, nested ones included, over `paths`."""
    count = 0

    def visit(node, in_function):
        nonlocal count
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                count += 1
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    for path in paths:
        with open(path, encoding="utf-8") as f:
            visit(ast.parse(f.read()), False)
    return count


def test_run_configs_and_results_live_in_settings():
    """Every job's config and result class is defined in albert_tf/settings/ (below training/, data/, tasks/ and
    cloud/, which take them), never in jobs/: jobs/ holds the calls, the CLI extras and the registry."""
    from albert_tf import jobs  # pylint: disable=import-outside-toplevel

    names = {name for job in jobs.JOBS for name in (job.config, job.result)}
    defined = []
    for module, path in _modules().items():
        if _unit(module) != "jobs":
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and (node.name in names or node.name.endswith(("Config", "Result"))):
                defined.append(f"{path}:{node.lineno} class {node.name}")
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.endswith(("Config", "Result"))
                                                    for t in node.targets):
                defined.append(f"{path}:{node.lineno} {ast.unparse(node.targets[0])} = ...")
    assert not defined, "a run config or result defined in jobs/ (move it to albert_tf/settings/): " + "; ".join(defined)
    for job in jobs.JOBS:
        assert job.config_class().__module__.startswith("albert_tf.settings."), job.name


"""No two modules of albert_tf import each other, directly or through a chain, lazy imports inside functions
included. Reads the source with `ast` (nothing is imported), so it runs in a second without TensorFlow."""
import ast
import os

from helpers import REPO


def module_imports(package_dir):
    """{module name: set of module names of the same package it imports} for every .py file under package_dir.

    Every `import` and `from ... import` statement counts, wherever it stands (module level, function bodies,
    `if TYPE_CHECKING` blocks); relative imports are resolved; `from pkg import name` counts `pkg` and, when
    `pkg.name` is a module, `pkg.name`. A module's own ancestor packages are left out: Python imports them before
    the module in any case, so importing one cannot close a cycle of its own."""
    root = os.path.dirname(os.path.abspath(package_dir))
    modules = {}
    for folder, _, files in os.walk(package_dir):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                modules[dotted.removesuffix(".__init__")] = path
    graph = {}
    for module, path in modules.items():
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets.add(base)
                targets.update(f"{base}.{alias.name}" for alias in node.names)
        graph[module] = {t for t in targets if t in modules and t != module and not module.startswith(t + ".")}
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each a sorted list; sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _write_package(base, files):
    for relative, text in files.items():
        path = os.path.join(base, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def test_the_check_finds_a_lazy_cycle_through_a_chain_and_a_relative_import(tmp_path):
    _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def f():\n    from .sub import c  # lazy\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "import pkg.a\n",
        "pkg/d.py": "import os\nfrom pkg import a\n",   # imports into the cycle, is not part of it
    })
    graph = module_imports(str(tmp_path / "pkg"))
    assert graph["pkg.b"] == {"pkg.sub", "pkg.sub.c"}
    assert graph["pkg.d"] == {"pkg.a"}            # its parent package `pkg` is not an edge
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


def test_the_check_accepts_a_package_without_cycles(tmp_path):
    _write_package(tmp_path, {"pkg/__init__.py": "def f():\n    from pkg.a import x\n",  # a package's lazy re-export
                              "pkg/a.py": "from pkg import b\nx = 1\n", "pkg/b.py": "from . import c\n",
                              "pkg/c.py": ""})
    assert cycles(module_imports(str(tmp_path / "pkg"))) == []


def test_albert_tf_has_no_import_cycle():
    found = cycles(module_imports(os.path.join(REPO, "albert_tf")))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)

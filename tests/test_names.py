"""One meaning per name. Every job's config (albert_tf/settings/): a setting that two commands share has one flag,
one type and one help text; the old spellings are aliases only; the casing option is the one declared in
albert_tf.settings.casing. Every exit code a job returns is in the one table (albert_tf.runtime.exit_codes). A
function name that stands for one thing (the run record's `read_record` / `write_record`) has one signature in
albert_tf/: two modules defining it differently are two things under one name. (A setting's default written twice:
tests/test_defaults.py; backslash continuations: tests/test_source_style.py.) Exit codes are defined in that table only."""
import ast
import dataclasses
import os
import re
import signal

import pytest

from albert_tf import jobs, run_config
from albert_tf.runtime import exit_codes
from albert_tf.settings import casing
from tests import helpers

CONFIGS = {job.name: job.config_class() for job in jobs.JOBS}
# Spellings of a concept that have a canonical flag elsewhere: never a field's own flag.
OLD_SPELLINGS = {"--train-batch-size": "--batch-size", "--seq-length": "--max-seq-length", "--steps":
                 "--num-train-steps", "--init-checkpoint": "--init", "--model": "--init", "--output-dir": "--output",
                 "--dev-data": "--eval-data", "--lowercase": "--uncased", "--do-lower-case": "--uncased"}


def _fields():
    """(command, field) of every field of every job's config."""
    return [(name, field) for name, cls in CONFIGS.items() for field in dataclasses.fields(cls)]


def test_a_shared_setting_has_one_flag_and_one_type():
    """(A setting may be required in one command and optional in another: the type compared is without None.)"""
    by_name = {}
    for command, field in _fields():
        by_name.setdefault(field.name, []).append((command, field))
    for name, uses in by_name.items():
        if len(uses) < 2:
            continue
        spellings = {run_config.flag_of(f) for _, f in uses}
        assert len(spellings) == 1, f"{name}: flags {spellings} in {[c for c, _ in uses]}"
        kinds = {run_config.base_type(CONFIGS[c], f)[0] for c, f in uses}
        assert len(kinds) == 1, f"{name}: types {kinds} in {[c for c, _ in uses]}"


def test_no_field_is_spelled_the_old_way():
    for command, field in _fields():
        flag = run_config.flag_of(field)
        assert flag not in OLD_SPELLINGS, f"{command} {flag}: spelled {OLD_SPELLINGS[flag]} everywhere else"
        for alias in field.metadata["aliases"]:
            assert OLD_SPELLINGS.get(alias, flag) == flag, f"{command} {alias} is an alias of {flag}"


@pytest.mark.parametrize("command", sorted(name for name, cls in CONFIGS.items()
                                           if "cased" in {f.name for f in dataclasses.fields(cls)}))
def test_the_casing_option_is_the_one_declared_in_settings(command):
    field = next(f for f in dataclasses.fields(CONFIGS[command]) if f.name == "cased")
    expected = casing.cased_option(new_vocabulary=command == "vocab")  # vocab makes the record the others read
    assert dict(field.metadata) == dict(expected.metadata) and field.default is expected.default is None


def test_every_command_reading_text_takes_the_casing_option():
    readers = {"vocab", "create-data", "finetune", "export", "convert"}
    assert {name for name, cls in CONFIGS.items() if "cased" in {f.name for f in dataclasses.fields(cls)}} >= readers


def test_exit_codes_are_the_tables():
    table = {v for k, v in vars(exit_codes).items() if k.isupper() and isinstance(v, int)}
    assert table == {0, 1, 2, 3, 4, 69, 74, 75, 76, 77, 78, 130, 143}
    assert exit_codes.TERMINATED == 128 + signal.SIGTERM  # the shell's code for a process SIGTERM ended
    documented = exit_codes.__doc__
    for code in table:
        assert f"\n    {code} " in documented, f"exit {code} is not in the table of runtime/exit_codes.py"


# Function names that stand for one thing each, wherever they are defined.
ONE_MEANING = ("read_record", "write_record")


def top_level_signatures(names, package=os.path.join(helpers.REPO, "albert_tf")):
    """{name: {signature: [modules]}} of the module-level functions called `names` in `package` (read with ast)."""
    found = {}
    for root, _, files in os.walk(package):
        for file_name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(root, file_name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            module = os.path.relpath(path, os.path.dirname(package)).replace(os.sep, "/")
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
                    found.setdefault(node.name, {}).setdefault(ast.unparse(node.args), []).append(module)
    return found


def test_a_function_name_has_one_signature():
    for name, signatures in top_level_signatures(ONE_MEANING).items():
        assert len(signatures) == 1, f"{name} is defined with {len(signatures)} signatures: {signatures}"


def test_two_signatures_under_one_name_are_found(tmp_path):
    """The check itself, on a package of two modules: the same name with two signatures (a nested function is not
    a module's)."""
    (tmp_path / "albert_tf").mkdir()
    (tmp_path / "albert_tf" / "a.py").write_text("def write_record(path, values):\n    pass\n")
    (tmp_path / "albert_tf" / "b.py").write_text("def write_record(path, current, extra=None):\n    pass\n"
                                                 "def helper():\n    def write_record(x):\n        pass\n")
    assert top_level_signatures(ONE_MEANING, str(tmp_path / "albert_tf")) == {"write_record": {"path, values": ["albert_tf/a.py"],
                                                                  "path, current, extra=None": ["albert_tf/b.py"]}}


def _module_constants():
    """(path, line, name, value node) of every assignment to an UPPER_CASE name at a module's or a class's top level
    in albert_tf/."""
    found = []
    for directory, _, names in os.walk(os.path.join(helpers.REPO, "albert_tf")):
        for file_name in (n for n in names if n.endswith(".py")):
            path = os.path.join(directory, file_name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            bodies = [tree.body] + [node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
            for statement in (s for body in bodies for s in body):
                targets = statement.targets if isinstance(statement, ast.Assign) else (
                    [statement.target] if isinstance(statement, ast.AnnAssign) and statement.value else [])
                for target in (t for t in targets if isinstance(t, ast.Name) and t.id.isupper()):
                    found.append((os.path.relpath(path, helpers.REPO), statement.lineno, target.id, statement.value))
    return found


def test_exit_codes_are_defined_once():
    """An exit code has one home, albert_tf/runtime/exit_codes.py: no other module gives one of its names a value
    (a second meaning, as the keeper's STOPPED = 1 was, or a copy), and no module defines an int constant named as an
    exit code is (..._CODE, EXIT_...)."""
    table = {k for k, v in vars(exit_codes).items() if k.isupper() and isinstance(v, int)}
    home = os.path.join("albert_tf", "runtime", "exit_codes.py")
    wrong = []
    for path, line, name, value in _module_constants():
        if path == home:
            continue
        is_int = isinstance(value, ast.Constant) and type(value.value) is int  # pylint: disable=unidiomatic-typecheck
        if name in table or (is_int and re.search(r"(^|_)(EXIT|CODE|CODES)(_|$)", name)):
            wrong.append(f"{path}:{line} {name} = {ast.unparse(value)}")
    assert not wrong, "exit codes defined outside albert_tf/runtime/exit_codes.py: " + "; ".join(wrong)

"""The settings of `finetune`, `export` and `convert`, checked when they are made: every invalid range or combination
is refused by the config's constructor with one line naming the flag, and the command line prints the same line
(exit 2, nothing written). The task registry: one row per task, read by every list of tasks (the flag's choices, the
paper's defaults, the adapters, GLUE's layouts). Each decision made once: the fine-tuning budget (held by the task)
and export's handle."""
import ast
import os

import pytest

import finetune_helpers as fh
import helpers
import albert_tf
from albert_tf import run_config
from albert_tf.settings import ConvertConfig, ExportConfig, FinetuneConfig
from albert_tf.settings import finetune_config, task_registry
from albert_tf.settings.task_registry import REGISTRY, GlueTask, Hyperparameters, TaskRow
from albert_tf.tasks import budget as budgets
from albert_tf.tasks import glue

NAMES = ", ".join(f"albert_{size}_{v}" for v in ("v1", "v2") for size in ("base", "large", "xlarge", "xxlarge"))
# (command, its config class, the values every case adds, {case: (values, the one line expected)})
INVALID = [
    ("finetune", FinetuneConfig, dict(task="sst2", data_dir="d", init="i"), [
        (dict(batch_size=0), "--batch-size must be positive, got 0"),
        (dict(max_seq_length=-8), "--max-seq-length must be positive, got -8"),
        (dict(epochs=0.0), "--epochs must be positive, got 0.0"),
        (dict(learning_rate=-0.001), "--learning-rate must be positive, got -0.001"),
        (dict(steps_per_execution=0), "--steps-per-execution must be positive, got 0"),
        (dict(log_every=0), "--log-every must be positive, got 0"),
        (dict(warmup_proportion=1.0), "--warmup-proportion must be in [0, 1), got 1.0"),
        (dict(albert_dropout=1.5), "--albert-dropout must be in [0, 1), got 1.5"),
        (dict(classifier_dropout=-0.1), "--classifier-dropout must be in [0, 1), got -0.1"),
        (dict(length_bucket=-1), "--length-bucket must be 0 or positive, got -1"),
        (dict(length_bucket=16, tpu="local"),
         "--length-bucket 16: a TPU's compiled step needs static shapes; use 0 (the default on TPU)"),
        (dict(cpu_replicas=0), "--cpu-replicas must be >= 1, got 0"),
    ]),
    ("export", ExportConfig, dict(init="i"), [
        (dict(max_seq_length=2), "--max-seq-length must be at least 3, got 2"),
        (dict(version=0), "--version must be a positive integer, got 0"),
    ]),
    ("convert", ConvertConfig, {}, [
        (dict(release="albert_huge_v3"),
         f"--release albert_huge_v3: not a released model; expected one of {NAMES} or hf:OWNER/NAME"),
        (dict(release="hf:a/b/c"), "--release hf:a/b/c: expected hf:OWNER/NAME (a Hugging Face hub id)"),
        (dict(release="albert_base_v2", source="tf1", config="c.json"),
         "--release brings its own checkpoint, config and vocabulary: drop --from, --config"),
        (dict(source="tf1"), "--checkpoint required (or --release NAME for Google's released weights)"),
        (dict(source="tf1", checkpoint="ckpt", cache_dir="c"), "--cache-dir goes with --release"),
        (dict(init="m"), "--init goes with --to hf|keras-hub (importing takes --release or --from/--checkpoint)"),
        (dict(to="hf"), "--to hf: --init required"),
        (dict(to="keras-hub", init="m", source="hf", cache_dir="c"),
         "--to keras-hub writes the model of --init: drop --from, --cache-dir"),
    ]),
]
CASES = [pytest.param(command, cls, {**base, **values}, message, id=f"{command}-{'-'.join(values)}")
         for command, cls, base, cases in INVALID for values, message in cases]


@pytest.mark.parametrize("command, cls, values, message", CASES)
def test_an_invalid_setting_is_refused_when_made_and_on_the_command_line_alike(command, cls, values, message,
                                                                               tmp_path, cli):
    output = tmp_path / "out"
    with pytest.raises(ValueError) as info:
        cls(output=str(output), **values)
    assert str(info.value) == message and "\n" not in message
    code, out, err = cli(command, *run_config.argv_of(cls, {**values, "output": output}))
    assert (code, out, err) == (2, "", f"albert-tf {command}: error: {message}\n")
    assert not output.exists()


def test_with_a_tpu_every_path_is_on_cloud_storage_when_made():
    """FinetuneConfig refuses a local --data-dir, --init or --output with --tpu (TPU hosts read Cloud Storage only)
    when it is made; all on gs:// it is made."""
    paths = {"data_dir": "gs://b/d", "init": "gs://b/i", "output": "gs://b/o"}
    assert FinetuneConfig(task="sst2", tpu="local", **paths).tpu == "local"
    for name, flag in (("data_dir", "--data-dir"), ("init", "--init"), ("output", "--output")):
        with pytest.raises(ValueError, match=f"^{flag} local/x"):
            FinetuneConfig(task="sst2", tpu="local", **{**paths, name: "local/x"})


def test_the_convert_line_without_a_source_names_every_missing_flag():
    with pytest.raises(ValueError, match=r"^--from, --checkpoint, --output required \(or --release NAME"):
        ConvertConfig()


# ---------------------------------------------------------------------------------------------- the task registry
def test_every_registered_row_is_consistent_and_its_adapter_is_a_finetune_task():
    from albert_tf.tasks.adapters import adapter_class  # pylint: disable=import-outside-toplevel  (TensorFlow)
    from albert_tf.tasks.base import FinetuneTask  # pylint: disable=import-outside-toplevel

    assert list(REGISTRY) == ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "squad1",
                              "squad2", "race"]
    for name, row in REGISTRY.items():
        assert row.name == name and row.problems() == [], (name, row.problems())
        assert issubclass(adapter_class(name), FinetuneTask)
    # the paper's Table 16 by hand: CoLA, SQuAD v1.1 and RACE
    assert budgets.PAPER_DEFAULTS["cola"] == Hyperparameters(1e-5, 16, 5336, 320, 512, 0.0, 0.1)
    assert budgets.PAPER_DEFAULTS["squad1"] == Hyperparameters(5e-5, 48, 3649, 365, 384, 0.0, 0.1)
    assert budgets.PAPER_DEFAULTS["race"] == Hyperparameters(2e-5, 32, 12000, 1000, 512, 0.1, 0.1)
    assert {name for name, row in REGISTRY.items() if row.family == "glue"} == set(glue.SPECS)


def test_an_inconsistent_row_is_refused_in_one_line():
    paper = Hyperparameters(1e-5, 8, 100, 10, 128, 0.0, 0.1)
    for row, words in [(TaskRow("cola", "glue", "albert_tf.x:Y", paper, REGISTRY["cola"].glue), "registered already"),
                       (TaskRow("new", "ner", "albert_tf.x:Y", paper), "family 'ner'"),
                       (TaskRow("new", "glue", "albert_tf.x:Y", paper), "only a GLUE task, has a GlueTask"),
                       (TaskRow("new", "race", "x.Y", paper), "is not albert_tf.MODULE:CLASS")]:
        with pytest.raises(ValueError, match=words) as info:
            task_registry.register(row)
        assert "\n" not in str(info.value) and "new" not in REGISTRY


@pytest.fixture
def fake_task():
    """A GLUE-like task "fake" registered for the test (one row), and taken out after it."""
    row = TaskRow("fake", "glue", "albert_tf.tasks.glue.finetune:GlueFinetune",
                  Hyperparameters(4e-5, 8, 30, 6, 64, 0.1, 0.2),
                  GlueTask("fake", "FAKE", 2, ("no", "yes"), ("accuracy",), ("dev",), "sentence", None, "label"))
    task_registry.register(row)
    try:
        yield row
    finally:
        del REGISTRY["fake"]


def test_one_registration_makes_a_task_known_to_the_flag_the_budget_the_adapter_and_the_reader(fake_task, tmp_path,
                                                                                              cli, tiny_spm_model):
    assert "fake" in finetune_config.TASKS
    config = FinetuneConfig(task="fake", data_dir=str(tmp_path / "data"), init="i", output="o")
    code, _, err = cli("finetune", "--task", "fake", "--data-dir", "d", "--init", "i", "--output", tmp_path / "o",
                       "--batch-size", "0")  # past the choices: refused by the range only
    assert code == 2 and err == "albert-tf finetune: error: --batch-size must be positive, got 0\n"
    # the budget from the row: 20 examples at batch 8 → 2 steps a pass; ceil(30 / 2) = 15 passes; warm-up
    # round(6 / 30 · 15 · 2) = 6 steps; sequence min(64, 128)
    seq = budgets.max_seq_length(config, 128)
    budget = budgets.make_budget(config, 20, seq)
    assert (seq, budget.batch_size, budget.steps_per_epoch, budget.epochs, budget.warmup_steps) == (64, 8, 2, 15, 6)
    assert (budget.learning_rate, budget.albert_dropout, budget.classifier_dropout) == (4e-5, 0.1, 0.2)
    # the adapter and GLUE's reader: FAKE/train.tsv and dev.tsv with a header, labels by the row's names
    folder = tmp_path / "data" / "FAKE"
    folder.mkdir(parents=True)
    (folder / "train.tsv").write_text("sentence\tlabel\na good day\tyes\na bad day\tno\n")
    (folder / "dev.tsv").write_text("sentence\tlabel\nfine\tyes\n")
    from albert_tf.tasks.adapters import make_task  # pylint: disable=import-outside-toplevel  (TensorFlow)
    from albert_tf.tasks.glue.finetune import GlueFinetune  # pylint: disable=import-outside-toplevel

    task = make_task("fake", str(tmp_path / "data"))
    assert type(task) is GlueFinetune and glue.SPECS["fake"] is fake_task.glue
    assert [(e.text_a, e.label) for e in task.train] == [("a good day", 1), ("a bad day", 0)]
    assert [e.label for e in task.dev["dev"]] == [1]


def test_a_task_taken_out_is_gone_from_every_list(fake_task):
    del REGISTRY["fake"]
    try:
        assert "fake" not in finetune_config.TASKS and "fake" not in budgets.PAPER_DEFAULTS
        assert "fake" not in glue.SPECS
        with pytest.raises(ValueError, match="FinetuneConfig: task: expected one of cola, "):
            FinetuneConfig(task="fake", data_dir="d", init="i", output="o")
    finally:
        REGISTRY["fake"] = fake_task


def _task_name_lists(path, names):
    """(line, names) of each tuple, list, set or dict literal in the module at `path` that holds two or more of
    `names` as string constants (elements or keys)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = []
    for node in ast.walk(tree):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if items is None or not isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            continue
        named = [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
        if len(named) >= 2:
            found.append((node.lineno, named))
    return found


def test_no_second_list_of_task_names_in_the_package(tmp_path):
    """The registry is the one list: no module of albert_tf writes two task names in one literal (the flag's
    choices, the paper's table, the adapters' dispatch and GLUE's table all read the registry)."""
    registry = os.path.join(helpers.REPO, "albert_tf", "settings", "task_registry.py")
    offenders = {}
    for directory, _, files in os.walk(os.path.join(helpers.REPO, "albert_tf")):
        for name in files:
            path = os.path.join(directory, name)
            if name.endswith(".py") and path != registry:
                offenders.update({f"{os.path.relpath(path, helpers.REPO)}:{line}": named
                                  for line, named in _task_name_lists(path, set(REGISTRY))})
    assert offenders == {}
    assert _task_name_lists(registry, set(REGISTRY)) == []  # rows, not a list beside them
    # and the check can fail: the dispatch the adapters made before the registry
    sample = tmp_path / "sample.py"
    sample.write_text('if task == "race":\n    pass\nelif task in ("squad1", "squad2"):\n    pass\n')
    assert _task_name_lists(str(sample), set(REGISTRY)) == [(3, ["squad1", "squad2"])]


# ---------------------------------------------------------------------------------------------- decisions made once
def test_the_budget_is_made_once_and_held_by_the_task(tmp_path, tiny_spm_model, monkeypatch):
    from albert_tf.training import finetuning  # pylint: disable=import-outside-toplevel  (TensorFlow)

    made = []

    def spy(*args, **kwargs):
        made.append(budgets.make_budget(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(finetuning, "make_budget", spy)
    config = FinetuneConfig(task="sst2", data_dir=fh.write_sst2(str(tmp_path / "sst2"), num_train=40, num_dev=8),
                            init=fh.save_random_init(str(tmp_path / "init"), tiny_spm_model),
                            output=str(tmp_path / "out"), batch_size=8, max_seq_length=16, epochs=2)
    setup = finetuning.prepare(config, finetuning.read_inputs(config))
    assert len(made) == 1 and setup.task.budget is made[0] and setup.budget is made[0]
    assert (made[0].steps_per_epoch, made[0].epochs, made[0].length_bucket) == (5, 2, 16)  # 40 // 8; CPU: 16


def test_export_resolves_its_handle_once(random_init, tmp_path, monkeypatch):
    from albert_tf.checkpoints import handles  # pylint: disable=import-outside-toplevel  (TensorFlow)

    resolved = []
    real = handles.resolve_init

    def spy(handle, *args, **kwargs):
        resolved.append(handle)
        return real(handle, *args, **kwargs)

    monkeypatch.setattr(handles, "resolve_init", spy)
    result = albert_tf.export(ExportConfig(init=random_init, output=str(tmp_path / "base"), max_seq_length=16,
                                           no_warmup=True, cased=False))
    assert resolved == [random_init] and result.path == str(tmp_path / "base" / "1")

"""The `albert-tf` command line: every subcommand's --help, --version, the flags made from the run configs' fields
(flags == fields), the quickstart end to end and its printed next steps run on a generated corpus."""
import dataclasses
import glob
import json
import math
import os
import re

import numpy as np
import pytest

from albert_tf import __version__, cli, jobs, run_config
from helpers import run_cli, run_program


@pytest.mark.parametrize("name", sorted(jobs.BY_NAME))
def test_help_of_every_subcommand(name, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([name, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: albert-tf {name}")
    # Every option with a default shows it (ArgumentDefaultsHelpFormatter).
    assert "(default:" in out or name in ("convert",)


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"albert-tf {__version__}"


def test_unknown_subcommand_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["frobnicate"])
    assert info.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, line", [
    (["plan", "--toplogy", "v3-8"], "unknown --toplogy; did you mean --topology? (the following arguments are "
                                    "required: --config, --topology)"),
    (["pretrain", "--confg", "x.json", "--train-data=d", "--model-dir", "m"],
     "unknown --confg; did you mean --config? (the following arguments are required: --config)"),
    (["plan", "--config", "albert_base", "--frobnicate=1"],  # nothing close: named all the same
     "unknown --frobnicate (the following arguments are required: --topology)"),
    (["plan", "--config", "albert_base", "--topo", "cpu", "--remta"],  # --topo: argparse's prefix of --topology
     "unrecognized arguments: --remta; did you mean --remat?"),
])
def test_a_misspelled_required_flag_is_named_with_its_closest(argv, line, capsys):
    """Issue 48 D10. Before: `plan --toplogy v3-8` said only "the following arguments are required: --config,
    --topology", neither the misspelling nor the flag it was meant to be."""
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err == f"albert-tf {argv[0]}: error: {line}\n"


def test_bad_input_is_answered_before_tensorflow_is_imported(tmp_path):
    """Issue 48 D17: each job's typical bad input (a path that is not there, a file where a directory goes, a
    --max-seq-length the config cannot hold) gets its one line and exit 2 with TensorFlow not imported (it takes
    seconds). Before: the CLI imported TensorFlow first, and `vocab --input missing.txt` answered in 8-13 s."""
    afile, missing = tmp_path / "afile", tmp_path / "missing"
    afile.write_text("one line\n")
    pretrain = ["--config", "albert_tiny", "--model-dir", tmp_path / "model", "--batch-size", 8, "--num-train-steps",
                10, "--num-warmup-steps", 1, "--max-predictions", 5]
    handle = (f"--init {missing}: no such directory and not a released model's name (expected a pretrained-model "
              "directory")
    cases = [
        (["vocab", "--input", missing / "corpus.txt", "--output-prefix", tmp_path / "spm"],
         f"--input '{missing}/corpus.txt' matches no file"),
        (["create-data", "--input", afile, "--spm-model", missing / "spm.model", "--output", tmp_path / "d" / "train"],
         f"--spm-model {missing}/spm.model: no such file"),
        (["pretrain", *pretrain, "--train-data", f"{missing}/train-*", "--max-seq-length", 64],
         f"--train-data '{missing}/train-*' matches no file"),
        (["pretrain", *pretrain, "--train-data", afile, "--max-seq-length", 512],
         "--max-seq-length 512 exceeds the config's max_position_embeddings 128"),
        (["finetune", "--task", "sst2", "--data-dir", tmp_path, "--init", missing, "--output", tmp_path / "ft"], handle),
        (["export", "--init", missing, "--output", tmp_path / "export"], handle),
        (["convert", "--from", "hf", "--checkpoint", missing, "--output", tmp_path / "c"],
         f"--checkpoint {missing}: not a directory"),
        (["quickstart", "--output", afile], f"--output {afile} is a file; expected a directory"),
    ]
    assert {argv[0] for argv, _ in cases} == {job.name for job in jobs.JOBS if job.tensorflow}
    proc = run_program("bad_input_imports", json.dumps([[str(word) for word in argv] for argv, _ in cases]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for (argv, line), run in zip(cases, json.loads(proc.stdout)):
        assert run["rc"] == 2 and run["stderr"].startswith(f"albert-tf {argv[0]}: error: {line}"), (argv, run)
        assert run["stderr"].count("\n") == 1, run["stderr"]
        assert not run["tensorflow"], f"{argv[0]} imported TensorFlow before its bad-input line"


def test_quickstart_end_to_end(tmp_path):
    """The README's first command, with fewer steps: vocab → create-data → pretrain on the built-in corpus, then
    finetune on the document task built from it, and one raw-text request through the fine-tuned export."""
    out = tmp_path / "qs"
    proc = run_cli("quickstart", ["--output", out, "--num-train-steps", 20, "--finetune-epochs", 1], check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    model = out / "model"
    files = set(os.listdir(model))
    assert {"albert_config.json", "spm.model", "checkpoint", "metrics.jsonl", "ckpt-20.index"} <= files
    assert (out / "spm.model").stat().st_size > 10_000 and len(glob.glob(str(out / "data" / "*.tfrecord"))) == 2
    # The printed figures are real numbers: the pretraining log lines.
    lines = [line for line in proc.stdout.splitlines() if line.startswith("train step ")]
    assert [int(re.match(r"train step (\d+):", line).group(1)) for line in lines] == [20]
    figures = dict(re.findall(r"(\w+)=(\S+)", lines[-1]))
    for key in ("loss", "masked_lm_accuracy", "sentence_order_accuracy", "examples_per_sec"):
        value = float(figures[key])
        assert math.isfinite(value) and value >= 0, (key, value)
    assert 0 < float(figures["loss"]) < 20

    # The fine-tuning task: two balanced classes in SST-2's layout, dev sentences not in train.
    rows = {split: [line.split("\t") for line in (out / "task" / f"{split}.tsv").read_text().splitlines()[1:]]
            for split in ("train", "dev")}
    assert [label for _, label in rows["train"] + rows["dev"]].count("0") == \
        [label for _, label in rows["train"] + rows["dev"]].count("1") > 200
    assert not {s for s, _ in rows["dev"]} & {s for s, _ in rows["train"]}
    # Its figures: the printed dev accuracy is eval_results.json's, a multiple of 1 / (dev size).
    results = json.loads((out / "finetune" / "eval_results.json").read_text())
    accuracy = results["dev"]["accuracy"]
    assert round(accuracy * len(rows["dev"]), 6) == int(round(accuracy * len(rows["dev"])))
    assert f"dev accuracy {accuracy:.4f}" in proc.stdout
    assert (out / "finetune" / "best" / "checkpoint").exists()
    # The request's answer as printed equals the export's in this process (a fresh load of the SavedModel).
    export = re.search(r"fine-tuned export (\S+)", proc.stdout).group(1)
    assert export.startswith(str(out / "finetune" / "export"))
    answer = re.search(r"→ label (\d) \(([^)]*)\), probabilities \[([^]]*)\]", proc.stdout)
    assert answer, proc.stdout[-2000:]
    from albert_tf.data import builtin_corpus  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import quickstart  # pylint: disable=import-outside-toplevel

    label, probabilities = quickstart.ask_export(export, builtin_corpus.REQUEST)
    assert int(answer.group(1)) == label == int(np.argmax(probabilities))
    assert answer.group(2) == builtin_corpus.TASK_GROUPS[label][0]
    np.testing.assert_allclose([float(p) for p in answer.group(3).split(",")], probabilities, atol=1e-4)
    assert sum(probabilities) == pytest.approx(1.0, abs=1e-5)
    assert "[quickstart] done" in proc.stdout


# ------------------------------------------------------------------------------------------ flags == fields
CONFIGS = {job.name: job.config_class() for job in jobs.JOBS}
EXTRA_FLAGS = {name: set() for name in CONFIGS}
EXTRA_FLAGS["pretrain"] = {"--recipe"}  # not a setting: where settings come from
# Values a config's own checks need where _other_value's would be refused (None: the field left at its default).
VALID_VALUES = {"keep-alive": {"root": "gs://x/root", "model_dir": "gs://x/model_dir", "config": "albert_large",
                               "preemptible": None, "reserved": None,  # gs:// paths, a preset, one capacity kind,
                               "type": "v5litepod-16", "valid_until_duration": "6h"}}  # a slice, a duration


def _parser(command):
    import argparse  # pylint: disable=import-outside-toplevel

    parser = argparse.ArgumentParser(prog=f"albert-tf {command}")
    cli.add_job_arguments(parser, jobs.BY_NAME[command])
    return parser


# Values in range where the generic rule below would not be (a config checks its ranges when it is made): plan's
# topology must be a slice whose 8 cores, times the 4 accumulation steps, divide the batch; fractions kept below 1;
# pretrain's --decay-start/--decay-length need --schedule wsd, its phases' longest is --max-seq-length (512 + 3), a
# shorter one needs its --phase-data, a token budget buys more steps than the warm-up (3125 + 3) and wsd's decay
# starts after it. pretrain's lengths exclude each other (a typed --num-train-steps, --budget-tokens, --budget-hours),
# and --budget-hours --phases; plan's too, and its --compare is a recipe.
IN_RANGE = {("plan", "topology"): "v3-8", ("plan", "batch_size"): 4096 + 32,
            ("plan", "budget_tokens"): 10**11, ("plan", "phases"): "256:0.5,515:0.5", ("plan", "compare"): "paper_v1",
            ("pretrain", "schedule"): "wsd", ("pretrain", "budget_tokens"): 10**11,
            ("pretrain", "phases"): "256:0.5,515:0.5", ("pretrain", "phase_data"): {"256": "gs://x/phase_data"},
            ("finetune", "warmup_proportion"): 0.5, ("finetune", "albert_dropout"): 0.5,
            ("finetune", "classifier_dropout"): 0.5, ("convert", "release"): "albert_base_v2"}
# Settings that exclude each other: "every field at another value" is one config per group (each with every field
# of no group), which together set every field.
EXCLUSIVE = {"pretrain": [("tpu", "num_train_steps"), ("cpu_replicas", "budget_tokens", "phases", "phase_data"),
                          ("budget_hours",)],
             "plan": [("num_train_steps",), ("budget_tokens", "phases"), ("budget_hours",)],
             "finetune": [("tpu",), ("length_bucket", "cpu_replicas")],
             "convert": [("release", "cache_dir"), ("source", "checkpoint", "config", "spm_model"),
                         ("to", "init", "spm_model")]}


# A command none of whose flags is required, yet which needs some: the least a valid config sets.
LEAST = {"convert": {"release": "albert_base_v2"}}


def _required(command):
    """{field: value} of the fields a config cannot go without: the required ones (another value than nothing) and
    LEAST's."""
    cls = CONFIGS[command]
    return {**{f.name: IN_RANGE.get((command, f.name), _other_value(cls, f)) for f in dataclasses.fields(cls)
               if run_config.default_of(f) is dataclasses.MISSING}, **LEAST.get(command, {})}


def _other_values(command):
    """[{field: another value than its default}] (a field whose value is None is left out): one mapping of every
    field, or one per group of EXCLUSIVE."""
    cls = CONFIGS[command]
    values = {f.name: IN_RANGE.get((command, f.name), _other_value(cls, f)) for f in dataclasses.fields(cls)}
    values = {name: value for name, value in values.items() if value is not None}
    groups = EXCLUSIVE.get(command, [()])
    grouped = {name for group in groups for name in group}
    return [{k: v for k, v in values.items() if k not in grouped or k in group} for group in groups]


def _other_value(cls, field):
    """A value of the field's type that is not its default and in its range (what a test types for it): a path on
    Cloud Storage (valid with --tpu), a fraction halved, a number raised by 3; a command's VALID_VALUES first; None:
    left out."""
    command = next(name for name, config in CONFIGS.items() if config is cls)
    if field.name in VALID_VALUES.get(command, {}):
        return VALID_VALUES[command][field.name]
    kind, _ = run_config.base_type(cls, field)
    default, choices = run_config.default_of(field), field.metadata["choices"]
    if choices:
        return next(c for c in choices if c != default)
    if field.metadata["parse"]:  # a field of two kinds (vocab --vocab-size N | auto)
        return "auto"
    if kind in (str, dict, bool, list):
        return {str: f"gs://x/{field.name}", dict: {"vocab_size": 8000}, bool: default is None or not default,
                list: ["--a", "--b"]}[kind]
    if kind is float and default is not None and 0 < default < 1:
        return default / 2
    return (0 if default in (None, dataclasses.MISSING) else default) + kind(3)



def _words(cls, field, value):
    flag = run_config.flag_of(field)
    if isinstance(value, bool):
        return [flag if value else field.metadata["negative"]]
    if isinstance(value, dict):
        return [w for k, v in value.items() for w in (flag, f"{k}={v}")]
    if isinstance(value, list):
        return [w for v in value for w in (f"{flag}={v}",)]
    return [flag, str(value)]


@pytest.mark.parametrize("command", sorted(CONFIGS))
def test_every_field_has_exactly_one_flag_and_every_flag_is_a_field(command):
    import argparse  # pylint: disable=import-outside-toplevel

    cls, parser = CONFIGS[command], _parser(command)
    shown = [a for a in parser._actions if a.help != argparse.SUPPRESS and a.dest != "help"]  # pylint: disable=W0212
    fields = {f.name: f for f in dataclasses.fields(cls)}
    flags = {}
    for action in shown:
        for option in action.option_strings:
            flags[option] = action.dest
    negatives = {f.metadata["negative"] for f in fields.values() if f.metadata["negative"]}
    hidden = {f.name for f in fields.values() if f.metadata["hidden"]}
    assert {flags[run_config.flag_of(f)] for f in fields.values() if f.name not in hidden} == set(fields) - hidden
    assert sorted(dest for flag, dest in flags.items() if flag not in negatives | EXTRA_FLAGS[command]) == \
        sorted(set(fields) - hidden)  # one shown flag per field, none that is not a field


@pytest.mark.parametrize("command", sorted(CONFIGS))
def test_the_cli_and_the_python_api_give_the_same_config(command):
    """Defaults: the flags left out give the dataclass's defaults. Values: every field typed on the command line
    (a value other than its default; the flags that exclude each other in turns) gives the config built in Python
    from the same values."""
    cls, parser = CONFIGS[command], _parser(command)
    fields = dataclasses.fields(cls)
    required = _required(command)
    argv = [w for f in fields if f.name in required for w in _words(cls, f, required[f.name])]
    assert run_config.config_from_args(cls, parser.parse_args(argv)) == cls(**required)
    for f in fields:
        if f.name not in required:
            assert getattr(cls(**required), f.name) == run_config.default_of(f), f.name
    for values in _other_values(command):
        argv = [w for f in fields if f.name in values for w in _words(cls, f, values[f.name])]
        assert run_config.config_from_args(cls, parser.parse_args(argv)) == cls(**values)


@pytest.mark.slow  # albert_base: a pretraining step, an export and a fine-tuning epoch on CPU (a few minutes)
def test_the_quickstarts_next_steps_run_on_a_generated_corpus(tmp_path, monkeypatch, capsys):
    """The printed "next: your own corpus" commands, pasted, run to the end on a small corpus: the vocabulary sized
    from it, pretrain's vocab_size taken from that vocabulary, the batch from the memory model (here for a 4 GiB
    machine, to keep the test short). Only the run lengths are shortened, by changing the printed values of their
    flags (or adding them). Then the printed GLUE step on a generated SST-2 folder, shortened likewise."""
    import shlex  # pylint: disable=import-outside-toplevel

    import finetune_helpers as fh  # pylint: disable=import-outside-toplevel
    import helpers  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import quickstart  # pylint: disable=import-outside-toplevel

    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    for i in range(2):
        helpers.write_corpus(str(tmp_path / "corpus" / f"part{i}.txt"), num_docs=60, seed=i)
    fh.write_sst2(str(tmp_path / "glue" / "SST-2"), 32, 16)
    lines = quickstart.next_steps(str(tmp_path / "unused"), memory=4 * 2 ** 30)
    commands = [shlex.split(line) for line in lines if line.startswith("  albert-tf ")]
    assert [c[1] for c in commands] == ["vocab", "create-data", "pretrain", "export", "finetune"]
    shorter = {"pretrain": {"--num-train-steps": "1", "--num-warmup-steps": "0"},
               "finetune": {"--epochs": "1", "--batch-size": "8", "--max-seq-length": "32"}}
    for command in commands:
        argv = list(command[1:])
        for flag, value in shorter.get(command[1], {}).items():  # a flag given twice is refused: change its value
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        code = cli.main(argv)
        assert code == 0, (command, capsys.readouterr())
    out = capsys.readouterr().out
    pretrain = commands[2]
    assert pretrain[pretrain.index("--batch-size") + 1] == "16"  # what 4 GiB holds of albert_base at 128 tokens
    vocab_size = int(re.search(r"(\d+) pieces", out).group(1))
    config = json.loads((tmp_path / "work" / "model" / "albert_config.json").read_text())
    assert config["vocab_size"] == vocab_size < 1000 and config["hidden_size"] == 768  # albert_base, sized vocab
    assert (tmp_path / "work" / "export" / "1" / "saved_model.pb").exists()
    assert json.loads((tmp_path / "work" / "sst2" / "eval_results.json").read_text())["dev"]["accuracy"] >= 0


@pytest.mark.parametrize("command", sorted(CONFIGS))
def test_to_argv_is_the_inverse_of_parsing(command):
    """run_config.to_argv(config), parsed by the command's own parser, gives the config back: with every field at
    another value than its default, and with only the required ones (then only those are written)."""
    cls, parser = CONFIGS[command], _parser(command)
    fields = dataclasses.fields(cls)
    required = _required(command)
    for values in _other_values(command) + [required]:
        config = cls(**values)
        argv = run_config.to_argv(config)
        assert run_config.config_from_args(cls, parser.parse_args(argv)) == config, argv
    assert len(run_config.to_argv(cls(**required))) == sum(len(_words(cls, f, required[f.name])) for f in fields
                                                              if f.name in required)

"""Pretraining recipes: named presets of PretrainConfig values, merged preset → recipe file → typed flags; one reader
for `pretrain` and `plan`, which both refuse a misspelled key with one line."""
import argparse
import json
import shlex

import pytest

from albert_tf import cli
from albert_tf.cli import main
from albert_tf.jobs import pretrain as jobs_pretrain
from albert_tf.settings.pretrain_config import CPU_SMALL_MODEL, PretrainConfig, over_recipe, read_recipe

REQUIRED = ["--config", "albert_tiny", "--train-data", "d-*", "--model-dir", "m"]
PAPER = {"batch_size": 4096, "learning_rate": 0.00176, "num_train_steps": 125000, "num_warmup_steps": 3125,
         "max_seq_length": 512, "max_predictions": 20}


def parse(*argv):
    """(PretrainConfig, what the recipe set) of `albert-tf pretrain REQUIRED ARGV`."""
    args = cli.build_parser(["pretrain"]).parse_args(["pretrain", *REQUIRED, *argv])
    base, typed = jobs_pretrain.recipe_and_typed(args)
    return PretrainConfig(**over_recipe(base, typed)), {k: v for k, v in base.items() if k not in typed}


def test_paper_v2_sets_the_paper_values_and_no_dropout():
    config, applied = parse("--recipe", "paper_v2", "--steps-per-loop", "7")
    assert {k: getattr(config, k) for k in PAPER} == PAPER and config.no_dropout is True
    assert applied["no_dropout"] is True and config.steps_per_loop == 7 and "steps_per_loop" not in applied
    config, _ = parse("--recipe", "paper_v1")
    assert config.no_dropout is False and config.num_warmup_steps == 3125


def test_paper_v1_equals_the_defaults():
    defaults, _ = parse()
    assert parse("--recipe", "paper_v1")[0] == defaults


def test_preset_then_file_then_typed_flags(tmp_path):
    """A file over its base preset, typed flags over both, even a typed value equal to the default."""
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"description": "small", "base": "paper_v2",
                                "flags": {"learning-rate": 0.001, "batch-size": 256, "dynamic_masking": True,
                                          "eval-batch-size": 64, "set": {"vocab_size": 8000}}}))
    config, applied = parse("--recipe", str(path), "--learning-rate", "0.00176")   # the default, but typed
    assert config.learning_rate == 0.00176 and config.batch_size == 256 and config.num_train_steps == 125000
    assert config.dynamic_masking is True and config.eval_batch_size == 64 and config.no_dropout is True
    assert config.config_overrides == {"vocab_size": 8000}
    assert "learning_rate" not in applied and applied["batch_size"] == 256
    config, _ = parse("--recipe", str(path), "--batch-size", "32", "--eval-batch-size", "8")
    assert (config.batch_size, config.eval_batch_size, config.learning_rate) == (32, 8, 0.001)


def test_the_python_api_merges_the_same_way(tmp_path):
    config = PretrainConfig.from_recipe("paper_v2", config="albert_base", train_data="d-*", model_dir="m",
                                        batch_size=512)
    assert config.batch_size == 512 and config.no_dropout and config.num_train_steps == 125000


def test_an_old_spelling_in_a_recipe_file_works_with_a_notice(tmp_path, capsys):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"flags": {"train-batch-size": 128}}))
    assert parse("--recipe", str(path))[0].batch_size == 128
    err = capsys.readouterr().err
    assert "'train-batch-size' is deprecated" in err and "'batch-size'" in err and err.count("\n") == 1


@pytest.mark.parametrize("content, message", [
    ({"flags": {"no-such-flag": 1}}, "unknown setting 'no-such-flag'; expected one of config, train-data"),
    ({"flags": {"batch-size": "big"}}, "'batch-size': expected an integer, got 'big'"),
    ({"flags": {"no-dropout": 1}}, "'no-dropout': expected true or false, got 1"),
    ({"flags": {"xla": "maybe"}}, "'xla': expected one of auto, on, off, got 'maybe'"),
    ({"learning-rate": 0.1}, "field 'flags': expected an object of pretrain flags"),
    ({"flags": {}, "steps": 3}, "unknown field(s) steps"),
    ({"flags": {}, "base": "paper_v3"}, "field 'base': expected one of paper_v2, paper_v1"),
    ("{not json", "not valid JSON"),
])
def test_bad_recipes_are_refused_by_pretrain_and_plan_alike(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ValueError) as e:
        parse("--recipe", str(path))
    assert message in str(e.value)
    assert main(["plan", "--config", "albert_base", "--topology", "v3-64", "--recipe", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("albert-tf plan: error: ") and message in err and err.count("\n") == 1


def test_unknown_names():
    with pytest.raises(ValueError, match="--recipe 'paper_v3': unknown; expected one of paper_v2, paper_v1"):
        read_recipe("paper_v3")
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_recipe("/nonexistent/recipe.json")


def test_plan_takes_a_recipe(capsys):
    assert main(["plan", "--config", "albert_base", "--topology", "v3-64", "--recipe", "paper_v2", "--json"]) == 0
    from_recipe = json.loads(capsys.readouterr().out)
    assert main(["plan", "--config", "albert_base", "--topology", "v3-64", "--batch-size", "4096",
                 "--max-seq-length", "512", "--max-predictions", "20", "--num-train-steps", "125000", "--json"]) == 0
    from_flags = json.loads(capsys.readouterr().out)
    # the same plan; only the command it recommends differs (it repeats --recipe)
    assert "--recipe paper_v2 " in from_recipe.pop("pretrain_command")
    assert "--recipe" not in from_flags.pop("pretrain_command")
    assert from_flags == from_recipe
    assert main(["plan", "--config", "albert_base", "--topology", "v3-64", "--recipe", "paper_v2", "--batch-size",
                 "1024", "--json"]) == 0
    smaller = json.loads(capsys.readouterr().out)
    assert smaller["global_batch"] == 1024 and smaller["steps"] == 125000


def test_plan_keeps_the_recipes_learning_rate_and_notes_the_scaling(tmp_path, capsys):
    """A recipe's learning rate stays what the printed command trains with; the square-root rule is a note."""
    path = tmp_path / "lr.json"
    path.write_text(json.dumps({"flags": {"learning-rate": 0.0005, "batch-size": 1024}}))
    assert main(["plan", "--config", "albert_base", "--topology", "v3-8", "--recipe", str(path)]) == 0
    out = capsys.readouterr().out
    lr_line = next(line for line in out.splitlines() if line.startswith("learning rate:"))
    assert lr_line.startswith("learning rate: 0.0005; note: square-root scaling") and "0.00088 at batch 1024" in lr_line
    command = out.rstrip().splitlines()[-1]
    assert "--recipe " + str(path) in command and "--learning-rate" not in command
    # the command parses as pretrain's and trains at the recipe's rate
    config = jobs_pretrain.config_from_args(cli.build_parser(["pretrain"]).parse_args(shlex.split(command)[1:]))
    assert config.learning_rate == 0.0005 and config.batch_size == 1024
    # asked for: a typed --learning-rate is repeated in the command
    assert main(["plan", "--config", "albert_base", "--topology", "v3-8", "--recipe", str(path),
                 "--learning-rate", "0.00088"]) == 0
    assert "--learning-rate 0.00088" in capsys.readouterr().out.rstrip().splitlines()[-1]


def test_cpu_small_is_a_2_layer_256_wide_run_at_seq_64_whatever_the_preset(capsys):
    """The recipe's --set gives every size: any --config preset yields the same model; its parameters, counted by
    hand: embeddings V·E + 512·E + 2·E + LayerNorm 2·E and the E→H projection E·H + H; attention 4·(H·H + H)
    + 2·H."""
    from albert_tf import config as albert_config  # pylint: disable=import-outside-toplevel

    config, _ = parse("--recipe", "cpu_small")
    assert (config.batch_size, config.max_seq_length, config.max_predictions) == (128, 64, 10)
    assert config.dynamic_masking and config.no_dropout and config.learning_rate == 0.005
    assert 0.05 < config.num_warmup_steps / config.num_train_steps < 0.07  # a 6 % warm-up
    assert config.num_train_steps % config.save_checkpoints_steps == 0
    models = [albert_config.resolve(preset, config.config_overrides) for preset in ("albert_tiny", "albert_xxlarge")]
    assert models[0] == models[1]
    assert (models[0].num_hidden_layers, models[0].hidden_size, models[0].embedding_size) == (2, 256, 128)
    assert main(["plan", "--config", "albert_base", "--topology", "cpu", "--recipe", "cpu_small", "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)["parameter_counts"]
    v, e, h = 8000, 128, 256
    assert counts["embeddings"] == v * e + 512 * e + 2 * e + 2 * e + e * h + h
    assert counts["attention"] == 4 * (h * h + h) + 2 * h


def test_another_schedule_over_a_wsd_recipe_drops_its_decay(capsys, tmp_path):
    """A recipe file of cpu_small with warmup-stable-decay (decay over the last 20 %): a --schedule other than wsd
    given over it leaves no wsd field of the recipe behind (else it would be refused as '--decay-start 0.8 needs
    --schedule wsd') and the recipe's line says so; one given with wsd keeps the recipe's other decay field, and a
    decay flag with a non-wsd schedule is still refused."""
    from albert_tf.settings.pretrain_config import DECAY_LENGTH, DECAY_START  # pylint: disable=import-outside-toplevel

    recipe = tmp_path / "wsd.json"
    recipe.write_text(json.dumps({"base": "cpu_small", "flags": {"schedule": "wsd", "decay-start": 0.8,
                                                                 "decay-length": 0.2}}))

    def pretrain_config(*argv):  # (config, the recipe's line) as `albert-tf pretrain` makes and prints them
        config = jobs_pretrain.config_from_args(cli.build_parser(["pretrain"]).parse_args(
            ["pretrain", *REQUIRED, "--recipe", str(recipe), *argv]))
        return config, capsys.readouterr().out.strip()

    config, line = pretrain_config()
    assert (config.schedule, config.decay_start, config.decay_length) == ("wsd", 0.8, 0.2)
    assert "--schedule wsd --decay-start 0.8 --decay-length 0.2" in line and "dropped" not in line
    for schedule in ("polynomial", "linear", "one-cycle"):
        config, line = pretrain_config("--schedule", schedule)
        assert (config.schedule, config.decay_start, config.decay_length) == (schedule, DECAY_START, DECAY_LENGTH)
        assert line.endswith(f"(its --decay-start 0.8, --decay-length 0.2 dropped: --schedule {schedule} has no "
                             "wsd decay)")
        config.check()
    config, line = pretrain_config("--schedule", "one-cycle", "--budget-tokens", "8192000")
    assert line.endswith("(its --num-train-steps 6600 replaced by the length typed; its --decay-start 0.8, "
                         "--decay-length 0.2 dropped: --schedule one-cycle has no wsd decay)")
    config, _ = pretrain_config("--schedule", "wsd", "--decay-start", "0.7")
    assert (config.decay_start, config.decay_length) == (0.7, 0.2)
    with pytest.raises(ValueError, match="--decay-start 0.7 needs --schedule wsd"):
        pretrain_config("--schedule", "linear", "--decay-start", "0.7")


def test_typed_flags_win_over_cpu_small_and_set_changes_one_key(capsys):
    config, _ = parse("--recipe", "cpu_small", "--learning-rate", "0.002", "--set", "vocab_size=4000",
                            "--batch-size", "64")
    assert (config.learning_rate, config.batch_size, config.max_seq_length) == (0.002, 64, 64)
    assert config.config_overrides["vocab_size"] == 4000 and config.config_overrides["hidden_size"] == 256
    args = cli.build_parser(["pretrain"]).parse_args(["pretrain", *REQUIRED, "--recipe", "cpu_small", "--set",
                                                      "vocab_size=4000", "--batch-size", "64"])
    assert jobs_pretrain.config_from_args(args) == config.__class__(**{**vars(config), "learning_rate": 0.005})
    line = capsys.readouterr().out.splitlines()[-1]
    assert "--set hidden_size=256" in line and "--set vocab_size" not in line and "--batch-size" not in line
    config = PretrainConfig.from_recipe("cpu_small", config="albert_base", train_data="d-*", model_dir="m",
                                        config_overrides={"num_hidden_layers": 6})
    assert config.config_overrides["num_hidden_layers"] == 6 and config.config_overrides["hidden_size"] == 256


def test_plan_on_cpu_points_to_cpu_small_and_its_command_repeats_it(capsys):
    assert main(["plan", "--config", "albert_base", "--topology", "cpu", "--batch-size", "32"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(
        "note: for a pretraining this machine can do in about an hour, plan and run --recipe cpu_small")
    assert main(["plan", "--config", "albert_base", "--topology", "cpu"]) == 0  # the pod recipe's batch and steps
    note = capsys.readouterr().out.splitlines()[0]
    assert note.startswith("note: pretrain refuses the pod recipe's") and "--recipe cpu_small" in note
    assert main(["plan", "--config", "albert_base", "--topology", "cpu", "--recipe", "cpu_small"]) == 0
    out = capsys.readouterr().out
    command = out.rstrip().splitlines()[-1].strip()
    assert "note: for a pretraining" not in out
    assert command.startswith("albert-tf pretrain --recipe cpu_small --config albert_base")
    config = jobs_pretrain.config_from_args(cli.build_parser(["pretrain"]).parse_args(shlex.split(command)[1:]))
    assert config.config_overrides == CPU_SMALL_MODEL and config.batch_size == 128

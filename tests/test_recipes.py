"""Pretraining recipes: `--recipe` fills the flags the user did not type, typed flags win, bad recipes are refused."""
import argparse
import json

import pytest

from albert_tf.cli import main
from albert_tf.training import recipes

REQUIRED = ["--config", "albert_tiny", "--train-data", "d-*", "--model-dir", "m"]
PAPER = {"train_batch_size": 4096, "learning_rate": 0.00176, "num_train_steps": 125000, "num_warmup_steps": 3125,
         "max_seq_length": 512, "max_predictions": 20}


def pretrain_parser():
    from albert_tf.training import pretrain  # pylint: disable=import-outside-toplevel

    parser = argparse.ArgumentParser()
    pretrain.add_arguments(parser)  # which ends with recipes.add_arguments
    return parser


def parse(*argv):
    parser = pretrain_parser()
    args = parser.parse_args([*REQUIRED, *argv])
    return args, recipes.apply_recipe(args, parser)


def test_paper_v2_sets_the_paper_flags_and_no_dropout():
    args, applied = parse("--recipe", "paper_v2", "--steps-per-loop", "7")
    assert {k: getattr(args, k) for k in PAPER} == PAPER and args.no_dropout is True
    assert applied["no-dropout"] is True and args.steps_per_loop == 7
    # every value is a plain int/float/str again, as argparse would give without a recipe
    assert type(args.train_batch_size) is int and type(args.learning_rate) is float and type(args.xla) is str
    args, _ = parse("--recipe", "paper_v1")
    assert args.no_dropout is False and args.num_warmup_steps == 3125


def test_typed_flags_win_even_when_equal_to_the_default(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"description": "small", "flags": {"learning-rate": 0.001, "train-batch-size": 256,
                                                                  "dynamic-masking": True, "eval-batch-size": 64}}))
    args, applied = parse("--recipe", str(path), "--learning-rate", "0.00176")   # the default, but typed
    assert args.learning_rate == 0.00176 and args.train_batch_size == 256
    assert args.dynamic_masking is True and args.eval_batch_size == 64
    assert "learning-rate" not in applied and applied["train-batch-size"] == 256
    args, applied = parse("--recipe", str(path), "--train-batch-size", "32", "--eval-batch-size", "8")
    assert (args.train_batch_size, args.eval_batch_size, args.learning_rate) == (32, 8, 0.001)


def test_without_a_recipe_nothing_changes():
    plain = argparse.ArgumentParser()
    from albert_tf.training import pretrain  # pylint: disable=import-outside-toplevel

    pretrain.add_arguments(plain)
    expected = {k: v for k, v in vars(plain.parse_args(REQUIRED)).items() if k != "recipe"}
    args, applied = parse()
    assert applied == {} and {k: v for k, v in vars(args).items() if k != "recipe"} == expected
    assert all(type(v) in (int, float, str, bool, type(None)) for v in vars(args).values())


@pytest.mark.parametrize("content, message", [
    ({"flags": {"no-such-flag": 1}}, "flag 'no-such-flag' is not a flag of this command"),
    ({"flags": {"train-batch-size": "big"}}, "flag 'train-batch-size': expected a value like 4096, got 'big'"),
    ({"flags": {"no-dropout": 1}}, "flag 'no-dropout': expected a value like False, got 1"),
    ({"learning-rate": 0.1}, "field 'flags': expected an object of pretrain flags"),
    ({"flags": {}, "steps": 3}, "unknown field(s) steps"),
    ("{not json", "not valid JSON"),
])
def test_bad_recipes(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ValueError, match=None) as e:
        parse("--recipe", str(path))
    assert message in str(e.value)


def test_unknown_names():
    with pytest.raises(ValueError, match="--recipe 'paper_v3': unknown; expected one of paper_v2, paper_v1"):
        recipes.load_recipe("paper_v3")
    with pytest.raises(FileNotFoundError, match="no such file"):
        recipes.load_recipe("/nonexistent/recipe.json")


def test_recipe_arguments():
    assert recipes.recipe_arguments("paper_v2") == [
        "--train-batch-size", "4096", "--learning-rate", "0.00176", "--num-train-steps", "125000",
        "--num-warmup-steps", "3125", "--max-seq-length", "512", "--max-predictions", "20", "--no-dropout"]
    assert "--no-dropout" not in recipes.recipe_arguments("paper_v1")


def test_plan_takes_a_recipe(capsys):
    assert main(["plan", "--config", "albert_base", "--topology", "v3-64", "--recipe", "paper_v2", "--json"]) == 0
    from_recipe = json.loads(capsys.readouterr().out)
    assert main(["plan", "--config", "albert_base", "--topology", "v3-64", "--batch-size", "4096", "--seq-length",
                 "512", "--max-predictions", "20", "--steps", "125000", "--json"]) == 0
    from_flags = json.loads(capsys.readouterr().out)
    # the same plan; only the echo of how it was asked for (the recommended command repeats --recipe) differs
    assert from_recipe.pop("recipe_arg") == "paper_v2" and from_flags.pop("recipe_arg") is None
    assert from_flags == from_recipe
    assert main(["plan", "--config", "albert_base", "--topology", "v3-64", "--recipe", "paper_v2", "--batch-size",
                 "1024", "--json"]) == 0
    smaller = json.loads(capsys.readouterr().out)
    assert smaller["global_batch"] == 1024 and smaller["steps"] == 125000

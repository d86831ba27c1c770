"""`KeepAliveConfig` is checked when it is made: each bad value gives the same one line through the Python call and
the command line (exit 2), with the flag spelled as `albert-tf keep-alive` spells it; `--help` and the launch line
name only real flags, and the printed launch line parses back, with pretrain's own parser, into the run it means."""
import re
import shlex

import pytest

from albert_tf import cli as albert_cli
from albert_tf.jobs import keep_alive as job
from albert_tf.jobs import pretrain
from albert_tf.runtime import exit_codes
from albert_tf.settings.keeper_config import KeepAliveConfig
from albert_tf.settings.pretrain_config import PretrainConfig
from fake_gcloud import FakeClock, FakeGcloud

REQUIRED = {"name": "pod", "zone": "europe-west4-a", "root": "gs://b/albert", "config": "albert_base"}
# (field values, the same as flags, the expected line): the lines are written out by hand, flags as --help shows them.
BAD = [
    ({"root": "/data/albert"}, ["--root", "/data/albert"],
     "--root /data/albert: expected a gs:// path (TPU hosts read and write Cloud Storage only)"),
    ({"model_dir": "models/x"}, ["--model-dir", "models/x"],
     "--model-dir models/x: expected a gs:// path (TPU hosts read and write Cloud Storage only)"),
    ({"config": "configs/base.json"}, ["--config", "configs/base.json"],
     "--config configs/base.json: expected a preset name (albert_base, ...) or a gs:// path"),
    ({"spot": True, "reserved": True}, ["--spot", "--reserved"],
     "--spot, --preemptible and --reserved: one at most"),
    ({"num_train_steps": 0}, ["--num-train-steps", "0"], "--num-train-steps 0: expected a positive integer"),
    ({"retries": 0}, ["--retries", "0"], "--retries 0: expected a positive integer"),
    ({"poll": -1}, ["--poll", "-1"], "--poll -1.0: expected a non-negative number"),
    ({"retry_wait": -2.5}, ["--retry-wait", "-2.5"], "--retry-wait -2.5: expected a non-negative number"),
    ({"settle_timeout": -1}, ["--settle-timeout", "-1"], "--settle-timeout -1.0: expected a non-negative number"),
    ({"wait": -1}, ["--wait", "-1"], "--wait -1.0: expected a non-negative number"),
    ({"max_restarts": -1}, ["--max-restarts", "-1"], "--max-restarts -1: expected a non-negative number"),
    ({"pretrain_flags": ["--model-dir", "gs://b/other"]}, ["--", "--model-dir", "gs://b/other"],
     "--model-dir after --: the keeper sets it itself (use keep-alive's --model-dir instead)"),
    ({"pretrain_flags": ["--num-train-steps=9"]}, ["--", "--num-train-steps=9"],
     "--num-train-steps after --: the keeper sets it itself (use keep-alive's --num-train-steps instead)"),
    ({"pretrain_flags": ["--eval-data", "x"]}, ["--", "--eval-data", "x"],
     "--eval-data after --: the keeper sets it itself (use keep-alive's --root or --no-eval instead)"),
    ({"pretrain_flags": ["--tpu", "other"]}, ["--", "--tpu", "other"],
     "--tpu after --: the keeper sets it itself (use keep-alive's --name instead)"),
]


def flags(values):
    return [w for name, value in values.items() for w in ("--" + name.replace("_", "-"), value)]


@pytest.mark.parametrize("values, words, line", BAD, ids=[line.split(":")[0] for _, _, line in BAD])
def test_a_bad_setting_is_one_line_from_the_call_and_the_command_line(cli, values, words, line):
    with pytest.raises(ValueError) as raised:
        KeepAliveConfig(**{**REQUIRED, **values})
    assert str(raised.value) == line
    code, out, err = cli("keep-alive", *flags({k: v for k, v in REQUIRED.items() if k not in values}), *words)
    assert (code, out, err) == (exit_codes.BAD_INPUT, "", f"albert-tf keep-alive: error: {line}\n")


def test_an_image_that_does_not_fit_the_type_is_one_line_before_any_call(cli, tmp_path):
    """(The image table lives in albert_tf/cloud/, above the settings: checked by the call, before anything runs.)"""
    line = ("--image tpu-vm-tf-2.18.0-pjrt is a single-host image; a slice of 4 hosts needs a pod image "
            "(tpu-vm-tf-X.Y.Z-pod-...)")
    values = {**REQUIRED, "type": "v3-32", "image": "tpu-vm-tf-2.18.0-pjrt", "state_file": str(tmp_path / "s")}
    with pytest.raises(ValueError, match=f"^{re.escape(line)}$"):
        job.keep_alive(KeepAliveConfig(**values), runner=None)
    assert cli("keep-alive", *flags(values)) == (exit_codes.BAD_INPUT, "", f"albert-tf keep-alive: error: {line}\n")
    assert not (tmp_path / "s").exists()


def test_help_names_only_real_flags(cli, capsys):
    """Every --flag that keep-alive's --help names is keep-alive's own or pretrain's (for the words after --)."""
    with pytest.raises(SystemExit):
        cli("keep-alive", "--help")
    text = capsys.readouterr().out
    own = {s for a in albert_cli.build_parser(["keep-alive"]).chosen._actions for s in a.option_strings}
    theirs = {s for a in albert_cli.build_parser(["pretrain"]).chosen._actions for s in a.option_strings}
    named = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", text))
    assert "--num-train-steps" in named and "--retry-wait" in named
    assert named <= own | theirs, named - own - theirs


def parsed_back(words):
    """The PretrainConfig that `albert-tf pretrain` would run for a launch's words (pretrain's own parser)."""
    argv = words[words.index("pretrain"):]
    return pretrain.config_from_args(albert_cli.build_parser(argv).parse_args(argv))


def test_the_printed_launch_line_parses_back_into_the_run(cli, monkeypatch):
    monkeypatch.setenv("INSTALL_CMD", "fake-install")
    monkeypatch.delenv("ALBERT_TF", raising=False)
    code, out, _ = cli("keep-alive", *flags(REQUIRED), "--type", "v3-32", "--num-train-steps", "5000",
                       "--dry-run", "--", "--remat", "--learning-rate", "0.001")
    assert code == exit_codes.DONE
    lines = out.splitlines()
    words = shlex.split(lines[lines.index(f"# {job.LAUNCH_NOTE}: the command, in pretrain's own words") + 1])
    assert words[:3] == ["python3", "-m", "albert_tf"]
    expected = PretrainConfig.from_recipe(
        "paper_v2", config="albert_base", train_data="gs://b/albert/records/train-*",
        model_dir="gs://b/albert/models/albert_base", eval_data="gs://b/albert/records/eval-*",
        spm_model="gs://b/albert/spm.model", tpu="pod", num_train_steps=5000, remat=True, learning_rate=0.001)
    assert parsed_back(words) == expected


def test_the_launch_note_of_a_run_parses_back_into_the_run(tmp_path, monkeypatch):
    """The keeper's note before each start (`starting on worker 0: ...`) is the command worker 0 runs."""
    monkeypatch.setenv("INSTALL_CMD", "fake-install")
    monkeypatch.delenv("ALBERT_TF", raising=False)
    clock, notes = FakeClock(), []
    config = KeepAliveConfig(**REQUIRED, type="v3-8", num_train_steps=6, project="p1",
                             state_file=str(tmp_path / "state"), pretrain_flags=["--batch-size", "64", "--num-warmup-steps", "1"])
    fake = FakeGcloud(clock)
    assert job.keep_alive(config, runner=fake, clock=clock, say=notes.append).exit_code == exit_codes.DONE
    started = [n for n in notes if n.startswith(f"{job.LAUNCH_NOTE}: ")]
    assert len(started) == 1
    words = shlex.split(started[0][len(job.LAUNCH_NOTE) + 2:])
    assert words == fake.launches[0][fake.launches[0].index("--") + 1:]  # what the fake worker 0 was given
    expected = PretrainConfig.from_recipe(
        "paper_v2", config="albert_base", train_data="gs://b/albert/records/train-*",
        model_dir="gs://b/albert/models/albert_base", eval_data="gs://b/albert/records/eval-*",
        spm_model="gs://b/albert/spm.model", tpu="local", num_train_steps=6, batch_size=64, num_warmup_steps=1)
    assert parsed_back(words) == expected

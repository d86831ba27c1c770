"""The `albert-tf` command line: every subcommand's --help, --version, and the quickstart end to end."""
import math
import os
import re
import subprocess
import sys

import pytest

from albert_tf import __version__, cli
from helpers import REPO


def _run(*args, timeout=600):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-m", "albert_tf", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("name", sorted(cli.SUBCOMMANDS))
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


def test_quickstart_end_to_end(tmp_path):
    """The README's first command, with fewer steps: vocab → create-data → pretrain on the built-in corpus."""
    out = tmp_path / "qs"
    proc = _run("quickstart", "--output", str(out), "--steps", "20")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    model = out / "model"
    files = set(os.listdir(model))
    assert {"albert_config.json", "spm.model", "checkpoint", "metrics.jsonl", "ckpt-20.index"} <= files
    assert (out / "spm.model").stat().st_size > 10_000 and len(os.listdir(out / "data")) == 2
    # The printed figures are real numbers: the pretraining log lines.
    lines = [line for line in proc.stdout.splitlines() if line.startswith("train step ")]
    assert [int(re.match(r"train step (\d+):", line).group(1)) for line in lines] == [20]
    figures = dict(re.findall(r"(\w+)=(\S+)", lines[-1]))
    for key in ("loss", "masked_lm_accuracy", "sentence_order_accuracy", "examples_per_sec"):
        value = float(figures[key])
        assert math.isfinite(value) and value >= 0, (key, value)
    assert 0 < float(figures["loss"]) < 20
    assert "[quickstart] done" in proc.stdout

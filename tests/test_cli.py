"""The `albert-tf` command line: every subcommand's --help, --version, and the quickstart end to end."""
import glob
import json
import math
import os
import re

import numpy as np
import pytest

from albert_tf import __version__, cli
from helpers import run_cli


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
    """The README's first command, with fewer steps: vocab → create-data → pretrain on the built-in corpus, then
    finetune on the document task built from it, and one raw-text request through the fine-tuned export."""
    out = tmp_path / "qs"
    proc = run_cli("quickstart", ["--output", out, "--steps", 20, "--finetune-epochs", 1], check=False)
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
    from albert_tf import quickstart  # pylint: disable=import-outside-toplevel

    label, probabilities = quickstart.ask_export(export, quickstart.REQUEST)
    assert int(answer.group(1)) == label == int(np.argmax(probabilities))
    assert answer.group(2) == quickstart.TASK_GROUPS[label][0]
    np.testing.assert_allclose([float(p) for p in answer.group(3).split(",")], probabilities, atol=1e-4)
    assert sum(probabilities) == pytest.approx(1.0, abs=1e-5)
    assert "[quickstart] done" in proc.stdout

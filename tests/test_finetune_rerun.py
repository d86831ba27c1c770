"""Re-running a finished fine-tune writes nothing: it says the run is complete and exits 0 (no second export)."""
import os

import pytest

import finetune_helpers as fh
import helpers


def tree(directory):
    """{relative path: (size, mtime_ns)} of every file under `directory`."""
    out = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            st = os.stat(path)
            out[os.path.relpath(path, directory)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.slow  # two fine-tuning processes (about a minute on this shared machine)
def test_rerunning_a_finished_finetune_writes_nothing(tmp_path, tiny_spm_model):
    init = fh.save_random_init(str(tmp_path / "init"), tiny_spm_model)
    data = fh.write_sst2(str(tmp_path / "sst2"), 64, 32)
    out = tmp_path / "out"
    args = ["--task", "sst2", "--data-dir", data, "--init", init, "--output", out, "--epochs", 1,
            "--batch-size", 16, "--max-seq-length", 24, "--seed", 3]
    helpers.run_cli("finetune", args)
    assert sorted(os.listdir(out / "export")) == ["1"]
    before = tree(out)
    again = helpers.run_cli("finetune", args)
    assert again.stdout.strip().splitlines()[-1] == (
        f"the run in {out} is already complete (1 epoch(s), exported to {out / 'export' / '1'}): nothing to do "
        "(a new --output trains again)")
    assert tree(out) == before  # no file written or touched, no export/2

"""Nothing left behind (albert_tf.runtime.leftovers): each job on a full disk exits 74 with one line naming the
path and leaves no temporary file; what a killed run left (kill -9: no clean-up runs), the next run of the same
output removes, and only that, with one note.

The full disk is RLIMIT_FSIZE (helpers.file_size_limit): a write past the limit fails at the operating system's
write call with EFBIG, TensorFlow's C++ writers included, as a write fails on a full disk. What a killed run leaves
is made as kill -9 leaves it (the names seen after killing each job mid-write); a real kill where it is cheap."""
import os
import signal
import subprocess
import sys

import pytest

import finetune_helpers
import helpers
from albert_tf.runtime import leftovers

TEMP = "0123456789ab"  # a temp_path_for suffix
TF_TEMP = "0123456789abcdef0123456789abcdef"  # TensorFlow's atomic writes' suffix (file_io: NAME.tmp<32 hex>)


def _error_line(err, command):
    lines = helpers.error_lines(err)
    errors = [line for line in lines if line.startswith(f"albert-tf {command}: error: ")]
    assert len(errors) == 1, err
    return errors[0]


def _note(err, command):
    notes = [line for line in helpers.error_lines(err) if "removed the temporary files of an interrupted" in line]
    assert len(notes) == 1 and notes[0].startswith(f"albert-tf {command}: note: "), err
    return notes[0]


def _make(root, relative_paths, content=b"x" * 1000):
    """Files (a trailing "/": folders holding one file) under `root`, as a killed run leaves them."""
    for relative in relative_paths:
        path = os.path.join(root, relative)
        if relative.endswith("/"):
            os.makedirs(path, exist_ok=True)
            path = os.path.join(path, "part-00000-of-00001.data-00000-of-00001.tempstate1234")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)


# ---------------------------------------------------------------------------------------------- the library
def test_only_the_named_temporaries_of_the_output_are_removed(tmp_path):
    ours = [".metrics.jsonl.tmp-" + TEMP, "ckpt-4_temp/", "ckpt-4.index.tempstate99", "checkpoint.tmp" + TF_TEMP]
    others = [".notes.txt.tmp-" + TEMP,            # a temporary of a file the job does not write
              "metrics.jsonl.tmp-" + TEMP,          # not hidden: not temp_path_for's
              ".metrics.jsonl.tmp-0123",            # not its 12 hex
              "ckpt-4", "ckpt-4.index", "mine_temp/", "notes.tempstate1", "checkpoint.tmp"]
    _make(tmp_path, ours + others)
    removed = leftovers.remove(str(tmp_path), r"metrics\.jsonl", checkpoints=True)
    assert [path for path, _ in removed] == sorted(str(tmp_path) + "/" + p for p in ours)
    assert sum(size for _, size in removed) == 4000
    assert helpers.tree(tmp_path) == sorted([
        "ckpt-4", "ckpt-4.index", "checkpoint.tmp", "metrics.jsonl.tmp-" + TEMP, ".metrics.jsonl.tmp-0123",
        ".notes.txt.tmp-" + TEMP, "mine_temp", "mine_temp/part-00000-of-00001.data-00000-of-00001.tempstate1234",
        "notes.tempstate1"])
    assert leftovers.note_text(removed).endswith(f"{leftovers.some([p for p, _ in removed])} (4.0 kB)")


class _FailingManager:
    """A tf.train.CheckpointManager whose save fails midway, after TensorFlow's first temporaries (as a full disk
    or a Ctrl-C during the save): a folder ckpt-N_temp and a data file."""

    def __init__(self, directory, error):
        self.directory, self.error = directory, error

    def save(self, checkpoint_number):
        _make(self.directory, [f"ckpt-{checkpoint_number}_temp/", f"ckpt-{checkpoint_number}.data-00000-of-00001"])
        raise self.error


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_save_leaves_nothing_of_itself(tmp_path, error):
    _make(tmp_path, ["ckpt-2.index", "ckpt-2.data-00000-of-00001", "checkpoint"])  # the last complete save
    with pytest.raises(type(error)):
        leftovers.save_checkpoint(_FailingManager(str(tmp_path), error), 4)
    assert helpers.tree(tmp_path) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]


def test_a_checkpoint_save_on_a_full_disk_leaves_nothing_of_itself(tmp_path):
    """TensorFlow's own save, failing at the disk (D5: fine-tuning's saves went straight to the manager and left
    CKPT_temp/ behind, a full disk's worth)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.runtime import faults  # pylint: disable=import-outside-toplevel

    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(tf.zeros([40_000]))), str(tmp_path),
                                         max_to_keep=2)
    leftovers.save_checkpoint(manager, 1)
    complete = helpers.tree(tmp_path)
    with helpers.file_size_limit(100_000), pytest.raises(tf.errors.OutOfRangeError) as info:
        leftovers.save_checkpoint(manager, 2)
    assert helpers.tree(tmp_path) == complete and manager.latest_checkpoint == str(tmp_path / "ckpt-1")
    assert str(faults.classify(info.value)).startswith(f"{tmp_path / 'ckpt-2'}: could not be written: file too "
                                                       "large; free space")


def test_a_finetune_output_loses_what_a_killed_run_left_and_nothing_else(tmp_path):
    """What `finetune` removes once it holds its output's lock (training.finetuning; the whole run: the slow test
    below and test_finetune.py's kill test)."""
    from albert_tf.runtime import lock  # pylint: disable=import-outside-toplevel
    from albert_tf.training import finetuning, run  # pylint: disable=import-outside-toplevel

    out = tmp_path / "out"
    killed = ["best/ckpt-1_temp/", "checkpoints/ckpt-1.index.tempstate5", "checkpoints/checkpoint.tmp" + TF_TEMP,
              ".finetune_config.json.tmp-" + TEMP, ".eval_results.json.tmp-" + TEMP, "best/.albert_config.json.tmp-"
              + TEMP, "..albert_tf.lock.tmp-" + TEMP]
    kept = ["notes.txt", ".notes.txt.tmp-" + TEMP, "train/events.out.tfevents.1.v2", "best/ckpt-1.index",
            "best/ckpt-1.data-00000-of-00001", "checkpoints/checkpoint"]
    _make(out, killed + kept)
    with lock.output_lock(str(out), "--output") as held:
        run.remove_leftovers(held, finetuning.leftover_places(str(out)))
    assert helpers.tree(out) == sorted(set(kept) | {"best", "checkpoints", "train"})


def test_a_killed_runs_work_folder_is_removed_and_a_live_ones_kept(tmp_path, monkeypatch):
    """A real kill -9 of a process inside private_temp_dir (the vocab trainer's folder)."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    program = ("import os, signal, sys\nfrom albert_tf.runtime import leftovers\n"
               "with leftovers.private_temp_dir('vocab') as work:\n"
               "    open(os.path.join(work, 'trainer.log'), 'w').write('x' * 500)\n"
               "    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", program], env=helpers.checkout_env(TMPDIR=str(tmp_path)),
                          check=False)
    assert proc.returncode == -signal.SIGKILL
    killed = [name for name in os.listdir(tmp_path) if name.startswith("albert_tf_vocab_")]
    assert len(killed) == 1
    with leftovers.private_temp_dir("vocab") as live:
        assert leftovers.remove_abandoned("keras_hub") == []
        removed = leftovers.remove_abandoned("vocab")
        assert os.path.isdir(live)
    assert [path for path, _ in removed] == [str(tmp_path / killed[0]) + "/"] and removed[0][1] == 500
    assert os.listdir(tmp_path) == []


def test_a_lock_that_cannot_be_written_leaves_no_file_and_no_folder(tmp_path):
    """Before: an empty lock file (and the folder made for it) stayed on a full disk."""
    from albert_tf.runtime import lock  # pylint: disable=import-outside-toplevel

    with helpers.file_size_limit(10), pytest.raises(OSError, match="File too large"):
        lock.DirectoryLock(str(tmp_path / "new"), "--output").acquire()
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------------------------- per job
# Each run below finds what a killed run left, removes it (one note), then meets a full disk: one line naming the
# path (exit 74), and at the end nothing of either is left; a user's files, and other outputs' temporaries, stay.

def test_pretrain_removes_a_killed_runs_temporaries_and_leaves_none_on_a_full_disk(tmp_path, cli, pretrain_data):
    """Before: the killed run's files stayed; the full disk was exit 1 here (EFBIG; ENOSPC: 74 without the path)."""
    model = tmp_path / "model"
    killed = ["ckpt-2_temp/", "ckpt-2.index.tempstate77", "checkpoint.tmp" + TF_TEMP, "steps/ckpt-2_temp/",
              ".metrics.jsonl.tmp-" + TEMP, "..albert_tf.lock.tmp-" + TEMP]
    users = ["notes.txt", ".notes.txt.tmp-" + TEMP]
    _make(model, killed + users)
    with helpers.file_size_limit(50_000):
        code, _, err = cli("pretrain", *helpers.pretrain_args(pretrain_data, model, steps=2))
    assert code == 74, err
    assert f"6 file(s): {model}/..albert_tf.lock.tmp-{TEMP}, {model}/.metrics.jsonl.tmp-{TEMP}, " in _note(
        err, "pretrain")
    assert _error_line(err, "pretrain") == (f"albert-tf pretrain: error: {model / 'ckpt-2'}: could not be written: "
                                            "file too large; free space (or choose another output), then run again")
    assert helpers.tree(model) == sorted(users + ["albert_config.json", "metrics.jsonl", "pretrain_config.json",
                                                  "steps", "train"] + [
        os.path.join("train", name) for name in os.listdir(model / "train")])


@pytest.mark.slow  # a fine-tuning run (about 25 s of CPU): its fast parts below and in test_a_checkpoint_save_...
def test_finetune_removes_a_killed_runs_temporaries_and_leaves_none_on_a_full_disk(tmp_path, cli, random_init):
    """Before (D5): best/ckpt-1_temp/ was left on a full disk (and exit 1 here: EFBIG), the line named no path,
    and what a killed run left stayed."""
    data = finetune_helpers.write_sst2(str(tmp_path / "sst2"), num_train=32, num_dev=16)
    out = tmp_path / "out"
    _make(out, ["best/ckpt-1_temp/", "checkpoints/ckpt-1.index.tempstate5", ".finetune_config.json.tmp-" + TEMP,
                "best/.albert_config.json.tmp-" + TEMP, "notes.txt"])
    with helpers.file_size_limit(200_000):
        code, _, err = cli("finetune", "--task", "sst2", "--data-dir", data, "--init", random_init, "--output", out,
                           "--epochs", 1, "--batch-size", 16, "--max-seq-length", 24)
    assert code == 74, err
    assert "4 file(s)" in _note(err, "finetune")
    assert _error_line(err, "finetune").startswith(f"albert-tf finetune: error: {out / 'best' / 'ckpt-1'}: could "
                                                   "not be written: file too large"), err
    left = helpers.tree(out)
    assert not [p for p in left if "ckpt" in p or "tmp" in p or "lock" in p], left
    assert {"notes.txt", "finetune_config.json"} <= set(left)


def test_an_export_removes_a_killed_exports_temporaries_and_leaves_none_on_a_full_disk(tmp_path):
    """What every export writes through (the encoder's and the fine-tuned tasks'), with a small module. Before
    (D16): a killed export's BASE/.1.tmp-* stayed for good (later exports wrote 1, 2, ... beside it); the full
    disk's line named no path when TensorFlow's text did not start with it."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.runtime import faults  # pylint: disable=import-outside-toplevel
    from albert_tf.serving import saved_model  # pylint: disable=import-outside-toplevel

    module = tf.Module()
    module.table = tf.Variable(tf.zeros([40_000]))  # 160 kB of variables
    module.call = tf.function(lambda x: x * module.table[0], input_signature=[tf.TensorSpec([], tf.float32)])
    base = tmp_path / "export"
    _make(base, [f".1.tmp-{TEMP}/", f".1.tmp-{TEMP}/saved_model.pb", f"..albert_tf.lock.tmp-{TEMP}",
                 f".notes.tmp-{TEMP}"])
    with helpers.file_size_limit(60_000), pytest.raises(tf.errors.OutOfRangeError) as info:
        saved_model.write_saved_model(module, str(base), {"serving_default": module.call})
    assert helpers.tree(base) == [".notes.tmp-" + TEMP]
    assert str(faults.classify(info.value)).startswith(f"{base / '1' / 'variables' / 'variables'}: could not be "
                                                       "written: file too large")  # the variables' checkpoint
    assert saved_model.write_saved_model(module, str(base), {"serving_default": module.call}) == str(base / "1")


def test_convert_to_hf_removes_a_killed_runs_temporaries_and_leaves_none_on_a_full_disk(tmp_path, cli,
                                                                                       random_init):
    """Before: exit 1 here (EFBIG) and a killed conversion's .hf.tmp-* stayed."""
    output = tmp_path / "hf"
    _make(tmp_path, [f".hf.tmp-{TEMP}/", f".hf.tmp-{TEMP}/model.safetensors", f".hf2.tmp-{TEMP}/"])
    with helpers.file_size_limit(20_000):
        code, _, err = cli("convert", "--init", random_init, "--to", "hf", "--output", output)
    assert code == 74, err
    assert f"1 file(s): {tmp_path}/.hf.tmp-{TEMP}/ (2.0 kB)" in _note(err, "convert"), err
    assert _error_line(err, "convert").startswith(f"albert-tf convert: error: {output}/"), err
    assert sorted(os.listdir(tmp_path)) == [f".hf2.tmp-{TEMP}"]


def test_create_data_removes_a_killed_runs_temporaries(tmp_path, cli, corpus_file, tiny_spm_model):
    """Its shards', its index's and its lock's temporaries; another prefix's stay (a real kill: test_signals.py)."""
    out = tmp_path / "data"
    _make(out, [f".train-00000-of-00002.tfrecord.tmp-{TEMP}", f"..train.record_counts.json.tmp-{TEMP}",
                f"..train.albert_tf.lock.tmp-{TEMP}", f".eval-00000-of-00001.tfrecord.tmp-{TEMP}"])
    code, _, err = cli("create-data", "--input", corpus_file, "--spm-model", tiny_spm_model, "--output",
                       out / "train", "--max-seq-length", 32)
    assert code == 0 and "3 file(s)" in _note(err, "create-data") and "(3.0 kB)" in err, err
    assert sorted(p for p in os.listdir(out) if ".tmp-" in p) == [f".eval-00000-of-00001.tfrecord.tmp-{TEMP}"]


def test_vocab_removes_a_killed_runs_temporaries(tmp_path, cli, corpus_file, monkeypatch):
    """The prefix's temporaries (a kill between writing them and renaming) and the trainer's folder of a run that
    is gone; another prefix's temporaries stay. (vocab on a full disk: test_faults.py.)"""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    # as a killed vocab leaves its trainer's folder: the flock on .albert_tf.held gone with the process
    _make(tmp_path / "tmp", ["albert_tf_vocab_x1y2z3/.albert_tf.held", "albert_tf_vocab_x1y2z3/work/trainer.log"])
    _make(tmp_path, [f".spm.model.tmp-{TEMP}", f".spm.casing.json.tmp-{TEMP}", f".spm2.model.tmp-{TEMP}"])
    code, _, err = cli("vocab", "--input", corpus_file, "--output-prefix", tmp_path / "spm", "--vocab-size", 100)
    assert code == 0, err
    assert f"3 file(s): {tmp_path}/.spm.casing.json.tmp-{TEMP}, {tmp_path}/.spm.model.tmp-{TEMP}, " \
           f"{tmp_path / 'tmp'}/albert_tf_vocab_x1y2z3/ (4.0 kB)" in _note(err, "vocab")
    assert sorted(p for p in os.listdir(tmp_path) if p.startswith(".")) == [f".spm2.model.tmp-{TEMP}"]
    assert os.listdir(tmp_path / "tmp") == []

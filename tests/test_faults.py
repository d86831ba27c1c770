"""Faults a command cannot fix by itself, each one line and its own exit code (albert_tf.runtime.exit_codes), with
nothing half-written left: a full disk (74), a bucket that does not answer (69) or refuses access (78), a killed
create-data worker (76), an unexpected error (1, the traceback only with --verbose); argparse's errors in one line.

TensorFlow's errors are made as TensorFlow raises them (their classes and messages, taken from tf.io.gfile on a
machine without network and on a full tmpfs), raised by a patched tf.io.gfile / TFRecordWriter: no network, no
root, no full disk needed."""
import errno
import os
import signal

import pytest
import tensorflow as tf

import helpers
from albert_tf.runtime import exit_codes, faults

NO_HOST = ("Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve hostname', error details: "
           "Could not resolve host: www.googleapis.com\n\t when reading metadata of gs://some-bucket/spm")
FORBIDDEN = ("Error executing an HTTP request: HTTP response code 403 with body '{\"error\": {\"code\": 403, "
             "\"message\": \"someone@example.com does not have storage.objects.get access\"}}'\n\t when reading "
             "metadata of gs://some-bucket/spm")


def _one_error_line(err, command):
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("progress: ")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"albert-tf {command}: error: "), err
    return lines[0]


# ---------------------------------------------------------------------------------------------- classification
def test_each_fault_class_has_its_code_and_one_line():
    cases = [
        (OSError(errno.ENOSPC, "No space left on device", "/data/out/.spm.model.tmp-0123456789ab"), 74,
         "/data/out/spm.model: could not be written: no space left on device"),
        (tf.errors.ResourceExhaustedError(None, None, "/d/.train-00000-of-00001.tfrecord.tmp-4f217f455e63; No "
                                                      "space left on device"), 74,
         "/d/train-00000-of-00001.tfrecord: could not be written: no space left on device"),
        (tf.errors.FailedPreconditionError(None, None, NO_HOST), 69,
         "gs://some-bucket/spm: not reachable (Could not resolve host: www.googleapis.com)"),
        (tf.errors.PermissionDeniedError(None, None, FORBIDDEN), 78, "gs://some-bucket/spm: access refused"),
    ]
    # TensorFlow's texts as it raised them on a full and on a read-only tmpfs: before, the save's line named no path
    # (D18) and a read-only or forbidden path was "free space" (74) or exit 1 (D14)
    save = "{{function_node __wrapped__SaveV2_dtypes_99_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
    cases += [
        (tf.errors.ResourceExhaustedError(None, None, f"{save}out/model/ckpt-4_temp/part-00000-of-00001.data-00000-"
                                                      "of-00001.tempstate11981488040702586744; No space left on "
                                                      "device [Op:SaveV2]"), 74,
         "out/model/ckpt-4: could not be written: no space left on device; free space"),
        (tf.errors.ResourceExhaustedError(None, None, "base/.1.tmp-c668d5f371d7/saved_model.pb.tmpc116acb5c50848fc"
                                                      "9642cf126655c7e6; No space left on device"), 74,
         "base/1/saved_model.pb: could not be written: no space left on device"),
        (tf.errors.OutOfRangeError(None, None, f"{save}/o/best/ckpt-1_temp/part-00000-of-00001.data-00000-of-"
                                               "00001.tempstate4549039356148674697; File too large [Op:SaveV2]"), 74,
         "/o/best/ckpt-1: could not be written: file too large"),
        (OSError(errno.EROFS, "Read-only file system", "ro/.spm.albert_tf.lock"), 78,
         "ro/.spm.albert_tf.lock: access refused (read-only file system): a matter of permission, not of space; "
         "choose an output on a writable filesystem, then run again"),
        (PermissionError(errno.EACCES, "Permission denied", "/data/out"), 78,
         "/data/out: access refused (permission denied): a matter of permission, not of space; give this user "
         "access to it (its permissions or owner) or choose another path, then run again"),
        (OSError(errno.EPERM, "Operation not permitted", "/data/out/x"), 78,
         "/data/out/x: access refused (operation not permitted)"),
        (tf.errors.PermissionDeniedError(None, None, "ro/.hf.tmp-fb668acee6f7; Read-only file system"), 78,
         "ro/hf: access refused (read-only file system)"),
        (tf.errors.PermissionDeniedError(None, None, "locked/.hf.tmp-806c233f535e; Permission denied"), 78,
         "locked/hf: access refused (permission denied)"),
    ]
    for error, code, start in cases:
        fault = faults.classify(error)
        assert fault.exit_code == code and str(fault).startswith(start), (error, str(fault))
        assert "\n" not in str(fault)
    assert faults.classify(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")) is None
    assert faults.classify(RuntimeError("boom")) is None


# ---------------------------------------------------------------------------------------------- a full disk
_REAL_WRITER = tf.io.TFRecordWriter


class _FullDiskWriter:
    """tf.io.TFRecordWriter on a disk that fills after `room` records: write and close raise as TensorFlow's do."""

    def __init__(self, path, room=20):
        self.path, self.room, self.real = path, room, _REAL_WRITER(path)

    def _full(self):
        return tf.errors.ResourceExhaustedError(None, None, f"{self.path}; No space left on device")

    def write(self, record):
        self.room -= 1
        if self.room < 0:
            raise self._full()
        self.real.write(record)

    def close(self):
        self.real.close()
        if self.room < 0:
            raise self._full()


def test_create_data_on_a_full_disk_exits_74_and_removes_its_temp_shards(tmp_path, cli, corpus_file,
                                                                         tiny_spm_model, monkeypatch):
    """Before: a traceback (the temp writers' close raised again in the clean-up) and 20 MB of temp shards left."""
    monkeypatch.setattr(tf.io, "TFRecordWriter", _FullDiskWriter)
    out = tmp_path / "data"
    code, _, err = cli("create-data", "--input", corpus_file, "--spm-model", tiny_spm_model, "--output",
                       out / "train", "--num-shards", 2, "--max-seq-length", 32, "--dupe-factor", 3)
    line = _one_error_line(err, "create-data")
    assert code == 74, err
    assert line.startswith(f"albert-tf create-data: error: {out / 'train-0000'}") and "no space left" in line
    assert not out.exists() or os.listdir(out) == []  # no temp shard, no lock, no index


def test_create_data_whose_index_does_not_fit_puts_no_shard_in_place(tmp_path, cli, corpus_file, tiny_spm_model,
                                                                     monkeypatch):
    """The disk fills up at the record-count index, the last file written: before, the shards were already renamed
    into place and stayed without their index; now the index is written before any rename, and nothing is left."""
    from albert_tf.data import record_index  # pylint: disable=import-outside-toplevel

    def full(path, entries, vocabulary=None):
        raise OSError(errno.ENOSPC, "No space left on device", os.fspath(path))

    monkeypatch.setattr(record_index, "write_index", full)
    out = tmp_path / "data"
    code, _, err = cli("create-data", "--input", corpus_file, "--spm-model", tiny_spm_model, "--output",
                       out / "train", "--num-shards", 2, "--max-seq-length", 32)
    assert code == 74 and "no space left" in _one_error_line(err, "create-data"), err
    assert not out.exists() or os.listdir(out) == []  # no shard, no temp, no lock, no index


def test_vocab_on_a_full_disk_exits_74_in_one_line(tmp_path, cli, corpus_file, monkeypatch):
    real_gfile = tf.io.gfile.GFile

    def full(path, mode="r"):
        if "w" in mode:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real_gfile(path, mode)
    monkeypatch.setattr(tf.io.gfile, "GFile", full)
    code, _, err = cli("vocab", "--input", corpus_file, "--output-prefix", tmp_path / "spm", "--vocab-size", 100)
    assert code == 74 and "could not be written: no space left on device" in _one_error_line(err, "vocab"), err


# ---------------------------------------------------------------------------------------------- a path not writable
def test_every_job_reports_a_folder_it_may_not_write_as_access_refused(tmp_path, corpus_file, tiny_spm_model,
                                                                      pretrain_data, random_init):
    """A real refusal: each job writes into a folder of mode 0o555, run as a user whom the permission bits bind
    (as root: without CAP_DAC_OVERRIDE, tests/programs/permission_bound_cli.py). Before: exit 1 and a
    PermissionError / PermissionDeniedError line (on a read-only filesystem: exit 74 and "free space")."""
    import finetune_helpers  # pylint: disable=import-outside-toplevel

    sst2 = finetune_helpers.write_sst2(str(tmp_path / "sst2"), num_train=16, num_dev=8)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    locked.chmod(0o555)  # whatever the umask
    commands = {
        "vocab": ["--input", corpus_file, "--output-prefix", locked / "spm", "--vocab-size", 100],
        "create-data": ["--input", corpus_file, "--spm-model", tiny_spm_model, "--output", locked / "data" / "train"],
        "pretrain": helpers.pretrain_args(pretrain_data, locked / "model", steps=2),
        "finetune": ["--task", "sst2", "--data-dir", sst2, "--init", random_init, "--output", locked / "out"],
        "convert": ["--init", random_init, "--to", "hf", "--output", locked / "hf"],
        "export": ["--init", random_init, "--output", locked / "export", "--no-warmup"],
    }
    argv = []
    for command, args in commands.items():
        argv += (["--then"] if argv else []) + [command] + [str(a) for a in args]
    proc = helpers.run_program("permission_bound_cli", *argv)
    assert proc.stdout.splitlines() == ["exit 78"] * len(commands), proc.stdout + proc.stderr
    lines = helpers.error_lines(proc.stderr)
    assert len(lines) == len(commands), proc.stderr
    for command, line in zip(commands, lines):
        assert line.startswith(f"albert-tf {command}: error: {locked}/") and ": access refused (permission " \
            "denied): a matter of permission, not of space; give this user access to it" in line, line
    assert os.listdir(locked) == []


# ---------------------------------------------------------------------------------------------- gs://
def _gfile_raising(monkeypatch, error):
    def fail(path, *args, **kwargs):
        if str(path).startswith("gs://"):
            raise error
        raise AssertionError(f"no local path expected here: {path}")
    for name in ("exists", "glob", "isdir", "GFile"):
        monkeypatch.setattr(tf.io.gfile, name, fail)


@pytest.mark.parametrize("error, code", [(tf.errors.FailedPreconditionError(None, None, NO_HOST), 69),
                                         (tf.errors.PermissionDeniedError(None, None, FORBIDDEN), 78)])
def test_vocab_to_an_unreachable_or_refusing_bucket_fails_before_training(cli, corpus_file, monkeypatch, error,
                                                                          code):
    """Before: vocab trained fully, then failed at the upload with a 23-42 line traceback (exit 1)."""
    from albert_tf.data import vocab as vocab_training  # pylint: disable=import-outside-toplevel

    _gfile_raising(monkeypatch, error)
    monkeypatch.setattr(vocab_training, "sample_sentences",
                        lambda *args, **kwargs: pytest.fail("read the corpus before checking the bucket"))
    got, _, err = cli("vocab", "--input", corpus_file, "--output-prefix", "gs://some-bucket/spm")
    line = _one_error_line(err, "vocab")
    assert got == code and line.startswith("albert-tf vocab: error: gs://some-bucket/spm: "), err


def test_create_data_from_an_unreachable_bucket_exits_69(tmp_path, cli, tiny_spm_model, monkeypatch):
    _gfile_raising(monkeypatch, tf.errors.FailedPreconditionError(None, None, NO_HOST.replace(
        "reading metadata of gs://some-bucket/spm", "reading gs://some-bucket/")))
    code, _, err = cli("create-data", "--input", "gs://some-bucket/corpus/*.txt", "--spm-model", tiny_spm_model,
                       "--output", tmp_path / "data" / "train")
    assert code == 69, err
    assert _one_error_line(err, "create-data").startswith("albert-tf create-data: error: gs://some-bucket/: not "
                                                          "reachable (Could not resolve host")
    assert not (tmp_path / "data").exists()


# ---------------------------------------------------------------------------------------------- a killed worker
def test_a_killed_create_data_worker_is_one_line_and_exit_76(tiny_spm_model):
    """Before: RuntimeError (exit 1), or the main process's BrokenPipeError traceback when it sent to the dead
    worker."""
    from albert_tf.data import create_pretraining_data as creation  # pylint: disable=import-outside-toplevel
    from albert_tf.data.instances import InstanceOptions  # pylint: disable=import-outside-toplevel

    with open(tiny_spm_model, "rb") as f:
        proto = f.read()
    workers = creation._Workers(2, proto, True, InstanceOptions(max_seq_length=32).validate())
    try:
        victim = workers.processes[1]
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(30)
        blocks = [("a.txt", [["a first sentence .", "a second one ."]])] * 4
        with pytest.raises(exit_codes.RuntimeLost, match=rf"worker process {victim.pid} was killed \(SIGKILL: out "
                                                         r"of memory\?\); no shard written"):
            workers.run(iter(blocks), lambda path, result: None)
    finally:
        workers.close()


class _BrokenPipe:
    """A worker's end of the pipe whose main process was killed: one block in, then the send breaks."""

    def __init__(self):
        self.blocks = [[["a first sentence .", "a second one ."]]]

    def recv(self):
        if not self.blocks:
            raise EOFError
        return self.blocks.pop()

    def send(self, answer):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_a_worker_whose_main_process_is_gone_ends_quietly(tiny_spm_model, capfd):
    """Before: each worker printed a 25-line BrokenPipeError traceback when the main process was SIGKILLed."""
    from albert_tf.data import create_pretraining_data as creation  # pylint: disable=import-outside-toplevel
    from albert_tf.data.instances import InstanceOptions  # pylint: disable=import-outside-toplevel

    with open(tiny_spm_model, "rb") as f:
        proto = f.read()
    creation._serve(_BrokenPipe(), proto, (True, False), InstanceOptions(max_seq_length=32).validate())
    assert capfd.readouterr().err == ""


# ---------------------------------------------------------------------------------------------- argparse, other
def test_a_misspelled_flag_is_one_line_naming_the_closest(cli, capsys):
    """Before: a 26-line usage, the flag not named."""
    with pytest.raises(SystemExit) as info:
        cli("vocab", "--input", "x", "--output-prefix", "y", "--vocab-sise", 8000)
    assert info.value.code == 2
    assert capsys.readouterr().err == ("albert-tf vocab: error: unrecognized arguments: --vocab-sise 8000; did you "
                                       "mean --vocab-size?\n")
    with pytest.raises(SystemExit):
        cli("pretrain", "--config", "albert_tiny", "--model-dir", "m")
    assert capsys.readouterr().err == ("albert-tf pretrain: error: the following arguments are required: "
                                       "--train-data\n")
    with pytest.raises(SystemExit):
        cli("vocab", "--input", "x", "--output-prefix", "y", "--vocab-size", "many")
    assert capsys.readouterr().err == ("albert-tf vocab: error: argument --vocab-size: expected a number of pieces "
                                       "or auto, got 'many'\n")


def test_an_unexpected_error_is_one_line_and_exit_1_unless_verbose(cli, monkeypatch, tmp_path):
    from albert_tf.jobs import vocab as vocab_job  # pylint: disable=import-outside-toplevel

    def broken(config):
        raise KeyError("lost")
    monkeypatch.setattr(vocab_job, "vocab", broken)
    (tmp_path / "x").write_text("a sentence.\n")  # past vocab.preflight's check of --input
    args = ("vocab", "--input", tmp_path / "x", "--output-prefix", tmp_path / "y")
    code, _, err = cli(*args)
    assert (code, err) == (1, "albert-tf vocab: error: KeyError: 'lost' (run with --verbose for the traceback)\n")
    with pytest.raises(KeyError):
        cli(*args, "--verbose")

"""The run skeleton pretrain and finetune share (albert_tf/training/run.py): the same run-record refusal line, the
same runtime-lost line, one progress line format (one regex parses both jobs' lines) and one TensorBoard layout
(RUN_DIR/train and RUN_DIR/eval, a fine-tuning run's included)."""
import dataclasses
import io
import os
import re

import finetune_helpers as fh
import helpers
import pytest
import tensorflow as tf

from albert_tf import cli, layout, run_config
from albert_tf.config import AlbertConfig
from albert_tf.settings.finetune_config import FinetuneConfig, FinetuneResult
from albert_tf.settings.pretrain_config import PretrainConfig
from albert_tf.runtime.exit_codes import RUNTIME_LOST
from albert_tf.tasks import budget as budgets
from albert_tf.training import finetuning, rehearsal, run
from albert_tf.training.callbacks import ProgressLog
from albert_tf.training.loop import Progress

# Written out here, not imported: what users' log parsers and the docs rely on.
REFUSAL = re.compile(r"(?P<path>\S+): the output directory holds a run with other settings: (?P<fields>.+); "
                     r"use a new (?P<flag>--[\w-]+) or the same settings")


# ---------------------------------------------------------------------------------------------- the run record
def test_the_run_record_refusal_is_the_same_line_for_both_jobs(tmp_path):
    """A resumed run with another batch size is refused by both jobs with one line of one shape: the record's path,
    each differing field with both values, the flag naming the directory."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    helpers.write_records(str(tmp_path / "train.tfrecord"), 16, 32, 5, seed=0)
    AlbertConfig(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=64).to_json_file(str(tmp_path / "albert_config.json"))
    pretrain = PretrainConfig(config=tmp_path / "albert_config.json", train_data=tmp_path / "train.tfrecord",
                              model_dir=tmp_path / "model", max_seq_length=32, max_predictions=5, batch_size=8,
                              num_train_steps=2, num_warmup_steps=1)
    recorded = dataclasses.replace(pretrain, batch_size=16)
    (tmp_path / "model").mkdir()
    run_config.write_record(layout.ModelDir(str(tmp_path / "model")).run_record, run_config.run_record(recorded))
    with pytest.raises(ValueError) as pretrain_refusal:
        albert_tf.pretrain(pretrain)

    finetune = FinetuneConfig(task="mrpc", data_dir="d", init="i", output=str(tmp_path / "out"))
    finetuning.record_run(finetune, budgets.make_budget(dataclasses.replace(finetune, batch_size=16), 100, 128))
    with pytest.raises(ValueError) as finetune_refusal:
        finetuning.record_run(finetune, budgets.make_budget(finetune, 100, 128))

    lines = [REFUSAL.fullmatch(str(e.value)) for e in (pretrain_refusal, finetune_refusal)]
    assert all(lines), (str(pretrain_refusal.value), str(finetune_refusal.value))
    assert [m["path"] for m in lines] == [layout.ModelDir(str(tmp_path / "model")).run_record,
                                          layout.FinetuneDir(str(tmp_path / "out")).run_record]
    assert [m["flag"] for m in lines] == ["--model-dir", "--output"]
    assert lines[0]["fields"] == "batch_size 8 (recorded 16)"
    assert "budget.batch_size 32 (recorded 16)" in lines[1]["fields"]


# ---------------------------------------------------------------------------------------------- runtime lost
def test_the_runtime_lost_line_names_the_last_step_or_epoch_and_the_checkpoint():
    error = tf.errors.UnavailableError(None, None, "Socket closed\n\t [[{{node CollectiveReduceV2}}]]")
    lost = run.runtime_lost("pretrain", error, 30, "m/ckpt-20")
    assert lost.exit_code == RUNTIME_LOST
    assert str(lost) == ("the TPU / runtime or a peer worker went away after step 30 (UnavailableError: Socket "
                         "closed); the last checkpoint is m/ckpt-20: relaunch the same command to resume from it")
    assert rehearsal.lost_after_step(str(lost)) == 30  # what the rehearsal reads from a worker's log
    assert str(run.runtime_lost("finetune", error, 2, "o/checkpoints/ckpt-2")).startswith(
        "the TPU / runtime or a peer worker went away after epoch 2 (UnavailableError: Socket closed); the last "
        "checkpoint is o/checkpoints/ckpt-2: ")
    assert [str(run.runtime_lost(job, error, None, None)).split(" (")[0] for job in ("pretrain", "finetune")] == [
        "the TPU / runtime or a peer worker went away before the first step ended",
        "the TPU / runtime or a peer worker went away before the first epoch ended"]


# ---------------------------------------------------------------------------------------------- progress
class _Clock:
    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


def test_both_jobs_progress_lines_parse_with_one_regex():
    """Pretraining's Progress and fine-tuning's ProgressLog at the same point of a run (step 60 of 200, 59 steps in
    the 14.75 s since the first step ended: 4 steps/s, batch 16, 20 s since the start): the same fields, then each
    job's own."""
    clock, lines = _Clock(), []
    progress = Progress(0, 200, 16, started=clock.now, echo=lambda text, **_: lines.append(text), clock=clock)
    clock.now = 105.25
    progress.advanced(1)
    clock.now = 120.0
    progress.advanced(60)
    progress.doing("saving step 60")
    pretrain_line = progress.line()

    clock, out = _Clock(), io.StringIO()
    log = ProgressLog(100, 2, 16, every_steps=59, clock=clock, stream=out)
    log.on_train_begin()
    log.on_epoch_begin(0)
    clock.now = 105.25
    log.on_train_batch_end(0, {"loss": 0.7})
    clock.now = 120.0
    log.on_train_batch_end(59, {"loss": 0.69314718})
    finetune_line = out.getvalue().strip()

    parsed = [run.PROGRESS_LINE.fullmatch(line) for line in (pretrain_line, finetune_line)]
    assert all(parsed), (pretrain_line, finetune_line)
    shared = ("step", "total_steps", "percent", "steps_per_second", "examples_per_second", "elapsed", "eta")
    assert [m.group(*shared) for m in parsed] == [("60", "200", "30.0", "4", "64", "20s", "35s")] * 2
    assert parsed[0]["more"] == " | saving step 60 for 0s"
    assert parsed[1]["more"] == " | epoch 1/2 | loss 0.6931"


# ---------------------------------------------------------------------------------------------- a fine-tuning run
def _events(directory):
    """{tag} of the TensorBoard event files in `directory`."""
    tags = set()
    for path in tf.io.gfile.glob(os.path.join(directory, "events*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(v.tag for v in event.summary.value)
    return tags


def test_a_finetune_run_writes_tensorboard_as_pretraining_does_and_prints_its_progress_lines(tmp_path,
                                                                                         tiny_spm_model, capsys,
                                                                                         monkeypatch):
    """One epoch of 3 steps on a generated SST-2: its TensorBoard events are OUTPUT/train (Keras' logs, the learning
    rate) and OUTPUT/eval (the official dev metric, tagged with the data split), the layout of a pretraining model
    dir; its progress lines (stdout a pipe: no Keras bar) are on stderr in the one format. The best epoch's
    evaluation and export (`finish`: tests/test_finetune.py, tests/test_task_export.py) are left out here."""
    init = fh.save_random_init(str(tmp_path / "init"), tiny_spm_model)
    data = fh.write_sst2(str(tmp_path / "sst2"), 48, 8)
    output = tmp_path / "out"
    monkeypatch.setattr(finetuning, "finish", lambda cfg, *_: FinetuneResult("done", cfg.output))
    assert cli.main(["finetune", "--task", "sst2", "--data-dir", data, "--init", init, "--output", str(output),
                     "--epochs", "1", "--batch-size", "16", "--max-seq-length", "16", "--log-every", "1"]) == 0
    err = capsys.readouterr().err
    finetune_dir = layout.FinetuneDir(str(output))
    assert {"loss", "accuracy", "learning_rate"} <= _events(finetune_dir.events(layout.TRAIN_SPLIT))
    assert _events(finetune_dir.events(layout.EVAL_SPLIT)) == {"dev/accuracy"}
    assert not (output / "logs").exists()
    progress = [run.PROGRESS_LINE.fullmatch(line) for line in err.splitlines() if line.startswith("progress: ")]
    assert [m and (m["step"], m["total_steps"]) for m in progress] == [("2", "3"), ("3", "3")], err
    assert all(m["more"].startswith(" | epoch 1/1 | loss ") for m in progress)


def test_a_finetune_whose_fit_fails_puts_the_signal_handlers_back(tmp_path, tiny_spm_model, monkeypatch):
    """Keras calls on_train_end only when fit returns: a fit that raises (here after on_train_begin, as a data error
    mid-epoch does) must still put SIGINT / SIGTERM's previous handlers back and end the watcher thread, or a
    notebook's next Ctrl-C would only 'request a stop' of a run that is over."""
    import signal  # pylint: disable=import-outside-toplevel
    import threading  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.task_model import TaskModel  # pylint: disable=import-outside-toplevel

    def failing_fit(self, *args, callbacks=(), **kwargs):
        for callback in callbacks:
            callback.set_model(self)
            callback.on_train_begin()
        assert signal.getsignal(signal.SIGINT) != before[signal.SIGINT]  # the stop handler is in place
        raise RuntimeError("a failure inside fit")

    init = fh.save_random_init(str(tmp_path / "init"), tiny_spm_model)
    data = fh.write_sst2(str(tmp_path / "sst2"), 48, 8)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(TaskModel, "fit", failing_fit)
    assert cli.main(["finetune", "--task", "sst2", "--data-dir", data, "--init", init, "--output",
                     str(tmp_path / "out"), "--epochs", "1", "--batch-size", "16", "--max-seq-length", "16"]) != 0
    assert {s: signal.getsignal(s) for s in before} == before
    assert all(t.name != "stop-signal" for t in threading.enumerate())

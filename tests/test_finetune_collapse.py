"""A fine-tuning run that collapses to a constant prediction says so: `training_collapse` on epoch histories
(hand-written, the first one the measured collapse of docs/fine-tuning-quality.md, "Collapse") and the
CollapseWatch's line, file and resume; and the collapse itself, reproduced with the original's optimizer and
avoided by the default one."""
import json
import math

import pytest

import finetune_helpers as fh
from albert_tf.training import collapse

LN2 = math.log(2)


def test_a_run_that_learned_then_returned_to_chance_for_two_epochs_is_a_collapse():
    history = [(1, 0.500, 0.707), (2, 0.604, 0.675), (3, 0.500, 0.737), (4, 0.500, 0.706)]
    found = collapse.training_collapse(history, majority=0.5, num_labels=2)
    assert found == {"epoch": 3, "accuracy": 0.5, "loss": 0.706, "majority_rate": 0.5, "chance_loss": LN2,
                     "best_epoch": 2, "best_accuracy": 0.604}
    # one chance-like epoch is not enough; nor is a loss well under ln 2 (still fitting the training data)
    assert collapse.training_collapse(history[:3], 0.5, 2) is None
    assert collapse.training_collapse(history[:3] + [(4, 0.500, 0.40)], 0.5, 2) is None
    # a run that never left chance is on the plateau, not collapsed
    assert collapse.training_collapse([(1, 0.5, 0.70), (2, 0.505, 0.69), (3, 0.5, 0.693)], 0.5, 2) is None
    # the collapse starts where the chance-like epochs start; 3 labels: ln 3
    history = [(1, 0.7, 0.5), (2, 0.4, 1.09), (3, 0.4, 1.10), (4, 0.405, 1.098)]
    found = collapse.training_collapse(history, majority=0.4, num_labels=3)
    assert found["epoch"] == 2 and found["chance_loss"] == pytest.approx(math.log(3)) and found["best_epoch"] == 1


def test_the_watch_prints_one_line_once_and_keeps_its_epochs_for_a_resumed_run(tmp_path, capsys):
    path = str(tmp_path / "epoch_history.json")
    watch = collapse.CollapseWatch(path, 0.5, 2, "adamw-original", "bfloat16")
    for epoch, accuracy, loss in [(1, 0.697, 0.6), (2, 0.5, 0.69), (3, 0.5, 0.693), (4, 0.5, 0.693)]:
        watch.epoch_end(epoch, {"dev": {"accuracy": accuracy}}, loss)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "training collapsed at epoch 2" in lines[0] and "majority-class rate (0.500)" in lines[0]
    assert "--learning-rate" in lines[0] and "--optimizer adamw-keras" in lines[0] and "--dtype float32" in lines[0]
    assert watch.collapse["epoch"] == 2 and json.loads(open(path).read())["collapse"] == watch.collapse
    # a run resumed after epoch 2 keeps epochs 1-2 and has not yet collapsed (that took epoch 3)
    resumed = collapse.CollapseWatch(path, 0.5, 2, "adamw-keras", "float32", initial_epoch=2)
    assert [e for e, _, _ in resumed.history] == [1, 2] and resumed.collapse is None
    resumed.epoch_end(3, {"dev": {"accuracy": 0.5}}, 0.693)
    line = capsys.readouterr().err
    assert "collapsed at epoch 2" in line and "adamw-keras" not in line and "--dtype float32" not in line



def test_auto_keeps_float32_for_the_original_optimizer_and_never_changes_an_explicit_dtype():
    from albert_tf.runtime.precision import DtypeChoice  # pylint: disable=import-outside-toplevel
    from albert_tf.training.finetuning import dtype_for_quality  # pylint: disable=import-outside-toplevel

    fast = DtypeChoice("bfloat16", "auto: TPU")
    kept = dtype_for_quality(fast, "auto", "adamw-original")
    assert kept.dtype == "float32" and "auto: TPU would be bfloat16" in kept.reason and "adamw-original" in kept.reason
    assert dtype_for_quality(fast, "auto", "adamw-keras") == fast
    explicit = DtypeChoice("bfloat16", "--dtype")
    assert dtype_for_quality(explicit, "bfloat16", "adamw-original") == explicit
    slow = DtypeChoice("float32", "auto: CPU matmul bfloat16 44 vs float32 65 GFLOP/s")
    assert dtype_for_quality(slow, "auto", "adamw-original") == slow


@pytest.mark.slow
def test_the_default_optimizer_does_not_collapse_where_the_original_does(tmp_path, capsys, builtin_spm_model):
    """The collapse of docs/fine-tuning-quality.md ("Collapse"), through `albert_tf.finetune` in float32: the
    few-label task, a 4-layer 256-wide random init (seed 2), 8 epochs of 16 steps at lr 1e-3 (a warm-up of 24
    steps, as the benchmark's 15 epochs have), seed 2. With the original's AdamWeightDecay the run ends predicting
    one class (here: 0.58 after the first epoch, then the majority-class rate for good, reported as a collapse;
    seeds 0 and 1 never leave the majority-class rate, and which seeds learn first depends on the last bit of the
    arithmetic); with the default optimizer (bias-corrected), from the same init on the same batches, it does not
    collapse and ends above 0.78 (0.80 in seeds 0, 1 and 2 here)."""
    import albert_tf  # pylint: disable=import-outside-toplevel
    from albert_tf.data.builtin_corpus import write_few_label_task  # pylint: disable=import-outside-toplevel

    data = write_few_label_task(str(tmp_path / "task"))
    init = fh.save_random_init(str(tmp_path / "init"), builtin_spm_model, seed=2, hidden_size=256,
                               intermediate_size=1024, embedding_size=128)
    runs = {}
    for optimizer in ("adamw-original", None):
        output = tmp_path / f"out-{optimizer}"
        settings = {} if optimizer is None else {"optimizer": optimizer}
        albert_tf.finetune(albert_tf.FinetuneConfig(
            task="sst2", data_dir=data, init=init, output=str(output), epochs=8, batch_size=16, max_seq_length=64,
            learning_rate=1e-3, warmup_proportion=0.1875, classifier_dropout=0.1, seed=2, dtype="float32",
            **settings))
        report = json.loads((output / "eval_results.json").read_text())
        history = json.loads((output / "epoch_history.json").read_text())["epochs"]
        record = json.loads((output / "finetune_config.json").read_text())
        runs[optimizer] = (report, [row[1] for row in history], record, capsys.readouterr().err)
    report, accuracies, record, err = runs["adamw-original"]
    assert max(accuracies[-3:]) <= 0.51, accuracies  # one class predicted at the end
    if max(accuracies) > 0.55:  # it had learned something first: a collapse, said and recorded
        assert report["collapse"] is not None and record["collapse"] == report["collapse"], (accuracies, err)
        assert "training collapsed" in err
    report, accuracies, record, err = runs[None]
    assert record["budget"]["optimizer"] == "adamw-keras"
    assert report["collapse"] is None and "training collapsed" not in err, (accuracies, err)
    assert accuracies[-1] >= 0.78, accuracies

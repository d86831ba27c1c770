"""A fine-tuning run that collapses to a constant prediction says so: `training_collapse` on epoch histories
(hand-written, the first one the measured collapse of docs/fine-tuning-quality.md, "Collapse") and the
CollapseWatch's line, file and resume."""
import json
import math

import pytest

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


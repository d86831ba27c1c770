"""albert_tf.training.loop: the compiled multi-step loop, evaluation, the metrics log and SIGTERM handling."""
import json
import os
import signal

import pytest
import tensorflow as tf

from albert_tf.training.loop import MetricsLog, StopSignal, evaluate, make_train_loop


def test_train_loop_runs_n_steps_and_sums_over_replicas_and_steps():
    strategy = tf.distribute.get_strategy()
    counter = tf.Variable(0.0)
    batches = tf.data.Dataset.range(100).map(lambda i: tf.cast(i, tf.float32))

    def step(x, scale):
        counter.assign_add(1.0)
        return {"x": x * scale, "one": tf.constant(1.0)}

    loop = make_train_loop(strategy, step, ("x", "one"))
    iterator = iter(batches)
    first = {k: float(v) for k, v in loop(iterator, tf.constant(3), 2.0).items()}
    assert first == {"x": 2.0 * (0 + 1 + 2), "one": 3.0}
    second = {k: float(v) for k, v in loop(iterator, tf.constant(4), 1.0).items()}
    assert second == {"x": 3 + 4 + 5 + 6, "one": 4.0}  # the iterator goes on where the last call stopped
    assert float(counter.numpy()) == 7.0


def test_evaluate_runs_num_steps_and_traces_once_for_every_evaluation():
    strategy = tf.distribute.get_strategy()
    eval_loop = make_train_loop(strategy, lambda x: {"s": x}, ("s",))
    data = tf.data.Dataset.range(10).map(lambda i: tf.cast(i, tf.float32))
    assert evaluate(eval_loop, data, 4) == {"s": 0 + 1 + 2 + 3}
    assert evaluate(eval_loop, data, 10) == {"s": 45.0}  # a fresh iterator each evaluation
    assert evaluate(eval_loop, data.map(lambda x: 2 * x), 3) == {"s": 2 * (0 + 1 + 2)}
    assert eval_loop.experimental_get_tracing_count() == 1  # one trace (on a TPU: one compilation) per run


def _rows(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_metrics_log_writes_jsonl_events_and_lines_and_truncates_on_resume(tmp_path):
    lines = []
    log = MetricsLog(str(tmp_path), chief=True, echo=lambda text, **kw: lines.append(text))
    for step in (2, 4, 6):
        log.write("train", step, {"loss": 1.0 / step})
    log.write("eval", 6, {"loss": 0.5})
    log.close()
    assert lines[0] == "train step 2: loss=0.5"
    rows = _rows(tmp_path / "metrics.jsonl")
    assert [(r["split"], r["step"]) for r in rows] == [("train", 2), ("train", 4), ("train", 6), ("eval", 6)]
    events = [f for f in os.listdir(tmp_path / "train") if "tfevents" in f]
    assert events
    tags = set()
    for record in tf.data.TFRecordDataset(str(tmp_path / "train" / events[0])):
        event = tf.compat.v1.Event.FromString(record.numpy())
        tags.update(v.tag for v in event.summary.value)
    assert tags == {"loss"}
    # A resume from step 4: the rows of steps 5.. are trained again, so they go.
    resumed = MetricsLog(str(tmp_path), chief=True, echo=lambda *a, **k: None)
    resumed.truncate_after(4)
    resumed.write("train", 6, {"loss": 0.2})
    rows = _rows(tmp_path / "metrics.jsonl")
    assert [(r["split"], r["step"], r["loss"]) for r in rows] == [("train", 2, 0.5), ("train", 4, 0.25),
                                                                 ("train", 6, 0.2)]


def test_metrics_log_of_a_non_chief_writes_no_file(tmp_path):
    log = MetricsLog(str(tmp_path / "m"), chief=False, echo=lambda *a, **k: None)
    log.write("train", 1, {"loss": 1.0})
    log.truncate_after(0)
    log.close()
    assert not os.path.exists(tmp_path / "m")


def test_stop_signal_records_sigterm_and_restores_the_handler():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignal() as stop:
        assert stop.requested is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before

"""albert_tf.training.loop: the compiled multi-step loop and its length, evaluation, the metrics log, progress lines
and SIGTERM / SIGINT handling."""
import json
import os
import queue
import re
import signal

import numpy as np
import pytest
import tensorflow as tf

import helpers as ph
from albert_tf.runtime.signals import StopSignal, duration_text
from albert_tf.training.loop import (LoopLength, MetricsLog, Progress, evaluate, make_train_loop)

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


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
    for n in (1, 2, 5, 9):  # a new length is a new tensor value, not a new trace (on TPU: not a new compile)
        loop(iterator, tf.constant(n), 1.0)
    assert loop.experimental_get_tracing_count() == 2  # one per value of the Python argument (2.0, 1.0)


def test_a_per_step_loop_returns_each_steps_values_in_its_own_entry():
    """per_step=5: entry i of a call's vector is the call's step i (zeros past num_steps); a NaN step leaves the
    other entries finite (the host names the step)."""
    strategy = tf.distribute.get_strategy()
    values = [1.5, 2.25, float("nan"), 4.0, 8.0, 16.0]
    loop = make_train_loop(strategy, lambda x: {"x": x, "twice": 2.0 * x}, ("x", "twice"), per_step=5)
    iterator = iter(tf.data.Dataset.from_tensor_slices(tf.constant(values)))
    first = {k: v.numpy().tolist() for k, v in loop(iterator, tf.constant(2)).items()}
    assert first == {"x": [1.5, 2.25, 0.0, 0.0, 0.0], "twice": [3.0, 4.5, 0.0, 0.0, 0.0]}
    second = loop(iterator, tf.constant(4))["x"].numpy()
    assert np.isnan(second[0]) and second[1:].tolist() == [4.0, 8.0, 16.0, 0.0]
    assert loop.experimental_get_tracing_count() == 1


def test_the_loop_sums_on_each_replica_and_reduces_once_per_call():
    """Per call: Σ over steps and replicas equals numpy's sums over the call's examples; inside the loop's body
    each replica only adds to its accumulators (AssignAddVariableOp) and nothing is summed across replicas (no
    AddN, which ReductionToOneDevice's per-step reduction put there, once per step)."""
    # two CPU replicas in a fresh process (the CPU is split before TensorFlow initializes its devices)
    proc = ph.run_program("two_replica_loop")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    values = np.array(got["values"], dtype=np.float64)
    start = 0
    for (steps, scale), call in zip(((3, 2.0), (4, 1.0), (1, 1.0)), got["calls"]):
        examples = values[start:start + 4 * steps]
        start += 4 * steps
        want = {"sum": scale * examples.sum(), "square": (examples ** 2).sum(), "replica": steps * (0 + 1),
                "count": 4.0 * steps}
        assert call.keys() == want.keys()
        for key, value in want.items():
            assert call[key] == pytest.approx(value, rel=1e-6, abs=1e-5), (steps, key)
    assert got["whiles"] == 1 and "AssignAddVariableOp" in got["body_ops"]
    assert not {"AddN", "CollectiveReduceV2", "NcclAllReduce"} & set(got["body_ops"]), got["body_ops"]


def test_loop_length_starts_at_one_doubles_and_keeps_calls_within_the_target_time():
    lengths = LoopLength(cap=100, target_seconds=10.0)
    assert lengths.next(remaining=50) == 1  # the first call traces and compiles
    lengths.record(1, 30.0)                 # compile + one step: 30 s
    assert lengths.next(50) == 1            # at 30 s a step, a step alone
    lengths.record(1, 0.5)
    assert [lengths.next(50), lengths.next(3)] == [2, 2]  # at most double the longest call so far
    lengths.record(2, 1.0)
    lengths.record(4, 2.0)
    lengths.record(8, 4.0)                  # 0.5 s a step: 20 steps fill 10 s
    assert lengths.next(100) == 16
    lengths.record(16, 8.0)
    assert lengths.next(100) == 20 and lengths.next(7) == 7
    lengths.record(20, 40.0)                # the machine slowed down to 2 s a step
    assert lengths.next(100) == 5
    assert LoopLength(cap=3).next(100) == 1
    capped = LoopLength(cap=6)
    capped.record(4, 0.001)
    assert capped.next(100) == 6


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


def test_duration_text():
    assert [duration_text(s) for s in (0, 42.4, 60, 725, 3600, 11220, 86400 + 5 * 3600 + 59)] == [
        "0s", "42s", "1m00s", "12m05s", "1h00m", "3h07m", "1d05h"]


class FakeClock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


LINE = re.compile(r"progress: step ([\d,]+)/([\d,]+) \(([\d.]+)%\) \| (\S+) steps/s \| (\S+) examples/s \| "
                  r"elapsed (\S+) \| ETA (\S+)( \| .+ for \S+)?$")


def test_progress_lines_rates_elapsed_eta_and_when_they_are_printed():
    clock, lines = FakeClock(), []
    progress = Progress(100, 1100, 32, started=clock.now, interval=20.0, echo=lambda t, **k: lines.append(t),
                        clock=clock)
    clock.now += 15
    assert progress.line() == ("progress: step 100/1,100 (9.1%) | - steps/s | - examples/s | elapsed 15s | ETA -")
    progress.doing("steps 101..101 running")
    clock.now += 10
    progress.advanced(101)  # the first call always prints; it compiled, so no rate is known yet
    assert lines == ["progress: step 101/1,100 (9.2%) | - steps/s | - examples/s | elapsed 25s | ETA -"]
    clock.now += 5
    progress.advanced(151)  # not due: 5 s since the last line
    assert len(lines) == 1
    progress.doing("saving step 151")
    clock.now += 15
    assert progress.line() == ("progress: step 151/1,100 (13.7%) | 10 steps/s | 320 examples/s | elapsed 45s | "
                               "ETA 1m35s | saving step 151 for 15s")
    clock.now += 5
    progress.advanced(351)  # 250 steps in 25 s since the first call ended; 20 s since the last line
    assert lines[-1] == ("progress: step 351/1,100 (31.9%) | 10 steps/s | 320 examples/s | elapsed 50s | "
                         "ETA 1m15s")
    for line in lines:
        assert LINE.match(line), line
    assert progress.elapsed() == 50


def test_eta_counts_steady_state_steps_only_and_none_before_one_is_known(capsys):
    """A resumed run whose first call compiles for 58 s, then steps of 0.05 s: the ETA is the steps left at the
    steady-state rate (hand-computed), never the compile's; until a second call has ended, no ETA at all. The
    lines go to stderr (stdout holds results)."""
    clock = FakeClock()
    with Progress(399, 2000, 8, started=clock.now, interval=20.0, clock=clock) as progress:
        progress.doing("steps 400..400 running")
        clock.now += 58.0  # tracing and compiling, then one step
        progress.advanced(400)
        assert progress.rate() is None
        assert "- steps/s" in progress.line() and "ETA -" in progress.line()
        clock.now += 0.1
        progress.advanced(402)  # 2 steps in 0.1 s: 20 steps/s
        assert progress.rate() == pytest.approx(20.0)
        assert progress.line().endswith(f"| ETA {duration_text((2000 - 402) / 20.0)}")  # 1m20s, not hours
        clock.now += 24.9
        progress.advanced(900)  # 500 steps in 25 s since the first call ended: 20 steps/s
        assert progress.rate() == pytest.approx(20.0)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "progress: step 400/2,000 (20.0%) | - steps/s | - examples/s | elapsed 58s | ETA -",
        "progress: step 900/2,000 (45.0%) | 20 steps/s | 160 examples/s | elapsed 1m23s | ETA 55s"]


def test_progress_prints_while_the_host_waits():
    clock, lines = FakeClock(), []
    progress = Progress(0, 10, 4, interval=1.5, echo=lambda t, **k: lines.append(t), clock=clock)
    clock.now += 2.2
    progress.beat()
    assert not lines  # the host is not waiting: it prints its own lines
    progress.doing("steps 1..1 running")
    clock.now += 1.6
    progress.beat()
    progress.beat()  # not due again: 0 s since that line
    clock.now += 1.4
    progress.beat()  # 1.4 s < interval
    clock.now += 0.1
    progress.beat()
    assert lines == ["progress: step 0/10 (0.0%) | - steps/s | - examples/s | elapsed 4s | ETA - | "
                     "steps 1..1 running for 2s",
                     "progress: step 0/10 (0.0%) | - steps/s | - examples/s | elapsed 5s | ETA - | "
                     "steps 1..1 running for 3s"]
    assert all(LINE.match(line) for line in lines), lines


def test_progress_thread_beats_while_the_host_waits():
    clock, printed = FakeClock(), queue.Queue()
    with Progress(0, 10, 4, interval=20.0, echo=lambda t, **k: printed.put(t), clock=clock, tick=0.01) as progress:
        progress.doing("saving step 0")
        clock.now += 25
        line = printed.get(timeout=30)  # the thread's line, within a few ticks of real time
    assert line.endswith("| elapsed 25s | ETA - | saving step 0 for 25s"), line
    assert not progress._thread.is_alive()  # pylint: disable=protected-access


def test_stop_signal_records_sigterm_and_sigint_and_restores_the_handlers():
    before = {s: signal.getsignal(s) for s in StopSignal.SIGNALS}
    with StopSignal() as stop:
        assert stop.requested is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested == signal.SIGTERM and stop.exit_code == 75 and stop.name == "SIGTERM"
    with StopSignal() as stop:
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt
        assert stop.requested == signal.SIGINT and stop.exit_code == 130
    assert {s: signal.getsignal(s) for s in StopSignal.SIGNALS} == before
    assert signal.set_wakeup_fd(-1) == -1  # no wakeup fd left behind


def start_waiter(at_once=""):
    """tests/programs/stop_signal_waiter.py: a process sitting in StopSignal, once it is inside."""
    proc = ph.spawn(at_once, program="stop_signal_waiter", env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.read_until(lambda line: True, timeout=60)[0] == ["ready"]
    return proc


def test_a_second_sigint_aborts_at_once_with_one_line():
    proc = start_waiter()
    proc.send_signal(signal.SIGINT)  # the first: a stop request, the process goes on
    assert proc.read_until(lambda line: True, timeout=10)[0] == ["requested"]
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _, out, err = proc.finish(timeout=10)
    assert proc.returncode == 130 and out == "ready\nrequested\n"  # nothing after the request
    assert err == "prog: second interrupt (SIGINT): aborted without saving; the last checkpoint is intact\n"


def test_a_signal_while_nothing_is_to_save_exits_at_once():
    proc = start_waiter("before the first step finished, nothing to save")
    proc.send_signal(signal.SIGTERM)
    _, out, err = proc.finish(timeout=10)
    assert proc.returncode == 75 and err == ""  # not done: the same command starts it again
    assert out == "ready\nSIGTERM: before the first step finished, nothing to save; exiting\n"
    proc = start_waiter("nothing to save")
    proc.send_signal(signal.SIGINT)
    _, out, _ = proc.finish(timeout=10)
    assert proc.returncode == 130 and out == "ready\nSIGINT: nothing to save; exiting\n"

"""Pieces of a training run that pretraining, fine-tuning and the benchmarks share.

    make_train_loop(strategy, step_fn, sum_keys)   N steps in one compiled call (the original's iterations_per_loop),
                                                    metric sums (or per-step values) kept on the devices, reduced
                                                    once per call
    LoopLength(cap, target_seconds)                 how many steps the next call runs: about target_seconds of wall
    evaluate(eval_loop, dataset, num_steps)         metric sums over an eval set (the loop compiled once per run)
    MetricsLog(model_dir, chief)                    TensorBoard scalars (run.Events) + metrics.jsonl + a log line
                                                    per record
    Progress(start_step, total_steps, batch_size)   pretraining's progress line (run.progress_line) every ~20 s on
                                                    stderr, rates and ETA from steady-state steps only
"""
import json
import sys
import threading
import time

import tensorflow as tf

from albert_tf import layout
from albert_tf.files import atomic_write_text
from albert_tf.runtime.signals import duration_text
from albert_tf.training.run import Events, progress_line


# ---------------------------------------------------------------------------------------------- compiled loops
def make_train_loop(strategy, step_fn, sum_keys, per_step=None):
    """A tf.function `loop(iterator, num_steps, *args) → {key: float32}` that runs `num_steps` steps of
    `strategy.run(step_fn, (next(iterator), *args))` in one compiled call and returns each `sum_keys` value summed
    over replicas: a scalar summed over the call's steps too, or with `per_step` (an int ≥ every `num_steps` the
    loop is called with) a float32 [per_step] vector whose entry i is step i's value (entries from `num_steps` on
    are 0). `num_steps` is a tensor (one trace for any count); each distinct Python value among `args` (e.g. the
    dropout switch) traces once.

    Per-step values let the host sum a metrics row in step order, the same float additions however the row's steps
    were split into calls (the call lengths follow the wall clock: LoopLength); float32 sums over each call's steps
    would round differently for a different split, so two runs of one seed would log different losses.

    The values stay on the devices during the call: each replica adds its step's values to its own accumulators
    (float32 variables, one per key, made here under `strategy.scope()`: ON_READ, so a replica's update touches its
    own copy only), set to zero when the call starts and read once when it ends, which sums them over replicas (on
    a TPU pod one transfer per call, where a reduction per step costs a round trip to the host every step). Call it
    on every worker of a multi-worker run at the same point (its variables are made together). One step at a time
    (the while loop's parallel_iterations 1): a step's ops, its updates included, end before the next step reads
    its batch, so an input error (a changed file) stops the call with the steps before it whole."""
    shape = [] if per_step is None else [int(per_step)]
    with strategy.scope():
        totals = {k: tf.Variable(tf.zeros(shape), trainable=False, name=f"sum_{k}", dtype=tf.float32,
                                 synchronization=tf.VariableSynchronization.ON_READ,
                                 aggregation=tf.VariableAggregation.SUM) for k in sum_keys}

    def accumulate(index, batch, *args):
        sums = step_fn(batch, *args)
        entry = None if per_step is None else tf.equal(tf.range(per_step), index)  # the step's entry, once
        for k in sum_keys:
            value = tf.cast(sums[k], tf.float32)
            if entry is not None:  # into entry `index` alone (a non-finite value stays in its own entry)
                value = tf.where(entry, value, 0.0)
            totals[k].assign_add(value)

    def loop(iterator, num_steps, *args):
        for total in totals.values():
            total.assign(tf.zeros(shape))
        for index in tf.range(num_steps):
            tf.autograph.experimental.set_loop_options(parallel_iterations=1)
            strategy.run(accumulate, args=(index, next(iterator), *args))
        return {k: tf.identity(totals[k].read_value()) for k in sum_keys}

    return tf.function(loop)


class LoopLength:
    """How many steps the next compiled call runs, so that a call takes about `target_seconds` of wall time: the
    host sees a stop signal, prints progress and checks the clock only between calls.

    The first call runs 1 step (it traces and compiles; a stop signal during it exits at once, see StopSignal);
    each later call at most doubles the longest so far and stays within `target_seconds` at the step time measured
    by the last call, never above `cap` nor the steps left to the next boundary. So no call is long before the step
    time is known (on a TPU too, without trusting the plan's estimate), and a step longer than `target_seconds`
    runs alone. The count is a tensor argument of the compiled loop, so a new length is no new trace (no TPU
    recompile), and the lengths do not change the result: the data order is a function of the step, not of the
    calls."""

    def __init__(self, cap, target_seconds=10.0):
        self.cap, self.target_seconds = cap, target_seconds
        self.last = self.step_seconds = None

    def next(self, remaining):
        """The length of the next call, 1..min(cap, remaining)."""
        steps = 1 if self.last is None else 2 * self.last
        if self.step_seconds:
            steps = min(steps, int(self.target_seconds / self.step_seconds))
        return max(1, min(steps, self.cap, remaining))

    def record(self, steps, seconds):
        """A call of `steps` steps took `seconds` of wall time (the first one's compile makes it an overestimate)."""
        self.last, self.step_seconds = max(steps, self.last or 0), seconds / steps


def evaluate(eval_loop, dataset, num_steps):
    """Sums over `num_steps` batches of a distributed `dataset` (each input pipeline yields that many, padded):
    `eval_loop` is `make_train_loop(strategy, eval_step, keys)`, made once per run so every evaluation reuses its
    one trace (on a TPU, one compilation). Returns {key: float}."""
    return {k: float(v) for k, v in eval_loop(iter(dataset), tf.constant(num_steps)).items()}


# ---------------------------------------------------------------------------------------------- metrics
class MetricsLog:
    """Where a run's metrics go: TensorBoard events under MODEL_DIR/<split>/ (run.Events), one JSON object per
    record in MODEL_DIR/metrics.jsonl ({"split", "step", **metrics}) and a log line on stdout. Files are written by
    the chief only (TensorFlow's single-client model: other workers print, nothing more).

    After a resume, `truncate_after(step)` drops the metrics.jsonl rows past the restored step (they belong to
    steps that are trained again), so the file holds one row per (split, step).
    """

    def __init__(self, model_dir, chief=True, echo=print):
        self.model_dir, self.chief, self.echo = model_dir, chief, echo
        self.path = layout.ModelDir(model_dir).metrics
        self.events = Events(layout.ModelDir(model_dir), chief)

    def truncate_after(self, step):
        """Drops metrics.jsonl rows whose step is past `step` (rewritten atomically; no-op without the file)."""
        if not self.chief or not tf.io.gfile.exists(self.path):
            return
        with tf.io.gfile.GFile(self.path, "r") as f:
            lines = f.read().splitlines()
        kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
        if len(kept) != len(lines):
            atomic_write_text(self.path, "".join(line + "\n" for line in kept))

    def write(self, split, step, metrics):
        """Records `metrics` ({name: float}) of `split` at `step`."""
        self.events.write(split, step, metrics)
        self.echo(f"{split} step {step}: " + " ".join(f"{k}={v:.6g}" for k, v in metrics.items()), flush=True)
        if self.chief:
            tf.io.gfile.makedirs(self.model_dir)
            with tf.io.gfile.GFile(self.path, "a") as f:
                f.write(json.dumps({"split": split, "step": step, **metrics}) + "\n")

    def close(self):
        self.events.flush()


# ---------------------------------------------------------------------------------------------- progress
def print_to_stderr(text, **kwargs):
    """print() to stderr: where progress goes (stdout holds a command's results: metrics rows, what it wrote)."""
    print(text, file=sys.stderr, **kwargs)


class Progress:
    """Progress lines on stderr, one at least every `interval` seconds whatever the step time, in the format of
    both jobs (albert_tf.training.run.progress_line):

        progress: step 480/125,000 (0.4%) | 2.31 steps/s | 9,462 examples/s | elapsed 3m28s | ETA 14h58m

    `advanced(step)` after each compiled call prints one when `interval` seconds have passed since the last line (and
    after the first call); while the host waits (a long call, a save, an evaluation: what `doing` names) a
    background thread prints one ending in what it waits for, e.g. `| steps 481..512 running for 25s`. Rates are
    steady-state wall-clock rates: from the end of the first call (its tracing and compilation left out, which on a
    resume or a TPU can be most of a short run's time) to the end of the last one, saves and evaluations counted so
    that the ETA is what the run will take. Until a second call has ended no rate is known, and the line shows none
    ("- steps/s", "ETA -"). Use it as a context manager (the thread lives inside it). `clock` gives the time the
    lines show; the thread looks at it (`beat`) every `tick` seconds of real time."""

    def __init__(self, start_step, total_steps, batch_size, started=None, interval=20.0, echo=print_to_stderr,
                 clock=time.time, tick=1.0):
        self.start_step, self.total_steps, self.batch_size = start_step, total_steps, batch_size
        self.interval, self.echo, self.clock, self.tick = interval, echo, clock, tick
        self.started = clock() if started is None else started
        self.step = start_step
        self._first = None        # (step, time) when the first call ended
        self._last_advance = None  # when the last call ended
        self._activity = None     # (what the host waits for, since when)
        self._last_line = self.started
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = None

    def rate(self):
        """Steady-state steps per second of wall time: since the end of the first call (None until a later call has
        ended)."""
        if self._first is None or self.step <= self._first[0]:
            return None
        step, since = self._first
        return (self.step - step) / max(self._last_advance - since, 1e-9)

    def line(self, now=None):
        """The progress line as of now."""
        now = self.clock() if now is None else now
        more = ()
        if self._activity:
            what, since = self._activity
            more = (f"{what} for {duration_text(now - since)}",)
        return progress_line(self.step, self.total_steps, self.rate(), self.batch_size, now - self.started, more)

    def _print(self, now):
        self._last_line = now
        self.echo(self.line(now), flush=True)

    def doing(self, what):
        """What the host waits for from now on ("steps 3..4 running", "saving step 4"); None: nothing."""
        with self._lock:
            self._activity = (what, self.clock()) if what else None

    def advanced(self, step):
        """A compiled call ended at `step`: prints a line if one is due."""
        with self._lock:
            now = self.clock()
            self.step, self._last_advance, self._activity = step, now, None
            first = self._first is None
            if first:
                self._first = (step, now)
            if first or now - self._last_line >= self.interval:
                self._print(now)

    def elapsed(self):
        return self.clock() - self.started

    def beat(self):
        """The background thread's look at the clock: prints a line if the host waits (`doing`) and one is due."""
        with self._lock:
            now = self.clock()
            if self._activity and now - self._last_line >= self.interval:  # (the host prints nothing else)
                self._print(now)

    def _heartbeat(self):
        while not self._stopped.wait(self.tick):
            self.beat()

    def __enter__(self):
        self._stopped.clear()
        self._thread = threading.Thread(target=self._heartbeat, name="progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stopped.set()
        self._thread.join()
        return False

"""Pieces of a training run that pretraining, fine-tuning and the benchmarks share.

    make_train_loop(strategy, step_fn, sum_keys)   N steps in one compiled call (the original's iterations_per_loop)
    evaluate(eval_loop, dataset, num_steps)         metric sums over an eval set (the loop compiled once per run)
    MetricsLog(model_dir, chief)                     TensorBoard scalars + metrics.jsonl + a log line per record
    StopSignal()                                     SIGTERM (a preemption notice) → finish the loop, save, exit 0
"""
import json
import os
import signal

import tensorflow as tf


# ---------------------------------------------------------------------------------------------- compiled loops
def make_train_loop(strategy, step_fn, sum_keys):
    """A tf.function `loop(iterator, num_steps, *args) → {key: float32 scalar}` that runs `num_steps` steps of
    `strategy.run(step_fn, (next(iterator), *args))` in one compiled call and returns each `sum_keys` value summed
    over replicas and steps. `num_steps` is a tensor (one trace for any count); each distinct Python value among
    `args` (e.g. the dropout switch) traces once. No host round trip inside the loop."""

    def loop(iterator, num_steps, *args):
        sums = {k: tf.constant(0.0) for k in sum_keys}
        for _ in tf.range(num_steps):
            per_replica = strategy.run(step_fn, args=(next(iterator), *args))
            sums = {k: sums[k] + strategy.reduce("sum", per_replica[k], axis=None) for k in sum_keys}
        return sums

    return tf.function(loop)


def evaluate(eval_loop, dataset, num_steps):
    """Sums over `num_steps` batches of a distributed `dataset` (each input pipeline yields that many, padded):
    `eval_loop` is `make_train_loop(strategy, eval_step, keys)`, made once per run so every evaluation reuses its
    one trace (on a TPU, one compilation). Returns {key: float}."""
    return {k: float(v) for k, v in eval_loop(iter(dataset), tf.constant(num_steps)).items()}


# ---------------------------------------------------------------------------------------------- metrics
def write_scalar_summary(name, value):
    """tf.summary.scalar without the tensorboard package (TF 2.21 no longer depends on it): the same event
    record, a float32 scalar tagged for TensorBoard's scalars plugin."""
    from tensorflow.core.framework import summary_pb2  # pylint: disable=import-outside-toplevel

    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata.SerializeToString())


class MetricsLog:
    """Where a run's metrics go: TensorBoard events under MODEL_DIR/<split>/, one JSON object per record in
    MODEL_DIR/metrics.jsonl ({"split", "step", **metrics}) and a log line on stdout. Files are written by the
    chief only (TensorFlow's single-client model: other workers print, nothing more).

    After a resume, `truncate_after(step)` drops the metrics.jsonl rows past the restored step (they belong to
    steps that are trained again), so the file holds one row per (split, step).
    """

    FILE = "metrics.jsonl"

    def __init__(self, model_dir, chief=True, splits=("train", "eval"), echo=print):
        self.model_dir, self.chief, self.echo = model_dir, chief, echo
        self.path = os.path.join(model_dir, self.FILE)
        self._splits = splits
        self._writers = {}

    def _writer(self, split):
        if split not in self._writers:
            self._writers[split] = (tf.summary.create_file_writer(os.path.join(self.model_dir, split))
                                    if self.chief else tf.summary.create_noop_writer())
        return self._writers[split]

    def truncate_after(self, step):
        """Drops metrics.jsonl rows whose step is past `step` (rewritten atomically; no-op without the file)."""
        from albert_tf.utils import atomic_write_text  # pylint: disable=import-outside-toplevel

        if not self.chief or not tf.io.gfile.exists(self.path):
            return
        with tf.io.gfile.GFile(self.path, "r") as f:
            lines = f.read().splitlines()
        kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
        if len(kept) != len(lines):
            atomic_write_text(self.path, "".join(line + "\n" for line in kept))

    def write(self, split, step, metrics):
        """Records `metrics` ({name: float}) of `split` at `step`."""
        with self._writer(split).as_default(step=step):
            for name, value in metrics.items():
                write_scalar_summary(name, value)
        self.echo(f"{split} step {step}: " + " ".join(f"{k}={v:.6g}" for k, v in metrics.items()), flush=True)
        if self.chief:
            tf.io.gfile.makedirs(self.model_dir)
            with tf.io.gfile.GFile(self.path, "a") as f:
                f.write(json.dumps({"split": split, "step": step, **metrics}) + "\n")

    def close(self):
        for writer in self._writers.values():
            writer.flush()


# ---------------------------------------------------------------------------------------------- signals
class StopSignal:
    """A context manager that turns SIGTERM (a preemption notice) into a flag: the loop finishes the steps in
    flight, saves and exits cleanly. `requested` is the signal number received, or None. The previous handlers
    come back on exit. Main thread only (Python's signal rule)."""

    SIGNALS = (signal.SIGTERM,)

    def __init__(self):
        self.requested = None
        self._previous = {}

    def _handle(self, signum, frame):  # pylint: disable=unused-argument
        self.requested = signum

    def __enter__(self):
        self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        return False

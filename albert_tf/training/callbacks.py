"""`albert-tf finetune`'s Keras callbacks: the per-epoch work (EpochEnd), progress lines for logs (ProgressLog) and
SIGINT / SIGTERM (StopOnSignal)."""
import sys
import time

import keras

from albert_tf.layout import EVAL_SPLIT, TRAIN_SPLIT, FinetuneDir
from albert_tf.runtime import leftovers
from albert_tf.runtime.signals import StopSignal
from albert_tf.training.run import Events, progress_line


class EpochEnd(keras.callbacks.Callback):
    """At each epoch's end, in order: score the dev set with the task's official metric, keep the best model
    (managers["best"]), log to TensorBoard (OUTPUT/train and OUTPUT/eval, pretraining's layout: run.Events) and
    stdout, checkpoint (managers["resume"]).

    An epoch cut short (StopOnSignal stopped it) is neither scored nor saved: `steps_done` < steps_per_epoch.

    Args:
      task: the FinetuneTask, holding the run's Budget (`task.budget`); tokenizer: its AlbertTokenizer.
      state: {"epoch", "best_value", "best_epoch"} tf.Variables, checkpointed with the run.
      managers: {"resume", "best"} tf.train.CheckpointManagers; output: the run's --output.
      watch: a collapse.CollapseWatch told each epoch's dev metrics and training loss (it says when the run has
        collapsed to a constant prediction), or None.
    """

    def __init__(self, task, tokenizer, state, managers, output, watch=None):
        super().__init__()
        self.task, self.tokenizer = task, tokenizer
        self.state, self.managers = state, managers
        self.events = Events(FinetuneDir(output))
        self.steps_done = 0  # steps of the epoch in progress
        self.watch = watch  # a CollapseWatch (albert_tf.training.collapse), or None

    @property
    def budget(self):
        """The run's Budget, held by the task."""
        return self.task.budget

    def on_epoch_begin(self, epoch, logs=None):
        self.steps_done = 0

    def on_train_batch_end(self, batch, logs=None):
        self.steps_done = min(batch + 1, self.budget.steps_per_epoch)  # `batch`: the last step of the call

    def on_epoch_end(self, epoch, logs=None):
        if self.steps_done < self.budget.steps_per_epoch:
            return  # stopped partway: its steps are not kept (a run resumes from whole epochs)
        step = (epoch + 1) * self.budget.steps_per_epoch
        results = self.task.evaluate(self.model, self.tokenizer)
        value = next(iter(results.values()))[self.task.primary_metric]
        improved = value > float(self.state["best_value"].numpy())
        if improved:
            self.state["best_value"].assign(value)
            self.state["best_epoch"].assign(epoch + 1)
            leftovers.save_checkpoint(self.managers["best"], epoch + 1)  # a failed save leaves nothing
        self._log(step, logs or {}, results)
        text = " ".join(f"{split}/{k}={v:.4f}" for split, m in results.items() for k, v in m.items())
        print(f"epoch {epoch + 1}/{self.budget.epochs} step {step}: loss={(logs or {}).get('loss', float('nan')):.4f} "
              f"{text}{' (best)' if improved else ''}", flush=True)
        if self.watch is not None:
            self.watch.epoch_end(epoch + 1, results, (logs or {}).get("loss"))
        self.state["epoch"].assign(epoch + 1)
        leftovers.save_checkpoint(self.managers["resume"], epoch + 1)

    def _log(self, step, logs, results):
        """Training's Keras logs and learning rate under TRAIN_SPLIT; the official metrics under EVAL_SPLIT, tagged
        with the task's data split ("dev/accuracy")."""
        learning_rate = float(self.model.optimizer.learning_rate.numpy())
        self.events.write(TRAIN_SPLIT, step, {**logs, "learning_rate": learning_rate})
        self.events.write(EVAL_SPLIT, step, {f"{split}/{name}": v for split, metrics in results.items()
                                             for name, v in metrics.items()})
        self.events.flush()


class ProgressLog(keras.callbacks.Callback):
    """Progress as lines, for logs (where Keras' bar is unreadable): every `every_steps` steps and at least every
    `every_seconds` seconds, in pretraining's format (albert_tf.training.run.progress_line) with the epoch and the
    loss after it,

        progress: step 120/300 (40.0%) | 14.2 steps/s | 227 examples/s | elapsed 9s | ETA 13s | epoch 2/3 | loss 0.6931

    Rates are measured from the end of this run's first step (which includes compiling); elapsed counts from the
    start of training; ETA is the remaining steps at that rate.

    Args:
      steps_per_epoch, epochs, batch_size: the run's budget. every_steps, every_seconds: how often to print.
      clock: seconds (time.monotonic); stream: where lines go (sys.stderr: progress, apart from results).
    """

    def __init__(self, steps_per_epoch, epochs, batch_size, every_steps=100, every_seconds=30.0,
                 clock=time.monotonic, stream=None):
        super().__init__()
        self.steps_per_epoch, self.epochs, self.batch_size = steps_per_epoch, epochs, batch_size
        self.total_steps = steps_per_epoch * epochs
        self.every_steps, self.every_seconds = every_steps, every_seconds
        self.clock, self.stream = clock, stream
        self.epoch = 0
        self.started = self.anchor = self.last = None  # times: train begin; (step, time) of first step, last line

    def on_train_begin(self, logs=None):
        self.started, self.anchor, self.last = self.clock(), None, None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        step, now = self.epoch * self.steps_per_epoch + batch + 1, self.clock()
        if self.anchor is None:
            self.anchor = self.last = (step, now)
            return
        if step - self.last[0] >= self.every_steps or now - self.last[1] >= self.every_seconds:
            self.last = (step, now)
            print(self.line(step, now, logs or {}), file=self.stream or sys.stderr, flush=True)

    def line(self, step, now, logs):
        """The progress line at global `step` (1-based) and clock `now`."""
        steps_per_second = (step - self.anchor[0]) / max(now - self.anchor[1], 1e-9)
        more = [f"epoch {self.epoch + 1}/{self.epochs}"] + ([f"loss {float(logs['loss']):.4f}"] if "loss" in logs
                                                             else [])
        return progress_line(step, self.total_steps, steps_per_second, self.batch_size, now - self.started, more)


class StopOnSignal(keras.callbacks.Callback):
    """SIGINT (Ctrl-C) and SIGTERM during `model.fit` as a request to stop at the next step boundary: `requested`
    becomes the signal's number and the model's `stop_training` is set (the epoch in progress is then not saved,
    see EpochEnd). A second SIGINT aborts at once with one line (exit 130, the output lock released). The
    mechanism is pretrain's, `runtime.signals.StopSignal` (a watcher thread woken through `signal.set_wakeup_fd`, so a second
    Ctrl-C acts even inside a long TensorFlow call), installed at on_train_begin (the main thread) and removed at
    on_train_end (the previous handlers come back). Keras skips on_train_end when fit raises: the caller calls it
    again in a `finally` (a second call does nothing). `exits=False` (a library call): a second SIGINT does not end
    the process."""

    SIGNALS = StopSignal.SIGNALS

    def __init__(self, prog="albert-tf finetune", exits=True):
        super().__init__()
        self._stop = StopSignal(prog, on_request=self._request, exits=exits)

    def _request(self, signum):  # pylint: disable=unused-argument
        self.model.stop_training = True

    @property
    def requested(self):
        return self._stop.requested

    @property
    def name(self):
        return self._stop.name

    @property
    def exit_code(self):
        """130 after SIGINT (the shell's code for an interrupt), 75 after SIGTERM (a preemption: the rerun goes on)."""
        return self._stop.exit_code

    def on_train_begin(self, logs=None):
        self._stop.__enter__()

    def on_train_end(self, logs=None):
        if self._stop._pipe is not None:  # pylint: disable=protected-access
            self._stop.__exit__(None, None, None)

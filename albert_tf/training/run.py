"""What a pretraining run (training/pretraining.py) and a fine-tuning run (training/finetuning.py) share. Both
drivers read top to bottom in the same order:

    check the settings → lock the run directory (runtime.lock) → prepare: read and check every input, the run
    record among them → build the model, restore the latest checkpoint → the loop → the job's result

and both read, check and write the run record through albert_tf/run_config.py (run_record, resume_names,
check_record, write_record: one home, one signature), print progress in one format (progress_line), write
TensorBoard events in one layout (Events: RUN_DIR/train, RUN_DIR/eval) and end with one line, exit 76, when the
TPU / runtime or a peer worker goes away (runtime_lost). The loops stay each job's own: pretraining's hand-written
multi-step loop (TPU iterations per loop, exact resume), fine-tuning's Keras `model.fit` and its callbacks.

    runtime_lost(job, error, position, latest)  the RuntimeLost (exit 76) of a run whose runtime went away
    remove_leftovers(held, places)              what a killed earlier run of the run directory left, removed
    progress_line(step, total_steps, ...)       the progress line (stderr) of both jobs; PROGRESS_LINE parses it
    Events(run_dir, chief)                      TensorBoard scalars, one folder per split (layout.SPLITS)
"""
import re

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from albert_tf import layout
from albert_tf.runtime import leftovers
from albert_tf.runtime.exit_codes import RuntimeLost
from albert_tf.runtime.signals import duration_text
from albert_tf.training import distribute


# ---------------------------------------------------------------------------------------------- runtime lost
UNITS = {"pretrain": "step", "finetune": "epoch"}  # what each job completes and resumes from


def remove_leftovers(held, places):
    """Removes what a killed earlier run of the run directory left (albert_tf.runtime.leftovers) and says so in one
    note. `held`: the directory's lock, held (None: a worker that holds none removes nothing); `places`: (folder,
    a regular expression of the names written there atomically or None, whether it holds checkpoints)."""
    if held is None:
        return
    leftovers.note([found for folder, names, checkpoints in places
                    for found in leftovers.remove(folder, names, checkpoints)])


def runtime_lost(job, error, position, latest_checkpoint):
    """The RuntimeLost (exit 76) for a runtime failure (distribute.RUNTIME_ERRORS: the TPU, its runtime or a peer
    worker went away) of `job` ("pretrain" / "finetune"). `position`: the last step (pretrain) or whole epoch
    (finetune) the run completed, None before one has; `latest_checkpoint`: what a relaunch of the same command
    resumes from (None: none yet). One line:

        the TPU / runtime or a peer worker went away after step 30 (UnavailableError: ...); the last checkpoint is
        MODEL_DIR/ckpt-20: relaunch the same command to resume from it
    """
    unit = UNITS[job]
    where = f"after {unit} {position}" if position is not None else f"before the first {unit} ended"
    return RuntimeLost(f"the TPU / runtime or a peer worker went away {where} ({distribute.error_summary(error)}); "
                       f"the last checkpoint is {latest_checkpoint or 'none'}: relaunch the same command to resume "
                       "from it")


# ---------------------------------------------------------------------------------------------- progress
PROGRESS_LINE = re.compile(
    r"progress: step (?P<step>[\d,]+)/(?P<total_steps>[\d,]+) \((?P<percent>[\d.]+)%\) \| "
    r"(?P<steps_per_second>\S+) steps/s \| (?P<examples_per_second>\S+) examples/s \| "
    r"elapsed (?P<elapsed>\S+) \| ETA (?P<eta>\S+)(?P<more>( \| [^|]+)*)$")


def rate_text(value):
    """A rate as the progress line shows it: 9,462 / 2.31 / 0.5 (three significant digits below 100)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def progress_line(step, total_steps, steps_per_second, batch_size, elapsed, more=()):
    """The progress line of both jobs (printed on stderr: stdout holds a command's results), matched by
    PROGRESS_LINE:

        progress: step 480/125,000 (0.4%) | 2.31 steps/s | 9,462 examples/s | elapsed 3m28s | ETA 14h58m

    then the job's own fields in `more`, each after " | " (pretrain: what the host waits for, "saving step 480
    for 12s"; finetune: "epoch 2/3", "loss 0.6931"). `steps_per_second` None: no rate known yet ("- steps/s",
    "ETA -"); `elapsed`: seconds since the run started; the ETA is the steps left at that rate."""
    rate = steps_per_second
    fields = [f"progress: step {step:,}/{total_steps:,} ({100 * step / total_steps:.1f}%)",
              f"{rate_text(rate)} steps/s" if rate else "- steps/s",
              f"{rate_text(rate * batch_size)} examples/s" if rate else "- examples/s",
              f"elapsed {duration_text(elapsed)}",
              f"ETA {duration_text((total_steps - step) / rate)}" if rate else "ETA -", *more]
    return " | ".join(fields)


# ---------------------------------------------------------------------------------------------- TensorBoard
def write_scalar_summary(name, value):
    """tf.summary.scalar without the tensorboard package (TF 2.21 no longer depends on it): the same event
    record, a float32 scalar tagged for TensorBoard's scalars plugin."""
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata.SerializeToString())


class Events:
    """A run's TensorBoard scalars, in the one layout of both jobs: a folder per split under the run directory,
    RUN_DIR/train and RUN_DIR/eval (layout.TRAIN_SPLIT, layout.EVAL_SPLIT; `run_dir.events(split)`), so that
    `tensorboard --logdir` shows pretraining and fine-tuning runs alike. A folder is made at its first write.
    Only the chief writes (TensorFlow's single-client model); other workers' writes go nowhere.

    Args:
      run_dir: layout.ModelDir (pretraining) or layout.FinetuneDir (fine-tuning).
      chief: whether this process writes.
    """

    def __init__(self, run_dir, chief=True):
        self.run_dir, self.chief = run_dir, chief
        self._writers = {}

    def writer(self, split):
        """The summary writer of `split` (one of layout.SPLITS)."""
        if split not in layout.SPLITS:
            raise ValueError(f"TensorBoard split {split!r}: expected one of {', '.join(layout.SPLITS)}")
        if split not in self._writers:
            self._writers[split] = (tf.summary.create_file_writer(self.run_dir.events(split)) if self.chief
                                    else tf.summary.create_noop_writer())
        return self._writers[split]

    def write(self, split, step, scalars):
        """Records `scalars` ({tag: float}) of `split` at `step`."""
        with self.writer(split).as_default(step=step):
            for name, value in scalars.items():
                write_scalar_summary(name, float(value))

    def flush(self):
        for writer in self._writers.values():
            writer.flush()

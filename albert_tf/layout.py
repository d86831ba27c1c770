"""The one owner of run-directory names: what a pretraining model dir and a fine-tuning output hold, and where.

Every module, the rehearsal and the TPU scripts take these names from here (the scripts by asking the package:
`python -m albert_tf.layout metrics run-record`). No TensorFlow, no other import of the package.

A pretraining `--model-dir` (`ModelDir`), which is also a pretrained-model directory:

    albert_config.json     the model's config (CONFIG_FILE)
    spm.model              the SentencePiece model, when known (SPM_FILE)
    checkpoint, ckpt-N.*   tf.train.CheckpointManager's state file and checkpoints (the newest, of any kind)
    steps/                 the checkpoints of every --save-checkpoints-steps step, kept apart (its own state file)
    pretrain_config.json   the run's settings, its run record (a resume with other values is refused)
    metrics.jsonl          one JSON object per (split, step) row
    train/, eval/          TensorBoard event files per split
    record_counts.json     the data files' record counts (counted once)
    dtype_probe.json       (in the probe cache, not the model dir) what `--dtype auto` measured on this machine

A fine-tuning `--output` (`FinetuneDir`):

    finetune_config.json   the run's settings and budget (its run record)
    checkpoints/           the last whole epochs (resume)
    best/                  the best epoch's weights and albert_config.json
    export/N/              the raw-text SavedModel of the best epoch
    eval_results.json      the best epoch's official dev metrics
    train/, eval/          TensorBoard event files per split (the split names are pretraining's)
"""
import dataclasses
import os
import sys

CONFIG_FILE = "albert_config.json"
SPM_FILE = "spm.model"
CHECKPOINT_STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's state file (names the latest ckpt-N)
CHECKPOINT_PREFIX = "ckpt"            # ckpt-N.index, ckpt-N.data-*
STEP_CHECKPOINTS_DIR = "steps"        # MODEL_DIR/steps/ckpt-N.*: the step saves kept apart
METRICS_FILE = "metrics.jsonl"
PRETRAIN_RECORD_FILE = "pretrain_config.json"
FINETUNE_RECORD_FILE = "finetune_config.json"
EVAL_RESULTS_FILE = "eval_results.json"
EPOCH_HISTORY_FILE = "epoch_history.json"
RECORD_COUNTS_FILE = "record_counts.json"
TRAIN_SPLIT, EVAL_SPLIT = "train", "eval"  # metrics rows and TensorBoard folders, in both jobs
SPLITS = (TRAIN_SPLIT, EVAL_SPLIT)


def _join(directory, name):
    """`directory`/`name`, with gs:// kept as it is (os.path.join does that on POSIX)."""
    return os.path.join(directory, name)


@dataclasses.dataclass(frozen=True)
class ModelDir:
    """A pretraining run's --model-dir (local or gs://): the path of each file it holds."""
    path: str

    @property
    def config(self):
        return _join(self.path, CONFIG_FILE)

    @property
    def spm_model(self):
        return _join(self.path, SPM_FILE)

    @property
    def checkpoint_state(self):
        return _join(self.path, CHECKPOINT_STATE_FILE)

    def checkpoint(self, step):
        """The prefix of the checkpoint of `step` (ckpt-STEP; its files add .index and .data-*)."""
        return _join(self.path, f"{CHECKPOINT_PREFIX}-{step}")

    @property
    def step_checkpoints(self):
        """The folder of the step saves kept apart from the rotation (pretrain --keep-step-checkpoints)."""
        return _join(self.path, STEP_CHECKPOINTS_DIR)

    @property
    def run_record(self):
        return _join(self.path, PRETRAIN_RECORD_FILE)

    @property
    def metrics(self):
        return _join(self.path, METRICS_FILE)

    @property
    def record_counts(self):
        return _join(self.path, RECORD_COUNTS_FILE)

    def events(self, split):
        """The TensorBoard folder of `split` (train / eval)."""
        return _join(self.path, split)

    @staticmethod
    def names():
        """The names a model dir may hold besides the checkpoints (what the rehearsal compares)."""
        return (CHECKPOINT_STATE_FILE, CONFIG_FILE, SPM_FILE, METRICS_FILE, *SPLITS, RECORD_COUNTS_FILE,
                PRETRAIN_RECORD_FILE, STEP_CHECKPOINTS_DIR)


@dataclasses.dataclass(frozen=True)
class FinetuneDir:
    """A fine-tuning run's --output: the path of each file and folder it holds."""
    path: str

    @property
    def run_record(self):
        return _join(self.path, FINETUNE_RECORD_FILE)

    @property
    def checkpoints(self):
        return _join(self.path, "checkpoints")

    @property
    def best(self):
        return _join(self.path, "best")

    @property
    def export(self):
        return _join(self.path, "export")

    @property
    def eval_results(self):
        return _join(self.path, EVAL_RESULTS_FILE)

    @property
    def epoch_history(self):
        """Each finished epoch's dev accuracy and training loss, and the collapse finding (training.collapse)."""
        return _join(self.path, EPOCH_HISTORY_FILE)

    def events(self, split):
        """The TensorBoard folder of `split` (train / eval)."""
        return _join(self.path, split)


_NAMES = {"config": CONFIG_FILE, "spm": SPM_FILE, "checkpoint-state": CHECKPOINT_STATE_FILE,
          "checkpoint-prefix": CHECKPOINT_PREFIX, "metrics": METRICS_FILE, "run-record": PRETRAIN_RECORD_FILE,
          "record-counts": RECORD_COUNTS_FILE, "finetune-record": FINETUNE_RECORD_FILE,
          "eval-results": EVAL_RESULTS_FILE}


def main(argv=None):
    """`python -m albert_tf.layout NAME...`: prints each name's file name, one per line (the TPU
    scripts' way of asking). Exit 2 with one line for an unknown name."""
    argv = sys.argv[1:] if argv is None else argv
    unknown = [a for a in argv if a not in _NAMES]
    if unknown or not argv:
        print(f"error: expected one or more of {', '.join(_NAMES)}; got {' '.join(unknown) or 'none'}",
              file=sys.stderr)
        return 2
    print("\n".join(_NAMES[a] for a in argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())

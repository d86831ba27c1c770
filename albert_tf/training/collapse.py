"""The collapsed-init check of fine-tuning: an --init encoder that maps every input to nearly the same output (as a
briefly pretrained model does) is measured against a randomly initialized one of the same config, said in one
line, and changed only when asked (`finetune --collapsed-init reset-biases`).
"""
import json
import math
import sys

import keras
import numpy as np

from albert_tf import files, messages
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.settings.finetune_config import FinetuneConfig


#: An --init encoder whose token vectors vary across inputs less than this fraction of a randomly initialized
#: encoder's (same config, same inputs) is "collapsed": it maps every input to nearly the same output.
COLLAPSE_RATIO = 0.25



def input_spread(encoder, inputs):
    """How much the encoder's last-layer token vectors depend on the input: the std across all real tokens of
    the batch (input_mask 1, [CLS] excluded), averaged over the H features, divided by the mean std within one
    token vector. 0 when every token of every input gets the same vector.

    Args:
      encoder: an AlbertEncoder; inputs: dict of int32 [B, L] (numpy).
    Returns:
      float.
    """
    sequence = np.asarray(encoder(inputs, training=False)["sequence_output"], np.float64)  # [B, L, H]
    mask = np.asarray(inputs["input_mask"]).astype(bool).copy()
    mask[:, 0] = False
    tokens = sequence[mask]                                                                 # [T, H]
    if len(tokens) < 2:
        return float("nan")
    return float(tokens.std(axis=0).mean() / max(tokens.std(axis=1).mean(), 1e-12))



def reset_biases(encoder):
    """Zeroes the encoder's biases and LayerNorm betas (the input-independent terms). Returns how many."""
    variables = [v for v in encoder.trainable_variables if v.path.endswith(("bias", "beta"))]
    for v in variables:
        v.assign(np.zeros(v.shape, v.dtype))
    return len(variables)



def check_collapse(encoder, inputs, seed):
    """(spread of `encoder`, spread of a fresh randomly initialized encoder of the same config) on `inputs`."""
    keras.utils.set_random_seed(seed)
    reference = AlbertEncoder(encoder.config)
    return input_spread(encoder, inputs), input_spread(reference, inputs)



def handle_collapse(encoder, task, tokenizer, cfg: FinetuneConfig):
    """Measures the --init encoder's input spread on a training batch (of the task's budget) against a random
    encoder's and prints both. When it is collapsed: one warning line with the advice, and only with
    --collapsed-init reset-biases are its biases and LayerNorm betas zeroed (a user's weights never change unasked).
    Returns True when collapsed."""
    features = task.sample_inputs(tokenizer, min(task.budget.batch_size, 64))
    features = {k: np.asarray(v).reshape(-1, np.asarray(v).shape[-1]) for k, v in features.items()}
    spread, reference = check_collapse(encoder, features, cfg.seed)
    print(f"--init input spread {spread:.4f} (a randomly initialized encoder: {reference:.4f})", flush=True)
    if not spread < COLLAPSE_RATIO * reference:
        return False
    if cfg.collapsed_init == "reset-biases":
        count = reset_biases(encoder)
        action = f"zeroed its {count} bias and LayerNorm beta tensors (--collapsed-init reset-biases)"
    else:
        action = ("kept as it is; if fine-tuning starts slowly, pretrain longer or pass --collapsed-init "
                  "reset-biases")
    messages.say("note", f"the --init encoder's token vectors vary across inputs {spread / reference:.2f}x as much "
                         f"as a random encoder's (under {COLLAPSE_RATIO}x: it maps every input to nearly the same "
                         f"output, as a briefly pretrained model does); {action}.", "finetune")
    return True


# ---------------------------------------------------------------------------------------------- collapse in training
#: A fine-tuning run has collapsed when, for this many epochs in a row, its dev accuracy is at most the majority-class
#: rate plus ACCURACY_MARGIN and its training loss at least LOSS_FRACTION · ln(labels), after an earlier epoch's dev
#: accuracy was above that: it has learned something, then predicts one class whatever the input. (A run that never
#: left the majority rate is on the plateau of docs/fine-tuning-quality.md, not collapsed.)
COLLAPSE_EPOCHS = 2
ACCURACY_MARGIN = 0.01
LOSS_FRACTION = 0.93


def training_collapse(history, majority, num_labels, epochs=COLLAPSE_EPOCHS):
    """Whether a classification run's last `epochs` epochs are a collapse to a constant prediction.

    Args:
      history: [(epoch, dev accuracy, mean training loss)] in order, one per finished epoch.
      majority: the dev set's majority-class rate; num_labels: the number of classes (≥ 2).
    Returns:
      None, or {"epoch": the first collapsed epoch, "accuracy", "loss": the last epoch's, "majority_rate",
      "chance_loss": ln(num_labels), "best_epoch", "best_accuracy": the best epoch before it}.
    """
    chance = math.log(num_labels)

    def chance_like(accuracy, loss):
        return accuracy <= majority + ACCURACY_MARGIN and loss >= LOSS_FRACTION * chance

    if len(history) <= epochs or not all(chance_like(a, l) for _, a, l in history[-epochs:]):
        return None
    start = len(history) - epochs
    while start > 0 and chance_like(*history[start - 1][1:]):
        start -= 1
    better = [(a, e) for e, a, _ in history[:start] if a > majority + ACCURACY_MARGIN]
    if not better:
        return None  # never left chance: a plateau, not a collapse
    best_accuracy, best_epoch = max(better, key=lambda pair: (pair[0], -pair[1]))
    _, accuracy, loss = history[-1]
    return {"epoch": int(history[start][0]), "accuracy": float(accuracy), "loss": float(loss),
            "majority_rate": float(majority), "chance_loss": chance, "best_epoch": int(best_epoch),
            "best_accuracy": float(best_accuracy)}


def collapse_line(collapse, optimizer, dtype):
    """The one line a collapsed run prints (stderr), naming what happened and what to try."""
    tries = ["a lower --learning-rate (a third of it)"]
    if optimizer == "adamw-original":
        tries.append("--optimizer adamw-keras (the default: bias-corrected, smaller early steps)")
    if dtype != "float32":
        tries.append("--dtype float32")
    return messages.line("warning", f"training collapsed at epoch {collapse['epoch']}: dev accuracy "
            f"{collapse['accuracy']:.3f} is the majority-class rate ({collapse['majority_rate']:.3f}) and the training "
            f"loss {collapse['loss']:.3f} is back at ln {collapse_labels(collapse)} = {collapse['chance_loss']:.3f}, after "
            f"{collapse['best_accuracy']:.3f} at epoch {collapse['best_epoch']}: the model predicts one class whatever "
            f"the input; the best epoch is what is kept and exported; try {', or '.join(tries)}", "finetune")


def collapse_labels(collapse):
    """The number of labels behind collapse["chance_loss"] (= ln of it)."""
    return int(round(math.exp(collapse["chance_loss"])))


class CollapseWatch:
    """Watches a classification run epoch by epoch (EpochEnd calls `epoch_end`) and, the first time its last
    COLLAPSE_EPOCHS epochs are a collapse (`training_collapse`), prints `collapse_line` and keeps the finding in
    `collapse` (finetune writes it to eval_results.json and the run record). The epochs seen are kept in `path`
    (JSON), so that a resumed run judges its earlier epochs too.

    Args:
      path: the history file (layout.FinetuneDir.epoch_history); majority: the dev set's majority-class rate;
      num_labels: the number of classes; optimizer, dtype: the run's, for the advice; initial_epoch: the epoch the
      run (re)starts after (history beyond it is dropped); stream: where the line goes (sys.stderr).
    """

    def __init__(self, path, majority, num_labels, optimizer, dtype, initial_epoch=0, stream=None):
        self.path, self.majority, self.num_labels = path, float(majority), int(num_labels)
        self.optimizer, self.dtype, self.stream = optimizer, dtype, stream
        self.history, self.collapse = [], None
        if files.exists(path):
            kept = json.loads(files.read_text(path))
            self.history = [tuple(row) for row in kept.get("epochs", []) if row[0] <= initial_epoch]
            self.collapse = training_collapse(self.history, self.majority, self.num_labels)  # said before: quiet

    def epoch_end(self, epoch, results, loss):
        """One finished epoch: `results` the official dev metrics ({split: {name: value}}; the first split's
        accuracy is used), `loss` the epoch's mean training loss."""
        accuracy = next(iter(results.values())).get("accuracy")
        if accuracy is None or loss is None or not math.isfinite(loss):
            return
        self.history.append((int(epoch), float(accuracy), float(loss)))
        if self.collapse is None:
            self.collapse = training_collapse(self.history, self.majority, self.num_labels)
            if self.collapse is not None:
                print(collapse_line(self.collapse, self.optimizer, self.dtype), file=self.stream or sys.stderr,
                      flush=True)
        files.atomic_write_text(self.path, json.dumps({"epochs": self.history, "collapse": self.collapse}) + "\n")

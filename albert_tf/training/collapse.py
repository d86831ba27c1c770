"""The collapsed-init check of fine-tuning: an --init encoder that maps every input to nearly the same output (as a
briefly pretrained model does) is measured against a randomly initialized one of the same config, said in one
line, and changed only when asked (`finetune --collapsed-init reset-biases`).
"""
import sys

import keras
import numpy as np

from albert_tf.modeling.encoder import AlbertEncoder


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



def handle_collapse(encoder, task, tokenizer, budget, cfg):
    """Measures the --init encoder's input spread on a training batch against a random encoder's and prints both.
    When it is collapsed: one warning line with the advice, and only with --collapsed-init reset-biases are its
    biases and LayerNorm betas zeroed (a user's weights never change unasked). Returns True when collapsed."""
    features = task.sample_inputs(tokenizer, budget, min(budget.batch_size, 64))
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
    print(f"albert-tf finetune: note: the --init encoder's token vectors vary across inputs "
          f"{spread / reference:.2f}x as much as a random encoder's (under {COLLAPSE_RATIO}x: it maps every input "
          f"to nearly the same output, as a briefly pretrained model does); {action}.", file=sys.stderr, flush=True)
    return True

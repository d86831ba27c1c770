"""Fine-tuning's optimizer: Keras AdamW whose `global_clipnorm` clips on the true global norm of the gradients.

Keras computes `global_clipnorm`'s norm over an IndexedSlices gradient (the word and token-type embeddings') slice by
slice: a row that occurs k times in a batch adds the squares of its k slices instead of the square of their sum.
The original's `tf.clip_by_global_norm` (optimization.py) sees the dense gradient. `AdamWDenseNorm` densifies such a
gradient (slices summed per row) and clips on the dense norm. The update is unchanged: Keras' clip already gave
AdamW dense gradients (its `slices * scale` densifies), and Keras' Adam squares an IndexedSlices slice by slice, so
a sparse gradient with repeated rows would give it another second moment. Densifying (tf.convert_to_tensor, a
segment sum into the variable's shape) also compiles under XLA, where tf.unique's dynamic shape would not.

`AdamWeightDecay` is the update the original fine-tunes GLUE, SQuAD and RACE with (optimization.py's
AdamWeightDecayOptimizer, BERT's): for every variable w with gradient g, after the global-norm clip,

    m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²       (no bias correction)
    u = m / (√v + ε) + λ·w                          (λ·w unless the path matches LayerNorm, layer_norm or bias)
    w ← w − lr·u

Keras' AdamW takes the same decay step but multiplies the Adam part by its bias correction √(1−β2^t)/(1−β1^t)
(ε added before it): 0.32 at step 1, 0.15 at step 10, 0.31 at step 100, 0.79 at step 1000. At one learning rate
the original's early steps are up to ~6.5x larger; the paper's per-task learning rates were tuned with them.
`make_optimizer` builds either by name (`finetune --optimizer`).
"""
import re

import keras
import tensorflow as tf

from albert_tf.training.lamb import DEFAULT_EXCLUDE, LAMB

#: The fine-tuning optimizers by `finetune --optimizer` name; the first is the default.
from albert_tf.tasks.budget import OPTIMIZERS  # noqa: E402  (the names; built here)
#: The original's fine-tuning settings: weight decay λ, the variables it skips (regexes searched in the path),
#: ε, the global-norm clip.
WEIGHT_DECAY = 0.01
NO_DECAY = DEFAULT_EXCLUDE
EPSILON = 1e-6
CLIP_NORM = 1.0


def dense_gradients(grads):
    """Each tf.IndexedSlices as its dense tensor (slices summed per row); tensors and None as they are."""
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]


def clip_by_global_norm(grads, clip_norm):
    """`tf.clip_by_global_norm(grads, clip_norm)[0]` on the dense gradients (IndexedSlices densified first). A
    non-finite norm gives NaN gradients, as TensorFlow's and Keras' do.

    Args:
      grads: list of tensors, tf.IndexedSlices or None; clip_norm: a positive float.
    Returns:
      a list like grads of dense tensors (None kept): each times clip_norm / max(norm, clip_norm), norm the square
      root of the sum of all squares (in float32).
    """
    grads = dense_gradients(grads)
    squares = [tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads if g is not None]
    norm = tf.sqrt(tf.add_n(squares)) if squares else tf.zeros([], tf.float32)
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)  # NaN when norm is not finite
    return [None if g is None else g * tf.cast(scale, g.dtype) for g in grads]


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWDenseNorm(keras.optimizers.AdamW):
    """keras.optimizers.AdamW whose `global_clipnorm` is applied on the dense gradients' global norm (see
    `clip_by_global_norm`); everything else is AdamW's (clipnorm / clipvalue unchanged). Where Keras clips (each
    replica's gradients, before they are summed across replicas) is unchanged too."""

    def _clip_gradients(self, grads):
        if self.global_clipnorm and self.global_clipnorm > 0:
            return clip_by_global_norm(grads, self.global_clipnorm)
        return super()._clip_gradients(grads)


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(LAMB):
    """The original's AdamWeightDecayOptimizer (see the module docstring for the update): LAMB's arithmetic
    (training/lamb.py, the same per-variable function) with the trust ratio off for every variable, which is what
    lamb_optimizer.py adds to AdamWeightDecayOptimizer. Gradients are clipped to `global_clipnorm` on their dense
    global norm (`clip_by_global_norm`, as the original's tf.clip_by_global_norm on TPU, whose embedding gradients
    are dense). Slots: float32 `<path with / as _>_adam_m` and `_adam_v`, each of its variable's shape.

    Args:
      learning_rate: a float or a LearningRateSchedule (called with `iterations`, 0 on the first update).
      weight_decay_rate: λ (0 disables weight decay).
      beta_1, beta_2, epsilon: as in the update above.
      exclude_from_weight_decay: regexes searched (re.search) in each variable's path; a match is not decayed.
      global_clipnorm: the clip norm (None or 0: no clip; the gradients are still densified).
      **kwargs: the Keras base optimizer's other arguments (name, ...).
    """

    SLOT_PREFIX = "adam"

    def __init__(self, learning_rate=0.001, weight_decay_rate=WEIGHT_DECAY, beta_1=0.9, beta_2=0.999,
                 epsilon=EPSILON, exclude_from_weight_decay=NO_DECAY, global_clipnorm=CLIP_NORM,
                 name="adam_weight_decay", **kwargs):
        kwargs.pop("exclude_from_layer_adaptation", None)  # LAMB's get_config writes it
        super().__init__(learning_rate=learning_rate, weight_decay_rate=weight_decay_rate, beta_1=beta_1,
                         beta_2=beta_2, epsilon=epsilon, exclude_from_weight_decay=exclude_from_weight_decay,
                         global_clipnorm=global_clipnorm, name=name, **kwargs)

    def uses_layer_adaptation(self, variable):
        """Never: Adam's update is not scaled by a trust ratio."""
        return False

    def _clip_gradients(self, grads):
        if self.global_clipnorm and self.global_clipnorm > 0:
            return clip_by_global_norm(grads, self.global_clipnorm)
        return dense_gradients(super()._clip_gradients(grads))

    def get_config(self):
        config = super().get_config()
        config.pop("exclude_from_layer_adaptation")
        return config


def make_optimizer(name, learning_rate, variables):
    """The fine-tuning optimizer `name` (one of OPTIMIZERS), built for `variables`: β 0.9/0.999, ε 1e-6, weight
    decay 0.01 except the variables whose path matches NO_DECAY, gradients clipped to a dense global norm of 1.0.

      adamw-original: AdamWeightDecay, the original's update (no bias correction).
      adamw-keras:    keras.optimizers.AdamW with the dense-norm clip (AdamWDenseNorm).

    Args:
      name: the optimizer's name; learning_rate: a float or a LearningRateSchedule; variables: the model's
        trainable variables.
    Returns:
      the built optimizer.
    """
    if name == "adamw-original":
        optimizer = AdamWeightDecay(learning_rate)
    elif name == "adamw-keras":
        optimizer = AdamWDenseNorm(learning_rate, weight_decay=WEIGHT_DECAY, beta_1=0.9, beta_2=0.999,
                                   epsilon=EPSILON, global_clipnorm=CLIP_NORM)
        pattern = re.compile("|".join(NO_DECAY))
        # Keras matches var_names against the short name ("gamma", "kernel"); match the path, as the original.
        optimizer.exclude_from_weight_decay(var_list=[v for v in variables if pattern.search(v.path)])
    else:
        raise ValueError(f"optimizer {name!r}: expected one of {', '.join(OPTIMIZERS)}")
    optimizer.build(variables)
    return optimizer

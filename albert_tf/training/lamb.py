"""LAMB exactly as ALBERT was pretrained with it (google-research/albert lamb_optimizer.py), as a Keras 3 optimizer.

For every variable w with gradient g (after the caller's global-norm clipping):

    m ← β1·m + (1−β1)·g                 (no bias correction)
    v ← β2·v + (1−β2)·g²                (no bias correction)
    u = m / (√v + ε)
    u ← u + λ·w                         unless the path matches exclude_from_weight_decay
    r = ‖w‖₂ / ‖u‖₂  (1 if either is 0) unless the path matches exclude_from_layer_adaptation, else r = 1
    w ← w − r·lr·u

Why not `keras.optimizers.Lamb`: it bias-corrects m and v (the original does not), adds weight decay through the
generic `weight_decay` path outside the trust ratio (the original puts λ·w inside u, so it is scaled by r), and it
has no per-variable exclusion from layer adaptation (the original skips the trust ratio for LayerNorm and biases).
Any of these changes the trajectory, so a released recipe (lr 0.00176, batch 4096) would not reproduce.
`tensorflow-addons`' LAMB is end-of-life and Keras 2 only.

The slots m and v are float32 whatever the variable's dtype or the compute dtype (mixed_bfloat16 keeps variables in
float32 anyway; this keeps it true for a bfloat16-variable model too), and the update is computed in float32.
"""
import re

import keras
import tensorflow as tf

from albert_tf.runtime import host_xla
from albert_tf.settings.defaults import PAPER

DEFAULT_EXCLUDE = ("LayerNorm", "layer_norm", "bias")


def _matches(patterns, name):
    return any(re.search(p, name) is not None for p in patterns or ())


@host_xla.jit_function(autograph=False)  # XLA-compiled where the host has XLA (not the TPU wheel)
def _lamb_update(w, g, m, v, lr, beta_1, beta_2, epsilon, weight_decay_rate, adapt):
    """The LAMB arithmetic of the module docstring for one variable, in float32; returns (w, m, v) updated, w in
    its own dtype. `weight_decay_rate` 0.0 means no decay; `adapt` (a Python bool) applies the trust ratio."""
    w32 = tf.cast(w, tf.float32)
    g = tf.cast(g, tf.float32)
    next_m = beta_1 * m + (1.0 - beta_1) * g
    next_v = beta_2 * v + (1.0 - beta_2) * tf.square(g)
    update = next_m / (tf.sqrt(next_v) + epsilon)
    if weight_decay_rate:
        update = update + weight_decay_rate * w32
    ratio = tf.constant(1.0)
    if adapt:
        w_norm = tf.norm(w32)
        u_norm = tf.norm(update)
        ratio = tf.where((w_norm > 0.0) & (u_norm > 0.0), w_norm / tf.where(u_norm > 0.0, u_norm, 1.0), 1.0)
    return tf.cast(w32 - ratio * lr * update, w.dtype), next_m, next_v


@keras.saving.register_keras_serializable(package="albert_tf")
class LAMB(keras.optimizers.Optimizer):
    """ALBERT's LAMB (Layer-wise Adaptive Moments for Batch training), see the module docstring for the update.
    Its slots are named after the variable's path and `SLOT_PREFIX`: `<path with / as _>_lamb_m`, `..._lamb_v`.

    Args:
      learning_rate: a float, a `keras.optimizers.schedules.LearningRateSchedule` (called with the step counter,
        `self.iterations`, which starts at 0 on the first update, like the original's global_step) or a callable.
      weight_decay_rate: λ, added as λ·w to the update (inside the trust ratio). 0 disables weight decay.
      beta_1, beta_2: decay rates of the first and second moments.
      epsilon: added to √v.
      exclude_from_weight_decay: regexes searched (re.search) in each variable's path (`variable.path`, e.g.
        "albert/encoder/layer_norm/gamma"); a match gets no weight decay.
      exclude_from_layer_adaptation: regexes likewise; a match gets trust ratio 1. None (the default) means the
        weight-decay exclusions, as in the original.
      **kwargs: the Keras base optimizer's arguments (name, global_clipnorm, ...). Note that Keras clips each
        replica's gradient before the cross-replica sum; the pretraining loop clips the summed gradient itself.
    """

    SLOT_PREFIX = "lamb"

    def __init__(self, learning_rate=PAPER["learning_rate"], weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, exclude_from_weight_decay=DEFAULT_EXCLUDE, exclude_from_layer_adaptation=None,
                 name="lamb", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        # Stored under private names: the Keras base class has a method called exclude_from_weight_decay.
        self._weight_decay_excludes = tuple(exclude_from_weight_decay or ())
        self._layer_adaptation_excludes = (
            tuple(exclude_from_layer_adaptation) if exclude_from_layer_adaptation else None)

    # ------------------------------------------------------------------ per-variable decisions (static)
    @staticmethod
    def _path(variable):
        return getattr(variable, "path", None) or variable.name

    def uses_weight_decay(self, variable):
        """Whether `variable` gets λ·w added to its update (a Python bool, decided from its path)."""
        return bool(self.weight_decay_rate) and not _matches(self._weight_decay_excludes, self._path(variable))

    def uses_layer_adaptation(self, variable):
        """Whether `variable`'s update is scaled by the trust ratio ‖w‖/‖u‖."""
        excludes = self._layer_adaptation_excludes
        if excludes is None:
            excludes = self._weight_decay_excludes
        return not _matches(excludes, self._path(variable))

    # ------------------------------------------------------------------ Keras optimizer protocol
    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v, self._decay, self._adapt = [], [], [], []
        for variable in var_list:
            for slots, suffix in ((self._m, "m"), (self._v, "v")):
                if variable.dtype == "float32":  # colocated with the variable under tf.distribute
                    slot = self.add_variable_from_reference(variable, name=f"{self.SLOT_PREFIX}_{suffix}")
                else:
                    slot = self.add_variable(variable.shape, dtype="float32",
                                             name=f"{self.SLOT_PREFIX}_{suffix}_{variable.name}")
                slots.append(slot)
            self._decay.append(self.uses_weight_decay(variable))
            self._adapt.append(self.uses_layer_adaptation(variable))

    def update_step(self, gradient, variable, learning_rate):
        """One LAMB update of `variable` (any shape) with `gradient` (same shape; IndexedSlices are densified).

        The arithmetic runs as one XLA-compiled function per variable (`_lamb_update`): a few passes over memory
        instead of one per elementwise op (op by op where this TensorFlow has no host XLA: see host_xla.py)."""
        index = self._get_variable_index(variable)
        m, v = self._m[index], self._v[index]
        if isinstance(gradient, tf.IndexedSlices):
            gradient = tf.convert_to_tensor(gradient)
        new_w, new_m, new_v = _lamb_update(
            tf.convert_to_tensor(variable), gradient, tf.convert_to_tensor(m), tf.convert_to_tensor(v),
            tf.cast(learning_rate, tf.float32), self.beta_1, self.beta_2, self.epsilon,
            self.weight_decay_rate if self._decay[index] else 0.0, self._adapt[index])
        self.assign(variable, new_w)
        self.assign(m, new_m)
        self.assign(v, new_v)

    def apply_reduced_gradients(self, grads, variables):
        """Applies gradients that are already summed over replicas (and clipped), without summing them again.

        Keras' `apply()` in a replica context sums the gradients over replicas itself and clips (global_clipnorm)
        before that sum, i.e. per replica; the original clips the summed gradient. The pretraining loop therefore
        sums and clips itself and calls this, in a replica context (inside strategy.run) or with no strategy.

        Args:
          grads: a list of dense float tensors, one per variable, identical on every replica.
          variables: the model's trainable variables (the list the optimizer was built with).
        """
        if not self.built:
            self.build(variables)
        learning_rate = self.learning_rate

        def update_all(strategy, grads):
            for grad, variable in zip(grads, variables):
                strategy.extended.update(
                    variable.value, lambda var, g: self.update_step(g, var, learning_rate), args=(grad,),
                    group=False)
            # Counted once the gradients exist: a step whose batch could not be read (a data error inside a
            # compiled loop) counts as no step (the counter has no other tie to the batch).
            with tf.control_dependencies([t for g in grads for t in strategy.experimental_local_results(g)]):
                self._iterations.assign_add(1)

        tf.distribute.get_replica_context().merge_call(update_all, args=(list(grads),))

    def get_config(self):
        config = super().get_config()
        config.update({
            "weight_decay_rate": self.weight_decay_rate,
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "exclude_from_weight_decay": list(self._weight_decay_excludes),
            "exclude_from_layer_adaptation": (
                None if self._layer_adaptation_excludes is None else list(self._layer_adaptation_excludes)),
        })
        return config

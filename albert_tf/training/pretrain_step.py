"""One pretraining step, as the original computes it: the loss (MLM + SOP over the global batch), the metrics made
from its sums, the train step (forward → loss → gradients of this replica's share → sum over replicas → clip to
global norm 1.0 → LAMB update, optionally over accumulated micro-batches) and the eval step.

    forward → loss (MLM Σw·nll / Σw over the GLOBAL batch + SOP mean over the global batch)
           → gradients of this replica's share → sum over replicas → clip to global norm 1.0 → LAMB update

The driver that runs these steps in compiled loops is albert_tf/training/pretraining.py.
"""
import re

import tensorflow as tf

from albert_tf.modeling import fused
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.runtime import host_xla
from albert_tf.settings.pretrain_config import PRETRAIN_OPTIMIZERS
from albert_tf.training.lamb import LAMB
from albert_tf.training.optimizers import NO_DECAY, AdamWDenseNorm
from albert_tf.training.schedules import WarmupPolynomialDecay

# What one step returns per replica, summed over replicas and over the steps of a loop: the loss's sums
# (pretraining_loss) and the gradient norm.
LOSS_SUM_KEYS = ("mlm_nll", "mlm_weight", "mlm_correct", "sop_nll", "sop_correct", "sop_count")
SUM_KEYS = LOSS_SUM_KEYS + ("grad_norm_sum",)
EVAL_KEYS = LOSS_SUM_KEYS


def pretraining_loss(outputs, batch, global_batch_size, mlm_weight_total, sop_weight=1.0):
    """This replica's share of the loss, and metric sums.

    Args:
      outputs: the pretrainer's outputs; `mlm_logits` float32 [b, P, V], `sop_logits` float32 [b, 2].
      batch: `masked_lm_ids` int32 [b, P], `masked_lm_weights` float32 [b, P], `sentence_order_labels` int32 [b],
        optional `sentence_order_weights` float32 [b] (eval batches: 0 marks a padding example; default 1).
      global_batch_size: B, the batch summed over all replicas.
      mlm_weight_total: Σ masked_lm_weights over the global batch (a scalar, already summed over replicas).
      sop_weight: W, the sentence-order term's weight (`pretrain --sop-weight`; the original's 1).
    Returns:
      (loss, sums): loss is a scalar whose sum over replicas is the global loss
        Σ w·nll / (Σw + 1e-5) + W · Σ sop_nll / B (the original's 1e-5 guards an all-padding batch);
        sums holds float32 scalars summed later over replicas and steps for the metrics.
    """
    ids, weights = batch["masked_lm_ids"], batch["masked_lm_weights"]
    labels = batch["sentence_order_labels"]
    mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
    sop_logits = tf.cast(outputs["sop_logits"], tf.float32)

    mlm_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=mlm_logits)      # [b, P]
    sop_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=sop_logits)   # [b]
    sop_weights = batch.get("sentence_order_weights")
    sop_weights = tf.ones_like(sop_nll) if sop_weights is None else sop_weights
    mlm_nll_sum = tf.reduce_sum(weights * mlm_nll)
    sop_nll_sum = tf.reduce_sum(sop_weights * sop_nll)
    loss = mlm_nll_sum / (mlm_weight_total + 1e-5) + sop_weight * sop_nll_sum / float(global_batch_size)

    mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), ids), tf.float32)
    sop_correct = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), labels), tf.float32)
    sums = {
        "mlm_nll": mlm_nll_sum,
        "mlm_weight": tf.reduce_sum(weights),
        "mlm_correct": tf.reduce_sum(weights * mlm_correct),
        "sop_nll": sop_nll_sum,
        "sop_correct": tf.reduce_sum(sop_weights * sop_correct),
        "sop_count": tf.reduce_sum(sop_weights),
    }
    return loss, sums



def metrics_from_sums(sums):
    """The logged metrics from sums over replicas and steps (floats)."""
    mlm_loss = sums["mlm_nll"] / max(sums["mlm_weight"], 1e-5)
    sop_loss = sums["sop_nll"] / max(sums["sop_count"], 1.0)
    return {
        "loss": mlm_loss + sop_loss,
        "masked_lm_loss": mlm_loss,
        "masked_lm_accuracy": sums["mlm_correct"] / max(sums["mlm_weight"], 1e-5),
        "sentence_order_loss": sop_loss,
        "sentence_order_accuracy": sums["sop_correct"] / max(sums["sop_count"], 1.0),
    }



@host_xla.jit_function(autograph=False)
def _add_lists(totals, more):
    """[a + b for a, b in zip(totals, more)] as one XLA kernel where the host has XLA. (As plain adds inside the
    accumulation loop, Grappler's arithmetic optimizer merges them with the gradients' own sums into AccumulateNV2
    ops whose temporary variables collide across the loop's iterations: AlreadyExistsError, albert_base, 2 streams.)"""
    return [a + b for a, b in zip(totals, more)]



def make_train_step(model, optimizer, global_batch_size, jit_compile=False, accumulation_steps=1, sop_weight=1.0):
    """Returns train_step(batch, training) → metric sums, to run in a replica context (strategy.run).

    batch: a per-replica pretraining batch, static shapes [b, L] / [b, P] / [b].
    `jit_compile` compiles the forward/backward with XLA (the cross-replica sum and the update stay outside).
    `accumulation_steps` N: the batch runs as N micro-batches of b / N examples, one after the other (a while loop,
    one micro-batch's activations alive at a time), their gradients summed in float32; the loss normalizers are
    those of the whole global batch (Σw over all micro-batches and replicas, B), so the summed gradient is the
    gradient of the same loss, then clipped once and applied by one LAMB update.
    `sop_weight`: the sentence-order term's weight in the loss (pretraining_loss); the sums are the same either way.
    """
    variables = model.trainable_variables

    def forward_backward(batch, mlm_weight_total, training):
        with tf.GradientTape() as tape, fused.training_step():  # training=False (no dropout) runs fused too
            outputs = model(batch, training=training)
            loss, sums = pretraining_loss(outputs, batch, global_batch_size, mlm_weight_total, sop_weight)
        grads = tape.gradient(loss, variables)
        return [tf.convert_to_tensor(g) for g in grads], sums  # embedding gathers give IndexedSlices

    if jit_compile:
        forward_backward = tf.function(forward_backward, jit_compile=True, reduce_retracing=True)

    def accumulated(batch, mlm_weight_total, training):
        """Σ of forward_backward over the N micro-batches of `batch`: (gradients, sums)."""
        micro = {k: tf.reshape(v, [accumulation_steps, v.shape[0] // accumulation_steps] + v.shape[1:])
                 for k, v in batch.items()}

        def body(index, grads, sums):
            more_grads, more_sums = forward_backward({k: v[index] for k, v in micro.items()}, mlm_weight_total,
                                                     training)
            totals = _add_lists(grads + [sums[k] for k in LOSS_SUM_KEYS],
                                more_grads + [more_sums[k] for k in LOSS_SUM_KEYS])
            return index + 1, totals[:len(grads)], dict(zip(LOSS_SUM_KEYS, totals[len(grads):]))

        zeros = ([tf.zeros(v.shape, tf.float32) for v in variables], {k: tf.constant(0.0) for k in LOSS_SUM_KEYS})
        _, grads, sums = tf.while_loop(lambda index, *_: index < accumulation_steps, body, (tf.constant(0), *zeros),
                                       parallel_iterations=1)  # one micro-batch at a time
        return grads, sums

    def train_step(batch, training):
        replica = tf.distribute.get_replica_context()
        mlm_weight_total = replica.all_reduce("sum", tf.reduce_sum(batch["masked_lm_weights"]))
        if accumulation_steps > 1:
            grads, sums = accumulated(batch, mlm_weight_total, training)
        else:
            grads, sums = forward_backward(batch, mlm_weight_total, training)
        grads = replica.all_reduce("sum", grads)                 # the gradient of the global-batch loss
        grads, grad_norm = tf.clip_by_global_norm(grads, 1.0)    # as the original: clip_norm=1.0
        optimizer.apply_reduced_gradients(grads, variables)     # (Keras' apply() would sum again)
        sums["grad_norm_sum"] = grad_norm / tf.cast(replica.num_replicas_in_sync, tf.float32)
        return sums

    return train_step



def make_eval_step(model, global_batch_size):
    """Returns eval_step(batch) → metric sums (replica context), the model without dropout. Padding examples of
    the last eval batches (sentence_order_weights 0, masked_lm_weights 0) count in no sum. Run it through one
    `loop.make_train_loop(strategy, eval_step, EVAL_KEYS)` per run: one trace, one compilation for every eval."""

    @tf.autograph.experimental.do_not_convert  # no control flow; spares a harmless AutoGraph warning
    def eval_step(batch):
        outputs = model(batch, training=False)
        total = tf.distribute.get_replica_context().all_reduce("sum", tf.reduce_sum(batch["masked_lm_weights"]))
        return pretraining_loss(outputs, batch, global_batch_size, total)[1]

    return eval_step



class PretrainAdamW(AdamWDenseNorm):
    """`pretrain --optimizer adamw`: Keras' AdamW (bias-corrected Adam, decoupled weight decay lr·λ·w) for gradients
    the pretraining step has already summed over replicas and clipped: `apply_reduced_gradients`, as LAMB's, applies
    them without Keras' own cross-replica sum. β 0.9/0.999, ε 1e-6, λ 0.01 except the variables whose path matches
    the original's NO_DECAY (LayerNorm, biases), as fine-tuning's AdamW (training/optimizers.py)."""

    def __init__(self, learning_rate, name="adamw", **kwargs):
        kwargs = {"weight_decay": 0.01, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-6, **kwargs}
        super().__init__(learning_rate, name=name, **kwargs)

    def build(self, var_list):
        """Marks the variables whose path matches NO_DECAY (Keras matches short names; the original, paths)."""
        self.exclude_from_weight_decay(var_list=[v for v in var_list if any(re.search(p, v.path) for p in NO_DECAY)])
        super().build(var_list)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)  # summed over replicas already (make_train_step)

    def apply_reduced_gradients(self, grads, variables):
        """Applies gradients already summed over replicas and clipped (a replica context or none)."""
        self.apply(grads, variables)


PRETRAIN_OPTIMIZER_CLASSES = {"lamb": LAMB, "adamw": PretrainAdamW}  # by settings' PRETRAIN_OPTIMIZERS name


def build_model_and_optimizer(config, learning_rate, num_train_steps, num_warmup_steps, poly_power=1.0,
                              training_streams=1, fused=True, remat=False, schedule=None,
                              optimizer=PRETRAIN_OPTIMIZERS[0]):
    """The pretrainer (`remat`: rematerialized blocks, see AlbertEncoder), the optimizer named `optimizer` (LAMB
    with the original's settings, or PretrainAdamW) and its schedule (call under strategy.scope()): `schedule` (a
    LearningRateSchedule, training/schedules.py's make_schedule) or else the paper's polynomial decay of the
    numbers given. Returns (model, optimizer, schedule)."""
    # One model whatever the dropout flags: --no-dropout and --no-dropout-after-step run it with training=False,
    # which in ALBERT removes dropout and nothing else (inside fused.training_step(): the fused training path).
    # (Building it with the rates set to 0 would draw Keras' seed stream differently and so change the initial
    # weights of a seeded run.)
    model = AlbertPretrainer(config, fused=fused, training_streams=training_streams, remat=remat)
    if schedule is None:
        schedule = WarmupPolynomialDecay(learning_rate, num_train_steps, num_warmup_steps, power=poly_power)
    optimizer = PRETRAIN_OPTIMIZER_CLASSES[optimizer](schedule)
    optimizer.build(model.trainable_variables)
    return model, optimizer, schedule

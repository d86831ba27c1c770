"""The training library (no command line: albert_tf/jobs/ calls it): the pretraining and fine-tuning runs and what
they are made of. Their settings, results and run record are below it (albert_tf/settings/, albert_tf/run_config.py).

    pretraining, finetuning    the runs behind `albert_tf.pretrain` / `albert_tf.finetune`
    run                        what both runs share: the leftovers of a killed run, the lost runtime (exit 76), the
                               progress line, TensorBoard's layout
    loop                       the step loop's pieces: N steps per compiled call, eval sums, metrics rows, progress
    batch_plan                 a pretraining run's batch plan (replicas, accumulation, streams), decided once
    pretrain_step              one pretraining step (loss, metrics, gradients summed over replicas)
    lamb, optimizers           ALBERT's LAMB; fine-tuning's AdamW
    schedules                  the learning-rate schedules after the linear warm-up (pretrain --schedule: polynomial,
                               the paper's, linear, one-cycle, wsd); fine-tuning's is the polynomial one, power 1
    distribute                 the tf.distribute strategy from --tpu / --cpu-replicas, XLA's use
    callbacks, collapse        fine-tuning's Keras callbacks; the collapsed-init check
    costs                      parameters, memory, FLOPs and time of a pretraining step (`albert-tf plan`)
    run_costs                  a whole run's steps, hours, chip-hours and money over its sequence-length phases
    rehearsal                  a TPU pod rehearsed by worker processes on one machine

Imported lazily (TensorFlow only when used):

    LAMB                     albert_tf.training.lamb
    WarmupPolynomialDecay    albert_tf.training.schedules
    create_strategy          albert_tf.training.distribute
"""
import importlib

_LAZY = {
    "LAMB": "albert_tf.training.lamb",
    "WarmupPolynomialDecay": "albert_tf.training.schedules",
    "create_strategy": "albert_tf.training.distribute",
}


def __getattr__(name):  # PEP 562: keep `albert-tf --help` fast
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'albert_tf.training' has no attribute {name!r}")


__all__ = list(_LAZY)

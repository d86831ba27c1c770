"""The training library (no command line: albert_tf/jobs/ calls it): the pretraining and fine-tuning runs and what
they are made of.

    pretraining, finetuning    the runs behind `albert_tf.pretrain` / `albert_tf.finetune` (settings/: their configs)
    run, loop                  what both runs share: the run record, progress lines, the step loop's pieces
    pretrain_step              one pretraining step (loss, metrics, gradients summed over replicas)
    lamb, optimizers           ALBERT's LAMB; fine-tuning's AdamW
    schedules                  warm-up then polynomial decay
    distribute                 the tf.distribute strategy from --tpu / --cpu-replicas, XLA's use
    callbacks, collapse        fine-tuning's Keras callbacks; the collapsed-init check
    costs                      parameters, memory, FLOPs and time of a pretraining run (`albert-tf plan`)
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

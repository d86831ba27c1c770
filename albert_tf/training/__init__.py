"""Pretraining: ALBERT's LAMB, learning-rate schedules, distribution strategies and the training loop.

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

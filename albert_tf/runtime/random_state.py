"""The process's global random generators, given back as a library call found them: `albert_tf.pretrain` and
`albert_tf.finetune` seed Python's `random`, NumPy's global generator, TensorFlow's global seed and Keras' for their
run (`keras.utils.set_random_seed`); a notebook's or a script's own draws afterwards go on as if the call had not
happened. No TensorFlow here: TensorFlow and Keras are looked up among the modules already imported.

    with kept():
        keras.utils.set_random_seed(seed)
        ...
"""
import contextlib
import random
import sys

_KERAS_STATE = "keras.src.backend.common.global_state"
_KERAS_ATTRIBUTES = ("global_random_seed", "global_seed_generator")
_MISSING = object()


def _tf_context():
    """TensorFlow's eager context (its global seed and the generator of op seeds drawn from it), or None."""
    module = sys.modules.get("tensorflow.python.eager.context")
    return module.context() if module is not None else None


def _state():
    numpy = sys.modules.get("numpy")
    context = _tf_context()
    keras_state = sys.modules.get(_KERAS_STATE)
    rng = getattr(context, "_rng", None)
    return {
        "python": random.getstate(),
        "numpy": numpy.random.get_state() if numpy is not None else None,
        "tf": None if context is None else (getattr(context, "_seed", None),
                                            rng.getstate() if rng is not None else None),
        "keras": None if keras_state is None else {
            name: keras_state.get_global_attribute(name, _MISSING) for name in _KERAS_ATTRIBUTES},
    }


def _restore(saved):
    random.setstate(saved["python"])
    numpy = sys.modules.get("numpy")
    if saved["numpy"] is not None and numpy is not None:
        numpy.random.set_state(saved["numpy"])
    context = _tf_context()
    if context is not None and hasattr(context, "_seed"):
        seed, rng_state = saved["tf"] if saved["tf"] is not None else (None, None)
        context._seed = seed  # pylint: disable=protected-access
        if rng_state is None:
            context._rng = None  # pylint: disable=protected-access
        else:
            rng = random.Random()
            rng.setstate(rng_state)
            context._rng = rng  # pylint: disable=protected-access
    keras_state = sys.modules.get(_KERAS_STATE)
    if keras_state is not None:
        for name, value in (saved["keras"] or dict.fromkeys(_KERAS_ATTRIBUTES, _MISSING)).items():
            keras_state.set_global_attribute(name, None if value is _MISSING else value)


@contextlib.contextmanager
def kept():
    """Inside the block the global generators may be reseeded; they are as they were once it ends."""
    saved = _state()
    try:
        yield
    finally:
        _restore(saved)


__all__ = ["kept"]

"""Whether this TensorFlow can XLA-compile for the host CPU, and `tf.function`s that compile with XLA only if it can.

The LAMB update (training/lamb.py) and the fused training kernels (modeling/fused.py) are `tf.function`s with
`jit_compile=True`: on CPU and GPU that makes each of them a few passes over memory instead of one per elementwise op.
The TPU build of TensorFlow (the `tensorflow-tpu` wheel) has no XLA for the host: compiling there fails with "could
not find registered transfer manager for platform Host". Inside a TPUStrategy nothing is lost without the flag (the
whole training loop is compiled for the TPU anyway), so where host XLA is unavailable those functions are plain
`tf.function`s, the same math run op by op.

Decided once per process, at the first use (after the strategy has set up the devices): a trivial function is
compiled with XLA on the CPU; if that raises, host XLA is unavailable. The environment variable
`ALBERT_TF_HOST_XLA=0` skips the probe and turns host XLA off (`1` turns it on without probing); `override()` does
the same for a block of code (tests compare the two paths with it).
"""
import contextlib
import os

ENV_VAR = "ALBERT_TF_HOST_XLA"
_probed = []      # [bool] once the probe ran
_overrides = []   # a stack of forced values (override())


def _probe():
    """Compiles and runs x + 1 with XLA on the host CPU; True if that works."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    with tf.init_scope(), tf.device("/CPU:0"):  # eager, even when called while a tf.function is traced
        try:
            return float(tf.function(lambda x: x + 1.0, jit_compile=True)(tf.constant(1.0))) == 2.0
        except (tf.errors.OpError, RuntimeError, ValueError):
            return False


def available():
    """True when functions can be XLA-compiled for the host CPU (see the module docstring for the overrides)."""
    if _overrides:
        return _overrides[-1]
    setting = os.environ.get(ENV_VAR, "").strip().lower()
    if setting in ("0", "1", "false", "true", "off", "on"):
        return setting in ("1", "true", "on")
    if setting:
        raise ValueError(f"{ENV_VAR}={setting!r}: expected 0 (off) or 1 (on), or unset (probe)")
    if not _probed:
        _probed.append(_probe())
    return _probed[0]


@contextlib.contextmanager
def override(enabled):
    """Within the block, available() returns `enabled` (a bool). Functions made by jit_function() before the block
    keep the choice they made; ask for new ones inside it."""
    _overrides.append(bool(enabled))
    try:
        yield
    finally:
        _overrides.pop()


def jit_function(fn=None, **kwargs):
    """tf.function(fn, jit_compile=True, **kwargs) where host XLA is available(), else tf.function(fn, **kwargs).

    The choice is made at each call (available() is cached), between two tf.functions built when first needed, so
    a module can define its functions at import time without touching TensorFlow's devices. Usable as a decorator,
    with or without keyword arguments."""
    if fn is None:
        return lambda f: jit_function(f, **kwargs)
    compiled = {}

    def call(*args, **call_kwargs):
        jit = available()
        if jit not in compiled:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel

            compiled[jit] = tf.function(fn, jit_compile=jit, **kwargs)
        return compiled[jit](*args, **call_kwargs)

    call.__name__ = getattr(fn, "__name__", "jit_function")
    call.__doc__ = fn.__doc__
    return call

"""XLA settings that `import albert_tf` applies before anything is compiled.

XLA:CPU in TensorFlow 2.21 hands some reductions (softmax's max and sum among them) to YNNPACK "fusions". When two
threads run the same compiled kernel at once, as the concurrent batch slices of the CPU training path do
(`AlbertEncoder.training_streams`), and as LAMB's per-variable update does for variables of one shape, XLA builds a
second YNNPACK executable for that kernel while the first is in use; that construction is not thread-safe and
crashes the process now and then with SIGSEGV (in xla::cpu::EmitYnnSubgraph, seen here about once in 30 short
training runs). Turning the YNNPACK fusions off (`--xla_cpu_experimental_ynn_fusion_type=`, an empty list) makes XLA
emit those reductions itself: the softmax kernel alone gets about 20% slower, the albert_base CPU step shows no
measurable cost (benchmarks/train_step.py --also ynn=1).

The flag is added to XLA_FLAGS, which XLA reads once, at its first compilation; so it holds when albert_tf is imported
before any XLA function runs (the CLI always is). A user's own setting of the flag in XLA_FLAGS is left as it is (the
way to turn the fusions back on: `--xla_cpu_experimental_ynn_fusion_type=reduce`). TensorFlow 2.18 to 2.20 (the TPU
wheel included) have neither the fusions nor the flag, and XLA aborts on a flag it does not know, so nothing is added
there.
"""
import os

from albert_tf.runtime.requirements import tensorflow_version

YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type"
_INSTALLED = object()


def disable_ynn_fusions(environ=None, version=_INSTALLED):
    """Appends `--xla_cpu_experimental_ynn_fusion_type=` to environ["XLA_FLAGS"] (default: os.environ) unless the
    flag is already there or TensorFlow is older than 2.21 or not found (`version`: (major, minor) or None;
    default: the installed one's). Returns True when it added the flag."""
    environ = os.environ if environ is None else environ
    version = tensorflow_version() if version is _INSTALLED else version
    current = environ.get("XLA_FLAGS", "")
    if version is None or version < (2, 21) or YNN_FLAG.lstrip("-") in current:
        return False
    environ["XLA_FLAGS"] = f"{current} {YNN_FLAG}=".strip()
    return True

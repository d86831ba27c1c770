"""Picking the tf.distribute strategy from the command line, and what a TPU run demands of its paths.

    --tpu NAME          check_tpu_support() → TPUClusterResolver(tpu=NAME) → connect → initialize the TPU system → TPUStrategy
                        (`--tpu local` on a TPU VM: no remote connection)
    TF_CONFIG set       MultiWorkerMirroredStrategy (GPU/CPU clusters)
    --cpu-replicas N    the CPU split into N logical devices + MirroredStrategy: the distributed path without
                        accelerators (must run before TensorFlow initializes its devices)
    local GPUs          MirroredStrategy over all of them
    otherwise           the default (one-device) strategy
"""
import importlib.util
import json
import os

import tensorflow as tf

from albert_tf import _requirements, host_xla

# Where a TPU VM image or the `libtpu` package puts the TPU runtime, besides $TPU_LIBRARY_PATH.
LIBTPU_PATHS = ("/lib/libtpu.so", "/usr/lib/libtpu.so", "/usr/local/lib/libtpu.so")
INSTALL_FOR_TPU = (
    "on a TPU VM keep the image's TensorFlow (pip install albert_tf, without the [tf] extra, which would put the "
    "CPU tensorflow wheel over it), or pip install \"albert_tf[tpu]\" (tensorflow-tpu 2.20 with a libtpu "
    "older than 0.0.32)")


def create_strategy(tpu=None, cpu_replicas=None, environ=None):
    """Returns the tf.distribute.Strategy the flags ask for (see the module docstring for the order)."""
    environ = os.environ if environ is None else environ
    if tpu and cpu_replicas:
        raise ValueError("--tpu and --cpu-replicas are exclusive")
    if tpu:
        check_tpu_support(environ)
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu != "local":  # a TPU VM's own chips need no remote connection
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if environ.get("TF_CONFIG"):
        try:
            json.loads(environ["TF_CONFIG"])
        except json.JSONDecodeError as e:
            raise ValueError(f"TF_CONFIG: not valid JSON ({e})") from None
        return tf.distribute.MultiWorkerMirroredStrategy()
    if cpu_replicas:
        if cpu_replicas < 1:
            raise ValueError(f"--cpu-replicas must be >= 1, got {cpu_replicas}")
        cpus = tf.config.list_physical_devices("CPU")
        try:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(cpu_replicas)])
        except RuntimeError:
            # Devices already initialized: fine if they are already split the same way.
            if len(tf.config.list_logical_devices("CPU")) != cpu_replicas:
                raise ValueError(
                    f"--cpu-replicas {cpu_replicas}: TensorFlow already initialized its devices in this process; "
                    f"run in a fresh process") from None
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
    if tf.config.list_physical_devices("GPU"):
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def is_tpu_strategy(strategy):
    return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


def is_chief(strategy):
    """True on the worker that writes checkpoints, summaries and the model dir's files."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or is_tpu_strategy(strategy) or not getattr(resolver, "task_type", None):
        return True
    return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0)


def check_cloud_paths(paths):
    """With --tpu the TPU workers read and write Cloud Storage only; refuses anything else.

    Args:
      paths: {flag name: path or glob or None}.
    """
    for flag, path in paths.items():
        if path and not str(path).startswith("gs://"):
            raise ValueError(
                f"{flag} {path}: with --tpu, data and the model dir must be on Cloud Storage (gs://...), "
                f"because the TPU hosts cannot read this machine's local files")


# ---------------------------------------------------------------------------------------------- can this TF drive a TPU
def has_tpu_kernels():
    """True when this TensorFlow build has TPU kernels (TPUCompile): the TPU wheel and TPU VM images' builds do,
    the CPU/GPU `tensorflow` wheel does not."""
    from tensorflow.python.framework import kernels  # pylint: disable=import-outside-toplevel

    return bool(kernels.get_registered_kernels_for_op("TPUCompile").kernel)


def libtpu_path(environ=None):
    """The TPU runtime library this TensorFlow would load: $TPU_LIBRARY_PATH, the `libtpu` package's libtpu.so or
    the image's /lib/libtpu.so (or /usr/lib, /usr/local/lib); None when there is none."""
    environ = os.environ if environ is None else environ
    candidates = [environ.get("TPU_LIBRARY_PATH")]
    spec = importlib.util.find_spec("libtpu")  # the package is not imported
    if spec is not None and spec.submodule_search_locations:
        candidates += [os.path.join(d, "libtpu.so") for d in spec.submodule_search_locations]
    return next((p for p in candidates + list(LIBTPU_PATHS) if p and os.path.isfile(p)), None)


def check_tpu_support(environ=None):
    """Refuses (ValueError, one line saying what to install) a TensorFlow that cannot drive a TPU: a build without
    TPU kernels, no libtpu to load, or TPU_LOAD_LIBRARY=0 (which CPU machines running the TPU wheel need)."""
    environ = os.environ if environ is None else environ
    found = _requirements.installed_tensorflow()
    this = f"{found[0]} {found[1]}" if found else f"TensorFlow {tf.__version__}"
    if not has_tpu_kernels():
        raise ValueError(f"--tpu: this TensorFlow ({this}) is not a TPU build (no TPU kernels); {INSTALL_FOR_TPU}")
    if libtpu_path(environ) is None:
        raise ValueError(f"--tpu: {this} has TPU kernels but no TPU runtime to load (libtpu.so: none in "
                         f"$TPU_LIBRARY_PATH, the libtpu package or {', '.join(LIBTPU_PATHS)}); "
                         f"pip install \"libtpu>=0.0.14,<0.0.32\" or set TPU_LIBRARY_PATH")
    if environ.get("TPU_LOAD_LIBRARY", "").strip() == "0":
        raise ValueError("--tpu: TPU_LOAD_LIBRARY=0 is set, so TensorFlow does not load the TPU runtime; unset it")


def use_xla(flag, on_tpu, use_gpu):
    """Whether the train step's forward/backward is jit-compiled: `--xla` auto (GPU only), on or off; never on a
    TPU (the whole loop is compiled for it); never where this TensorFlow has no XLA for the host (the TPU wheel on
    a CPU machine), where `--xla on` is refused."""
    if on_tpu or flag == "off":
        return False
    if not host_xla.available():
        if flag == "on":
            raise ValueError("--xla on: this TensorFlow cannot XLA-compile for this machine (no host XLA: the "
                             "tensorflow-tpu wheel); use --xla off, or the tensorflow wheel (pip install "
                             "\"albert_tf[tf]\")")
        return False
    return flag == "on" or use_gpu

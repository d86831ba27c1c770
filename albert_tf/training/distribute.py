"""Picking the tf.distribute strategy from the command line, and what a TPU run demands of its paths.

    --tpu NAME          TPUClusterResolver(tpu=NAME) → connect → initialize the TPU system → TPUStrategy
                        (`--tpu local` on a TPU VM: no remote connection)
    TF_CONFIG set       MultiWorkerMirroredStrategy (GPU/CPU clusters)
    --cpu-replicas N    the CPU split into N logical devices + MirroredStrategy: the distributed path without
                        accelerators (must run before TensorFlow initializes its devices)
    local GPUs          MirroredStrategy over all of them
    otherwise           the default (one-device) strategy
"""
import json
import os

import tensorflow as tf


def create_strategy(tpu=None, cpu_replicas=None, environ=None):
    """Returns the tf.distribute.Strategy the flags ask for (see the module docstring for the order)."""
    environ = os.environ if environ is None else environ
    if tpu and cpu_replicas:
        raise ValueError("--tpu and --cpu-replicas are exclusive")
    if tpu:
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

"""FLOPs of one ALBERT pretraining example, and the bf16 peaks of the accelerators we know, for MFU.

The count is the matmuls only (forward 2·m·n·k, backward twice that), as `albert_tf.training.plan` counts them:
embedding projection, attention projections and scores, FFN, pooler, and the MLM head at the `max_predictions`
masked positions. Softmax, LayerNorm, GELU and the embedding gathers are left out (they are small and not what the
matrix units do).
"""
import os

# Dense bf16 matmul peaks in FLOP/s per device as TensorFlow sees it (a TPU device is one core up to v3, one chip
# from v4 on; a GPU device is one GPU). Sources: vendor spec sheets.
PEAK_BF16_FLOPS = {
    "tpu v2": 22.5e12,      # per core (45 TFLOP/s per chip, 2 cores)
    "tpu v3": 61.5e12,      # per core (123 TFLOP/s per chip, 2 cores)
    "tpu v4": 275e12,       # per chip (one TF device)
    "tpu v5 lite": 197e12,  # v5e
    "tpu v5litepod": 197e12,
    "tpu v5e": 197e12,
    "tpu v5p": 459e12,
    "tpu v6 lite": 918e12,  # v6e (Trillium)
    "tpu v6e": 918e12,
    "nvidia a100": 312e12,
    "nvidia h100": 989e12,  # SXM, dense
    "nvidia h200": 989e12,
    "nvidia l4": 121e12,
    "nvidia a10": 125e12,
    "tesla v100": 125e12,   # fp16 tensor cores (no bf16 on V100)
    "tesla t4": 65e12,      # fp16 tensor cores
}


def pretraining_flops_per_example(config, seq_length, max_predictions):
    """Training FLOPs (forward + backward = 3 × forward) of one example of `seq_length` tokens; the terms are
    listed in `albert_tf.training.plan.forward_macs`."""
    from albert_tf.training.plan import training_flops_per_example  # pylint: disable=import-outside-toplevel

    return training_flops_per_example(config, seq_length, max_predictions)


def peak_flops_for(device_kind):
    """The known bf16 peak for a device description ("NVIDIA H100 80GB HBM3", "TPU v3"), or None."""
    kind = (device_kind or "").lower()
    for name in sorted(PEAK_BF16_FLOPS, key=len, reverse=True):
        if name in kind:
            return PEAK_BF16_FLOPS[name]
    return None


def local_device_kind():
    """A description of this machine's accelerator: the first GPU's name, the TPU VM's accelerator type, or None."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return tf.config.experimental.get_device_details(gpus[0]).get("device_name")
    accelerator = os.environ.get("TPU_ACCELERATOR_TYPE") or os.environ.get("ACCELERATOR_TYPE")
    if accelerator:  # e.g. "v3-8", "v4-32"
        return "tpu " + accelerator.split("-")[0]
    return None

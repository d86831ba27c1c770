"""The device table: what the plan, pretrain's MFU, the keeper and the docs know of accelerators, in one place.

Cloud TPU v3 (Google's v3 documentation: 2 TensorCores per chip, 16 GiB HBM per core, 4 chips = 8 cores per host,
123 TFLOP/s bf16 per chip): a v3-N slice has N cores on N/8 hosts; one host (v3-8) is a "TPU VM", more is a pod
slice. Dense bf16 matmul peaks of other devices from their vendors' spec sheets. No TensorFlow here.

    python -m albert_tf.runtime.devices TOPOLOGY    prints "CORES HOSTS" (tpu/lib.sh asks this, never re-types it)
"""
import sys

V3_PEAK_FLOPS_PER_CHIP = 123e12
V3_CORES_PER_CHIP = 2
V3_CORES_PER_HOST = 8
V3_PEAK_FLOPS_PER_CORE = V3_PEAK_FLOPS_PER_CHIP / V3_CORES_PER_CHIP
V3_HBM_PER_CORE = 16 * 2 ** 30
TOPOLOGIES = {f"v3-{n}": n for n in (8, 32, 64, 128, 256, 512, 1024, 2048)}  # the v3 slice shapes: name → cores
# The share of a core's memory the plan may take: the rest is left to XLA's temporaries and the runtime.
HBM_USABLE_FRACTION = 0.9
CPU_TOPOLOGY = "cpu"  # `plan --topology cpu`: this machine

# Dense bf16 matmul peaks in FLOP/s per device as TensorFlow sees it (a TPU device is one core up to v3, one chip
# from v4 on; a GPU device is one GPU). Sources: vendor spec sheets.
PEAK_BF16_FLOPS = {
    "tpu v2": 22.5e12,      # per core (45 TFLOP/s per chip, 2 cores)
    "tpu v3": V3_PEAK_FLOPS_PER_CORE,  # per core (123 TFLOP/s per chip, 2 cores)
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


def topology_cores(topology):
    """Cores of a v3 topology name ("v3-512" → 512); ValueError naming the accepted ones otherwise."""
    if topology not in TOPOLOGIES:
        raise ValueError(f"--topology {topology!r}: unknown; expected one of {', '.join(TOPOLOGIES)}")
    return TOPOLOGIES[topology]


def topology_hosts(topology):
    """TPU VM hosts of a v3 topology ("v3-512" → 64); 1 is a single TPU VM, more a pod slice."""
    return topology_cores(topology) // V3_CORES_PER_HOST


def peak_flops_for(device_kind):
    """The known bf16 peak for a device description ("NVIDIA H100 80GB HBM3", "TPU v3"), or None."""
    kind = (device_kind or "").lower()
    for name in sorted(PEAK_BF16_FLOPS, key=len, reverse=True):
        if name in kind:
            return PEAK_BF16_FLOPS[name]
    return None


def main(argv=None):
    """`python -m albert_tf.runtime.devices TOPOLOGY`: prints "CORES HOSTS"; exit 2 with one line if unknown."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if len(argv) != 1:
            raise ValueError("usage: python -m albert_tf.runtime.devices TOPOLOGY")
        print(topology_cores(argv[0]), topology_hosts(argv[0]))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The compute dtype of a run: `--dtype auto` (the default of pretrain and finetune), float32 or bfloat16.

Variables stay float32 either way; bfloat16 means Keras' mixed_bfloat16 policy (matmuls and activations in
bfloat16). Which is faster depends on the device, and on a CPU on more than its flags: bfloat16 matmuls ran at 0.62×
float32 on an Intel Xeon with AVX512-BF16 but no AMX, and at about 2× on an AMD EPYC (Zen 4) with the same flag. So
`auto` decides as follows (`decide`, a pure function of what it is given):

    TPU                          bfloat16 (the MXU's input type; the paper's models were trained so)
    GPU, compute capability ≥ 8  bfloat16 (Ampere and newer have bfloat16 tensor cores)
    GPU, older                   float32
    CPU                          whichever ran faster in `probe_rates`: one float32 and one bfloat16 matmul of the
                                 run's own sizes ([B·L, H] × [H, I], the feed-forward's), through TensorFlow's own
                                 CPU kernels (oneDNN), the path the training step takes

A CPU probe takes a fraction of a second; its result is kept per machine, TensorFlow version and size in
`CACHE_DIR/dtype_probe.json` (`ALBERT_TF_CACHE`, else ~/.cache/albert_tf), so later runs do not repeat it. An
explicit `--dtype float32|bfloat16` always wins. `ALBERT_TF_AUTO_DTYPE=float32` (or bfloat16) fixes what `auto`
means on every machine, for runs that must give the same numbers everywhere (the test suite sets it).
"""
import contextlib
import dataclasses
import json
import os
import platform
import time

from albert_tf.files import atomic_write_text

DTYPES = ("float32", "bfloat16")
CHOICES = ("auto",) + DTYPES
CACHE_ENV = "ALBERT_TF_CACHE"
AUTO_ENV = "ALBERT_TF_AUTO_DTYPE"  # float32 or bfloat16: what `auto` means on every device (reproducible CI)
PROBE_FILE = "dtype_probe.json"
_PROBE_ROWS = (256, 2048)  # the probe matmul's rows: enough to reach the kernel's steady rate ...
_PROBE_FLOPS_MAX = 1e10    # ... and bounded in work: about 25 ms per matmul at 400 GFLOP/s (xxlarge: 149 rows)


@dataclasses.dataclass(frozen=True)
class DtypeChoice:
    """What `choose` decided. rates: GFLOP/s measured per dtype on a CPU ({"float32": x, "bfloat16": y}), else
    None; cached: whether the rates came from an earlier probe on this machine."""
    dtype: str
    reason: str
    rates: dict = None
    cached: bool = False

    def describe(self):
        """One line for the run's first lines, e.g. 'dtype bfloat16 (auto: CPU matmul 812 vs 401 GFLOP/s ...)'."""
        return f"dtype {self.dtype} ({self.reason})"

    def to_record(self):
        """The choice as the run record keeps it."""
        return {"dtype": self.dtype, "reason": self.reason, "rates_gflops": self.rates}


def decide(device, capability=None, rates=None):
    """The auto rule. device: "tpu", "gpu" or "cpu"; capability: a GPU's (major, minor); rates: a CPU's measured
    {"float32": GFLOP/s, "bfloat16": GFLOP/s}. Returns a DtypeChoice."""
    if device == "tpu":
        return DtypeChoice("bfloat16", "auto: TPU")
    if device == "gpu":
        if capability is None:
            return DtypeChoice("float32", "auto: GPU of unknown compute capability")
        major, minor = capability
        if major >= 8:
            return DtypeChoice("bfloat16", f"auto: GPU with compute capability {major}.{minor} (bfloat16 tensor cores)")
        return DtypeChoice("float32", f"auto: GPU with compute capability {major}.{minor} (< 8.0: no bfloat16 "
                                      "tensor cores)")
    if device != "cpu":
        raise ValueError(f"device {device!r}: expected 'tpu', 'gpu' or 'cpu'")
    if not rates or not all(rates.get(d, 0) > 0 for d in DTYPES):
        raise ValueError(f"rates {rates!r}: a CPU decision needs both measured matmul rates (GFLOP/s)")
    faster = "bfloat16" if rates["bfloat16"] > rates["float32"] else "float32"
    return DtypeChoice(faster, f"auto: CPU matmul bfloat16 {rates['bfloat16']:.0f} vs float32 "
                               f"{rates['float32']:.0f} GFLOP/s", dict(rates))


def probe_shape(batch_size, seq_length, hidden_size, intermediate_size):
    """The probe's matmul [m, k] × [k, n]: the feed-forward's first matmul of one step's (micro-)batch, its rows
    m = B·L clipped to [256, 2048] and cut further so that one matmul is at most 1e10 FLOPs (m ≥ 16)."""
    k, n = int(hidden_size), int(intermediate_size)
    m = min(max(int(batch_size) * int(seq_length), _PROBE_ROWS[0]), _PROBE_ROWS[1])
    return max(16, min(m, int(_PROBE_FLOPS_MAX // (2 * k * n)))), k, n


def probe_rates(m, k, n, rounds=3):
    """GFLOP/s of a float32 and a bfloat16 [m, k] × [k, n] matmul on this CPU, the best of `rounds` rounds that
    alternate the two dtypes (after one untimed warm-up each). Runs eagerly on the CPU device."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    flops = 2.0 * m * k * n
    best = {}
    with tf.device("/CPU:0"):
        rng = tf.random.Generator.from_seed(0)
        operands = {d: (tf.cast(rng.normal((m, k)), d), tf.cast(rng.normal((k, n)), d)) for d in DTYPES}
        for d in DTYPES:
            tf.linalg.matmul(*operands[d]).numpy()
        for _ in range(rounds):
            for d in DTYPES:
                start = time.perf_counter()
                tf.linalg.matmul(*operands[d]).numpy()
                seconds = time.perf_counter() - start
                best[d] = max(best.get(d, 0.0), flops / seconds / 1e9)
    return best


def cache_dir(environ=None):
    """Where albert_tf keeps per-machine files: $ALBERT_TF_CACHE, else ~/.cache/albert_tf."""
    environ = os.environ if environ is None else environ
    return environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "albert_tf")


def _machine_key(shape):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model} | {os.cpu_count()} cpus | tensorflow {tf.__version__} | {'x'.join(map(str, shape))}"


def cpu_rates(shape, directory=None, probe=probe_rates):
    """(rates, cached) for `shape` on this machine: from the probe cache when it has them, else measured and kept
    (atomically; a cache that cannot be read or written is ignored, the probe runs)."""
    path = os.path.join(directory or cache_dir(), PROBE_FILE)
    key = _machine_key(shape)
    try:
        with open(path, encoding="utf-8") as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    entry = known.get(key)
    if isinstance(entry, dict) and all(isinstance(entry.get(d), (int, float)) and entry[d] > 0 for d in DTYPES):
        return {d: float(entry[d]) for d in DTYPES}, True
    rates = probe(*shape)
    known[key] = rates
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write_text(path, json.dumps(known, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass
    return rates, False


def gpu_capability():
    """(major, minor) of the first visible GPU, or None when there is none or TensorFlow does not say."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
    return tuple(capability) if capability else None


def choose(flag, on_tpu, use_gpu, shape, directory=None, probe=probe_rates):
    """The run's DtypeChoice: `flag` ("auto", "float32" or "bfloat16") on this device. shape: `probe_shape(...)`
    of the run (used only for a CPU's probe)."""
    if flag not in CHOICES:
        raise ValueError(f"--dtype {flag!r}: expected one of {', '.join(CHOICES)}")
    if flag != "auto":
        return DtypeChoice(flag, "--dtype")
    pinned = os.environ.get(AUTO_ENV)
    if pinned:
        if pinned not in DTYPES:
            raise ValueError(f"{AUTO_ENV}={pinned!r}: expected one of {', '.join(DTYPES)}")
        return DtypeChoice(pinned, f"auto, fixed by {AUTO_ENV}")
    if on_tpu:
        return decide("tpu")
    if use_gpu:
        return decide("gpu", gpu_capability())
    rates, cached = cpu_rates(shape, directory, probe)
    return dataclasses.replace(decide("cpu", rates=rates), cached=cached)


@contextlib.contextmanager
def compute_policy(dtype):
    """Keras' global dtype policy while the layers of a run are built: mixed_bfloat16 for "bfloat16" (variables
    float32, compute bfloat16), float32 for "float32". Layers keep the policy they were built with; the previous
    global policy is restored on leaving, so a notebook's later models are not affected."""
    import keras  # pylint: disable=import-outside-toplevel

    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if dtype == "bfloat16" else "float32")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


__all__ = ["DTYPES", "CHOICES", "DtypeChoice", "decide", "probe_shape", "probe_rates", "cpu_rates", "choose",
           "gpu_capability", "cache_dir", "compute_policy"]

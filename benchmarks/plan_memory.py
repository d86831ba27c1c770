"""The plan's memory model against measured memory: real training steps on this CPU, with and without `--remat` and
`--gradient-accumulation-steps`, each configuration in a fresh process.

    python benchmarks/plan_memory.py                 # the default rows, about 15 minutes on a quiet 2-core VM
    python benchmarks/plan_memory.py --rows base-512-f32,base-512-f32-remat --steps 2

Each row runs `albert-tf pretrain`'s step on one device (`build_model_and_optimizer`, `make_train_step`,
`loop.make_train_loop`, one step per compiled call; streams as pretrain on CPU: 2, 1 with remat; no XLA for the
step, dropout as the config says, training=True) on a fixed random batch (benchmarks/train_step.py's `random_batch`). The step's memory
is read from TensorFlow's own allocator statistics (`tf.config.experimental.get_memory_info("CPU:0")`: TensorFlow
allocates every tensor on the CPU through a BFC allocator that keeps what it once took, so the resident set does not
shrink between steps and its growth over a step says nothing): after `--warmup-steps` steps (the first one traces),
each of `--steps` measured steps resets the peak (`reset_memory_stats`) and reads the bytes in use before it; the
step's memory is peak − before (the largest over the measured steps), its time the median. The process's peak
resident set (VmHWM) is printed too: TensorFlow's runtime, the program and the allocator's slack come on top.

Beside it, the plan's figure for the same run (`albert_tf.training.costs.estimate` with one core whose memory is this
machine's, `remat`, `accumulation_steps`, the dtype): what the step allocates and frees again, i.e. the activations
kept for the backward pass plus the step's parameter-sized transients (the gradients, the bf16 weight copies, the
accumulated gradient sum). ratio = plan / measured; the target is 0.75–1.33 for every row.

The last line: the rows as JSON.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)

# name → (config, overrides of the config, seq length, batch, dtype, remat, accumulation steps)
ROWS = {
    "base-128-f32": ("albert_base", {}, 128, 8, "float32", False, 1),
    "base-128-f32-remat": ("albert_base", {}, 128, 8, "float32", True, 1),
    "base-512-f32": ("albert_base", {}, 512, 8, "float32", False, 1),
    "base-512-f32-remat": ("albert_base", {}, 512, 8, "float32", True, 1),
    "base-512-f32-accum4": ("albert_base", {}, 512, 8, "float32", False, 4),
    "base-512-bf16": ("albert_base", {}, 512, 8, "bfloat16", False, 1),
    "base-512-bf16-remat": ("albert_base", {}, 512, 8, "bfloat16", True, 1),
    "large2-128-bf16": ("albert_large", {"num_hidden_layers": 2}, 128, 16, "bfloat16", False, 1),
    "large2-512-f32": ("albert_large", {"num_hidden_layers": 2}, 512, 4, "float32", False, 1),
    "large2-512-f32-accum2": ("albert_large", {"num_hidden_layers": 2}, 512, 4, "float32", False, 2),
    "large2v1-512-bf16": ("albert_large_v1", {"num_hidden_layers": 2}, 512, 4, "bfloat16", False, 1),
    "large2v1-512-bf16-remat": ("albert_large_v1", {"num_hidden_layers": 2}, 512, 4, "bfloat16", True, 1),
}
PREDICTIONS = 20
CHILD_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows among: {', '.join(ROWS)}")
    p.add_argument("--steps", type=int, default=2, help="measured steps per row (default 2)")
    p.add_argument("--warmup-steps", type=int, default=1, help="steps before measuring (default 1, it traces)")
    p.add_argument("--timeout", type=int, default=900, help="seconds a row may take (default 900)")
    p.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _config(name, overrides):
    from albert_tf.config import load_config  # pylint: disable=import-outside-toplevel

    return load_config(os.path.join(REPO, "configs", f"{name}.json")).replace(**overrides)


# ------------------------------------------------------------------------------------------ the child
def _status_kib(field):
    with open("/proc/self/status", encoding="ascii") as f:
        return int(next(line for line in f if line.startswith(field + ":")).split()[1])


def _child(args):
    """One row in this (fresh) process: prints one JSON line with the measured memory and times."""
    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.training.loop import make_train_loop  # pylint: disable=import-outside-toplevel
    from albert_tf.training.pretrain_step import (  # pylint: disable=import-outside-toplevel
        SUM_KEYS, build_model_and_optimizer, make_train_step)
    from train_step import random_batch  # pylint: disable=import-outside-toplevel

    name, overrides, seq, batch_size, dtype, remat, steps = ROWS[args._child]
    config = _config(name, overrides)
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if dtype == "bfloat16" else "float32")
    keras.utils.set_random_seed(0)
    model, optimizer, _ = build_model_and_optimizer(config, 1e-4, 1000, 10, training_streams=1 if remat else 2,
                                                    remat=remat)
    batch = {k: tf.constant(v) for k, v in random_batch(config.vocab_size, batch_size, seq, PREDICTIONS, 0).items()}
    batches = iter(tf.data.Dataset.from_tensors(batch).repeat())
    loop = make_train_loop(tf.distribute.get_strategy(), make_train_step(model, optimizer, batch_size,
                                                                         accumulation_steps=steps), SUM_KEYS)
    one = tf.constant(1)
    for _ in range(args.warmup_steps):
        loop(batches, one, True)
    grown, seconds = [], []
    for _ in range(args.steps):
        tf.config.experimental.reset_memory_stats("CPU:0")
        before = tf.config.experimental.get_memory_info("CPU:0")["current"]
        start = time.perf_counter()
        loss = float(loop(batches, one, True)["mlm_nll"])
        seconds.append(time.perf_counter() - start)
        grown.append(tf.config.experimental.get_memory_info("CPU:0")["peak"] - before)
    print(json.dumps({"step_bytes": max(grown), "steady_bytes": before, "peak_rss_bytes": _status_kib("VmHWM") * 1024,
                      "seconds": statistics.median(seconds), "loss": loss}), flush=True)


# ------------------------------------------------------------------------------------------ the parent
def plan_bytes(row):
    """The plan's per-step transient memory of a row: activations + gradients + bf16 copies + gradient sum."""
    from albert_tf.training import costs  # pylint: disable=import-outside-toplevel

    name, overrides, seq, batch_size, dtype, remat, steps = row
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    p = costs.estimate(_config(name, overrides), batch_size, seq, PREDICTIONS, cores=1, dtype=dtype, remat=remat,
                      peak_flops_per_core=None, memory_per_core=total, accumulation_steps=steps)
    return {"activations": p["activations_bytes"],
            "step": p["activations_bytes"] + p["gradients_bytes"] + p["bf16_weight_copies_bytes"]
            + p["gradient_sum_bytes"]}


def measure(row_name, args):
    env = dict(os.environ, **CHILD_ENV, PYTHONPATH=REPO)
    argv = [sys.executable, os.path.abspath(__file__), "--_child", row_name, "--steps", str(args.steps),
            "--warmup-steps", str(args.warmup_steps)]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=args.timeout,
                          check=False)
    if proc.returncode:
        raise RuntimeError(f"row {row_name}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(args):
    names = [n.strip() for n in args.rows.split(",") if n.strip()]
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        raise SystemExit(f"--rows: unknown row(s) {', '.join(unknown)}; expected among {', '.join(ROWS)}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    print(f"{'row':26s}{'seq':>5s}{'batch':>6s}{'dtype':>10s}{'remat':>6s}{'accum':>6s}{'measured MiB':>14s}"
          f"{'plan MiB':>10s}{'ratio':>7s}{'step s':>8s}{'peak RSS MiB':>14s}", flush=True)
    results = []
    for name in names:
        row = ROWS[name]
        got = measure(name, args)
        planned = plan_bytes(row)
        result = {"row": name, "config": row[0], "overrides": row[1], "seq": row[2], "batch": row[3],
                  "dtype": row[4], "remat": row[5], "accumulation_steps": row[6], **got,
                  "plan_step_bytes": planned["step"], "plan_activation_bytes": planned["activations"],
                  "ratio": planned["step"] / got["step_bytes"]}
        results.append(result)
        print(f"{name:26s}{row[2]:5d}{row[3]:6d}{row[4]:>10s}{'yes' if row[5] else 'no':>6s}{row[6]:6d}"
              f"{got['step_bytes'] / 2**20:14,.0f}{planned['step'] / 2**20:10,.0f}{result['ratio']:7.2f}"
              f"{got['seconds']:8.2f}{got['peak_rss_bytes'] / 2**20:14,.0f}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    print(json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    parsed = _parse_args()
    if parsed._child:  # pylint: disable=protected-access
        _child(parsed)
    else:
        sys.exit(main(parsed))

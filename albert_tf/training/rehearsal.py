"""A TPU pod rehearsed on one CPU machine: N local worker processes (MultiWorkerMirroredStrategy, TF_CONFIG on
loopback ports) run the same `albert-tf pretrain` command, as a pod's hosts each run an input pipeline.

    python -m albert_tf.training.rehearsal --train-data 'records/train-*' --work-dir /tmp/rehearsal [--workers 2]

What it runs and checks (exit 1 and one line per failed check otherwise):
  1. reference: one process, `--cpu-replicas N` with one input pipeline per replica (ALBERT_TF_INPUT_PIPELINES=
     per-replica: replica i reads what worker i reads), uninterrupted to the last step;
  2. N workers; once the chief has logged its first loop, SIGTERM to ONE worker (the last): all of them must agree to
     stop, save the same step and exit 0;
  3. the same N workers again: they resume from that checkpoint to the last step.
Then: every worker had its own input pipeline (i/N, all distinct); the model dir holds only the chief's files (no
worker leftovers); the final checkpoint equals the reference's (max |diff| over the model and optimizer variables).
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

from albert_tf.checkpoints import pretrained
from albert_tf.config import CONFIG_FILE
from albert_tf.data import record_index
from albert_tf.text import vocabulary
from albert_tf.training import pretrain_config

# The model dir's own files (the chief's); anything else is a worker's leftover.
MODEL_DIR_FILES = (pretrained.CHECKPOINT_STATE_FILE, CONFIG_FILE, vocabulary.SPM_FILE, pretrained.METRICS_FILE, "train",
                   "eval", record_index.CACHE_NAME, pretrain_config.RECORD_FILE)


def free_ports(count):
    """`count` distinct free TCP ports on 127.0.0.1 (held open together while picked, so they differ)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def tf_config(ports, index):
    """TF_CONFIG of worker `index` of a cluster of loopback workers (worker 0 is the chief)."""
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


def _environment(extra):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "ALBERT_TF_INPUT_PIPELINES")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(extra)
    return env


def pretrain_command(pretrain_args):
    return [sys.executable, "-m", "albert_tf", "pretrain", *map(str, pretrain_args)]


def start_workers(pretrain_args, workers, log_prefix):
    """Starts `workers` processes running the same pretrain command, each with its TF_CONFIG (fresh ports).
    Returns [(Popen, log path)]; each worker's stdout and stderr go to LOG_PREFIX-worker-I.log."""
    ports = free_ports(workers)
    started = []
    for index in range(workers):
        log_path = f"{log_prefix}-worker-{index}.log"
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(pretrain_command(pretrain_args), stdout=log, stderr=subprocess.STDOUT,
                                    env=_environment({"TF_CONFIG": tf_config(ports, index)}))
        started.append((proc, log_path))
    return started


def wait_all(started, timeout):
    """Waits for every worker; kills all of them if any is still running after `timeout` seconds (a hang).
    Returns their exit codes."""
    deadline = time.time() + timeout
    codes = []
    for proc, _ in started:
        try:
            codes.append(proc.wait(timeout=max(1.0, deadline - time.time())))
        except subprocess.TimeoutExpired:
            for other, _ in started:
                other.kill()
            codes.append(None)
    return codes


def metrics_rows(model_dir, split):
    """{step: metrics} of metrics.jsonl's rows of `split` ("train" / "eval"); {} when there is none."""
    try:
        with open(os.path.join(model_dir, pretrained.METRICS_FILE), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return {r["step"]: r for r in rows if r.get("split") == split}


EVAL_METRICS = ("masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss", "sentence_order_accuracy")


def eval_differences(pod_dir, reference_dir):
    """The eval rows the pod run and the one-process reference share: (steps compared, max relative |diff| over
    their metrics). Every eval record counted once on each side (whatever the number of workers) gives equal
    metrics, up to the order of float sums."""
    pod, reference = metrics_rows(pod_dir, "eval"), metrics_rows(reference_dir, "eval")
    steps = sorted(set(pod) & set(reference))
    diffs = [abs(pod[s][k] - reference[s][k]) / max(abs(reference[s][k]), 1e-6) for s in steps for k in EVAL_METRICS]
    return steps, max(diffs, default=0.0)


def first_train_row(model_dir):
    """The step of metrics.jsonl's first train row, or None."""
    steps = sorted(metrics_rows(model_dir, "train"))
    return steps[0] if steps else None


def interrupt_one(started, model_dir, victim, timeout):
    """SIGTERMs worker `victim` once the chief has logged a loop (the run is under way); False if none came."""
    deadline = time.time() + timeout
    while first_train_row(model_dir) is None:
        if time.time() > deadline or any(proc.poll() is not None for proc, _ in started):
            return False
        time.sleep(0.2)
    started[victim][0].send_signal(signal.SIGTERM)
    return True


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def stop_steps(logs):
    """The step each worker saved at when it stopped ("SIGTERM: saved step S (...)", or "a stop on another worker:
    saved step S (...)" on the workers that got no signal), None where it did not."""
    found = []
    for text in logs:
        lines = [line for line in text.splitlines() if re.match(r"(SIG[A-Z]+|a stop on another worker): saved step ",
                                                                line)]
        found.append(int(re.search(r"saved step (\d+)", lines[-1]).group(1)) if lines else None)
    return found


def input_pipelines(logs):
    """Each worker's "input pipeline I/N" (as printed by pretrain), None where it printed none."""
    found = []
    for text in logs:
        lines = [line for line in text.splitlines() if line.startswith("input pipeline ")]
        found.append(lines[0].split()[2].rstrip(":") if lines else None)
    return found


def leftovers(model_dir):
    """Names in the model dir that are not the chief's files (checkpoints, config, vocabulary, metrics, events)."""
    return sorted(n for n in os.listdir(model_dir) if n not in MODEL_DIR_FILES and not n.startswith("ckpt-"))


def max_abs_diff(checkpoint_a, checkpoint_b):
    """max |a - b| over every saved variable (model and optimizer) of two checkpoints (a KeyError when their
    variables differ)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    a, b = tf.train.load_checkpoint(checkpoint_a), tf.train.load_checkpoint(checkpoint_b)
    names = [n for n in a.get_variable_to_shape_map() if "VARIABLE_VALUE" in n and "save_counter" not in n]
    if sorted(names) != sorted(n for n in b.get_variable_to_shape_map()
                               if "VARIABLE_VALUE" in n and "save_counter" not in n):
        raise KeyError("the two checkpoints hold different variables")
    return max(float(np.max(np.abs(a.get_tensor(n).astype(np.float64) - b.get_tensor(n)))) for n in names)


def rehearse(pretrain_args, workers, work_dir, timeout=900):
    """Runs the rehearsal (see the module docstring) with `pretrain_args` (no --model-dir: one per run is made
    under `work_dir`). Returns a report dict; `failures` lists what went wrong (empty: all checks passed)."""
    os.makedirs(work_dir, exist_ok=True)
    reference_dir, pod_dir = os.path.join(work_dir, "reference"), os.path.join(work_dir, "pod")
    report = {"workers": workers, "failures": []}
    fail = report["failures"].append

    reference = subprocess.run(
        pretrain_command([*pretrain_args, "--model-dir", reference_dir, "--cpu-replicas", workers]),
        env=_environment({"ALBERT_TF_INPUT_PIPELINES": "per-replica"}), capture_output=True, text=True,
        timeout=timeout, check=False)
    if reference.returncode != 0:
        fail(f"the reference run exited {reference.returncode}: {reference.stderr.strip()[-2000:]}")
        return report

    pod_args = [*pretrain_args, "--model-dir", pod_dir]
    first = start_workers(pod_args, workers, os.path.join(work_dir, "run1"))
    if not interrupt_one(first, pod_dir, workers - 1, timeout):
        fail("the workers ended (or hung) before the chief logged its first loop: nothing to interrupt")
    codes = wait_all(first, timeout)
    logs = [read(path) for _, path in first]
    report["stopped_at"] = stop_steps(logs)
    report["pipelines"] = input_pipelines(logs)
    if codes != [0] * workers:
        fail(f"after SIGTERM to worker {workers - 1}, the workers exited {codes} (want all 0; None: hung)")
    if len(set(report["stopped_at"])) != 1 or None in report["stopped_at"]:
        fail(f"the workers did not all stop at one saved step: {report['stopped_at']}")
    if sorted(report["pipelines"], key=str) != sorted(f"{i + 1}/{workers}" for i in range(workers)):
        fail(f"input pipelines {report['pipelines']}: want one each, 1/{workers} .. {workers}/{workers}")

    second = start_workers(pod_args, workers, os.path.join(work_dir, "run2"))
    codes = wait_all(second, timeout)
    logs = [read(path) for _, path in second]
    if codes != [0] * workers:
        fail(f"the rerun's workers exited {codes} (want all 0; None: hung)")
    if not all(f"resumed from {os.path.join(pod_dir, 'ckpt-')}" in text for text in logs):
        fail("not every worker of the rerun resumed from the chief's checkpoint")
    report["leftovers"] = leftovers(pod_dir)
    if report["leftovers"]:
        fail(f"files in the model dir that are not the chief's: {report['leftovers']}")

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    final_pod, final_reference = tf.train.latest_checkpoint(pod_dir), tf.train.latest_checkpoint(reference_dir)
    if not final_pod or os.path.basename(final_pod) != os.path.basename(final_reference):
        fail(f"last checkpoints differ: {final_pod} vs {final_reference}")
        return report
    report["final_checkpoint"] = os.path.basename(final_pod)
    report["max_abs_diff"] = max_abs_diff(final_pod, final_reference)
    if not report["max_abs_diff"] <= 1e-5:
        fail(f"final weights differ from the one-process reference: max |diff| {report['max_abs_diff']:.3g} > 1e-5")
    if "--eval-data" in map(str, pretrain_args):
        report["eval_steps"], report["eval_max_rel_diff"] = eval_differences(pod_dir, reference_dir)
        if not report["eval_steps"] or report["eval_max_rel_diff"] > 1e-5:
            fail(f"eval metrics differ from the one-process run's (every eval record once on each side): steps "
                 f"{report['eval_steps']}, max relative |diff| {report['eval_max_rel_diff']:.3g}")
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m albert_tf.training.rehearsal", description=__doc__.split("\n\n")[0],
        epilog="Flags after `--` go to every pretrain run (e.g. -- --max-seq-length 128 --max-predictions 20).")
    parser.add_argument("--train-data", required=True, help="glob of pretraining TFRecords, >= --workers files")
    parser.add_argument("--work-dir", required=True, help="where the runs' model dirs and worker logs go")
    parser.add_argument("--workers", type=int, default=2, help="local worker processes (2-4)")
    parser.add_argument("--config", default="albert_tiny")
    parser.add_argument("--steps", type=int, default=40, help="--num-train-steps of every run")
    parser.add_argument("--batch-size", type=int, default=8, help="global batch, a multiple of --workers")
    parser.add_argument("--timeout", type=int, default=900, help="seconds each run may take")
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:len(argv) - len(extra) - (1 if "--" in argv else 0)])
    if not 2 <= args.workers <= 8 or args.batch_size % args.workers:
        parser.error(f"--workers {args.workers} --batch-size {args.batch_size}: want 2-8 workers dividing the batch")
    pretrain_args = ["--config", args.config, "--train-data", args.train_data, "--batch-size",
                     args.batch_size, "--num-train-steps", args.steps, "--num-warmup-steps", 2, "--steps-per-loop",
                     2, "--save-checkpoints-steps", 4, "--learning-rate", 0.01, *extra]
    report = rehearse(pretrain_args, args.workers, args.work_dir, args.timeout)
    print(json.dumps({k: v for k, v in report.items() if k != "failures"}))
    for failure in report["failures"]:
        print(f"rehearsal: FAILED: {failure}", file=sys.stderr)
    if not report["failures"]:
        print(f"rehearsal: {args.workers} workers stopped together at step {report['stopped_at'][0]}, resumed, and "
              f"ended within {report['max_abs_diff']:.3g} of the one-process run")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())

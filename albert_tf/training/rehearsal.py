"""A TPU pod rehearsed on one CPU machine: N local worker processes (MultiWorkerMirroredStrategy, TF_CONFIG on
loopback ports) run the same `albert-tf pretrain` command, as a pod's hosts each run an input pipeline; each worker
has D CPU replicas (`--cpu-replicas D`: distribute.CpuReplicasWorkerStrategy), as a host has D TensorFlow devices.

    python -m albert_tf.training.rehearsal --train-data 'records/train-*' --work-dir /tmp/rehearsal [--workers 2]
    python -m albert_tf.training.rehearsal --train-data 'records/train-*' --work-dir /tmp/v4 --topology v4-32

--topology takes a slice's shape from the device table (albert_tf/runtime/devices.py): its hosts (at most 2 here,
the machine's share) x its TensorFlow devices per host (`rehearsal_shape`).

What it runs and checks (exit 1 and one line per failed check otherwise):
  1. reference: one process, `--cpu-replicas N*D` with one input pipeline per D replicas (ALBERT_TF_INPUT_PIPELINES=
     N: replicas i*D .. i*D+D-1 read what worker i reads), uninterrupted to the last step (before the workers, or,
     with `rehearse(..., alongside=True)`, at the same time: the workers wait on each other, the reference fills
     that time);
  2. N workers; once the chief has logged its first loop, SIGTERM to ONE worker (the last): all of them must agree to
     stop, save the same step and exit 75 (stopped on a signal after saving, albert_tf/runtime/exit_codes.py);
  3. the same N workers again: they resume from that checkpoint to the last step.
Then: every worker ran N*D replicas and had its own input pipeline (i/N, all distinct); the model dir holds only
the chief's files (no worker leftovers); the final checkpoint equals the reference's (max |diff| over the model and
optimizer variables).

With --lose-a-worker SECONDS, a host lost instead (`lose_a_worker`): the last worker is SIGKILLed mid-run, the
others must exit 76 within a bound (the coordination service notices the missing heartbeats), and a relaunch of
all of them must resume from the last checkpoint; it prints the seconds to exit and the steps lost.

    python -m albert_tf.training.rehearsal --train-data 'records/train-*' --work-dir /tmp/lost --lose-a-worker 12
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

from albert_tf import layout
from albert_tf.layout import CHECKPOINT_STATE_FILE, EVAL_SPLIT, METRICS_FILE, TRAIN_SPLIT
from albert_tf.runtime import devices, exit_codes

# The model dir's own files (the chief's); anything else is a worker's leftover.
MODEL_DIR_FILES = layout.ModelDir.names()


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


# The most hosts a rehearsal runs: worker processes share this machine's cores.
MAX_HOSTS = 2


def rehearsal_shape(topology, max_hosts=MAX_HOSTS, max_devices_per_host=8):
    """(hosts, devices per host) of a slice's rehearsal, from the device table: its hosts, at most `max_hosts`, x
    its TensorFlow devices per host, at most `max_devices_per_host` ("v4-32": 4 hosts x 4 → 2 x 4; "v5litepod-16":
    2 x 8). One-line ValueError for a name the table refuses or a one-host slice (nothing crosses hosts: a
    one-process `--cpu-replicas D` run is its rehearsal)."""
    found = devices.parse_topology(topology)
    if found.hosts < 2:
        raise ValueError(f"--topology {topology}: one host ({found.devices} TensorFlow devices): no pod to rehearse; "
                         f"a one-process `albert-tf pretrain --cpu-replicas {found.devices}` run has its shape")
    return min(found.hosts, max_hosts), min(found.devices_per_host, max_devices_per_host)


def start_workers(pretrain_args, workers, log_prefix, replicas=1):
    """Starts `workers` processes running the same pretrain command, each with its TF_CONFIG (fresh ports) and
    `replicas` CPU replicas. Returns [(Popen, log path)]; each worker's stdout and stderr go to
    LOG_PREFIX-worker-I.log."""
    ports = free_ports(workers)
    command = pretrain_command([*pretrain_args, *(["--cpu-replicas", replicas] if replicas > 1 else [])])
    started = []
    for index in range(workers):
        log_path = f"{log_prefix}-worker-{index}.log"
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
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
        with open(os.path.join(model_dir, METRICS_FILE), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return {r["step"]: r for r in rows if r.get("split") == split}


EVAL_METRICS = ("masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss", "sentence_order_accuracy")


def eval_differences(pod_dir, reference_dir):
    """The eval rows the pod run and the one-process reference share: (steps compared, max relative |diff| over
    their metrics). Every eval record counted once on each side (whatever the number of workers) gives equal
    metrics, up to the order of float sums."""
    pod, reference = metrics_rows(pod_dir, EVAL_SPLIT), metrics_rows(reference_dir, EVAL_SPLIT)
    steps = sorted(set(pod) & set(reference))
    diffs = [abs(pod[s][k] - reference[s][k]) / max(abs(reference[s][k]), 1e-6) for s in steps for k in EVAL_METRICS]
    return steps, max(diffs, default=0.0)


def first_train_row(model_dir):
    """The step of metrics.jsonl's first train row, or None."""
    steps = sorted(metrics_rows(model_dir, TRAIN_SPLIT))
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


def replicas_in_sync(logs):
    """Each worker's replicas in sync, from its plan line ("plan: ..., 8 replica(s) x 1 examples"), None where it
    printed none."""
    found = [re.search(r"^plan: .*?, (\d+) replica\(s\) x ", text, re.M) for text in logs]
    return [int(match.group(1)) if match else None for match in found]


def input_pipelines(logs):
    """Each worker's "input pipeline I/N" (as printed by pretrain), None where it printed none."""
    found = []
    for text in logs:
        lines = [line for line in text.splitlines() if line.startswith("input pipeline ")]
        found.append(lines[0].split()[2].rstrip(":") if lines else None)
    return found


def leftovers(model_dir):
    """Names in the model dir that are not the chief's files (checkpoints, config, vocabulary, metrics, events)."""
    if not os.path.isdir(model_dir):
        return [f"(no model dir: {model_dir})"]
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


def start_reference(pretrain_args, workers, reference_dir, log_path, replicas=1):
    """Starts the one-process reference run: `--cpu-replicas N*D`, N input pipelines of D replicas each (replicas
    i*D .. i*D+D-1 read what worker i reads). Returns (Popen, log path); its stdout and stderr go to the log."""
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            pretrain_command([*pretrain_args, "--model-dir", reference_dir, "--cpu-replicas", workers * replicas]),
            stdout=log, stderr=subprocess.STDOUT, env=_environment({"ALBERT_TF_INPUT_PIPELINES": str(workers)}))
    return proc, log_path


def reference_finished(reference, timeout, fail):
    """Waits for the reference run (`start_reference`); False, after `fail(...)` with its log's tail, unless it
    exited 0."""
    code = wait_all([reference], timeout)[0]
    if code != 0:
        fail(f"the reference run exited {code} (None: hung): {read(reference[1]).strip()[-2000:]}")
    return code == 0


def run_the_pod(pod_args, workers, work_dir, timeout, report, replicas=1):
    """The rehearsal's two launches of `workers` processes of `replicas` replicas (rehearse): the first stopped by a
    SIGTERM to the last worker, the second resumed to the end; what they did goes into `report` (stop steps,
    replicas in sync, input pipelines, leftovers) and what went wrong into report["failures"]."""
    fail, pod_dir = report["failures"].append, pod_args[pod_args.index("--model-dir") + 1]
    first = start_workers(pod_args, workers, os.path.join(work_dir, "run1"), replicas)
    if not interrupt_one(first, pod_dir, workers - 1, timeout):
        fail("the workers ended (or hung) before the chief logged its first loop: nothing to interrupt")
    codes = wait_all(first, timeout)
    logs = [read(path) for _, path in first]
    report["stopped_at"] = stop_steps(logs)
    report["replicas"] = replicas_in_sync(logs)
    report["pipelines"] = input_pipelines(logs)
    if report["replicas"] != [workers * replicas] * workers:
        fail(f"replicas in sync per worker {report['replicas']}: want {workers} x {replicas} on each")
    if codes != [exit_codes.STOPPED] * workers:
        fail(f"after SIGTERM to worker {workers - 1}, the workers exited {codes} (want all {exit_codes.STOPPED}; "
             "None: hung)")
    if len(set(report["stopped_at"])) != 1 or None in report["stopped_at"]:
        fail(f"the workers did not all stop at one saved step: {report['stopped_at']}")
    if sorted(report["pipelines"], key=str) != sorted(f"{i + 1}/{workers}" for i in range(workers)):
        fail(f"input pipelines {report['pipelines']}: want one each, 1/{workers} .. {workers}/{workers}")

    second = start_workers(pod_args, workers, os.path.join(work_dir, "run2"), replicas)
    codes = wait_all(second, timeout)
    logs = [read(path) for _, path in second]
    if codes != [0] * workers:
        fail(f"the rerun's workers exited {codes} (want all 0; None: hung)")
    if not all(f"resumed from {os.path.join(pod_dir, 'ckpt-')}" in text for text in logs):
        fail("not every worker of the rerun resumed from the chief's checkpoint")
    report["leftovers"] = leftovers(pod_dir)
    if report["leftovers"]:
        fail(f"files in the model dir that are not the chief's: {report['leftovers']}")


def rehearse(pretrain_args, workers, work_dir, timeout=900, alongside=False, replicas=1):
    """Runs the rehearsal (see the module docstring) with `pretrain_args` (no --model-dir: one per run is made
    under `work_dir`) on `workers` workers of `replicas` CPU replicas each. `alongside`: the reference runs at the
    same time as the workers instead of before them. Returns a report dict; `failures` lists what went wrong
    (empty: all checks passed)."""
    os.makedirs(work_dir, exist_ok=True)
    reference_dir, pod_dir = os.path.join(work_dir, "reference"), os.path.join(work_dir, "pod")
    report = {"workers": workers, "replicas_per_worker": replicas, "failures": []}
    fail = report["failures"].append

    reference = start_reference(pretrain_args, workers, reference_dir, os.path.join(work_dir, "reference.log"),
                                replicas)
    if not alongside and not reference_finished(reference, timeout, fail):
        return report

    try:
        run_the_pod([*pretrain_args, "--model-dir", pod_dir], workers, work_dir, timeout, report, replicas)
    except BaseException:
        reference[0].kill()  # (alongside: still running)
        raise

    if alongside and not reference_finished(reference, timeout, fail):
        return report
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


# ---------------------------------------------------------------------------------------------- losing a worker
def saved_step(model_dir):
    """The step of the model dir's latest checkpoint (from its state file, no TensorFlow), or None."""
    try:
        text = read(os.path.join(model_dir, CHECKPOINT_STATE_FILE))
    except FileNotFoundError:
        return None
    match = re.search(r'^model_checkpoint_path: ".*?ckpt-(\d+)"', text, re.M)
    return int(match.group(1)) if match else None


def lost_after_step(text):
    """The step a worker had finished when it noticed the loss ("... went away after step N ..."), or None."""
    match = re.search(r"went away after step (\d+)", text)
    return int(match.group(1)) if match else None


def wait_for_checkpoint(started, model_dir, timeout, newer_than=None):
    """Waits until the chief has written a checkpoint (of a step after `newer_than`, when given) while every worker
    runs; its step, or None if none came."""
    deadline = time.time() + timeout
    while saved_step(model_dir) is None or (newer_than is not None and saved_step(model_dir) <= newer_than):
        if time.time() > deadline or any(proc.poll() is not None for proc, _ in started):
            return None
        time.sleep(0.1)
    return saved_step(model_dir)


def exit_times(started, since, timeout):
    """Waits (at most `timeout` s) for every worker; [(exit code or None when still running, seconds from `since`
    to its exit, seconds from `since` to its "went away" line or None)]. Those still running are killed."""
    deadline, ended, noticed = time.time() + timeout, {}, {}
    while len(ended) < len(started) and time.time() < deadline:
        for index, (proc, log_path) in enumerate(started):
            if index not in noticed and lost_after_step(read(log_path)) is not None:
                noticed[index] = round(time.time() - since, 1)
            if index not in ended and proc.poll() is not None:
                ended[index] = (proc.returncode, round(time.time() - since, 1))
        time.sleep(0.05)
    for index, (proc, _) in enumerate(started):
        if index not in ended:
            proc.kill()
            proc.wait()
            ended[index] = (None, round(time.time() - since, 1))
    return [(*ended[i], noticed.get(i)) for i in range(len(started))]


def lose_a_worker(pretrain_args, workers, work_dir, kill_delay=3.0, exit_bound=120, timeout=900, replicas=1,
                  after_second_save=False):
    """A host lost mid-run, rehearsed: N workers (of `replicas` CPU replicas each) run; `kill_delay` s after the
    chief's first checkpoint (with `after_second_save`: after its second, so that the kill lands mid-run at any
    speed of the machine, a save by the clock before it) the last worker is SIGKILLed (no signal handler runs, as when a TPU host goes away). The chief must exit within
    `exit_bound` s with exit_codes.RUNTIME_LOST (the coordination service notices the missing heartbeats and
    aborts the collectives; --collective-timeout-secs bounds a hung peer), then all N workers are started again and
    must resume from the latest checkpoint and finish (exit 0). Returns a report: seconds from the kill to each
    worker's exit, their codes, the step the chief had reached, the step resumed from, the steps and seconds of
    work lost; `failures` lists what went wrong."""
    os.makedirs(work_dir, exist_ok=True)
    model_dir = os.path.join(work_dir, "lost")
    args = [*pretrain_args, "--model-dir", model_dir]
    report = {"workers": workers, "replicas_per_worker": replicas, "failures": []}
    fail = report["failures"].append
    first = start_workers(args, workers, os.path.join(work_dir, "lost1"), replicas)
    report["first_saved_step"] = wait_for_checkpoint(first, model_dir, timeout)
    if report["first_saved_step"] is None:
        fail("the workers ended (or hung) before the chief's first checkpoint: nothing to lose")
        exit_times(first, time.time(), 0)  # (kills those still running)
        return report
    if after_second_save:
        report["second_saved_step"] = wait_for_checkpoint(first, model_dir, timeout, newer_than=report["first_saved_step"])
        if report["second_saved_step"] is None:
            fail("the workers ended (or hung) before the chief's second checkpoint: nothing to lose")
            exit_times(first, time.time(), 0)
            return report
    time.sleep(kill_delay)
    state = os.path.join(model_dir, CHECKPOINT_STATE_FILE)
    report["checkpoint_age_at_kill_s"] = round(time.time() - os.path.getmtime(state), 1)
    first[-1][0].send_signal(signal.SIGKILL)
    killed = time.time()
    ends = exit_times(first, killed, exit_bound)
    report["exit_codes"] = [code for code, _, _ in ends]
    report["seconds_to_exit"] = [seconds for _, seconds, _ in ends]
    report["seconds_to_error_line"] = [seconds for _, _, seconds in ends]
    report["replicas"] = replicas_in_sync([read(path) for _, path in first])
    if report["replicas"] != [workers * replicas] * workers:
        fail(f"replicas in sync per worker {report['replicas']}: want {workers} x {replicas} on each")
    report["reached_step"] = lost_after_step(read(first[0][1]))
    report["saved_step"] = saved_step(model_dir)
    survivors = report["exit_codes"][:-1]
    if survivors != [exit_codes.RUNTIME_LOST] * len(survivors):
        fail(f"after SIGKILL to worker {workers - 1}, the others exited {survivors} within {exit_bound} s (want "
             f"all {exit_codes.RUNTIME_LOST}; None: still running)")
    if report["reached_step"] is None or report["saved_step"] is None or report["reached_step"] < report["saved_step"]:
        fail(f"the chief's line names no step it reached ({report['reached_step']}), or it is before the saved "
             f"step {report['saved_step']}")
        return report
    report["steps_lost"] = report["reached_step"] - report["saved_step"]

    second = start_workers(args, workers, os.path.join(work_dir, "lost2"), replicas)
    codes = wait_all(second, timeout)
    logs = [read(path) for _, path in second]
    resumed = re.search(r"resumed from \S*ckpt-(\d+) at step", logs[0])
    report["resumed_step"] = int(resumed.group(1)) if resumed else None
    if codes != [0] * workers:
        fail(f"the relaunched workers exited {codes} (want all 0; None: hung)")
    if report["resumed_step"] != report["saved_step"]:
        fail(f"the relaunch resumed from step {report['resumed_step']}, want the last checkpoint's "
             f"{report['saved_step']}")
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m albert_tf.training.rehearsal", description=__doc__.split("\n\n")[0],
        epilog="Flags after `--` go to every pretrain run (e.g. -- --max-seq-length 128 --max-predictions 20).")
    parser.add_argument("--train-data", required=True, help="glob of pretraining TFRecords, >= --workers files")
    parser.add_argument("--work-dir", required=True, help="where the runs' model dirs and worker logs go")
    parser.add_argument("--workers", type=int, default=2, help="local worker processes (2-8), one replica each")
    parser.add_argument("--topology", default=None, metavar="SLICE",
                        help="instead of --workers: the shape of a slice of the device table, hosts (at most "
                             f"{MAX_HOSTS}) x TensorFlow devices per host, e.g. v5litepod-16 (2 x 8), v4-32 (2 x 4); "
                             f"{devices.TOPOLOGY_GRAMMAR}")
    parser.add_argument("--config", default="albert_tiny")
    parser.add_argument("--steps", type=int, default=None,
                        help="--num-train-steps of every run (default: 40; 400 with --lose-a-worker)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="global batch, a multiple of the replicas (default: 8, or the replicas if more)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds each run may take")
    parser.add_argument("--lose-a-worker", type=float, default=None, metavar="SECONDS",
                        help="instead: SIGKILL the last worker SECONDS after the chief's first checkpoint (saves "
                             "every 5 s by the clock, --collective-timeout-secs 60), time the others' exit (76) and "
                             "check that a relaunch resumes from the last checkpoint (lose_a_worker)")
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:len(argv) - len(extra) - (1 if "--" in argv else 0)])
    workers, replicas = args.workers, 1
    if args.topology:
        try:
            workers, replicas = rehearsal_shape(args.topology)
        except ValueError as e:
            parser.error(str(e))
    batch_size = args.batch_size or max(8, workers * replicas)
    if not 2 <= workers <= 8 or batch_size % (workers * replicas):
        parser.error(f"{workers} workers x {replicas} replicas, --batch-size {batch_size}: want 2-8 workers and "
                     "a batch the replicas divide")
    losing = args.lose_a_worker is not None
    pretrain_args = ["--config", args.config, "--train-data", args.train_data, "--batch-size",
                     batch_size, "--num-train-steps", args.steps or (400 if losing else 40), "--num-warmup-steps",
                     2, "--learning-rate", 0.01]
    if losing:
        pretrain_args += ["--steps-per-loop", 10, "--save-checkpoints-steps", 100000, "--save-checkpoints-secs", 5,
                          "--collective-timeout-secs", 60, *extra]
        report = lose_a_worker(list(map(str, pretrain_args)), workers, args.work_dir, args.lose_a_worker,
                               timeout=args.timeout, replicas=replicas)
    else:
        pretrain_args += ["--steps-per-loop", 2, "--save-checkpoints-steps", 4, *extra]
        report = rehearse(pretrain_args, workers, args.work_dir, args.timeout, replicas=replicas)
    print(json.dumps({k: v for k, v in report.items() if k != "failures"}))
    for failure in report["failures"]:
        print(f"rehearsal: FAILED: {failure}", file=sys.stderr)
    if losing and not report["failures"]:
        print(f"rehearsal: worker {workers - 1} killed; the others exited {report['exit_codes'][:-1]} after "
              f"{report['seconds_to_exit'][:-1]} s; the relaunch resumed from step {report['resumed_step']}, "
              f"{report['steps_lost']} steps lost (the last checkpoint was {report['checkpoint_age_at_kill_s']} s "
              "old at the kill)")
    elif not report["failures"]:
        print(f"rehearsal: {workers} workers x {replicas} replicas stopped together at step {report['stopped_at'][0]}, resumed, and "
              f"ended within {report['max_abs_diff']:.3g} of the one-process run")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())

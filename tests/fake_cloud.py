"""A stand-in for Google Cloud that the keeper can run against on this machine (tests/test_keeper_cloud.py).

One program, four roles (the first argument): `gcloud ARGS` (put on PATH as `gcloud`), and, on the fake worker 0,
`pretrain ARGS` (the `albert-tf pretrain` command), `python -c CODE` (the install check) and `install` (the install
command). Everything lives in the directory $FAKE:

  calls.log          every gcloud call made from this machine, one shlex-quoted line each (worker_calls.log: the
                     ones made on worker 0, e.g. the log copies)
  project            what `gcloud config get-value project` says (default p1); every other call must carry
                     --project=p1 (the fake's only project)
  slice.json         the TPU: {"state", "acceleratorType", "runtimeVersion", "schedulingConfig", "id"}; absent:
                     NOT_FOUND
  queued.json        its queued resource (Spot): {"state"}; absent: NOT_FOUND
  describe.json      scripted answers, one used per `describe`: a state (the slice takes it), an error class
                     ("fail": an expired token, "5xx", "permission") or "not_found"; when none is left the slice's
                     own state is the answer
  versions.json      what `tpu-vm versions list` offers (a list of names; default: tests/fake_versions.py's for the
                     zone); versions_errors.json: scripted errors of those calls ("fail", "permission"), one per call
  create_failures    how many creates fail (no capacity) before one succeeds; create_errors.json: scripted create
                     errors ("capacity", "quota", "permission", "bad_image"), one per create, first
  ssh_wedges         how many ssh calls hang (they never end: the keeper's timeout must kill them)
  install_failures   how many installs fail before one succeeds
  runs.json          one entry per pretrain start: {"steps": N, "end": "exit:CODE" | "preempt" | "vanish" | "hang",
                     "message": TEXT}; no entry: train to the last step and exit 0
  gcs/BUCKET/...     the gs:// objects; worker0/ the home directory of worker 0 (a new, empty one per create)
  launches.jsonl     what each pretrain start saw (its run id, the TPU variables, the lock, the step it resumed from)

ssh runs the command with bash in worker0/ and, for a start, returns when that run has settled (exited, hung or
lost its slice), so that what the keeper sees next does not depend on timing.
"""
import datetime
import glob
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import fake_versions

FAKE = os.environ["FAKE"]
WORKER = os.path.join(FAKE, "worker0")
SAVE_EVERY = 2  # the fake run's checkpoint interval, in steps
LOCK = ".albert_tf.lock"


def path(name):
    return os.path.join(FAKE, name)


def read_json(name, default):
    try:
        with open(path(name), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return default


def write_json(name, value):
    with open(path(name) + ".tmp", "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(path(name) + ".tmp", path(name))


def take(name):
    """The first scripted entry of the list in `name` (removed from it), or None."""
    entries = read_json(name, [])
    if not entries:
        return None
    write_json(name, entries[1:])
    return entries[0]


def count_down(name):
    """True (and one fewer left) while the counter in `name` is positive."""
    try:
        left = int(open(path(name), encoding="utf-8").read())
    except FileNotFoundError:
        return False
    if left <= 0:
        return False
    with open(path(name), "w", encoding="utf-8") as f:
        f.write(str(left - 1))
    return True


def local(url):
    """gs://BUCKET/PATH -> $FAKE/gcs/BUCKET/PATH; a local path as it is."""
    return os.path.join(FAKE, "gcs", url[len("gs://"):]) if url.startswith("gs://") else url


def fail(text, code=1):
    print(f"ERROR: {text}", file=sys.stderr)
    sys.exit(code)


def flag(args, name):
    return next((a.split("=", 1)[1] for a in args if a.startswith(name + "=")), None)


# ---------------------------------------------------------------------------------------------- gcloud
def storage(args):
    if args[:2] == ["ls", "-l"]:
        directory = local(args[2])
        if not os.path.isdir(directory):
            fail("(gcloud.storage.ls) One or more URLs matched no objects.")
        for name in sorted(os.listdir(directory)):
            full = os.path.join(directory, name)
            if os.path.isdir(full):
                print(f"{'':>32}  {args[2]}{name}/")
                continue
            stamp = datetime.datetime.fromtimestamp(os.path.getmtime(full), datetime.timezone.utc)
            print(f"{os.path.getsize(full):>10}  {stamp:%Y-%m-%dT%H:%M:%SZ}  {args[2]}{name}")
        print("TOTAL: some objects")
    elif args[0] == "ls":
        matches = sorted(glob.glob(local(args[1])))
        if not matches:
            fail("(gcloud.storage.ls) One or more URLs matched no objects.")
        prefix = args[1].rsplit("/", 1)[0]
        print("\n".join(f"{prefix}/{os.path.basename(m)}" for m in matches))
    elif args[0] == "cp":
        source, target = [a for a in args[1:] if not a.startswith("--")]
        target = local(target)
        if target.endswith("/"):
            target = os.path.join(target, os.path.basename(source))
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with open(local(source), "rb") as f, open(target, "wb") as g:
            g.write(f.read())
    else:
        fail(f"unexpected: gcloud storage {shlex.join(args)}", 9)


ERRORS = {
    "fail": "There was a problem refreshing your current auth tokens",
    "5xx": "INTERNAL: 503 Service Unavailable",
    "permission": "PERMISSION_DENIED: Permission 'tpu.nodes.get' denied on 'projects/p1'",
    "capacity": "RESOURCE_EXHAUSTED: There is no more capacity in the zone",
    "quota": "RESOURCE_EXHAUSTED: Quota limit 'TPUV3PodPerProjectPerZoneForTPUAPI' has been exceeded",
    "bad_image": "INVALID_ARGUMENT: Invalid runtime version",
}


def describe(name, zone):
    answer = take("describe.json")
    tpu = read_json("slice.json", None)
    if answer in ERRORS:
        fail(f"(gcloud.compute.tpus.tpu-vm.describe) {ERRORS[answer]}")
    if tpu is None or answer == "not_found":
        fail(f"(gcloud.compute.tpus.tpu-vm.describe) NOT_FOUND: Resource 'projects/p1/locations/{zone}/nodes/{name}' "
             "was not found")
    if answer:
        tpu["state"] = answer
        write_json("slice.json", tpu)
    print(json.dumps(tpu))


def kill_worker_processes():
    """The hosts go away: whatever runs on worker 0 ends with them."""
    for name in ("child", "pid"):
        try:
            os.kill(int(open(os.path.join(WORKER, "albert_tf_run", name), encoding="utf-8").read()), signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass


def create(name, args, queued=False):
    verb = "queued-resources" if queued else "tpu-vm"
    if read_json("slice.json", None) is not None or (queued and read_json("queued.json", None) is not None):
        fail(f"(gcloud.compute.tpus.{verb}.create) ALREADY_EXISTS: {name}")
    error = take("create_errors.json")
    if error:
        fail(f"(gcloud.compute.tpus.{verb}.create) {ERRORS[error]}")
    if count_down("create_failures"):
        fail(f"(gcloud.compute.tpus.{verb}.create) {ERRORS['capacity']}")
    kill_worker_processes()  # the hosts of a slice that vanished are gone too: a new slice has new, empty hosts
    subprocess.run(["rm", "-rf", WORKER], check=True)
    capacity = {k: f"--{k}" in args for k in ("spot", "preemptible", "reserved")}
    made = read_json("made", 0) + 1
    write_json("made", made)
    labels = dict(pair.split("=", 1) for pair in flag(args, "--labels").split(",")) if flag(args, "--labels") else {}
    write_json("slice.json", {"state": "READY", "acceleratorType": flag(args, "--accelerator-type"),
                              "runtimeVersion": flag(args, "--version") or flag(args, "--runtime-version"),
                              "schedulingConfig": capacity, "id": str(1000 + made), "labels": labels})
    if queued:
        write_json("queued.json", {"state": "ACTIVE"})
    os.makedirs(WORKER)


def queued_resources(verb, name, args):
    if verb == "create":
        assert flag(args, "--node-id") == name
        return create(name, args, queued=True)
    request = read_json("queued.json", None)
    if request is None:
        fail(f"(gcloud.compute.tpus.queued-resources.{verb}) NOT_FOUND: {name}")
    if verb == "describe":
        print(json.dumps({"state": request}))
    elif verb == "delete":
        assert "--force" in args  # its node goes with it
        kill_worker_processes()
        subprocess.run(["rm", "-rf", WORKER], check=True)
        for name_ in ("queued.json", "slice.json"):
            if os.path.exists(path(name_)):
                os.remove(path(name_))
    else:
        fail(f"unexpected: gcloud compute tpus queued-resources {verb}", 9)


def ssh(args):
    tpu = read_json("slice.json", None)
    if tpu is None or tpu["state"] != "READY":
        fail("(gcloud.compute.tpus.tpu-vm.ssh) ssh: connect to host worker 0 port 22: Connection refused", 255)
    if count_down("ssh_wedges"):
        time.sleep(3600)
    command = next(a for a in args if a.startswith("--command="))[len("--command="):]
    if os.path.exists(path("settled")):
        os.remove(path("settled"))
    env = dict(os.environ, HOME=WORKER, FAKE_WORKER=WORKER, FAKE_ON_WORKER="1")
    result = subprocess.run(["bash", "-c", command], cwd=WORKER, env=env, check=False, stdout=subprocess.PIPE,
                            text=True)
    sys.stdout.write(result.stdout)
    if ("on_worker.sh start" in command or "albert_tf_launch.sh" in command) and "\nstarted: " in "\n" + result.stdout:
        wait_until_settled()
    sys.exit(result.returncode)


def wait_until_settled(timeout=30):
    deadline = time.time() + timeout
    while not os.path.exists(path("settled")):
        assert time.time() < deadline, "the fake run did not settle"
        time.sleep(0.01)
    if open(path("settled"), encoding="utf-8").read() == "exit":  # until tpu/on_worker.sh recorded the exit code
        while not os.path.exists(os.path.join(WORKER, "albert_tf_run", "exit_code")):
            assert time.time() < deadline, "on_worker.sh recorded no exit code"
            time.sleep(0.01)


def gcloud(args):
    with open(path("worker_calls.log" if os.environ.get("FAKE_ON_WORKER") else "calls.log"), "a",
              encoding="utf-8") as f:
        f.write(shlex.join(args) + "\n")
    if args[:3] == ["config", "get-value", "project"]:
        print(open(path("project"), encoding="utf-8").read() if os.path.exists(path("project")) else "p1")
        return None
    if not os.environ.get("FAKE_ON_WORKER") and "--project=p1" not in args:
        fail(f"PERMISSION_DENIED: this fake knows project p1 only: gcloud {shlex.join(args)}")
    args = [a for a in args if a != "--project=p1"]
    if args[0] == "storage":
        return storage(args[1:])
    if args[:3] == ["compute", "tpus", "queued-resources"]:
        return queued_resources(args[3], args[4], args)
    if args[:3] != ["compute", "tpus", "tpu-vm"]:
        fail(f"unexpected: gcloud {shlex.join(args)}", 9)
    verb, name = args[3], args[4]
    zone = flag(args, "--zone")
    if verb == "versions" and name == "list":
        error = take("versions_errors.json")
        if error:
            fail(f"(gcloud.compute.tpus.tpu-vm.versions.list) {ERRORS[error]}")
        return print(fake_versions.listing(zone, versions=read_json("versions.json", None)))
    if verb == "describe":
        return describe(name, zone)
    if verb == "delete":
        if read_json("slice.json", None) is None:
            fail(f"(gcloud.compute.tpus.tpu-vm.delete) NOT_FOUND: node {name}")
        kill_worker_processes()
        subprocess.run(["rm", "-rf", WORKER], check=True)
        os.remove(path("slice.json"))
        return None
    if verb == "create":
        return create(name, args)
    if verb == "scp":
        if read_json("slice.json", {}).get("state") != "READY":
            fail("(gcloud.compute.tpus.tpu-vm.scp) scp: connect to host worker 0 port 22: Connection refused", 255)
        source, target = args[4], args[5].split(":", 1)[1]
        with open(source, "rb") as f, open(os.path.join(WORKER, target), "wb") as g:
            g.write(f.read())
        return None
    if verb == "ssh":
        return ssh(args)
    return fail(f"unexpected: gcloud {shlex.join(args)}", 9)


# ---------------------------------------------------------------------------------------------- worker 0
def installed():
    return os.path.exists(os.path.join(os.environ["FAKE_WORKER"], "installed"))


def python(args):
    """The install check: `python -c 'import albert_tf'`, which must not load the TPU runtime."""
    if os.environ.get("TPU_LOAD_LIBRARY") != "0":
        fail("the install check would load the TPU runtime (TPU_LOAD_LIBRARY is not 0)", 3)
    if args != ["-c", "import albert_tf"] or not installed():
        print("ModuleNotFoundError: No module named 'albert_tf'", file=sys.stderr)
        sys.exit(1)


def install():
    with open(path("installs.log"), "a", encoding="utf-8") as f:
        failed = count_down("install_failures")
        f.write("failed\n" if failed else "installed\n")
    if failed:
        fail("Could not install packages due to an OSError: [Errno 28] No space left on device")
    open(os.path.join(os.environ["FAKE_WORKER"], "installed"), "w", encoding="utf-8").close()


def save(model_dir, step):
    open(os.path.join(model_dir, f"ckpt-{step}.index"), "w", encoding="utf-8").close()
    with open(os.path.join(model_dir, "checkpoint"), "w", encoding="utf-8") as f:
        f.write(str(step))


def take_lock(model_dir, record):
    """The output lock: a lock of another run id is a live run's (exit 77); one of this run id is taken over."""
    lock = os.path.join(model_dir, LOCK)
    if os.path.exists(lock):
        holder = json.load(open(lock, encoding="utf-8"))["run_id"]
        record["lock"] = "taken over" if holder == record["run_id"] else f"held by {holder}"
        if holder != record["run_id"]:
            return False
        print(f"took over the lock of run {holder}")
    with open(lock, "w", encoding="utf-8") as f:
        json.dump({"run_id": record["run_id"], "pid": os.getpid()}, f)
    return True


def pretrain(args):
    settled = "exit"
    try:
        settled = train(args)
    finally:
        with open(path("settled"), "w", encoding="utf-8") as f:
            f.write(settled)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # hung, or its hosts are gone: it neither saves nor exits
    while True:
        time.sleep(1)


def train(args):
    if not installed():
        print("/usr/bin/python3: No module named albert_tf")
        sys.exit(1)
    assert args[0] == "pretrain", args
    options = dict(zip(args[1::2], args[2::2]))
    model_dir, last = local(options["--model-dir"]), int(options["--num-train-steps"])
    os.makedirs(model_dir, exist_ok=True)
    step = int(open(os.path.join(model_dir, "checkpoint"), encoding="utf-8").read()) \
        if os.path.exists(os.path.join(model_dir, "checkpoint")) else 0
    record = {"run_id": os.environ.get("ALBERT_TF_RUN_ID"), "tpu_name": os.environ.get("TPU_NAME"),
              "tpu_load_library": os.environ.get("TPU_LOAD_LIBRARY"), "resumed_from": step, "lock": "free"}
    run = take("runs.json") or {}
    locked = not take_lock(model_dir, record)
    with open(path("launches.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    if locked:
        print(f"albert-tf pretrain: error: {options['--model-dir']} is locked by a live run ({record['lock']})")
        sys.exit(77)
    for _ in range(run.get("steps", last)):
        if step == last:
            break
        time.sleep(0.01)
        step += 1
        with open(os.path.join(model_dir, "metrics.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps({"split": "train", "step": step}) + "\n")
        if step % SAVE_EVERY == 0 or step == last:
            save(model_dir, step)
    end = run.get("end", "exit:0" if step == last else "exit:75")
    if end in ("preempt", "vanish"):  # the slice goes away under the run: no signal, no save, the lock stays
        tpu = read_json("slice.json", None)
        if end == "preempt":
            write_json("slice.json", dict(tpu, state="PREEMPTED"))
            if read_json("queued.json", None) is not None:
                write_json("queued.json", {"state": "SUSPENDED"})
        else:
            os.remove(path("slice.json"))
        return "lost"
    if end == "hang":
        return "hang"
    os.remove(os.path.join(model_dir, LOCK))
    print(run.get("message", f"stopped at step {step}"))
    sys.exit(int(end.split(":")[1]))


if __name__ == "__main__":
    role, arguments = sys.argv[1], sys.argv[2:]
    {"gcloud": gcloud, "pretrain": pretrain, "python": python, "install": lambda _: install()}[role](arguments)

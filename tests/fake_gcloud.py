"""An in-process stand-in for `gcloud` (a runner for albert_tf.cloud: `runner(args, timeout) -> Result`) and a fake
clock, for the keeper's tests (tests/test_keeper.py): fast, no subprocess per call, no sleeps.

It plays one project's TPU node, its queued resource, the run on worker 0 and the model dir's checkpoints, logs
every call, and answers as scripted:

  describes   per `tpu-vm describe`: a Node.State (the node takes it), "not_found", or a failure class
              ("transient", "5xx", "rate" (an API rate limit), "capacity", "permanent", "timeout"); when none is
              left, the node's own state
  creates     per create (tpu-vm or queued): None (made), "capacity", "quota", "permission", "bad_image",
              "transient" (fails, not made), "timeout_made" (times out, but the node is made)
  statuses    per status ssh: "timeout" (a wedged ssh), "refused" (port 22 blocked) or "banner" (the status after
              a login banner); when none is left, the run's own status
  deletes     per delete (tpu-vm or queued): a failure class ("5xx") or None (deleted); a queued delete (--force)
              takes the node with it only when the node belongs to the queued resource (its `queuedResource`, as
              the API says: made by a queue request, or so made by a test), not a stranger's node of the same name
  queued_failures  how many queue requests end FAILED (with `queued_error`, its failedData message) before one
              is provisioned
  hook        called with each call's words before it is answered (a test's events: a signal, a stranger's node)
  runs        per launch: {"steps": N, "end": CODE | "preempt" | "vanish", "polls": K (running for K statuses)};
              none: trains to the last step and exits 0; on a node made with "wedged": True every run exits 76 at
              once
  queued_states  per queued-resources describe: a state
  versions    per `tpu-vm versions list`: a failure class ("transient", "permission") or None (the zone's listing:
              tests/fake_versions.py, or `offered` when given)
  zone        the zone every call must carry (default europe-west4-a)
"""
import dataclasses
import json
import shlex

from albert_tf.cloud import gcloud, worker
import fake_versions

ERRORS = {
    "transient": "ERROR: (gcloud.compute.tpus) There was a problem refreshing your current auth tokens",
    "5xx": "ERROR: (gcloud.compute.tpus) INTERNAL: 503 Service Unavailable",
    "capacity": "ERROR: (gcloud.compute.tpus.tpu-vm.create) RESOURCE_EXHAUSTED: There is no more capacity in the "
                "zone \"europe-west4-a\"",
    "quota": "ERROR: (gcloud.compute.tpus.tpu-vm.create) RESOURCE_EXHAUSTED: Quota limit "
             "'TPUV3PodPerProjectPerZoneForTPUAPI' has been exceeded",
    "permission": "ERROR: (gcloud.compute.tpus) PERMISSION_DENIED: Permission 'tpu.nodes.create' denied",
    "permanent": "ERROR: (gcloud.compute.tpus) PERMISSION_DENIED: Cloud TPU API has not been used in project p1",
    "bad_image": "ERROR: (gcloud.compute.tpus.tpu-vm.create) INVALID_ARGUMENT: Invalid runtime version",
    "not_found": "ERROR: (gcloud.compute.tpus) NOT_FOUND: Resource 'projects/p1/locations/europe-west4-a/nodes/pod' "
                 "was not found",
    "rate": "ERROR: (gcloud.compute.tpus.tpu-vm.describe) RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Read "
            "requests' and limit 'Read requests per minute' of service 'tpu.googleapis.com' for consumer "
            "'project_number:1'.",
    "already_exists": "ERROR: (gcloud.compute.tpus.tpu-vm.create) ALREADY_EXISTS: Resource 'pod' already exists",
}
# the calls (short) before a keeper starts: what the run reads under --root
PREFLIGHT = ["ls train", "ls spm", "ls eval"]
BANNER = "Welcome to Ubuntu 22.04.4 LTS\n * Documentation:  https://help.ubuntu.com\nLast login: Mon Jan 15 08:00:00\n"


class FakeClock:
    """time() and sleep(): sleep only moves the time on (and is logged)."""

    def __init__(self, start=1_800_000_000.0):
        self.now = start
        self.sleeps = []

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@dataclasses.dataclass
class FakeGcloud:  # pylint: disable=too-many-instance-attributes
    clock: FakeClock
    project: str = "p1"
    configured: list = dataclasses.field(default_factory=lambda: ["p1"])  # `config get-value project`, in turn
    node: dict | None = None
    queued: str | None = None  # the queued resource's state
    describes: list = dataclasses.field(default_factory=list)
    creates: list = dataclasses.field(default_factory=list)
    statuses: list = dataclasses.field(default_factory=list)
    runs: list = dataclasses.field(default_factory=list)
    queued_states: list = dataclasses.field(default_factory=list)
    steps: int = 6
    checkpoints: list = dataclasses.field(default_factory=list)
    eval_records: bool = True
    train_records: bool = True  # ROOT/records/train-* and ROOT/spm.model are there (the keeper's preflight)
    spm: bool = True
    calls: list = dataclasses.field(default_factory=list)
    launches: list = dataclasses.field(default_factory=list)
    launch_envs: list = dataclasses.field(default_factory=list)
    uploaded: str = ""  # the last file scp copied to worker 0
    run: dict | None = None  # the run on worker 0: {"status": ..., "polls": K, "end": ...}
    next_id: int = 100
    deletes: list = dataclasses.field(default_factory=list)
    queued_failures: int = 0
    queued_error: str = ""
    hook: object = None
    zone: str = "europe-west4-a"
    versions: list = dataclasses.field(default_factory=list)
    offered: tuple | None = None

    def make_node(self, state="READY", accelerator_type="v3-32", version="tpu-vm-tf-2.18.0-pod-pjrt",
                  capacity="on-demand", labels=None, queued=False):
        """The node; `queued`: made by the queued resource (deleted with it)."""
        self.next_id += 1
        self.node = {"state": state, "acceleratorType": accelerator_type, "runtimeVersion": version,
                     "schedulingConfig": {capacity: True} if capacity != "on-demand" else {},
                     "id": str(self.next_id), "createTime": "2027-01-15T08:00:00Z", "labels": dict(labels or {})}
        if queued:
            self.node["queuedResource"] = f"projects/{self.project}/locations/{self.zone}/queuedResources/pod"
        self.run = None

    # ------------------------------------------------------------------------------------------ the runner
    def __call__(self, args, timeout):
        args = list(args)
        self.calls.append(args)
        if self.hook is not None:
            self.hook(args)
        if args[:2] == ["config", "get-value"]:
            return self.ok(args, self.configured.pop(0) if len(self.configured) > 1 else self.configured[0])
        assert f"--project={self.project}" in args, f"a call without --project={self.project}: {args}"
        if args[0] == "storage":
            return self.storage(args)
        assert f"--zone={self.zone}" in args, args
        if args[2] == "queued-resources":
            return self.queued_resource(args)
        return {"describe": self.describe, "create": self.create, "delete": self.delete, "ssh": self.ssh,
                "scp": self.scp, "versions": self.list_versions}[args[3]](args, timeout)

    def scp(self, args, timeout):  # pylint: disable=unused-argument
        """The launch script the keeper copies: kept, as worker 0 would (its `bash albert_tf_launch.sh` runs it)."""
        with open(args[4], encoding="utf-8") as f:
            self.uploaded = f.read()
        return self.ok(args)

    def list_versions(self, args, timeout):
        answer = self.versions.pop(0) if self.versions else None
        if answer:
            return self.error(args, answer)
        return self.ok(args, fake_versions.listing(self.zone, self.project, self.offered))

    @staticmethod
    def ok(args, stdout=""):
        return gcloud.Result(tuple(args), stdout=stdout)

    @staticmethod
    def error(args, kind):
        text = ERRORS[kind]
        return gcloud.Result(tuple(args), stderr=text + "\n", returncode=1, failure=gcloud.classify(1, text))

    def storage(self, args):
        pattern = args[2]
        there = {"records/eval-*": self.eval_records, "records/train-*": self.train_records, "spm.model": self.spm}
        kind = next((k for k in there if pattern.endswith(k)), None)
        if kind is not None:
            return self.ok(args, pattern.replace("*", "00000") + "\n") if there[kind] else \
                gcloud.Result(tuple(args), stderr="ERROR: One or more URLs matched no objects.", returncode=1,
                              failure=gcloud.TRANSIENT)
        names = "".join(f"{pattern.rsplit('/', 1)[0]}/ckpt-{s}.index\n" for s in sorted(self.checkpoints))
        if not names:
            return gcloud.Result(tuple(args), stderr="ERROR: One or more URLs matched no objects.", returncode=1,
                                 failure=gcloud.TRANSIENT)
        return self.ok(args, names)

    def describe(self, args, timeout):
        answer = self.describes.pop(0) if self.describes else None
        if answer in ("transient", "5xx", "permanent", "capacity", "rate"):
            return self.error(args, answer)
        if answer == "timeout":
            self.clock.now += timeout
            return gcloud.timed_out(args, timeout)
        if self.node is None or answer == "not_found":
            return self.error(args, "not_found")
        if answer:
            self.node["state"] = answer
        return self.ok(args, json.dumps(self.node))

    def create(self, args, timeout, queued=False):
        if self.node is not None:
            return self.error(args, "already_exists")
        answer = self.creates.pop(0) if self.creates else None
        if answer == "timeout_made":
            self.clock.now += timeout
        elif answer:
            return self.error(args, answer)
        value = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if "=" in a}
        capacity = next((c for c in ("spot", "preemptible", "reserved") if f"--{c}" in args), "on-demand")
        if queued and self.queued_failures:
            self.queued_failures -= 1
            self.queued = "FAILED"
            return self.ok(args)
        if queued:
            self.queued = "ACTIVE"
        labels = dict(pair.split("=", 1) for pair in value["--labels"].split(",")) if "--labels" in value else {}
        self.make_node("READY", value["--accelerator-type"],
                       value.get("--version") or value["--runtime-version"], capacity, labels, queued)
        return gcloud.timed_out(args, timeout) if answer == "timeout_made" else self.ok(args)

    def delete(self, args, timeout):
        if self.node is None:
            return self.error(args, "not_found")
        answer = self.deletes.pop(0) if self.deletes else None
        if answer:
            return self.error(args, answer)
        self.node = None
        return self.ok(args)

    def queued_resource(self, args):
        verb = args[3]
        if verb == "create":
            if self.queued is not None:
                return gcloud.Result(tuple(args), stderr="ALREADY_EXISTS", returncode=1,
                                     failure=gcloud.ALREADY_EXISTS)
            return self.create(args, 300, queued=True)
        if self.queued is None:
            return self.error(args, "not_found")
        if verb == "delete":
            assert "--force" in args
            answer = self.deletes.pop(0) if self.deletes else None
            if answer:
                return self.error(args, answer)
            self.queued = None
            if self.node is not None and self.node.get("queuedResource"):
                self.node = None
            return self.ok(args)
        state = self.queued_states.pop(0) if self.queued_states else self.queued
        self.queued = state
        failed = {"failedData": {"error": {"message": self.queued_error}}} if state == "FAILED" else {}
        return self.ok(args, json.dumps({"state": {"state": state, **failed}}))

    # ------------------------------------------------------------------------------------------ worker 0
    def ssh(self, args, timeout):
        if self.node is None or self.node["state"] != "READY":
            return gcloud.Result(tuple(args), stderr="ssh: connect to host worker 0 port 22: Connection refused",
                                 returncode=255, failure=gcloud.TRANSIENT)
        command = next(a for a in args if a.startswith("--command="))[len("--command="):]
        if "on_worker.sh status" in command:
            answer = self.statuses.pop(0) if self.statuses else None
            if answer == "timeout":
                self.clock.now += timeout
                return gcloud.timed_out(args, timeout)
            if answer == "refused":
                return gcloud.Result(tuple(args), stderr="ssh: connect to host worker 0 port 22: Connection timed out",
                                     returncode=255, failure=gcloud.TRANSIENT)
            return self.ok(args, (BANNER if answer == "banner" else "") + self.status())
        if command == worker.launch_command():
            return self.start(args, self.uploaded)
        if "on_worker.sh stop" in command:
            if self.run is not None:
                self.run.update(polls=0, end=143)
            return self.ok(args, "stopped after SIGTERM\n")
        if command.startswith("command -v"):
            return self.ok(args, "/usr/bin/gcloud\n")
        raise AssertionError(f"unexpected ssh command: {command}")

    def status(self):
        if self.run is None:
            return "never started\n"
        if self.run.get("polls", 0) > 0:
            self.run["polls"] -= 1
            return "running 4242\n"
        return f"stopped {self.run['end']}\n{self.run.get('message', 'the last log line')}\n"

    def start(self, args, script):
        """A launch: `script` (worker.launch_script) read as worker 0 would run it: the start line's words (after
        `on_worker.sh start`) in `launches`, the environment it writes in `launch_envs`."""
        self.launches.append(shlex.split(script.rsplit("on_worker.sh start", 1)[1].splitlines()[0]))
        env = script.split("<<'ALBERT_TF_LAUNCH_ENV'\n", 1)[1].split("ALBERT_TF_LAUNCH_ENV\n", 1)[0]
        self.launch_envs.append(dict(line.split("=", 1) for line in env.splitlines()))
        run = dict(self.runs.pop(0)) if self.runs else {"steps": self.steps, "end": 0}
        if self.node.get("wedged"):
            run = {"steps": 0, "end": 76}
        last = max(self.checkpoints, default=0)
        self.checkpoints += [s for s in range(last + 2, min(run.get("steps", self.steps), self.steps) + 1, 2)]
        if run["end"] == "preempt":
            self.node["state"] = "PREEMPTED"
            if self.queued:
                self.queued = "SUSPENDED"
        elif run["end"] == "vanish":
            self.node = None
        self.run = run
        return self.ok(args, "started: log albert_tf_run/pretrain.log\n")


def short(words):
    """One call, cut short: its verb and what it is about."""
    if words[0] == "config":
        return "config"
    if words[0] == "storage":
        kinds = {"eval-*": "ls eval", "train-*": "ls train", "spm.model": "ls spm", ".json": "ls config"}
        return next((short for end, short in kinds.items() if words[2].endswith(end)), "ls")
    if words[2] == "queued-resources":
        if words[3] == "create":
            return "queue " + " ".join(w for w in words[5:] if w.startswith(("--acc", "--run", "--spot", "--res")))
        return f"queued {words[3]}"
    verb = words[3]
    if verb == "ssh":
        command = next(w for w in words if w.startswith("--command="))
        if command == f"--command={worker.launch_command()}":
            return "ssh start"
        return next((f"ssh {a}" for a in ("status", "start", "stop") if f"on_worker.sh {a}" in command), "ssh tools")
    if verb == "create":
        return "create " + " ".join(w for w in words[5:] if not w.startswith(("--zone", "--project", "--labels")))
    return verb

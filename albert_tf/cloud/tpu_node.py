"""One Cloud TPU node (a TPU VM or pod slice) and its queued resource, through gcloud: describe, create, delete,
queue, ssh and scp to worker 0, list a bucket. Every call carries the pinned `--project` and `--zone` and a timeout.
No TensorFlow here.

    cloud = Cloud(runner, project="p", zone="europe-west4-a", name="pod")
    seen = cloud.describe()            # Node (its state, type, image, capacity, id) or a failed Result
    cloud.create(spec)                 # tpu-vm create, or queued-resources create (Spot; v5e and v5p always)

`runner(args, timeout) -> gcloud.Result` is albert_tf.cloud.gcloud.run, or a test's fake.
"""
import dataclasses
import json

from albert_tf.cloud import gcloud
from albert_tf.runtime import devices

# The Cloud TPU v2 API's Node.State values (UNKNOWN: e.g. after a failed repair).
NODE_STATES = ("CREATING", "READY", "RESTARTING", "REIMAGING", "DELETING", "REPAIRING", "STOPPED", "STOPPING",
               "STARTING", "PREEMPTED", "TERMINATED", "HIDING", "HIDDEN", "UNHIDING", "UNKNOWN")
# A queued resource's states (QueuedResourceState.State).
QUEUED_STATES = ("CREATING", "ACCEPTED", "PROVISIONING", "FAILED", "DELETING", "ACTIVE", "SUSPENDING", "SUSPENDED",
                 "WAITING_FOR_RESOURCES")
CAPACITIES = ("on-demand", "spot", "preemptible", "reserved")
# Spot capacity comes through a queued resource, as Google advises (cloud.google.com/tpu/docs/spot); the GA
# `queued-resources create` has --spot, --reserved and --guaranteed but no preemptible kind, so a preemptible slice
# is made with `tpu-vm create --preemptible` (cloud.google.com/tpu/docs/preemptible). A generation whose row in the
# device table says queued resources (v5e, v5p) is always queued, whatever its capacity.
QUEUED_CAPACITIES = ("spot",)

# Timeouts of one call, in seconds: a create waits for its operation (a pod slice takes minutes).
TIMEOUTS = {"describe": 120, "create": 1800, "delete": 1800, "queue": 300, "ssh": 300, "scp": 300, "storage": 120,
            "config": 60, "versions": 120}


@dataclasses.dataclass(frozen=True)
class Spec:
    """What a slice is made of: recreated exactly so after a loss."""
    accelerator_type: str
    runtime_version: str
    capacity: str  # one of CAPACITIES

    @property
    def queued(self):
        """Made through a queued resource: Spot capacity, or a generation that is made only so (the device table's
        provisioning; a type the table does not know is not)."""
        return self.capacity in QUEUED_CAPACITIES or queued_only(self.accelerator_type)

    @property
    def text(self):
        """"v3-32, tpu-vm-tf-2.18.0-pod-pjrt, spot": what a note says it is made of."""
        return ", ".join(dataclasses.astuple(self))


@dataclasses.dataclass(frozen=True)
class Options:
    """What every create adds, and how worker 0 is reached: no external IP (`internal_ips`: create --internal-ips;
    ssh and scp then go by the internal IP, --internal-ip, or through Identity-Aware Proxy, `iap`:
    --tunnel-through-iap), the VMs' `service_account` (--service-account) and how long a queued request may wait
    (`valid_until`: queued-resources create --valid-until-duration, e.g. "6h")."""
    internal_ips: bool = False
    service_account: str | None = None
    valid_until: str | None = None
    iap: bool = False

    def create_words(self, queued):
        words = ["--internal-ips"] if self.internal_ips else []
        words += [f"--service-account={self.service_account}"] if self.service_account else []
        return words + ([f"--valid-until-duration={self.valid_until}"] if queued and self.valid_until else [])

    def ssh_words(self):
        return ["--tunnel-through-iap"] if self.iap else ["--internal-ip"] if self.internal_ips else []


@dataclasses.dataclass(frozen=True)
class Node:  # pylint: disable=too-many-instance-attributes
    """A node as `describe` gives it: with the v2 API's health report (`health`: HEALTHY, TIMEOUT,
    UNHEALTHY_TENSORFLOW, UNHEALTHY_MAINTENANCE, ...; `health_description`; `symptoms`: their symptomType values,
    e.g. MESH_BUILD_FAIL) and its `maintenance` (upcomingMaintenance, as one line; "" when none)."""
    state: str
    spec: Spec
    node_id: str = ""
    create_time: str = ""
    labels: dict = dataclasses.field(default_factory=dict)
    health: str = ""
    health_description: str = ""
    symptoms: tuple = ()
    maintenance: str = ""


@dataclasses.dataclass(frozen=True)
class Queued:
    """A queued resource as `describe` gives it: its state and, when FAILED, the error it gives
    (state.failedData.error.message; "" when none)."""
    state: str
    error: str = ""


def queued_only(accelerator_type):
    """Whether slices of `accelerator_type`'s generation are made through queued resources only (v5e, v5p)."""
    try:
        return devices.parse_topology(accelerator_type).generation.provisioning == devices.QUEUED_RESOURCES
    except ValueError:
        return False


def node_from_json(text):
    """A Node from `describe --format=json` (a state the API adds later is kept as it is: the keeper waits on it)."""
    values = json.loads(text)
    scheduling = values.get("schedulingConfig") or {}
    capacity = next((c for c in ("spot", "preemptible", "reserved") if scheduling.get(c)), "on-demand")
    spec = Spec(values.get("acceleratorType", ""), values.get("runtimeVersion", ""), capacity)
    symptoms = tuple(s.get("symptomType", "") for s in values.get("symptoms") or () if isinstance(s, dict))
    return Node(values.get("state") or "UNKNOWN", spec, str(values.get("id", "")), values.get("createTime", ""),
                dict(values.get("labels") or {}), values.get("health") or "", values.get("healthDescription") or "",
                symptoms, maintenance_line(values.get("upcomingMaintenance")))


def maintenance_line(upcoming):
    """upcomingMaintenance (type, maintenanceStatus, windowStartTime, windowEndTime) as one line; "" when none."""
    if not upcoming:
        return ""
    window = " to ".join(t for t in (upcoming.get("windowStartTime"), upcoming.get("windowEndTime")) if t)
    return " ".join(w for w in (upcoming.get("type", "maintenance"), upcoming.get("maintenanceStatus", ""),
                                f"({window})" if window else "") if w)


class Cloud:
    """gcloud calls about one node, in one project and zone (pinned when the keeper starts)."""

    def __init__(self, runner, project, zone, name, queued_name=None, timeouts=None, options=None):
        self.runner, self.project, self.zone, self.name = runner, project, zone, name
        self.options = options or Options()
        self.queued_name = queued_name or name
        self.timeouts = {**TIMEOUTS, **(timeouts or {})}

    def call(self, kind, *args, zone=True):
        where = ([f"--zone={self.zone}"] if zone else []) + [f"--project={self.project}"]
        return self.runner([*args, *where], self.timeouts[kind])

    # ------------------------------------------------------------------------------------------ the node
    def describe(self):
        """(Node, None) or (None, the failed Result: NOT_FOUND or another failure class)."""
        result = self.call("describe", "compute", "tpus", "tpu-vm", "describe", self.name, "--format=json")
        if not result.ok:
            return None, result
        try:
            return node_from_json(result.stdout), None
        except (ValueError, AttributeError):
            bad = dataclasses.replace(result, stderr=f"describe gave no node: {result.stdout[:200]!r}",
                                      failure=gcloud.TRANSIENT)
            return None, bad

    def create(self, spec, labels=None):
        """Asks for the node: a queued resource for Spot, `tpu-vm create` otherwise, with `labels` ({KEY: VALUE}) on
        what it makes. The Result of the call."""
        tagged = [f"--labels={','.join(f'{k}={v}' for k, v in labels.items())}"] if labels else []
        capacity = [] if spec.capacity == "on-demand" else [f"--{spec.capacity}"]
        if spec.queued:
            return self.call("queue", "compute", "tpus", "queued-resources", "create", self.queued_name,
                             f"--node-id={self.name}", f"--accelerator-type={spec.accelerator_type}",
                             f"--runtime-version={spec.runtime_version}", *capacity, *tagged,
                             *self.options.create_words(queued=True))
        return self.call("create", "compute", "tpus", "tpu-vm", "create", self.name,
                         f"--accelerator-type={spec.accelerator_type}", f"--version={spec.runtime_version}",
                         *capacity, *tagged, *self.options.create_words(queued=False))

    def versions(self):
        """(the zone's runtime versions as `versions list --format=json` gives them, None) or (None, the failed
        Result): what albert_tf.cloud.images.zone_image chooses from."""
        result = self.call("versions", "compute", "tpus", "tpu-vm", "versions", "list", "--format=json")
        return (result.stdout, None) if result.ok else (None, result)

    def delete(self):
        return self.call("delete", "compute", "tpus", "tpu-vm", "delete", self.name, "--quiet")

    # ------------------------------------------------------------------------------------------ its queued resource
    def describe_queued(self):
        """(Queued, None) or (None, the failed Result)."""
        result = self.call("describe", "compute", "tpus", "queued-resources", "describe", self.queued_name,
                           "--format=json")
        if not result.ok:
            return None, result
        try:
            state = json.loads(result.stdout).get("state") or {}
            error = ((state.get("failedData") or {}).get("error") or {}).get("message") or ""
            return Queued(state.get("state") or "CREATING", error), None
        except (ValueError, AttributeError):
            return None, dataclasses.replace(result, failure=gcloud.TRANSIENT,
                                             stderr=f"describe gave no state: {result.stdout[:200]!r}")

    def delete_queued(self):
        """Deletes the queued resource and, with --force, the node it made."""
        return self.call("delete", "compute", "tpus", "queued-resources", "delete", self.queued_name, "--quiet",
                         "--force")

    # ------------------------------------------------------------------------------------------ worker 0
    def ssh(self, command):
        return self.call("ssh", "compute", "tpus", "tpu-vm", "ssh", self.name, "--worker=0", f"--command={command}",
                         *self.options.ssh_words())

    def scp(self, source, target):
        return self.call("scp", "compute", "tpus", "tpu-vm", "scp", source, f"{self.name}:{target}", "--worker=0",
                         *self.options.ssh_words())

    # ------------------------------------------------------------------------------------------ the bucket
    def list_objects(self, pattern):
        """(names, None) or (None, the failed Result); no match is an empty list."""
        result = self.call("storage", "storage", "ls", pattern, zone=False)
        if result.ok:
            return [line.strip() for line in result.stdout.splitlines() if line.strip()], None
        if "matched no objects" in result.stderr or result.failure == gcloud.NOT_FOUND:
            return [], None
        return None, result

    def delete_commands(self, queued):
        """The commands that stop the billing, for the keeper's last line."""
        where = f"--zone={self.zone} --project={self.project}"
        if queued:
            return (f"gcloud compute tpus queued-resources delete {self.queued_name} {where} --quiet --force")
        return f"gcloud compute tpus tpu-vm delete {self.name} {where} --quiet"


def configured_project(runner):
    """The project of gcloud's configuration (`gcloud config get-value project`), or ValueError."""
    result = runner(["config", "get-value", "project"], TIMEOUTS["config"])
    project = result.stdout.strip() if result.ok else ""
    if not project or project == "(unset)":
        raise ValueError("no --project given and gcloud has no project configured (gcloud config set project P)")
    return project


__all__ = ["NODE_STATES", "QUEUED_STATES", "CAPACITIES", "QUEUED_CAPACITIES", "TIMEOUTS", "Spec", "Options", "Node",
           "Queued", "Cloud", "node_from_json", "queued_only", "configured_project"]

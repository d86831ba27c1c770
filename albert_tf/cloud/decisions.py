"""The keeper's decision table, as data: what it does for each state of the slice (every Node.State of the Cloud
TPU v2 API, not found (gcloud.NOT_FOUND), a failed `describe` of each class), of its queued resource, and, on a
READY slice, for each answer worker 0 gives about the run (each exit code of `albert-tf pretrain`, and no answer).
docs/tpu.md holds the same table (tests/test_keeper.py checks that it does). No TensorFlow here.

As TensorFlow's own Cloud TPU client decides (`Client.recoverable()`), only PREEMPTED and TERMINATED are lost: only
those (and NOT_FOUND twice in a row) are replaced. Every transitional, unknown or transient state is waited on.
"""
from albert_tf.cloud import gcloud
from albert_tf.runtime import exit_codes

# What the keeper does.
CHECK_RUN = "check the run"  # READY: ask worker 0 about the run, then act on the run's table below
WAIT = "wait"  # touch nothing; look again at the next poll (a slice waited on past --settle-timeout stops it)
REPLACE = "replace"  # delete it (and its queued resource) and create it again as recorded, then launch
CONFIRM = "look again"  # NOT_FOUND the first time: believed only at the next poll
CREATE = "create"  # NOT_FOUND twice in a row (or right after a create that failed): create as recorded
REQUEUE = "requeue"  # a queued resource SUSPENDED or FAILED: delete it and queue it again as recorded
STOP = "stop"  # one line; the keeper ends (and deletes what it created, unless --keep-slice)
# ... and for the run on a READY slice:
NOTHING = "nothing"
FINISHED = "done"
LAUNCH = "launch"
RELAUNCH = "relaunch"
RECHECK = "look at the slice again, then relaunch"

# The slice, as `describe` answers: (action, why).
NODE = {
    "READY": (CHECK_RUN, "the slice is up"),
    "CREATING": (WAIT, "being created"),
    "STARTING": (WAIT, "being started"),
    "RESTARTING": (WAIT, "being restarted"),
    "REIMAGING": (WAIT, "being reimaged"),
    "REPAIRING": (WAIT, "being repaired"),
    "STOPPING": (WAIT, "being stopped"),
    "DELETING": (WAIT, "being deleted (then NOT_FOUND)"),
    "HIDING": (WAIT, "being hidden"),
    "HIDDEN": (WAIT, "hidden: not lost (TensorFlow's recoverable())"),
    "UNHIDING": (WAIT, "being unhidden"),
    "UNKNOWN": (WAIT, "the API's own unknown state (after a failed repair): not lost"),
    "STOPPED": (STOP, "someone stopped it: the keeper neither starts nor deletes another's decision"),
    "PREEMPTED": (REPLACE, "lost"),
    "TERMINATED": (REPLACE, "lost"),
    gcloud.NOT_FOUND: (CONFIRM, "believed at the second poll in a row, then created as recorded"),
}
# A state the API adds later: waited on.
OTHER_STATE = (WAIT, "a state this table does not know: not lost")
# `describe` failed: (action, why), by failure class (albert_tf.cloud.gcloud).
FAILED_DESCRIBE = {
    gcloud.TRANSIENT: (WAIT, "a timeout, 5xx, 429 or dropped connection (after --retries tries): an unknown state"),
    gcloud.CAPACITY: (WAIT, "as transient"),
    gcloud.PERMANENT: (STOP, "permission denied, the API disabled, a bad project or zone: no retry will change it"),
}
# A create (or queue) request failed: (action, why).
FAILED_CREATE = {
    gcloud.CAPACITY: (CREATE, "no capacity: asked again every --wait seconds, for as long as it takes"),
    gcloud.TRANSIENT: (CREATE, "it may have been made: described first, created again every --wait seconds if not"),
    gcloud.ALREADY_EXISTS: (CHECK_RUN, "described at once: the node the keeper asked for"),
    gcloud.PERMANENT: (STOP, "quota, permission, an image or type the zone lacks, the API disabled"),
}
# The queued resource of a Spot slice whose node is not found: (action, why).
QUEUED = {
    "CREATING": (WAIT, "being queued"),
    "ACCEPTED": (WAIT, "queued"),
    "WAITING_FOR_RESOURCES": (WAIT, "waiting for capacity (as long as it takes)"),
    "PROVISIONING": (WAIT, "the node is being made"),
    "ACTIVE": (WAIT, "the node is made (it shows at the next describe)"),
    "SUSPENDING": (WAIT, "being suspended"),
    "DELETING": (WAIT, "being deleted"),
    "SUSPENDED": (REQUEUE, "its node was preempted"),
    "FAILED": (REQUEUE, "it could not be provisioned: its error read; a permanent one stops, else requeued after a "
                        "backoff (--wait, doubling to an hour)"),
    gcloud.NOT_FOUND: (CREATE, "queued again"),
}

# A READY slice's own health report (the v2 API's Node.health and Node.symptoms' symptomType): these say it cannot
# run (the runtime unresponsive or broken, a mesh that does not build, executions timing out). Reported at
# LOST_RUNS_BEFORE_RECREATE polls in a row with no new checkpoint, an owned slice is recreated; another's is noted.
# UNHEALTHY_MAINTENANCE resumes by itself (waited on); memory symptoms are the run's (noted only).
UNHEALTHY = ("TIMEOUT", "UNHEALTHY_TENSORFLOW")
UNHEALTHY_SYMPTOMS = ("MESH_BUILD_FAIL", "EXECUTE_TIMED_OUT")


def unhealthy(health, symptoms):
    """What of a READY node's health report says it cannot run ("UNHEALTHY_TENSORFLOW", "MESH_BUILD_FAIL, ..."),
    or None."""
    signs = ([health] if health in UNHEALTHY else []) + [s for s in symptoms if s in UNHEALTHY_SYMPTOMS]
    return ", ".join(signs) or None


# Bounds (seconds, counts) of what the keeper retries.
REQUEUE_BACKOFF_CAP = 3600.0  # a FAILED queued resource is requeued after --wait, doubling each time up to this
LOST_RUNS_BEFORE_RECREATE = 3  # runs in a row that lose their TPU (76, or the host) with no new checkpoint: the
#                                slice cannot make progress (a wedged host); an owned one is recreated
FINAL_DELETE_SECONDS = 900.0  # the final delete is tried again, with backoff, until describe says not found
FINAL_DELETE_BACKOFF = (10.0, 120.0)  # first and longest pause between those tries

NO_ANSWER = "no answer"
NEVER_STARTED = "never started"
RUNNING = "running"
HOST_LOST = "unknown"  # on_worker.sh status: "stopped unknown", the host went down under the run
OTHER_CODE = "other"
# The run on worker 0 of a READY slice (tpu/on_worker.sh status): (action, why).
RUN = {
    RUNNING: (NOTHING, "pretrain's own step watchdog ends a hung run (exit 76)"),
    NEVER_STARTED: (LAUNCH, "no run yet"),
    NO_ANSWER: (WAIT, "ssh failed or timed out: asked again at the next poll (bounded by --settle-timeout)"),
    HOST_LOST: (RELAUNCH, "the host went down under the run (no exit code)"),
    exit_codes.DONE: (FINISHED, "the schedule finished"),
    exit_codes.STOPPED: (RELAUNCH, "stopped after a save: it resumes"),
    exit_codes.RUNTIME_LOST: (RECHECK, "the TPU went away or a step hung: READY again, relaunched"),
    exit_codes.LOCK_HELD: (RELAUNCH, "another live run holds the lock: tried at every poll"),
    exit_codes.UNAVAILABLE: (RELAUNCH, "a bucket did not answer: relaunched, counted against --max-restarts"),
    exit_codes.UNEXPECTED: (RELAUNCH, "an unexpected error: counted against --max-restarts"),
    exit_codes.BAD_INPUT: (STOP, "bad flags or data"),
    exit_codes.OUTPUT_FAILED: (STOP, "an output could not be written (a full disk)"),
    exit_codes.ACCESS_REFUSED: (STOP, "access refused: a path not writable, or a bucket's credentials need fixing"),
    exit_codes.NON_FINITE: (STOP, "non-finite loss"),
    exit_codes.INTERRUPTED: (STOP, "someone pressed Ctrl-C"),
    exit_codes.TERMINATED: (RELAUNCH, "ended by SIGTERM before it could save: it resumes from the last checkpoint"),
    OTHER_CODE: (RELAUNCH, "a crash, killed (137): counted against --max-restarts"),
}


def node_decision(state):
    """(action, why) for a slice in `state` (a Node.State, or gcloud.NOT_FOUND)."""
    return NODE.get(state, OTHER_STATE)


def run_decision(status):
    """(action, why) for the run's `status`: RUNNING, NEVER_STARTED, NO_ANSWER, HOST_LOST or an exit code."""
    return RUN.get(status, RUN[OTHER_CODE])


def queued_decision(state):
    return QUEUED.get(state, (WAIT, "a state this table does not know"))


def table_rows():
    """Every row of the table as (what is seen, what the keeper does): docs/tpu.md shows them all."""
    rows = [(f"slice {state}", action) for state, (action, _) in NODE.items()]
    rows += [(f"describe failed: {failure}", action) for failure, (action, _) in FAILED_DESCRIBE.items()]
    rows += [(f"create failed: {failure}", action) for failure, (action, _) in FAILED_CREATE.items()]
    rows += [(f"queued resource {state}", action) for state, (action, _) in QUEUED.items()]
    rows += [(f"READY, run {status}", action) for status, (action, _) in RUN.items()]
    return rows


__all__ = ["unhealthy", "UNHEALTHY", "UNHEALTHY_SYMPTOMS",
           "NODE", "FAILED_DESCRIBE", "FAILED_CREATE", "QUEUED", "RUN", "node_decision", "run_decision",
           "queued_decision", "table_rows", "NO_ANSWER", "NEVER_STARTED", "RUNNING", "HOST_LOST",
           "OTHER_CODE"]

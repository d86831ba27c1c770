"""The keeper (`albert-tf keep-alive`, albert_tf/cloud/keeper.py) against an in-process fake gcloud
(tests/fake_gcloud.py) with a fake clock: one test per row of the decision table (albert_tf/cloud/decisions.py,
which docs/tpu.md shows), and the scenarios of a pod's life, each checking the exact gcloud calls made, in order.
The same keeper against the subprocess fake `gcloud` on PATH, whose worker 0 runs on_worker.sh for real:
tests/test_keeper_cloud.py."""
import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest

from albert_tf.cloud import decisions, gcloud, tpu_node
from albert_tf.cloud.keeper import Keeper, Settings, read_state
from albert_tf.jobs import keep_alive as job
from albert_tf.runtime import exit_codes
from fake_gcloud import FakeClock, FakeGcloud, PREFLIGHT, short
from helpers import REPO

pytestmark = pytest.mark.usefixtures("keeper_worker_env")
ZONE = "europe-west4-a"
MODEL_DIR = "gs://b/albert/models/albert_base"
POD_IMAGE = "tpu-vm-tf-2.18.0-pod-pjrt"
CREATE = f"create --accelerator-type=v3-32 --version={POD_IMAGE}"
QUEUE = f"queue --accelerator-type=v3-32 --runtime-version={POD_IMAGE} --spot"
NEW = [*PREFLIGHT, "versions"]  # a keeper that may create: the zone's runtime versions, its image chosen once
LAUNCH = ["ssh status", "scp", "ssh start"]  # never started (or ended): the status, then the launch
FINISHED = ["ls", "describe", "ssh status"]  # the last checkpoint is there: worker 0's run has stopped 0
END = ["delete", "describe"]  # the final delete, confirmed by describe (not found)
END_QUEUED = ["queued delete", "describe", "queued describe"]


class Run:
    """One keeper run: its result, its notes, and the calls made (cut short)."""

    def __init__(self, result, notes, fake):
        self.result, self.notes, self.fake = result, notes, fake
        self.calls = [short(c) for c in fake.calls]
        self.last = result.line


def config(tmp_path, **values):
    values = {"name": "pod", "zone": ZONE, "root": "gs://b/albert", "config": "albert_base", "num_train_steps": 6,
              "pretrain_flags": ["--num-warmup-steps", "1"], "project": "p1", "state_file": str(tmp_path / "keeper.state"), "poll": 300.0, "wait": 60.0,
              "retry_wait": 10.0, **values}
    return job.KeepAliveConfig(**values)


def keep(fake, clock, tmp_path, **values):
    notes = []
    result = job.keep_alive(config(tmp_path, **values), runner=fake, clock=clock, say=notes.append)
    assert result.line == notes[-1]
    return Run(result, notes, fake)


def owned_state(tmp_path, capacity="on-demand", node_id="101"):
    """A state file as the keeper leaves it after creating the slice (id 101: the fake's first node)."""
    (tmp_path / "keeper.state").write_text(json.dumps({
        "project": "p1", "zone": ZONE, "name": "pod", "accelerator_type": "v3-32", "runtime_version": POD_IMAGE,
        "capacity": capacity, "owned": True, "requested_at": 1.0, "node_id": node_id, "run_id": "pod.run",
        "model_dir": MODEL_DIR}))


# ---------------------------------------------------------------------------------------------- the table, row by row
def one_check(fake, clock, tmp_path, **values):
    """The keeper started on an owned slice, then one check: (seconds to the next, notes, calls of the check)."""
    settings = Settings.of(config(tmp_path, **values), "p1")
    launch = job.make_launch(settings, True)
    notes = []
    keeper = Keeper(settings, tpu_node.Cloud(fake, "p1", ZONE, "pod"), launch, clock=clock, say=notes.append)
    keeper.start()
    pause = keeper.check()
    return pause, notes, [short(c) for c in fake.calls]


WAITED = [s for s, (action, _) in decisions.NODE.items() if action == decisions.WAIT]


def test_every_node_state_of_the_api_has_a_row():
    assert set(decisions.NODE) == set(tpu_node.NODE_STATES) | {gcloud.NOT_FOUND}
    assert set(decisions.QUEUED) == set(tpu_node.QUEUED_STATES) | {gcloud.NOT_FOUND}
    codes = {v for k, v in vars(exit_codes).items() if k.isupper() and isinstance(v, int)}
    assert codes - {exit_codes.GAVE_UP} <= set(decisions.RUN)  # every code of pretrain's (4 is keep-alive's own)
    lost = [s for s, (action, _) in decisions.NODE.items() if action == decisions.REPLACE]
    assert lost == ["PREEMPTED", "TERMINATED"]  # TensorFlow's Client.recoverable(): only these are lost


@pytest.mark.parametrize("state", WAITED)
def test_a_transitional_or_unknown_state_is_waited_on(cloud, clock, tmp_path, state):
    owned_state(tmp_path)
    cloud.make_node(state)
    pause, notes, calls = one_check(cloud, clock, tmp_path)
    assert calls == ["ls", "describe"] and pause == 300
    assert notes[-1] == f"TPU pod is {state}: waiting (0s so far)"


@pytest.mark.parametrize("state", ["PREEMPTED", "TERMINATED"])
def test_a_lost_slice_is_deleted_and_created_as_recorded(cloud, clock, tmp_path, state):
    owned_state(tmp_path)
    cloud.make_node(state)
    pause, notes, calls = one_check(cloud, clock, tmp_path)
    assert calls == ["ls", "describe", "delete", CREATE] and pause == 0
    assert f"TPU pod is {state}: recreating it as v3-32, {POD_IMAGE}, on-demand" in notes


def test_stopped_stops_the_keeper(cloud, clock, tmp_path):
    owned_state(tmp_path)
    cloud.make_node("STOPPED")
    with pytest.raises(Exception, match="TPU pod is STOPPED .someone stopped it"):
        one_check(cloud, clock, tmp_path)


def test_ready_asks_worker_0(cloud, clock, tmp_path):
    owned_state(tmp_path)
    cloud.make_node("READY")
    cloud.run = {"polls": 1}
    pause, _, calls = one_check(cloud, clock, tmp_path)
    assert calls == ["ls", "describe", "ssh status"] and pause == 300


def test_not_found_is_believed_the_second_time(cloud, clock, tmp_path):
    owned_state(tmp_path)
    settings = Settings.of(config(tmp_path), "p1")
    keeper = Keeper(settings, tpu_node.Cloud(cloud, "p1", ZONE, "pod"), job.make_launch(settings, True), clock=clock)
    keeper.start()
    assert keeper.check() == 300 and [short(c) for c in cloud.calls] == ["ls", "describe"]
    assert keeper.check() == 0 and [short(c) for c in cloud.calls][2:] == ["ls", "describe", CREATE]


@pytest.mark.parametrize("failure, waits", [("transient", True), ("5xx", True), ("timeout", True),
                                            ("permanent", False)])
def test_a_failed_describe(cloud, clock, tmp_path, failure, waits):
    owned_state(tmp_path)
    cloud.make_node("READY")
    cloud.describes = [failure] * 3
    if waits:
        pause, notes, calls = one_check(cloud, clock, tmp_path)
        assert calls == ["ls", "describe", "describe", "describe"] and pause == 300
        assert "waiting" in notes[-1] and "UNKNOWN (" in notes[-1]
    else:
        with pytest.raises(Exception, match="describe pod failed .permanent"):
            one_check(cloud, clock, tmp_path)
        assert [short(c) for c in cloud.calls] == ["ls", "describe"]  # a permanent error is not retried


@pytest.mark.parametrize("failure, stops", [("capacity", False), ("transient", False), ("quota", True),
                                            ("permission", True), ("bad_image", True)])
def test_a_failed_create(cloud, clock, tmp_path, failure, stops):
    cloud.creates = [failure]
    run = keep(cloud, clock, tmp_path, type="v3-32", max_restarts=0, settle_timeout=0.0) if stops else None
    if stops:
        assert run.result.exit_code == exit_codes.GAVE_UP
        assert run.calls == [*NEW, "ls", "describe", CREATE, *END]
        assert run.notes[-2].startswith("could not create TPU pod (permanent: ")
        assert run.last == "nothing is left billing (TPU pod does not exist)"
    else:
        settings = Settings.of(config(tmp_path, type="v3-32"), "p1")
        keeper = Keeper(settings, tpu_node.Cloud(cloud, "p1", ZONE, "pod"), job.make_launch(settings, True),
                        clock=clock)
        keeper.start()
        assert keeper.check() == 60 and keeper.check() == 0  # tried again after --wait
        assert [short(c) for c in cloud.calls] == ["versions", "ls", "describe", CREATE, "ls", "describe", CREATE]


@pytest.mark.parametrize("state", list(decisions.QUEUED))
def test_a_queued_resource_of_a_slice_not_found(cloud, clock, tmp_path, state):
    owned_state(tmp_path, capacity="spot")
    cloud.queued = None if state == gcloud.NOT_FOUND else state
    action, _ = decisions.QUEUED[state]
    settings = Settings.of(config(tmp_path), "p1")
    keeper = Keeper(settings, tpu_node.Cloud(cloud, "p1", ZONE, "pod"), job.make_launch(settings, True), clock=clock)
    keeper.start()
    pause = keeper.check()
    calls = [short(c) for c in cloud.calls]
    if action == decisions.WAIT:
        assert calls == ["ls", "describe", "queued describe"] and pause == 300
    elif state == "FAILED":  # its error read (none here: not permanent): requeued after --wait
        assert calls == ["ls", "describe", "queued describe"] and pause == 60
    elif action == decisions.REQUEUE:
        assert calls == ["ls", "describe", "queued describe", "queued delete", QUEUE] and pause == 0
    else:  # no queued resource either: believed the second time, then queued again
        assert calls == ["ls", "describe", "queued describe"] and pause == 300


RUN_ROWS = [(status, action) for status, (action, _) in decisions.RUN.items()]


@pytest.mark.parametrize("status, action", RUN_ROWS)
def test_the_run_on_worker_0(cloud, clock, tmp_path, status, action):
    owned_state(tmp_path)
    cloud.make_node("READY")
    cloud.checkpoints = [2]
    if status == decisions.NO_ANSWER:
        cloud.statuses = ["timeout"]
        cloud.run = {"polls": 5}
    elif status == decisions.RUNNING:
        cloud.run = {"polls": 5}
    elif status == decisions.NEVER_STARTED:
        cloud.run = None
    else:
        cloud.run = {"end": 1 if status == decisions.OTHER_CODE else status}
    if action in (decisions.STOP, decisions.FINISHED):
        with pytest.raises(Exception) as stopped:
            one_check(cloud, clock, tmp_path)
        assert stopped.value.exit_code == (exit_codes.DONE if action == decisions.FINISHED else exit_codes.GAVE_UP)
        return
    pause, _, calls = one_check(cloud, clock, tmp_path)
    expected = {decisions.NOTHING: ["ssh status"], decisions.WAIT: ["ssh status"],
                decisions.LAUNCH: LAUNCH, decisions.RELAUNCH: LAUNCH,
                decisions.RECHECK: ["ssh status", "describe", "scp", "ssh start"]}[action]
    assert calls == ["ls", "describe", *expected] and pause == 300


def test_the_decision_table_is_in_the_docs():
    text = open(os.path.join(REPO, "docs", "tpu.md"), encoding="utf-8").read()
    rows = {tuple(cell.strip(" `") for cell in line.strip("|").split("|")[:2])
            for line in text.splitlines() if line.startswith("| ")}
    for seen, action in decisions.table_rows():
        assert (str(seen), action) in rows, f"docs/tpu.md lacks the row | {seen} | {action} |"


# ---------------------------------------------------------------------------------------------- scenarios
def test_first_create_without_capacity_is_retried_every_wait(cloud, clock, tmp_path):
    """No --project: gcloud's is read once. An on-demand slice finds no capacity twice: asked again every
    --wait seconds, never given up; made the third time, launched, done, deleted."""
    cloud.creates = ["capacity", "capacity"]
    run = keep(cloud, clock, tmp_path, type="v3-32", project=None)
    assert run.result.exit_code == 0, run.notes
    assert run.calls == ["config", *NEW,
                         "ls", "describe", CREATE,           # no capacity
                         "ls", "describe", CREATE,           # no capacity
                         "ls", "describe", CREATE,           # made
                         "ls", "describe", *LAUNCH,
                         *FINISHED, *END]                     # done: its checkpoint is there; the slice deleted
    assert clock.sleeps == [60, 60, 0, 300]
    assert sum("no more capacity" in n and "trying again in 60s" in n for n in run.notes) == 2
    assert run.last == "done: TPU pod deleted (describe: not found): nothing is left billing"


def test_a_create_reported_failed_whose_node_exists_is_the_keepers(cloud, clock, tmp_path):
    """The create's wait times out, yet the node is made: it was asked for by the keeper, so it is its own (deleted
    at the end, and after a preemption recreated without --allow-replace)."""
    cloud.creates = ["timeout_made"]
    cloud.runs = [{"steps": 3, "end": "preempt"}]
    run = keep(cloud, clock, tmp_path, type="v3-32")
    assert run.result.exit_code == 0, run.notes
    assert run.calls == [*NEW, "ls", "describe", CREATE,
                         "ls", "describe", *LAUNCH,           # the node is there: the keeper's
                         "ls", "describe", "delete", CREATE,  # preempted: recreated
                         "ls", "describe", *LAUNCH, *FINISHED, *END]
    state = read_state(str(tmp_path / "keeper.state"))
    assert state.owned and state.node_id == "102"


def test_the_api_state_unknown_is_waited_on(cloud, clock, tmp_path):
    owned_state(tmp_path)
    cloud.make_node("READY")
    cloud.describes = ["UNKNOWN", "UNKNOWN", "READY"]
    run = keep(cloud, clock, tmp_path)
    assert run.result.exit_code == 0, run.notes
    assert run.calls == [*PREFLIGHT, "ls", "describe", "ls", "describe", "ls", "describe", *LAUNCH, *FINISHED, *END]
    assert "TPU pod is UNKNOWN: waiting (300s so far)" in run.notes


def test_a_wedged_ssh_times_out_and_the_next_poll_goes_on(cloud, clock, tmp_path):
    owned_state(tmp_path)
    cloud.make_node("READY")
    cloud.run = {"polls": 1, "end": 75}
    cloud.statuses = ["timeout"]
    run = keep(cloud, clock, tmp_path)
    assert run.result.exit_code == 0, run.notes
    assert run.calls == [*PREFLIGHT, "ls", "describe", "ssh status",   # wedged: killed after its timeout
                         "ls", "describe", "ssh status",                # running
                         "ls", "describe", *LAUNCH,                     # stopped 75: relaunched
                         *FINISHED, *END]
    assert any("worker 0 not answering (gcloud compute tpus tpu-vm ssh ... timed out after 300 s)" in n
               for n in run.notes)


def test_a_run_compiling_for_20_minutes_is_not_stopped(cloud, clock, tmp_path):
    """No checkpoint and no metrics row for 25 minutes (start-up, restore, XLA compile): the keeper only asks."""
    owned_state(tmp_path)
    cloud.make_node("READY")
    cloud.runs = [{"steps": 6, "end": 0, "polls": 5}]
    cloud.checkpoints = []
    run = keep(cloud, clock, tmp_path, num_train_steps=8)
    assert run.result.exit_code == 0, run.notes
    assert run.calls == [*PREFLIGHT, "ls", "describe", *LAUNCH] + ["ls", "describe", "ssh status"] * 5 + \
        ["ls", "describe", "ssh status", *END]
    assert "ssh stop" not in run.calls and clock.sleeps == [300] * 6
    assert run.last == "done: TPU pod deleted (describe: not found): nothing is left billing"


def test_a_project_switch_mid_run_makes_no_second_slice(cloud, clock, tmp_path):
    """The project is read once at start (p1) and passed to every call: `gcloud config set project p2` during the
    run changes nothing (the fake refuses any call without --project=p1)."""
    cloud.configured = ["p1", "p2"]
    cloud.runs = [{"steps": 2, "end": 75}]
    run = keep(cloud, clock, tmp_path, type="v3-32", project=None)
    assert run.result.exit_code == 0, run.notes
    assert run.calls.count("config") == 1 and run.calls.count(CREATE) == 1
    assert all("--project=p1" in c for c in cloud.calls[1:])
    assert read_state(str(tmp_path / "keeper.state")).project == "p1"


def test_a_quota_error_stops_with_one_line_and_deletes_the_slice(cloud, clock, tmp_path):
    """After a preemption the recreate hits the quota: permanent, so one line and the end, nothing left billing."""
    owned_state(tmp_path)
    cloud.make_node("PREEMPTED")
    cloud.creates = ["quota"]
    run = keep(cloud, clock, tmp_path)
    assert run.result.exit_code == exit_codes.GAVE_UP
    assert run.calls == [*PREFLIGHT, "ls", "describe", "delete", CREATE, *END]
    line = run.notes[-2]
    assert line.startswith("could not create TPU pod (permanent: quota") and "Quota limit" in line
    assert run.last == "nothing is left billing (TPU pod does not exist)"


def test_done_deletes_the_slice_and_its_queued_resource(cloud, clock, tmp_path):
    run = keep(cloud, clock, tmp_path, type="v3-32", spot=True)
    assert run.result.exit_code == 0, run.notes
    assert run.calls == [*NEW, "ls", "describe", QUEUE, "ls", "describe", *LAUNCH, *FINISHED, *END_QUEUED]
    assert cloud.node is None and cloud.queued is None
    assert run.last == "done: TPU pod and its queued resource deleted (describe: not found): nothing is left billing"


def test_keep_slice_leaves_it_billing_and_says_how_to_delete_it(cloud, clock, tmp_path):
    run = keep(cloud, clock, tmp_path, type="v3-32", spot=True, keep_slice=True)
    assert run.result.exit_code == 0 and cloud.node is not None and "queued delete" not in run.calls
    assert run.last == ("--keep-slice: TPU pod and its queued resource left up and billing; delete it with: gcloud "
                        f"compute tpus queued-resources delete pod --zone={ZONE} --project=p1 --quiet --force")


def test_a_preempted_spot_slice_is_queued_again_as_it_was(cloud, clock, tmp_path):
    """Spot through a queued resource: preempted (the node PREEMPTED, the request SUSPENDED), the request is deleted
    (with its node) and queued again with the same type, image and capacity; the run resumes."""
    cloud.runs = [{"steps": 3, "end": "preempt"}]
    run = keep(cloud, clock, tmp_path, type="v3-32", spot=True)
    assert run.result.exit_code == 0, run.notes
    assert run.calls == [*NEW, "ls", "describe", QUEUE,                  # queued: made at once here
                         "ls", "describe", *LAUNCH,                        # preempted after step 3
                         "ls", "describe", "queued delete", QUEUE,          # requeued as it was
                         "ls", "describe", *LAUNCH,                        # resumes from step 2
                         *FINISHED, *END_QUEUED]
    first, second = cloud.launches
    assert first == second and "--num-train-steps" in first
    assert "TPU pod is PREEMPTED: recreating it as v3-32, tpu-vm-tf-2.18.0-pod-pjrt, spot" in run.notes


def test_a_slice_the_keeper_did_not_create_is_neither_deleted_nor_replaced(cloud, clock, tmp_path):
    cloud.make_node("READY", capacity="spot")
    cloud.runs = [{"steps": 3, "end": "preempt"}]
    run = keep(cloud, clock, tmp_path)
    assert run.result.exit_code == exit_codes.GAVE_UP
    assert run.calls == [*PREFLIGHT, "ls", "describe", *LAUNCH, "ls", "describe", "describe"]
    assert "TPU pod was not created by this keeper: it will not be deleted or recreated (--allow-replace)" \
        in run.notes
    assert run.notes[-2].startswith("TPU pod is PREEMPTED; it was not created by this keeper, so it is neither")
    assert run.last.startswith("TPU pod was not created by this keeper and is left as it is: it bills while it "
                               f"exists; delete it with: gcloud compute tpus tpu-vm delete pod --zone={ZONE}")


def test_a_found_slice_that_vanishes_is_not_recreated_as_it_was_but_made_as_type_says(cloud, clock, tmp_path):
    """Another's preemptible v3-8 runs the keeper's run, then is gone (not found twice): nothing of it is touched,
    and with --type the keeper makes its own slice as its flags say (its image chosen from the zone at start),
    which it deletes at the end."""
    cloud.make_node("READY", accelerator_type="v3-8", version="tpu-vm-tf-2.17.0-pjrt", capacity="preemptible")
    cloud.runs = [{"steps": 3, "end": "vanish"}]
    run = keep(cloud, clock, tmp_path, type="v3-32")
    assert run.result.exit_code == exit_codes.DONE, run.notes[-3:]
    assert run.calls == [*NEW, "ls", "describe", *LAUNCH, "ls", "describe", "ls", "describe", CREATE,
                         "ls", "describe", *LAUNCH, *FINISHED, *END]
    assert "TPU pod, not this keeper's, is gone: creating one as --type says" in run.notes


def test_allow_replace_recreates_a_found_slice_as_it_was(cloud, clock, tmp_path):
    """A reserved slice with its own image, found by the keeper: replaced only with --allow-replace, with the
    type, image and capacity describe gave; from then on it is the keeper's."""
    cloud.make_node("READY", version="tpu-vm-tf-2.17.0-pod-pjrt", capacity="reserved")
    cloud.runs = [{"steps": 3, "end": "preempt"}]
    run = keep(cloud, clock, tmp_path, allow_replace=True)
    assert run.result.exit_code == 0, run.notes
    recreate = "create --accelerator-type=v3-32 --version=tpu-vm-tf-2.17.0-pod-pjrt --reserved"
    assert run.calls == [*PREFLIGHT, "ls", "describe", *LAUNCH, "ls", "describe", "delete", recreate,
                         "ls", "describe", *LAUNCH, *FINISHED, *END]


def test_another_spot_slice_without_a_queued_resource_is_replaced_with_allow_replace(cloud, clock, tmp_path):
    cloud.make_node("READY", capacity="spot")
    cloud.runs = [{"steps": 3, "end": "preempt"}]
    run = keep(cloud, clock, tmp_path, allow_replace=True)
    assert run.result.exit_code == 0, run.notes
    assert run.calls == [*PREFLIGHT, "ls", "describe", *LAUNCH, "ls", "describe", "queued delete", "delete", QUEUE,
                         "ls", "describe", *LAUNCH, *FINISHED, *END_QUEUED]


def test_a_vanished_slice_is_confirmed_then_recreated(cloud, clock, tmp_path):
    cloud.runs = [{"steps": 3, "end": "vanish"}]
    run = keep(cloud, clock, tmp_path, type="v3-64", preemptible=True)
    create = f"create --accelerator-type=v3-64 --version={POD_IMAGE} --preemptible"
    assert run.result.exit_code == 0, run.notes
    assert run.calls == [*NEW, "ls", "describe", create, "ls", "describe", *LAUNCH,
                         "ls", "describe",                 # NOT_FOUND once: checked again
                         "ls", "describe", create,         # twice: created (nothing to delete)
                         "ls", "describe", *LAUNCH, *FINISHED, *END]
    assert "TPU pod was not found: checking again before recreating it" in run.notes


def test_a_state_that_does_not_settle_stops_the_keeper(cloud, clock, tmp_path):
    owned_state(tmp_path)
    cloud.make_node("RESTARTING")
    run = keep(cloud, clock, tmp_path, settle_timeout=600.0)
    assert run.result.exit_code == exit_codes.GAVE_UP
    assert run.calls == [*PREFLIGHT] + ["ls", "describe"] * 4 + [*END]
    assert run.notes[-2] == "TPU pod has been RESTARTING for 900s (more than --settle-timeout 600s)"
    assert run.last == "TPU pod deleted (describe: not found): nothing is left billing"


def test_bad_data_stops_the_keeper_with_one_line(cloud, clock, tmp_path):
    owned_state(tmp_path)
    cloud.make_node("READY")
    message = "albert-tf pretrain: error: gs://b/albert/records/train-00000: feature input_ids has 128 values"
    cloud.runs = [{"steps": 0, "end": 2, "message": message}]
    run = keep(cloud, clock, tmp_path)
    assert run.result.exit_code == exit_codes.GAVE_UP
    assert run.calls == [*PREFLIGHT, "ls", "describe", *LAUNCH, "ls", "describe", "ssh status", *END]
    assert run.notes[-2] == (f"pretrain on pod exited 2 (bad flags or data), not relaunched: {message} "
                             "(log: albert_tf_run/pretrain.log on worker 0, gs://b/albert/logs/albert_base/)")


def test_a_lock_held_by_another_live_run_is_retried_then_given_up(cloud, clock, tmp_path):
    owned_state(tmp_path)
    cloud.make_node("READY")
    cloud.runs = [{"steps": 0, "end": 77}] * 3
    run = keep(cloud, clock, tmp_path, max_restarts=1)
    assert run.result.exit_code == exit_codes.GAVE_UP and len(cloud.launches) == 2
    assert run.notes[-2] == f"gave up: 1 relaunches in a row made no progress in {MODEL_DIR}"


def test_runtime_lost_and_resume_codes_relaunch_with_the_same_run_id(cloud, clock, tmp_path):
    """75 relaunches; 76 (the TPU went away, or pretrain's step watchdog) looks at the slice again first. A second
    keeper on the same state file keeps the run id."""
    owned_state(tmp_path)
    cloud.make_node("READY")
    cloud.runs = [{"steps": 2, "end": 75}, {"steps": 4, "end": 76}]
    run = keep(cloud, clock, tmp_path)
    assert run.result.exit_code == 0, run.notes
    assert run.calls == [*PREFLIGHT, "ls", "describe", *LAUNCH, "ls", "describe", *LAUNCH,
                         "ls", "describe", "ssh status", "describe", "scp", "ssh start", *FINISHED, *END]
    ids = {f"ALBERT_TF_RUN_ID={env['ALBERT_TF_RUN_ID']}" for env in cloud.launch_envs}
    assert ids == {"ALBERT_TF_RUN_ID=pod.run"}


def test_ctrl_c_deletes_the_slice_it_created(cloud, clock, tmp_path):
    class Interrupted(FakeClock):
        def sleep(self, seconds):
            raise KeyboardInterrupt

    clock = Interrupted()
    cloud.clock = clock
    run = keep(cloud, clock, tmp_path, type="v3-32")
    assert run.result.exit_code == 130
    assert run.calls == [*NEW, "ls", "describe", CREATE, *END]
    assert run.notes[-2:] == ["interrupted (Ctrl-C)", "TPU pod deleted (describe: not found): nothing is left billing"]


# ---------------------------------------------------------------------------------------------- the launch line
def test_the_launch_line_is_made_from_pretrains_config(cloud, clock, tmp_path):
    cloud.eval_records = False
    run = keep(cloud, clock, tmp_path, type="v3-8", pretrain_flags=["--remat", "--num-warmup-steps", "1"])
    words = cloud.launches[0]
    env, command = [f"{k}={v}" for k, v in cloud.launch_envs[0].items()], words[words.index("--") + 1:]
    assert words[2:words.index("--")] == ["--env-file", "albert_tf_run/launch.env"]  # no argv carries the env
    assert run.calls[len(NEW) + 2] == "create --accelerator-type=v3-8 --version=tpu-vm-tf-2.18.0-pjrt"
    assert command == ["python3", "-m", "albert_tf", "pretrain", "--recipe", "paper_v2", "--config", "albert_base",
                       "--train-data", "gs://b/albert/records/train-*", "--model-dir", MODEL_DIR,
                       "--num-train-steps", "6", "--num-warmup-steps", "1", "--spm-model", "gs://b/albert/spm.model",
                       "--remat", "--tpu", "local"]
    assert env == ["TPU_NAME=local", "NEXT_PLUGGABLE_DEVICE_USE_C_API=true",
                   "TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/lib/libtpu.so", "ALBERT_TF_TPU_IMAGE=tpu-vm-tf-2.18.0-pjrt",
                   f"ALBERT_TF_RUN_ID={read_state(str(tmp_path / 'keeper.state')).run_id}"]
    assert run.result.exit_code == 0 and "--eval-data" not in command  # no eval records under ROOT


@pytest.mark.parametrize("flag", ["--model-dir", "--num-train-steps=9", "--train-data", "--tpu", "--eval-data"])
def test_flags_the_keeper_owns_are_refused_after_the_double_dash(tmp_path, flag):
    with pytest.raises(ValueError, match=f"^{flag.split('=')[0]} after --: the keeper sets it itself"):
        job.keep_alive(config(tmp_path, pretrain_flags=[flag, "x"]), runner=None)


def test_a_rebuilt_wheel_is_reinstalled_by_its_hash_and_gs_needs_gcloud_there(cloud, clock, tmp_path, monkeypatch):
    monkeypatch.delenv("INSTALL_CMD")
    monkeypatch.setenv("ALBERT_TF_SOURCE", "gs://b/dist/albert_tf-0.1.0-py3-none-any.whl")
    run = keep(cloud, clock, tmp_path, type="v3-32")
    assert run.calls == [*NEW, "ls", "describe", CREATE, "ls", "describe", "ssh status", "ssh tools", "scp",
                         "ssh start", *FINISHED, *END]
    start = cloud.uploaded  # the launch script worker 0 ran
    assert "sha256sum albert_tf_wheel/albert_tf-0.1.0-py3-none-any.whl" in start
    assert "--force-reinstall --no-deps" in start and "gcloud storage cp" in start and "gsutil cp" in start
    assert "tensorflow-text==2.18.*" in start  # the default pod image's release


def test_a_worker_without_gcloud_or_gsutil_is_one_line(cloud, clock, tmp_path, monkeypatch):
    monkeypatch.delenv("INSTALL_CMD")
    monkeypatch.setenv("ALBERT_TF_SOURCE", "gs://b/dist/albert_tf-0.1.0-py3-none-any.whl")
    original = cloud.ssh
    cloud.ssh = lambda args, timeout: (FakeGcloud.ok(args, "") if any("command -v" in a for a in args)
                                       else original(args, timeout))
    run = keep(cloud, clock, tmp_path, type="v3-32")
    assert run.result.exit_code == exit_codes.GAVE_UP and "scp" not in run.calls
    assert run.notes[-2].startswith("worker 0 has neither gcloud nor gsutil")
    assert run.last == "TPU pod deleted (describe: not found): nothing is left billing"


def test_failures_are_classified():
    for text, failure in (("INTERNAL: 503", gcloud.TRANSIENT), ("429 Too Many Requests", gcloud.TRANSIENT),
                          ("RESOURCE_EXHAUSTED: There is no more capacity", gcloud.CAPACITY),
                          ("RESOURCE_EXHAUSTED: Quota limit 'X' has been exceeded", gcloud.PERMANENT),
                          ("PERMISSION_DENIED", gcloud.PERMANENT), ("INVALID_ARGUMENT: accelerator type",
                                                                     gcloud.PERMANENT),
                          ("Cloud TPU API has not been used in project 1 before or it is disabled",
                           gcloud.PERMANENT),
                          ("NOT_FOUND: node pod", gcloud.NOT_FOUND), ("ALREADY_EXISTS", gcloud.ALREADY_EXISTS),
                          ("Connection reset by peer", gcloud.TRANSIENT)):
        assert gcloud.classify(1, text) == failure, text
    assert gcloud.classify(0, "PERMISSION_DENIED") is None


def test_a_wedged_gcloud_is_killed_after_its_timeout(tmp_path, monkeypatch):
    """The real runner: a `gcloud` that never ends (nor does its child) is killed with its process group."""
    fake = tmp_path / "gcloud"
    fake.write_text("#!/bin/sh\nsleep 600 &\nsleep 600\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    result = gcloud.run(["compute", "tpus", "tpu-vm", "ssh", "pod"], timeout=0.5)
    assert result.failure == gcloud.TRANSIENT and "timed out after 0.5 s" in result.line
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert gcloud.run(["config", "list"], timeout=5).failure == gcloud.PERMANENT


def test_project_and_zone_are_pinned_in_the_state_file(cloud, clock, tmp_path):
    keep(cloud, clock, tmp_path, type="v3-32")
    state = dataclasses.asdict(read_state(str(tmp_path / "keeper.state")))
    assert (state["project"], state["zone"], state["name"]) == ("p1", ZONE, "pod")
    other = keep(FakeGcloud(clock, project="p2", configured=["p2"]), clock, tmp_path, project="p2")
    assert other.result.exit_code == 2 and re.search("records p1/europe-west4-a/pod", other.notes[-2])


def test_the_keeper_runs_without_tensorflow(tmp_path):
    """`albert-tf keep-alive` runs on a laptop without TensorFlow: a whole keeper run imports none."""
    program = f"""
import os, sys
sys.path.insert(0, {os.path.join(REPO, 'tests')!r})
os.environ["INSTALL_CMD"] = "fake-install"
from fake_gcloud import FakeClock, FakeGcloud
from albert_tf.jobs import keep_alive as job
clock = FakeClock()
config = job.KeepAliveConfig(name="pod", zone="{ZONE}", root="gs://b/albert", config="albert_base", num_train_steps=6,
                             pretrain_flags=["--num-warmup-steps", "1"], project="p1", type="v3-32",
                             state_file={str(tmp_path / 'state')!r})
result = job.keep_alive(config, runner=FakeGcloud(clock), clock=clock, say=lambda line: None)
print(result.exit_code, "tensorflow" in sys.modules)
"""
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.stdout.split() == ["0", "False"], proc.stderr

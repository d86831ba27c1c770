"""The keeper end to end: `albert-tf keep-alive` (in this process, with a fake clock) calling the real gcloud runner
(a subprocess per call, with its timeout) against a fake Google Cloud (tests/fake_cloud.py), a `gcloud` on PATH
that plays the slice, its queued resource, API failures and a wedged ssh, logs every call, and whose ssh runs
on_worker.sh for real on this machine (worker 0 is a directory), where a fake `albert-tf pretrain` trains a few
steps into a local stand-in for the gs:// model dir, takes the output lock and ends as scripted.

Each scenario checks the gcloud calls the keeper made, in order, and what the runs saw. The decision table row by
row, in process: tests/test_keeper.py."""
import json
import os
import shlex
import signal
import sys

import pytest

from albert_tf.cloud import gcloud
from albert_tf.jobs import keep_alive as job
from albert_tf.runtime import exit_codes
import fake_gcloud
from fake_gcloud import FakeClock, PREFLIGHT
from helpers import REPO

FAKE_CLOUD = os.path.join(REPO, "tests", "fake_cloud.py")
ZONE = "europe-west4-a"
MODEL_DIR = "gs://b/albert/models/albert_base"
STEPS = 6


class Cloud:
    """The fake cloud's directory, scripted before the keeper runs and read after."""

    def __init__(self, directory, monkeypatch):
        self.dir = directory
        self.bin = directory / "bin"
        self.bin.mkdir()
        for name, role in (("gcloud", "gcloud"), ("fake-pretrain", "pretrain"), ("fake-python", "python"),
                           ("fake-install", "install")):
            wrapper = self.bin / name
            command = f"{shlex.quote(sys.executable)} -S {shlex.quote(FAKE_CLOUD)} {role}"  # -S: a fast start
            wrapper.write_text(f"#!/bin/sh\nexec {command} \"$@\"\n")
            wrapper.chmod(0o755)
        for name in ("ALBERT_TF_SOURCE", "TPU_PJRT_LIBRARY"):
            monkeypatch.delenv(name, raising=False)
        for name, value in (("PATH", f"{self.bin}:{os.environ['PATH']}"), ("FAKE", str(directory)),
                            ("LOG_COPY_SECONDS", "3600"), ("ALBERT_TF", str(self.bin / "fake-pretrain")),
                            ("ALBERT_TF_PYTHON", str(self.bin / "fake-python")),
                            ("INSTALL_CMD", str(self.bin / "fake-install"))):
            monkeypatch.setenv(name, value)
        self.clock = FakeClock()
        self.notes = []
        for name in ("records/train-00000", "spm.model"):  # what the run reads under --root (the preflight lists it)
            path = directory / "gcs" / "b" / "albert" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")

    def slice(self, state="READY", accelerator_type="v3-32", version="tpu-vm-tf-2.18.0-pod-pjrt", **capacity):
        (self.dir / "slice.json").write_text(json.dumps({
            "state": state, "acceleratorType": accelerator_type, "runtimeVersion": version, "id": "7",
            "schedulingConfig": {k: capacity.get(k, False) for k in ("spot", "preemptible", "reserved")}}))
        (self.dir / "worker0").mkdir(exist_ok=True)

    def script(self, name, value):
        (self.dir / name).write_text(json.dumps(value) if isinstance(value, list) else str(value))

    def model_dir(self):
        return self.dir / "gcs" / MODEL_DIR[len("gs://"):]

    def keep(self, runner=gcloud.run, **values):
        values = {"name": "pod", "zone": ZONE, "root": "gs://b/albert", "config": "albert_base", "num_train_steps": STEPS,
                  "state_file": str(self.dir / "keeper.state"), "retry_wait": 0.0,
                  "pretrain_flags": ["--save-checkpoints-secs", "1", "--num-warmup-steps", "1"], **values}
        self.notes = []
        return job.keep_alive(job.KeepAliveConfig(**values), runner=runner, clock=self.clock,
                              say=self.notes.append)

    def calls(self):
        """The keeper's gcloud calls, each cut short: its verb and what it is about (for ssh: the worker's action)."""
        lines = (self.dir / "calls.log").read_text().splitlines()
        return [short(shlex.split(line)) for line in lines]

    def settled_calls(self):
        """settled(calls()): see `settled`."""
        return settled(self.calls())

    def launches(self):
        path = self.dir / "launches.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def read(self, name):
        path = self.dir / name
        return path.read_text() if path.exists() else ""

    def cleanup(self):
        for name in ("child", "pid"):
            path = self.dir / "worker0" / "albert_tf_run" / name
            try:
                os.kill(int(path.read_text()), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass


def short(words):
    """fake_gcloud.short of a logged call, its --zone and --project left out (every call carries both)."""
    return fake_gcloud.short([w for w in words if not w.startswith(("--zone=", "--project="))])


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    fake = Cloud(tmp_path, monkeypatch)
    yield fake
    fake.cleanup()


def settled(calls):
    """`calls` without the polls that led to nothing ("ls", "describe", perhaps "ssh status" answered "running",
    then the next poll's "ls"): the keeper's clock is fake but the fake run's is not, so on a loaded machine a poll
    may come before the run's next checkpoint or its end, and how many such polls there are is the machine's, not
    the keeper's. Tests compare settled() of what was called and of what they expect."""
    calls, i = list(calls), 0
    while i < len(calls):
        for idle in (["ls", "describe", "ssh status"], ["ls", "describe"]):
            if calls[i:i + len(idle)] == idle and calls[i + len(idle):i + len(idle) + 1] == ["ls"]:
                del calls[i:i + len(idle)]
                break
        else:
            i += 1
    return calls


NEW = [*PREFLIGHT, "versions"]  # a keeper that may create: the zone's runtime versions, its image chosen once
LAUNCH = ["ssh status", "scp", "ssh start"]
FINISHED = ["ls", "describe", "ssh status"]  # the last checkpoint is there: worker 0's run has stopped 0
END = ["delete", "describe"]  # the final delete, confirmed by describe (not found)
END_QUEUED = ["queued delete", "describe", "queued describe"]


def test_a_preempted_slice_is_recreated_as_it_was_and_the_run_resumes(cloud):
    """A reserved slice with its own image, found by the keeper (so replaced only with --allow-replace): preempted
    after step 3 (last checkpoint: step 2), it is recreated with the recorded type, image and capacity, albert_tf
    is installed again on the new worker 0, and the relaunch takes over the lock the lost run left."""
    cloud.slice(version="tpu-vm-tf-2.17.0-pod-pjrt", reserved=True)
    cloud.script("runs.json", [{"steps": 3, "end": "preempt"}])
    result = cloud.keep(allow_replace=True)
    assert result.exit_code == 0, cloud.notes
    assert cloud.settled_calls() == settled([
        "config", *PREFLIGHT,
        "ls", "describe", *LAUNCH,                  # launch 1: preempted at step 3
        "ls", "describe",                           # PREEMPTED
        "delete", "create --accelerator-type=v3-32 --version=tpu-vm-tf-2.17.0-pod-pjrt --reserved",
        "ls", "describe", *LAUNCH,                  # launch 2 on the new slice: resumes, finishes
        *FINISHED, *END,                            # done: the slice (now the keeper's) deleted
    ]), cloud.notes
    first, second = cloud.launches()
    assert first["resumed_from"] == 0 and first["lock"] == "free"
    assert second["resumed_from"] == 2 and second["lock"] == "taken over"
    assert first["run_id"] == second["run_id"] and first["run_id"].startswith("pod.albert_base.")
    assert first["tpu_name"] == "pod" and first["tpu_load_library"] == "0"
    assert cloud.read("installs.log") == "installed\ninstalled\n"  # each new worker 0 installs once
    assert result.line == "done: TPU pod deleted (describe: not found): nothing is left billing"
    assert not cloud.read("slice.json")


def test_a_spot_slice_is_queued_preempted_and_queued_again(cloud):
    cloud.script("runs.json", [{"steps": 3, "end": "preempt"}])
    result = cloud.keep(type="v3-64", spot=True, project="p1")
    queue = "queue --accelerator-type=v3-64 --runtime-version=tpu-vm-tf-2.18.0-pod-pjrt --spot"
    assert result.exit_code == 0, cloud.notes
    assert cloud.settled_calls() == settled([*NEW, "ls", "describe", queue, "ls", "describe", *LAUNCH,
                             "ls", "describe", "queued delete", queue, "ls", "describe", *LAUNCH,
                             *FINISHED, *END_QUEUED]), cloud.notes
    assert [(r["resumed_from"], r["lock"]) for r in cloud.launches()] == [(0, "free"), (2, "taken over")]
    assert result.line == "done: TPU pod and its queued resource deleted (describe: not found): nothing is left billing"
    assert not cloud.read("queued.json") and not cloud.read("slice.json")


def test_a_vanished_slice_is_confirmed_then_recreated_and_the_stale_lock_taken_over(cloud):
    cloud.script("runs.json", [{"steps": 3, "end": "vanish"}])
    cloud.script("create_failures", 1)
    result = cloud.keep(type="v3-64", preemptible=True, project="p1")
    create = "create --accelerator-type=v3-64 --version=tpu-vm-tf-2.18.0-pod-pjrt --preemptible"
    assert result.exit_code == 0, cloud.notes
    assert cloud.settled_calls() == settled([
        *NEW, "ls", "describe", create,             # not found at the start: no capacity
        "ls", "describe", create,                   # tried again after --wait: made
        "ls", "describe", *LAUNCH,                  # launch 1: the slice vanishes at step 3
        "ls", "describe",                           # NOT_FOUND once: checked again
        "ls", "describe", create,                   # NOT_FOUND twice: created (nothing to delete), relaunched
        "ls", "describe", *LAUNCH,
        *FINISHED, *END,
    ]), cloud.notes
    assert [(r["resumed_from"], r["lock"]) for r in cloud.launches()] == [(0, "free"), (2, "taken over")]
    assert cloud.clock.sleeps[0] == 60.0


def test_a_wedged_ssh_is_killed_and_the_next_poll_goes_on(cloud):
    cloud.slice()
    cloud.script("ssh_wedges", 1)
    result = cloud.keep(project="p1", runner=lambda args, timeout: gcloud.run(args, min(timeout, 3.0)))
    assert result.exit_code == 0, cloud.notes
    assert cloud.settled_calls() == settled([
        *PREFLIGHT, "ls", "describe", "ssh status",           # wedged: killed after its timeout
        "ls", "describe", *LAUNCH, *FINISHED, "describe"])   # the slice was not the keeper's
    assert any("worker 0 not answering (gcloud compute tpus tpu-vm ssh ... timed out after 3 s)" in n
               for n in cloud.notes)
    assert result.line.startswith("TPU pod was not created by this keeper and is left as it is")


def test_a_quota_error_stops_with_one_line(cloud):
    cloud.script("create_errors.json", ["quota"])
    result = cloud.keep(type="v3-32", project="p1")
    assert result.exit_code == exit_codes.GAVE_UP
    assert cloud.settled_calls() == settled([*NEW, "ls", "describe", "create --accelerator-type=v3-32 "
                             "--version=tpu-vm-tf-2.18.0-pod-pjrt", *END])
    assert cloud.notes[-2].startswith("could not create TPU pod (permanent: quota, permission, an image or type the "
                                      "zone lacks, the API disabled): ERROR: (gcloud.compute.tpus.tpu-vm.create) "
                                      "RESOURCE_EXHAUSTED: Quota limit")
    assert result.line == "nothing is left billing (TPU pod does not exist)"


def test_a_failed_install_is_retried_by_the_next_launch(cloud):
    cloud.slice()
    cloud.script("install_failures", 1)
    result = cloud.keep(project="p1", keep_slice=True)
    assert result.exit_code == 0, cloud.notes
    assert cloud.settled_calls() == settled([*PREFLIGHT, "ls", "describe", *LAUNCH,          # the install fails
                             "ls", "describe", *LAUNCH, *FINISHED, "describe"])
    assert cloud.read("installs.log") == "failed\ninstalled\n" and len(cloud.launches()) == 1
    env = cloud.dir / "worker0" / "albert_tf_run" / "launch.env"  # the run's environment: a private file, no argv
    assert env.stat().st_mode & 0o777 == 0o600 and "ALBERT_TF_RUN_ID=pod." in env.read_text()
    assert not (cloud.dir / "worker0" / "albert_tf_launch.sh").exists()  # the launch script deleted itself
    assert result.line.startswith("TPU pod was not created by this keeper and is left as it is: it bills")


def test_resume_codes_relaunch_and_the_run_id_is_kept_across_keepers(cloud):
    """Exit 75 (stopped after a save) and 76 (the TPU went away, or pretrain's step watchdog; the slice is READY
    again) relaunch; a second keeper on the same state file keeps the run id, so its relaunches take over the first
    keeper's lock too. --keep-slice leaves the slice up between them."""
    cloud.script("runs.json", [{"steps": 2, "end": "exit:75"}, {"steps": 1, "end": "exit:76"}])
    result = cloud.keep(type="v3-32", project="p1", keep_slice=True)
    assert result.exit_code == 0, cloud.notes
    assert settled(cloud.calls()[len(NEW) + 3:]) == settled([
        "ls", "describe", *LAUNCH, "ls", "describe", *LAUNCH,
        "ls", "describe", "ssh status", "describe", "scp", "ssh start", *FINISHED])
    assert result.line == ("--keep-slice: TPU pod left up and billing; delete it with: gcloud compute tpus tpu-vm "
                           f"delete pod --zone={ZONE} --project=p1 --quiet")
    assert [r["resumed_from"] for r in cloud.launches()] == [0, 2, 2]
    run_id = cloud.launches()[0]["run_id"]
    again = cloud.keep(project="p1", num_train_steps=STEPS + 2)
    assert again.exit_code == 0, cloud.notes
    assert {r["run_id"] for r in cloud.launches()} == {run_id}
    assert again.line == "done: TPU pod deleted (describe: not found): nothing is left billing"

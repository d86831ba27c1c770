"""tpu/keep_alive.sh (the keeper) against a fake Google Cloud (tests/fake_cloud.py): a `gcloud` on PATH that plays a
scripted sequence of slice states and answers and logs every call, whose ssh runs tpu/on_worker.sh for real on this
machine (worker 0 is a directory), where a fake `albert-tf pretrain` trains a few steps into a local stand-in for
the gs:// model dir, takes the output lock, and ends as scripted (an exit code, its slice preempted, a hang).

Each scenario checks the gcloud calls the keeper made, in order, and what the runs saw."""
import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

from helpers import REPO

KEEPER = os.path.join(REPO, "tpu", "keep_alive.sh")
ON_WORKER = os.path.join(REPO, "tpu", "on_worker.sh")
FAKE_CLOUD = os.path.join(REPO, "tests", "fake_cloud.py")
ZONE = "europe-west4-a"
MODEL_DIR = "gs://b/albert/models/albert_base"
STEPS = 6
# Fast polling; the watchdog's unit is pretrain's --save-checkpoints-secs (1 s here).
FAST = ["--poll", "0.05", "--retry-wait", "0.01", "--wait", "0.05", "--kill-after", "0.3"]


class Cloud:
    """The fake cloud's directory, scripted before the keeper runs and read after."""

    def __init__(self, directory):
        self.dir = directory
        self.bin = directory / "bin"
        self.bin.mkdir()
        for name, role in (("gcloud", "gcloud"), ("fake-pretrain", "pretrain"), ("fake-python", "python"),
                           ("fake-install", "install")):
            wrapper = self.bin / name
            command = f"{shlex.quote(sys.executable)} -S {shlex.quote(FAKE_CLOUD)} {role}"  # -S: a fast start
            wrapper.write_text(f"#!/bin/sh\nexec {command} \"$@\"\n")
            wrapper.chmod(0o755)
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("INSTALL_CMD", "ALBERT_TF_SOURCE", "TF_IMAGE_VERSION", "ALBERT_TF",
                                 "ALBERT_TF_PYTHON")}
        self.env.update(PATH=f"{self.bin}:{os.environ['PATH']}", FAKE=str(directory), LOG_COPY_SECONDS="3600",
                        ALBERT_TF=str(self.bin / "fake-pretrain"), ALBERT_TF_PYTHON=str(self.bin / "fake-python"),
                        INSTALL_CMD=str(self.bin / "fake-install"))

    def slice(self, state="READY", accelerator_type="v3-32", version="tpu-vm-tf-2.18.0-pod-pjrt", **capacity):
        (self.dir / "slice.json").write_text(json.dumps({
            "state": state, "acceleratorType": accelerator_type, "runtimeVersion": version,
            "schedulingConfig": {k: capacity.get(k, False) for k in ("spot", "preemptible", "reserved")}}))
        (self.dir / "worker0").mkdir(exist_ok=True)

    def script(self, name, value):
        (self.dir / name).write_text(json.dumps(value) if isinstance(value, list) else str(value))

    def model_dir(self):
        return self.dir / "gcs" / MODEL_DIR[len("gs://"):]

    def keep(self, *flags, steps=STEPS, timeout=60):
        args = ["--name", "pod", "--zone", ZONE, "--root", "gs://b/albert", "--config", "albert_base", "--steps",
                str(steps), "--state-file", str(self.dir / "keeper.state"), *FAST, *flags]
        if "--" not in flags:
            args += ["--", "--save-checkpoints-secs", "1"]
        return subprocess.run([KEEPER, *args], capture_output=True, text=True, env=self.env, timeout=timeout,
                              check=False)

    def calls(self):
        """The keeper's gcloud calls, each cut short: its verb and what it is about (for ssh: the worker's action)."""
        lines = (self.dir / "calls.log").read_text().splitlines()
        return [short(shlex.split(line)) for line in lines]

    def full_calls(self):
        return [shlex.split(line) for line in (self.dir / "calls.log").read_text().splitlines()]

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
    if words[0] == "storage":
        return " ".join(words[:3] if words[1:3] == ["ls", "-l"] else words[:2])
    verb = words[3]
    if verb == "ssh":
        command = words[words.index("--command") + 1]
        action = next(a for a in ("status", "start", "stop") if f"on_worker.sh {a}" in command)
        return f"ssh [{action}]"
    if verb == "create":
        return " ".join(["create"] + [w for w in words[5:] if not w.startswith("--zone")])
    return verb


@pytest.fixture
def cloud(tmp_path):
    fake = Cloud(tmp_path)
    yield fake
    fake.cleanup()


LS, LIST = "storage ls", "storage ls -l"
LAUNCH = [LIST, "scp", "ssh [start]"]  # a launch: the progress read, then launch_pretrain.sh's two calls


def test_describe_failing_three_times_then_ready_deletes_nothing(cloud):
    cloud.slice()
    cloud.script("describe.json", ["READY", "fail", "fail", "fail", "READY"])
    result = cloud.keep()
    assert result.returncode == 0, result.stderr
    assert cloud.calls() == [
        "describe",                                 # the first look: READY, its values recorded
        LS, "describe", "describe", "describe",     # three failures: UNKNOWN, nothing touched
        LS, "describe", "ssh [status]", *LAUNCH,    # READY: no run yet, launched; it trains to the last step
        LS,                                         # the final checkpoint: done
    ], result.stderr
    assert "TPU pod is UNKNOWN (ERROR: (gcloud.compute.tpus.tpu-vm.describe) There was a problem refreshing" \
        in result.stderr
    assert len(cloud.launches()) == 1 and (cloud.model_dir() / f"ckpt-{STEPS}.index").exists()


def test_creating_is_waited_for(cloud):
    cloud.slice(state="CREATING")
    cloud.script("describe.json", ["CREATING", "CREATING", "REPAIRING", "READY"])
    result = cloud.keep()
    assert result.returncode == 0, result.stderr
    assert cloud.calls() == ["describe", LS, "describe", LS, "describe", LS, "describe", "ssh [status]", *LAUNCH,
                             LS], result.stderr
    assert "TPU pod is CREATING: waiting" in result.stderr and "TPU pod is REPAIRING: waiting" in result.stderr


def test_a_state_that_does_not_settle_is_reported(cloud):
    cloud.slice(state="RESTARTING")
    result = cloud.keep("--settle-timeout", "0", "--poll", "1.1")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith("keep_alive.sh: TPU pod has been RESTARTING for ")
    assert "delete" not in cloud.calls() and not cloud.launches()


def test_preempted_slice_is_recreated_as_it_was_and_the_run_resumes(cloud):
    """A reserved slice with its own image, found by the keeper (so replaced only with --allow-replace): preempted
    after step 3 (last checkpoint: step 2), it is recreated with the recorded type, image and capacity, albert_tf
    is installed again on the new worker 0, and the relaunch takes over the lock the lost run left."""
    cloud.slice(version="tpu-vm-tf-2.17.1-pod-pjrt", reserved=True)
    cloud.script("runs.json", [{"steps": 3, "end": "preempt"}])
    result = cloud.keep("--allow-replace")
    assert result.returncode == 0, result.stderr
    assert cloud.calls() == [
        "describe",
        LS, "describe", "ssh [status]", *LAUNCH,    # launch 1: preempted at step 3
        LS, "describe",                             # PREEMPTED
        "delete", "create --accelerator-type=v3-32 --version=tpu-vm-tf-2.17.1-pod-pjrt --reserved",
        *LAUNCH,                                    # launch 2 on the new slice: resumes, finishes
        LS,
    ], result.stderr
    first, second = cloud.launches()
    assert first["resumed_from"] == 0 and first["lock"] == "free"
    assert second["resumed_from"] == 2 and second["lock"] == "taken over"
    assert first["run_id"] == second["run_id"] and first["run_id"].startswith("pod.albert_base.")
    assert first["tpu_name"] == "pod" and first["tpu_load_library"] == "0"
    assert cloud.read("installs.log") == "installed\ninstalled\n"  # each new worker 0 installs once
    state = dict(line.split("=", 1) for line in cloud.read("keeper.state").splitlines())
    assert state == {"accelerator_type": "v3-32", "runtime_version": "tpu-vm-tf-2.17.1-pod-pjrt",
                     "capacity": "reserved", "created_by_keeper": "1", "run_id": first["run_id"],
                     "model_dir": MODEL_DIR}
    assert "TPU pod is PREEMPTED: recreating it as v3-32, tpu-vm-tf-2.17.1-pod-pjrt, reserved" in result.stderr


def test_a_slice_the_keeper_did_not_create_is_not_deleted(cloud):
    cloud.slice(spot=True)
    cloud.script("runs.json", [{"steps": 3, "end": "preempt"}])
    result = cloud.keep()
    assert result.returncode == 1
    assert "TPU pod was not created by this keeper: it will not be deleted or recreated (--allow-replace)" \
        in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("keep_alive.sh: TPU pod is PREEMPTED; it was not created by this keeper, so it is neither")
    assert cloud.calls() == ["describe", LS, "describe", "ssh [status]", *LAUNCH, LS, "describe"]


def test_a_vanished_slice_is_confirmed_then_recreated_and_the_stale_lock_taken_over(cloud):
    """The keeper creates the slice itself (spot); the slice then vanishes under the run (NOT_FOUND), which takes
    two checks to believe; the recreated slice's run takes over the lock the lost run left (same run id)."""
    cloud.script("runs.json", [{"steps": 3, "end": "vanish"}])
    result = cloud.keep("--type", "v3-64", "--spot")
    assert result.returncode == 0, result.stderr
    create = "create --accelerator-type=v3-64 --version=tpu-vm-tf-2.18.0-pod-pjrt --spot"
    assert cloud.calls() == [
        "describe", create,                         # not found at the start: created
        LS, "describe", "ssh [status]", *LAUNCH,    # launch 1: the slice vanishes at step 3
        LS, "describe",                             # NOT_FOUND once: checked again
        LS, "describe", create, *LAUNCH,            # NOT_FOUND twice: created (nothing to delete), relaunched
        LS,
    ], result.stderr
    assert [(r["resumed_from"], r["lock"]) for r in cloud.launches()] == [(0, "free"), (2, "taken over")]
    assert "TPU pod was not found: checking again before recreating it" in result.stderr


def test_a_hung_run_is_stopped_and_relaunched(cloud):
    """The run trains 2 steps and hangs (ignoring SIGTERM, as a client waiting on a lost host may): with no newer
    metrics row or checkpoint for 1 x --save-checkpoints-secs the watchdog stops it (SIGTERM, then SIGKILL)."""
    cloud.slice()
    cloud.script("runs.json", [{"steps": 2, "end": "hang"}])
    result = cloud.keep("--hang-factor", "1")
    assert result.returncode == 0, result.stderr
    calls = cloud.calls()
    assert calls[:7] == ["describe", LS, "describe", "ssh [status]", *LAUNCH]
    stop = calls.index("ssh [stop]")
    polls = calls[7:stop]  # checks while it hangs: the slice, the run, its progress
    assert polls and polls == [LS, "describe", "ssh [status]", LIST] * (len(polls) // 4)
    assert calls[stop + 1:] == [*LAUNCH, LS]
    warning = next(line for line in result.stderr.splitlines() if "no progress" in line)
    age = int(warning.split(" for ")[1].split("s ")[0])
    assert age >= 2 and "(more than 1 x 1s) while pod is READY" in warning
    assert "keep_alive.sh: worker 0: killed (SIGKILL) after 0.3s" in result.stderr
    assert [r["resumed_from"] for r in cloud.launches()] == [0, 2]
    log = cloud.read("worker0/albert_tf_run/pretrain.log")
    assert "exit 137" in log  # SIGKILL: the hung run ignored SIGTERM


def test_a_failed_install_is_retried_by_the_next_launch(cloud):
    cloud.slice()
    cloud.script("install_failures", 1)
    result = cloud.keep()
    assert result.returncode == 0, result.stderr
    assert cloud.calls() == ["describe", LS, "describe", "ssh [status]", *LAUNCH,  # the install fails
                             LS, "describe", "ssh [status]", *LAUNCH, LS], result.stderr
    assert cloud.read("installs.log") == "failed\ninstalled\n" and len(cloud.launches()) == 1
    assert "the launch failed (exit 1): trying again at the next check" in result.stderr
    assert "No space left on device" in result.stderr


def test_bad_data_stops_the_keeper_with_one_line(cloud):
    cloud.slice()
    message = ("albert-tf pretrain: error: gs://b/albert/records/train-00000: feature input_ids has 128 values, "
               "expected 512")
    cloud.script("runs.json", [{"steps": 0, "end": "exit:2", "message": message}])
    result = cloud.keep()
    assert result.returncode == 1
    assert cloud.calls() == ["describe", LS, "describe", "ssh [status]", *LAUNCH, LS, "describe", "ssh [status]"]
    last = result.stderr.splitlines()[-1]
    assert last == (f"keep_alive.sh: pretrain on pod exited 2 (bad flags or data), not relaunched: {message} "
                    "(log: albert_tf_run/pretrain.log on worker 0, gs://b/albert/logs/albert_base/)")
    assert sum("exited 2" in line for line in result.stderr.splitlines()) == 1


def test_a_lock_held_by_another_live_run_is_waited_for_then_given_up(cloud):
    cloud.slice()
    cloud.model_dir().mkdir(parents=True)
    (cloud.model_dir() / ".albert_tf.lock").write_text(json.dumps({"run_id": "someone-else", "pid": 1}))
    result = cloud.keep("--max-restarts", "1")
    assert result.returncode == 1
    assert [r["lock"] for r in cloud.launches()] == ["held by someone-else"] * 2
    assert "exited 77 (the model dir is locked by another live run: trying again every --poll)" in result.stderr
    assert result.stderr.splitlines()[-1] == ("keep_alive.sh: gave up: 1 relaunches in a row made no progress in "
                                              f"{MODEL_DIR}")


def test_resume_codes_relaunch_and_the_run_id_is_kept_across_keepers(cloud):
    """Exit 75 (stopped after a save) and 76 (the TPU went away; the slice is READY again) relaunch; a second keeper
    on the same state file keeps the run id, so its relaunches take over the first keeper's lock too."""
    cloud.slice()
    cloud.script("runs.json", [{"steps": 2, "end": "exit:75"}, {"steps": 1, "end": "exit:76"}])
    result = cloud.keep()
    assert result.returncode == 0, result.stderr
    assert cloud.calls() == ["describe", LS, "describe", "ssh [status]", *LAUNCH,
                             LS, "describe", "ssh [status]", *LAUNCH,
                             LS, "describe", "ssh [status]", "describe", *LAUNCH, LS], result.stderr
    assert [r["resumed_from"] for r in cloud.launches()] == [0, 2, 3 // 2 * 2]
    run_id = cloud.launches()[0]["run_id"]
    again = cloud.keep(steps=STEPS + 2)
    assert again.returncode == 0, again.stderr
    assert {r["run_id"] for r in cloud.launches()} == {run_id}


def test_progress_of_a_local_model_dir(tmp_path):
    """newest_progress reads a local directory directly: the newest of metrics.jsonl, checkpoint and ckpt-*."""
    for name, when in (("metrics.jsonl", 1000), ("checkpoint", 3000), ("ckpt-2.index", 2000), ("spm.model", 9000),
                       (".albert_tf.lock", 9000)):
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, (when, when))
    script = f'. {shlex.quote(os.path.join(REPO, "tpu", "lib.sh"))}; newest_progress "$1"'
    run = lambda d: subprocess.run(["bash", "-c", script, "keep_alive.sh", str(d)], capture_output=True, text=True,
                                   check=True).stdout.strip()
    assert run(tmp_path) == "3000"
    assert run(tmp_path / "none") == "0"

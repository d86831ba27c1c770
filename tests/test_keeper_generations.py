"""The keeper on every generation it supports (issue 45): the slice as Google spells its accelerator type, v5e and
v5p through queued resources whatever the capacity, the runtime image chosen once from the zone's versions list
(newest suitable, none suitable, forced), and the launch's runtime environment by hosts. In process against
tests/fake_gcloud.py (whose zones offer tests/fake_versions.py's listings), and `tpu/keep_alive.sh --dry-run` with
tests/fake_cloud.py as the `gcloud` on PATH. The expected images are read off those listings by hand."""
import os
import shlex
import subprocess
import sys

import pytest

from albert_tf.cloud import worker
from albert_tf.cloud.keeper import read_state
from albert_tf.jobs import keep_alive as job
from albert_tf.runtime import exit_codes
from fake_gcloud import FakeGcloud, PREFLIGHT, short
from helpers import REPO

pytestmark = pytest.mark.usefixtures("keeper_worker_env")
FAKE_CLOUD = os.path.join(REPO, "tests", "fake_cloud.py")


def keep(fake, tmp_path, **values):
    """(result, notes, calls cut short) of a keeper run in `fake`'s zone."""
    values = {"name": "pod", "zone": fake.zone, "root": "gs://b/albert", "config": "albert_base",
              "num_train_steps": 6, "pretrain_flags": ["--num-warmup-steps", "1"], "project": "p1",
              "state_file": str(tmp_path / "keeper.state"), **values}
    notes = []
    result = job.keep_alive(job.KeepAliveConfig(**values), runner=fake, clock=fake.clock, say=notes.append)
    return result, notes, [short(c) for c in fake.calls]


def launched_env(fake):
    """The environment of the last start on worker 0 (what the launch script writes to launch.env)."""
    return fake.launch_envs[-1]


# (type, zone, capacity flags, the image read off tests/fake_versions.py by hand, the create, hosts)
NEWEST = [
    ("v3-32", "europe-west4-a", {}, "tpu-vm-tf-2.18.0-pod-pjrt", "create --accelerator-type=v3-32 --version=", 4),
    ("v3-8", "europe-west4-a", {"preemptible": True}, "tpu-vm-tf-2.18.0-pjrt",  # -pjrt before -se
     "create --accelerator-type=v3-8 --version=", 1),
    ("v5litepod-16", "us-west4-a", {}, "tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6",  # queued on demand; not -v5p-...
     "queue --accelerator-type=v5litepod-16 --runtime-version=", 2),
    ("v5litepod-8", "us-west4-a", {"spot": True}, "tpu-vm-tf-2.19.0-pjrt-v5e-and-v6",
     "queue --accelerator-type=v5litepod-8 --runtime-version=", 1),
    ("v4-32", "us-central2-b", {"spot": True}, "tpu-vm-tf-2.19.0-pod-pjrt-v5p-and-below",  # not -v5e-and-v6
     "queue --accelerator-type=v4-32 --runtime-version=", 4),
    ("v4-8", "us-central2-b", {"reserved": True}, "tpu-vm-tf-2.18.0-pjrt-v5p-and-below",
     "create --accelerator-type=v4-8 --version=", 1),
    ("v5p-16", "us-east5-a", {}, "tpu-vm-tf-2.18.0-pod-pjrt-v5p-and-below",  # queued on demand; not 2.19 for v5e
     "queue --accelerator-type=v5p-16 --runtime-version=", 2),
    ("v5p-8", "us-east5-a", {"spot": True}, "tpu-vm-tf-2.18.0-pjrt-v5p-and-below",  # own suffix; not 2.21
     "queue --accelerator-type=v5p-8 --runtime-version=", 1),
]
NEWER = ("tpu-vm-tf-2.20.0-pjrt", "tpu-vm-tf-2.20.0-pod-pjrt")  # what the zone offers after the first create


@pytest.mark.parametrize("accelerator, zone, flags, image, made, hosts", NEWEST)
def test_the_newest_suitable_image_of_the_zone_is_chosen_once_and_kept(tmp_path, clock, accelerator, zone, flags,
                                                                      image, made, hosts):
    """The zone's list is asked once; the slice is made with its newest suitable image (v5e through a queued
    resource even on demand), the run launched with the slice's runtime variables, and after a preemption the
    slice is made again with the same image although the zone now offers a newer one."""
    fake = FakeGcloud(clock, zone=zone)
    fake.runs = [{"steps": 3, "end": "preempt"}]
    fake.hook = lambda args: setattr(fake, "offered", NEWER) if "create" in args else None
    result, notes, calls = keep(fake, tmp_path, type=accelerator, **flags)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert calls.count("versions") == 1
    capacity = "".join(f" --{k}" for k in flags)
    assert [c for c in calls if c.startswith(("create ", "queue "))] == [f"{made}{image}{capacity}"] * 2
    assert read_state(str(tmp_path / "keeper.state")).spec.runtime_version == image
    assert f"image {image}: the newest suitable of the runtime versions {zone} offers (--image names another)" in notes
    env = launched_env(fake)
    assert env["ALBERT_TF_TPU_IMAGE"] == image
    if hosts > 1:
        assert env["TPU_NAME"] == "pod" and env["TPU_LOAD_LIBRARY"] == "0"
    else:
        assert env["TPU_NAME"] == "local" and env["TF_PLUGGABLE_DEVICE_LIBRARY_PATH"] == "/lib/libtpu.so"


@pytest.mark.parametrize("accelerator, zone, pod_of_v4", [
    ("v4-32", "us-central2-b", True), ("v4-8", "us-central2-b", False), ("v3-32", "europe-west4-a", False),
    ("v5p-16", "us-east5-a", False)])
def test_a_v4_pod_slice_is_said_once_to_be_reported_broken_and_made_all_the_same(tmp_path, clock, accelerator, zone,
                                                                                 pod_of_v4):
    """One note naming the reports of v4 pods failing on the tf-2.18 and tf-2.19 images (TensorFlow's issues 82208
    and 93618), then the slice made and the run done as on any generation."""
    fake = FakeGcloud(clock, zone=zone)
    result, notes, calls = keep(fake, tmp_path, type=accelerator, spot=True)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert f"queue --accelerator-type={accelerator} --runtime-version=" in " ".join(calls)
    said = [note for note in notes if "reported broken" in note]
    if not pod_of_v4:
        assert not said
        return
    assert len(said) == 1 and said[0].startswith(f"note: {accelerator} is a TPU v4 pod slice (4 hosts)")
    assert all(f"github.com/tensorflow/tensorflow/issues/{n}" in said[0] for n in (82208, 93618))


@pytest.mark.parametrize("accelerator, zone, offered", [
    ("v3-32", "us-central1-b", None),   # only TensorFlow 2.16 and 2.17
    ("v5litepod-16", "us-central1-b", None),
    ("v4-32", "us-central2-b", ("tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6", "tpu-vm-tf-2.18.0-pjrt-v5p-and-below")),
    ("v5p-16", "us-central2-b", ("tpu-vm-tf-2.21.0-pod-pjrt", "tpu-vm-tf-2.18.0-pjrt")),  # too new; single host
])
def test_a_zone_without_a_suitable_image_is_one_line_before_anything_is_made(tmp_path, clock, accelerator, zone,
                                                                            offered):
    fake = FakeGcloud(clock, zone=zone, offered=offered)
    result, notes, calls = keep(fake, tmp_path, type=accelerator, spot=True)
    assert result.exit_code == exit_codes.BAD_INPUT
    assert calls == [*PREFLIGHT, "versions"] and fake.node is None and fake.queued is None
    line = notes[-2]
    assert line.startswith(f"{zone}: the zone offers no TensorFlow 2.18 to 2.20 image for a ") and "\n" not in line
    listed = offered or __import__("fake_versions").ZONE_VERSIONS[zone]
    assert line.split(": it offers ", 1)[1].startswith(", ".join(listed))
    assert result.line == "nothing was touched: no gcloud call was made about the slice"


@pytest.mark.parametrize("accelerator, zone, image", [
    ("v3-32", "europe-west4-a", "tpu-vm-tf-2.17.1-pod-pjrt"),   # an older one, not in the zone's newest
    ("v5litepod-16", "us-west4-a", "tpu-vm-base"),              # a base image: not TensorFlow's, passes
    ("v4-32", "us-central2-b", "tpu-vm-tf-2.18.0-pod-pjrt-v5p-and-below"),
    ("v5p-16", "us-east5-a", "tpu-vm-tf-2.18.0-pod-pjrt"),            # unsuffixed, not the zone's own-suffix choice
])
def test_image_forces_one_and_the_zone_is_not_asked(tmp_path, clock, accelerator, zone, image):
    fake = FakeGcloud(clock, zone=zone)
    result, notes, calls = keep(fake, tmp_path, type=accelerator, image=image, spot=True)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert "versions" not in calls
    assert f"queue --accelerator-type={accelerator} --runtime-version={image} --spot" in calls


@pytest.mark.parametrize("accelerator, image, message", [
    ("v4-32", "tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6", "is for other TPUs (-v5e-and-v6); TPU v4 images carry"),
    ("v5litepod-16", "tpu-vm-tf-2.18.0-pjrt-v5e-and-v6", "is a single-host image; a slice of 2 hosts"),
    ("v5litepod-8", "tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6", "is a pod image; a single host needs one without -pod"),
])
def test_a_forced_image_that_does_not_fit_the_generation_is_refused(tmp_path, clock, accelerator, image, message):
    fake = FakeGcloud(clock, zone="us-west4-a")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        keep(fake, tmp_path, type=accelerator, image=image)
    assert not fake.calls


@pytest.mark.parametrize("failures, code", [(["permission"], exit_codes.BAD_INPUT),
                                            (["transient"] * 3, exit_codes.GAVE_UP)])
def test_a_versions_list_that_fails_touches_nothing(tmp_path, clock, failures, code):
    """A permanent failure (permission) stops at once; a transient one is asked --retries times, then stops:
    both with one line and nothing made."""
    fake = FakeGcloud(clock, versions=list(failures))
    result, notes, calls = keep(fake, tmp_path, type="v3-32")
    assert result.exit_code == code and calls == [*PREFLIGHT, *["versions"] * len(failures)]
    assert notes[-2].startswith("could not list the runtime versions of europe-west4-a (")
    assert notes[-2].endswith("give --image to name one") and fake.node is None


def test_a_restart_uses_the_recorded_image_without_asking_the_zone(tmp_path, clock):
    fake = FakeGcloud(clock, zone="us-west4-a")
    fake.runs = [{"steps": 2, "end": 75}]
    result, _, _ = keep(fake, tmp_path, type="v5litepod-16", keep_slice=True, num_train_steps=2)
    assert result.exit_code == exit_codes.DONE
    again = FakeGcloud(clock, zone="us-west4-a", offered=())  # the zone offers nothing now
    again.node = None
    result, notes, calls = keep(again, tmp_path, type="v5litepod-16", num_train_steps=4)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert "versions" not in calls
    assert "queue --accelerator-type=v5litepod-16 --runtime-version=tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6" in calls


# ---------------------------------------------------------------------------------------------- the dry run
def dry_run(tmp_path, *words):
    """tpu/keep_alive.sh --dry-run with tests/fake_cloud.py as the `gcloud` on PATH: (its output's command lines,
    each split into words, its comment lines, the calls the fake logged)."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    gcloud = fake_bin / "gcloud"
    gcloud.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -S {shlex.quote(FAKE_CLOUD)} gcloud \"$@\"\n")
    gcloud.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("INSTALL_CMD", "ALBERT_TF_SOURCE", "ALBERT_TF")}
    env.update(PATH=f"{fake_bin}:{env['PATH']}", FAKE=str(tmp_path), ALBERT_TF_PYTHON_HERE=sys.executable)
    proc = subprocess.run([os.path.join(REPO, "tpu", "keep_alive.sh"), *words, "--dry-run"], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    logged = (tmp_path / "calls.log").read_text().splitlines()
    return ([shlex.split(line) for line in lines if line and not line.startswith("#")],
            [line for line in lines if line.startswith("#")], logged)


@pytest.mark.parametrize("accelerator, zone, image, hosts", [
    ("v5litepod-16", "us-west4-a", "tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6", 2),
    ("v3-32", "europe-west4-a", "tpu-vm-tf-2.18.0-pod-pjrt", 4),
    ("v4-32", "us-central2-b", "tpu-vm-tf-2.19.0-pod-pjrt-v5p-and-below", 4),
])
def test_the_dry_run_queues_the_slice_with_the_zones_image_and_launches_it(tmp_path, accelerator, zone, image, hosts):
    """Issue 45's check: `tpu/keep_alive.sh --name p --zone Z --type T --spot --root gs://b/a --config albert_base
    --dry-run` with a fake gcloud: the zone's versions list asked (read-only: the only calls made), a queued-resources
    create of T with the chosen image, and the launch on worker 0 with the pod's variables."""
    commands, comments, logged = dry_run(tmp_path, "--name", "p", "--zone", zone, "--type", accelerator, "--spot",
                                         "--root", "gs://b/a", "--config", "albert_base")
    assert [shlex.split(c)[:5] for c in logged] == [["config", "get-value", "project"],
                                                     ["compute", "tpus", "tpu-vm", "versions", "list"]]
    queue = next(c for c in commands if c[:5] == ["gcloud", "compute", "tpus", "queued-resources", "create"])
    assert queue[5:] == ["p", "--node-id=p", f"--accelerator-type={accelerator}", f"--runtime-version={image}",
                         "--spot", f"--zone={zone}", "--project=p1"]
    start = next(c for c in commands if c[:5] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh"]
                 and c[7] == "--command=bash albert_tf_launch.sh")
    assert start[5:7] == ["p", "--worker=0"]
    env = {line[len("#   "):] for line in comments if line.startswith("#   ") and "=" in line}
    assert {"TPU_NAME=p", "TPU_LOAD_LIBRARY=0", f"ALBERT_TF_TPU_IMAGE={image}"} <= env
    remote = commands[-2]  # what the launch script runs on worker 0
    assert remote[remote.index("--tpu") + 1] == "p" and "--env-file" in remote
    note = next(c for c in comments if c.startswith("# the slice: "))
    assert f"on {hosts} hosts" in note and f"client of all {hosts} hosts" in note

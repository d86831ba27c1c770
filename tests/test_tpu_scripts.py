"""tpu/*.sh: every script's --dry-run prints the commands it would run (checked word by word), --help, bad input,
the restart loop against a fake gcloud, and shellcheck on all of them (required when $CI is set)."""
import glob
import os
import shlex
import shutil
import stat
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPU = os.path.join(REPO, "tpu")
SCRIPTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(TPU, "*.sh")) if not p.endswith("lib.sh"))
ZONE = "europe-west4-a"


@pytest.fixture(scope="module", autouse=True)
def guard(tmp_path_factory):
    """Stand-ins that fail loudly for the tools a script must never run in these tests (gcloud, albert-tf,
    tensorboard): put first on PATH, so that a dry run that would run something is caught, not executed."""
    directory = tmp_path_factory.mktemp("guard")
    for tool in ("gcloud", "albert-tf", "tensorboard"):
        path = directory / tool
        path.write_text(f"#!/bin/sh\necho 'the test ran {tool}' >&2\nexit 99\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    GUARD.append(str(directory))
    yield
    GUARD.clear()


GUARD = []


def run_script(script, *args, env=None, check=True):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("INSTALL_CMD", "ALBERT_TF_SOURCE", "TF_IMAGE_VERSION", "ALBERT_TF", "LOCAL_CLI")}
    environ["PATH"] = os.pathsep.join(GUARD + [os.environ["PATH"]])
    environ.update(env or {})
    result = subprocess.run([os.path.join(TPU, script), *args], capture_output=True, text=True, env=environ,
                            timeout=60, check=False)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def commands(script, *args, env=None):
    """The dry-run's commands, each split into words as a shell would."""
    out = run_script(script, "--dry-run", *args, env=env).stdout
    return [shlex.split(line) for line in out.splitlines() if line and not line.startswith("#")]


def inner(command):
    """The words of the remote command of a `gcloud ... ssh --command CMD`."""
    return shlex.split(command[command.index("--command") + 1])


# One dry run per script: every script in tpu/ must be listed here.
DRY_RUNS = {
    "create_tpu.sh": ["--name", "vm", "--zone", ZONE, "--type", "v3-8"],
    "install.sh": ["--name", "vm", "--zone", ZONE],
    "create_bucket.sh": ["--bucket", "gs://my-bucket", "--zone", ZONE],
    "prepare_data.sh": ["--root", "gs://b/albert", "--corpus", "corpus/*.txt"],
    "launch_pretrain.sh": ["--name", "vm", "--zone", ZONE, "--type", "v3-8", "--root", "gs://b/albert",
                           "--config", "albert_base"],
    "resume_loop.sh": ["--name", "pod", "--zone", ZONE, "--type", "v3-32", "--root", "gs://b/albert", "--config",
                       "albert_base"],
    "tensorboard.sh": ["--root", "gs://b/albert", "--config", "albert_base"],
    "export.sh": ["--root", "gs://b/albert", "--config", "albert_base"],
    "delete_tpu.sh": ["--name", "vm", "--zone", ZONE],
}


def test_every_script_has_a_dry_run_case():
    assert sorted(DRY_RUNS) == SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_and_dry_run(script):
    help_text = run_script(script, "--help").stdout
    assert "Usage: tpu/" + script in help_text and "--dry-run" in help_text and "shellcheck" not in help_text
    assert commands(script, *DRY_RUNS[script])
    bad = run_script(script, "--dry-run", *DRY_RUNS[script], "--bogus", check=False)
    assert bad.returncode == 2 and "unknown argument --bogus" in bad.stderr


def test_create_single_host_vm():
    create, install = commands("create_tpu.sh", *DRY_RUNS["create_tpu.sh"])
    assert create == ["gcloud", "compute", "tpus", "tpu-vm", "create", "vm", f"--zone={ZONE}",
                      "--accelerator-type=v3-8", "--version=tpu-vm-tf-2.18.0-pjrt"]
    assert install[:8] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "vm", f"--zone={ZONE}", "--worker=all"]


@pytest.mark.parametrize("size", [32, 64, 128, 256, 512])
def test_create_pod_slice(size):
    create, install = commands("create_tpu.sh", "--name", "pod", "--zone", ZONE, "--type", f"v3-{size}", "--spot",
                               "--project", "my-project")
    assert f"--accelerator-type=v3-{size}" in create and "--version=tpu-vm-tf-2.18.0-pod-pjrt" in create
    assert "--spot" in create and create[-1] == install[-1] == "--project=my-project"
    assert "--worker=all" in install
    note = run_script("create_tpu.sh", "--name", "pod", "--zone", ZONE, "--type", f"v3-{size}", "--dry-run").stdout
    assert f"{size // 8} host(s)" in note


def test_create_image_overrides():
    (create, _) = commands("create_tpu.sh", "--name", "pod", "--zone", ZONE, "--type", "v3-32",
                           env={"TF_IMAGE_VERSION": "2.17.1"})
    assert "--version=tpu-vm-tf-2.17.1-pod-pjrt" in create
    (create,) = commands("create_tpu.sh", "--name", "vm", "--zone", ZONE, "--type", "v3-8", "--image", "my-image",
                         "--no-install")
    assert "--version=my-image" in create


@pytest.mark.parametrize("args, message", [
    (["--type", "v3-1024"], "--type v3-1024: expected one of v3-8 v3-32"),
    (["--type", "v4-8"], "--type v4-8: expected one of"),
    (["--zone", "europe"], "--zone europe: expected a zone such as europe-west4-a"),
    (["--name"], "--name needs a value"),
])
def test_create_refuses_bad_input(args, message):
    base = {"--name": "vm", "--zone": ZONE, "--type": "v3-8"}
    words = [w for k, v in base.items() if k not in args for w in (k, v)] + args
    result = run_script("create_tpu.sh", *words, "--dry-run", check=False)
    assert result.returncode == 2 and message in result.stderr and not result.stdout


def test_install_command():
    (install,) = commands("install.sh", *DRY_RUNS["install.sh"])
    remote = install[install.index("--command") + 1]
    assert remote.startswith('pip install "albert_tf @ git+https://github.com/OWNER/albert_tf.git" && '
                             'pip install --no-deps "tensorflow-text==2.18.*" && ')
    (install,) = commands("install.sh", *DRY_RUNS["install.sh"], env={"ALBERT_TF_SOURCE": "gs://b/albert_tf.whl"})
    assert '"albert_tf @ gs://b/albert_tf.whl"' in install[install.index("--command") + 1]
    (install,) = commands("install.sh", *DRY_RUNS["install.sh"], env={"INSTALL_CMD": "pip install --no-deps x"})
    assert inner(install)[:4] == ["pip", "install", "--no-deps", "x"]
    # a real run with the placeholder source stops before calling gcloud
    result = run_script("install.sh", *DRY_RUNS["install.sh"], check=False)
    assert result.returncode == 2 and "set ALBERT_TF_SOURCE" in result.stderr


def test_bucket_in_the_tpu_region():
    (create,) = commands("create_bucket.sh", *DRY_RUNS["create_bucket.sh"])
    assert create == ["gcloud", "storage", "buckets", "create", "gs://my-bucket", "--location=europe-west4",
                      "--uniform-bucket-level-access"]
    result = run_script("create_bucket.sh", "--bucket", "my-bucket", "--zone", ZONE, "--dry-run", check=False)
    assert result.returncode == 2 and "expected a gs:// path" in result.stderr


def test_prepare_data_locally():
    cmds = commands("prepare_data.sh", *DRY_RUNS["prepare_data.sh"], "--eval-corpus", "held/*.txt",
                    "--num-shards", "256")
    assert cmds[1] == ["albert-tf", "vocab", "--input", "corpus/*.txt", "--output-prefix", "albert_tf_data/spm",
                       "--vocab-size", "30000"]
    train, evaluation = cmds[2], cmds[3]
    assert train[:2] == ["albert-tf", "create-data"] and train[train.index("--num-shards") + 1] == "256"
    assert train[train.index("--max-seq-length") + 1] == "512" and train[train.index("--max-predictions") + 1] == "20"
    assert evaluation[evaluation.index("--output") + 1] == "albert_tf_data/records/eval"
    assert cmds[4] == ["gcloud", "storage", "cp", "-r", "albert_tf_data/records", "gs://b/albert/"]
    assert cmds[5] == ["gcloud", "storage", "cp", "albert_tf_data/spm.model", "gs://b/albert/spm.model"]


def test_prepare_data_on_dataflow():
    cmds = commands("prepare_data.sh", "--root", "gs://b/albert", "--corpus", "gs://b/corpus/*.txt", "--dataflow",
                    "--region", "europe-west4", "--vocab-corpus", "sample/*.txt", "--project", "p", "--",
                    "--extra_package", "dist/albert_tf.whl")
    vocab, upload, beam = cmds
    assert vocab[:4] == ["albert-tf", "vocab", "--input", "sample/*.txt"]
    assert upload[:5] == ["gcloud", "storage", "cp", "albert_tf_data/spm.model", "gs://b/albert/spm.model"]
    assert beam[:3] == ["python3", "-m", "albert_tf.data.beam"]
    pairs = dict(zip(beam[3::2], beam[4::2]))
    assert pairs["--input"] == "gs://b/corpus/*.txt" and pairs["--runner"] == "DataflowRunner"
    assert pairs["--region"] == "europe-west4" and pairs["--temp_location"] == "gs://b/albert/tmp"
    assert pairs["--project"] == "p" and pairs["--extra_package"] == "dist/albert_tf.whl"
    result = run_script("prepare_data.sh", "--root", "gs://b/a", "--corpus", "local/*.txt", "--dataflow", "--region",
                        "r", "--vocab-corpus", "s", "--dry-run", check=False)
    assert result.returncode == 2 and "--corpus local/*.txt: expected a gs:// path" in result.stderr


def test_launch_on_a_single_host_vm():
    (ssh,) = commands("launch_pretrain.sh", *DRY_RUNS["launch_pretrain.sh"])
    assert ssh[:8] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "vm", f"--zone={ZONE}", "--worker=0"]
    words = inner(ssh)
    assert words[:3] == ["set", "-o", "pipefail;"]
    pretrain = words[3:words.index("2>&1")]
    assert pretrain[:4] == ["python3", "-m", "albert_tf", "pretrain"]
    flags = dict(zip(pretrain[4::2], pretrain[5::2]))
    assert flags == {"--tpu": "local", "--recipe": "paper_v2", "--config": "albert_base",
                     "--train-data": "gs://b/albert/records/train-*", "--model-dir": "gs://b/albert/models/albert_base",
                     "--spm-model": "gs://b/albert/spm.model", "--eval-data": "gs://b/albert/records/eval-*"}
    assert words[-3:] == ["|", "tee", "-a"] or words[-4:-1] == ["|", "tee", "-a"]


@pytest.mark.parametrize("size", [32, 512])
def test_launch_on_a_pod_runs_on_worker_0_with_the_tpu_name(size):
    (ssh,) = commands("launch_pretrain.sh", "--name", "pod", "--zone", ZONE, "--type", f"v3-{size}", "--root",
                      "gs://b/albert", "--config", "gs://b/albert_config.json", "--recipe", "paper_v1", "--no-eval",
                      "--", "--num-train-steps", "1000")
    assert "--worker=0" in ssh and "--worker=all" not in ssh
    words = inner(ssh)
    pretrain = words[words.index("pretrain"):words.index("2>&1")]
    flags = dict(zip(pretrain[1::2], pretrain[2::2]))
    assert flags["--tpu"] == "pod" and flags["--recipe"] == "paper_v1" and "--eval-data" not in flags
    assert flags["--model-dir"] == "gs://b/albert/models/albert_config" and flags["--num-train-steps"] == "1000"


def test_launch_refuses_local_paths():
    args = dict(zip(DRY_RUNS["launch_pretrain.sh"][::2], DRY_RUNS["launch_pretrain.sh"][1::2]))
    for flag, value, message in (("--config", "configs/albert_base.json", "expected a preset name"),
                                 ("--root", "/data/albert", "expected a gs:// path")):
        words = [w for k, v in {**args, flag: value}.items() for w in (k, v)]
        result = run_script("launch_pretrain.sh", *words, "--dry-run", check=False)
        assert result.returncode == 2 and message in result.stderr


def test_resume_loop_dry_run_is_one_pass_after_a_preemption():
    cmds = commands("resume_loop.sh", *DRY_RUNS["resume_loop.sh"], "--steps", "5000")
    heads = [" ".join(c[:5]) for c in cmds]
    assert heads == ["gcloud storage ls gs://b/albert/models/albert_base/ckpt-5000.index",
                     "gcloud compute tpus tpu-vm describe", "gcloud compute tpus tpu-vm delete",
                     "gcloud compute tpus tpu-vm create", "gcloud compute tpus tpu-vm ssh",
                     "gcloud compute tpus tpu-vm ssh"]
    assert "--spot" in cmds[3] and "--accelerator-type=v3-32" in cmds[3]
    assert "--worker=all" in cmds[4] and "--worker=0" in cmds[5]
    pretrain = inner(cmds[5])
    assert pretrain[pretrain.index("--num-train-steps") + 1] == "5000" and "pod" == pretrain[
        pretrain.index("--tpu") + 1]


FAKE_GCLOUD = r"""#!/usr/bin/env bash
# A stand-in for gcloud: logs each call, keeps the TPU's state in $FAKE/state; the first training launch is
# preempted, the second one finishes.
echo "$*" >> "$FAKE/log"
case "$*" in
  "storage ls"*) [[ -e $FAKE/final ]] ;;
  *"tpu-vm describe"*) [[ $(cat "$FAKE/state") != MISSING ]] && cat "$FAKE/state" ;;
  *"tpu-vm delete"*) echo MISSING > "$FAKE/state" ;;
  *"tpu-vm create"*) echo READY > "$FAKE/state" ;;
  *"--worker=all"*) exit 0 ;;
  *"--worker=0"*)
    if [[ -n ${FAKE_NEVER:-} ]]; then exit 1; fi
    n=$(( $(cat "$FAKE/launches" 2>/dev/null || echo 0) + 1 )); echo $n > "$FAKE/launches"
    if [[ $n == 1 ]]; then echo PREEMPTED > "$FAKE/state"; exit 255; fi
    touch "$FAKE/final" ;;
  *) echo "unexpected: $*" >&2; exit 9 ;;
esac
"""


def test_resume_loop_recreates_a_preempted_slice_and_relaunches(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(FAKE_GCLOUD)
    gcloud.chmod(gcloud.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "state").write_text("READY\n")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE": str(tmp_path), "ALBERT_TF_SOURCE": "gs://b/w.whl"}
    result = run_script("resume_loop.sh", *DRY_RUNS["resume_loop.sh"], "--wait", "0", "--steps", "10", env=env)
    log = [line.split(" --")[0] for line in (tmp_path / "log").read_text().splitlines()]
    assert log == [
        "storage ls gs://b/albert/models/albert_base/ckpt-10.index",
        "compute tpus tpu-vm describe pod",                             # READY
        "compute tpus tpu-vm ssh pod",                                  # launch 1: preempted
        "storage ls gs://b/albert/models/albert_base/ckpt-10.index",
        "compute tpus tpu-vm describe pod",                             # PREEMPTED
        "compute tpus tpu-vm delete pod",
        "compute tpus tpu-vm create pod",
        "compute tpus tpu-vm ssh pod",                                  # install, --worker=all
        "compute tpus tpu-vm ssh pod",                                  # launch 2: finishes
        "storage ls gs://b/albert/models/albert_base/ckpt-10.index",
    ], result.stderr
    assert "done: gs://b/albert/models/albert_base/ckpt-10.index" in result.stderr
    # a slice that never finishes: the loop gives up
    (tmp_path / "final").unlink()
    (tmp_path / "log").unlink()
    result = run_script("resume_loop.sh", *DRY_RUNS["resume_loop.sh"], "--wait", "0", "--max-restarts", "2",
                        env={**env, "FAKE_NEVER": "1"}, check=False)
    assert result.returncode == 2 and "gave up after 2 relaunches" in result.stderr
    assert (tmp_path / "log").read_text().count("--worker=0") == 3


def test_tensorboard_export_delete():
    assert commands("tensorboard.sh", *DRY_RUNS["tensorboard.sh"], "--port", "7000") == [
        ["tensorboard", "--logdir", "gs://b/albert/models/albert_base", "--port", "7000"]]
    assert commands("export.sh", *DRY_RUNS["export.sh"]) == [
        ["albert-tf", "export", "--model", "gs://b/albert/models/albert_base", "--output",
         "gs://b/albert/export/albert_base"]]
    (ssh,) = commands("export.sh", "--model-dir", "gs://b/m", "--name", "pod", "--zone", ZONE)
    assert "--worker=0" in ssh and inner(ssh) == ["python3", "-m", "albert_tf", "export", "--model", "gs://b/m",
                                                  "--output", "gs://b/m/export"]
    assert commands("delete_tpu.sh", *DRY_RUNS["delete_tpu.sh"]) == [
        ["gcloud", "compute", "tpus", "tpu-vm", "delete", "vm", f"--zone={ZONE}", "--quiet"]]


def test_shellcheck():
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is not installed (CI must install it: apt-get install -y shellcheck)")
        pytest.skip("shellcheck is not installed (apt-get install -y shellcheck)")
    scripts = sorted(glob.glob(os.path.join(TPU, "*.sh")))
    result = subprocess.run(["shellcheck", "-x", *scripts], capture_output=True, text=True, cwd=REPO, check=False)
    assert result.returncode == 0, result.stdout + result.stderr

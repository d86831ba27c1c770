"""tpu/*.sh: every script's --dry-run prints the commands it would run (checked word by word: the TPU runtime's
variables per slice size, the worker, the detached start, the install), --help, bad input, tpu/on_worker.sh's
detached run on this machine, and shellcheck on all of them (required when $CI is set). The keeper
(tpu/keep_alive.sh) against a fake Google Cloud: tests/test_keeper.py."""
import glob
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

from helpers import REPO, default_signals, wait_until

TPU = os.path.join(REPO, "tpu")
# lib.sh is sourced; on_worker.sh runs on worker 0 (copied there by launch_pretrain.sh) and is tested on its own.
SCRIPTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(TPU, "*.sh"))
                 if os.path.basename(p) not in ("lib.sh", "on_worker.sh"))
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
               if k not in ("INSTALL_CMD", "ALBERT_TF_SOURCE", "TF_IMAGE_VERSION", "ALBERT_TF", "ALBERT_TF_PYTHON",
                            "LOCAL_CLI")}
    environ["PATH"] = os.pathsep.join(GUARD + [os.environ["PATH"]])
    environ["ALBERT_TF_PYTHON_HERE"] = sys.executable  # the keeper's wrapper runs albert_tf from this checkout
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
    "keep_alive.sh": ["--name", "pod", "--zone", ZONE, "--type", "v3-32", "--root", "gs://b/albert", "--config",
                      "albert_base"],
    "resume_loop.sh": ["--name", "pod", "--zone", ZONE, "--type", "v3-32", "--root", "gs://b/albert", "--config",
                       "albert_base"],
    "tensorboard.sh": ["--root", "gs://b/albert", "--config", "albert_base"],
    "export.sh": ["--root", "gs://b/albert", "--config", "albert_base"],
    "delete_tpu.sh": ["--name", "vm", "--zone", ZONE],
}


KEEPER_SCRIPTS = ("keep_alive.sh", "resume_loop.sh")  # wrappers of `albert-tf keep-alive` (tests/test_keeper.py)


def test_every_script_has_a_dry_run_case():
    assert sorted(DRY_RUNS) == SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_and_dry_run(script):
    help_text = run_script(script, "--help").stdout
    usage = "Usage: tpu/" + ("keep_alive.sh" if script == "resume_loop.sh" else script)  # the keeper's former name
    assert usage in help_text and "--dry-run" in help_text and "shellcheck" not in help_text
    assert commands(script, *DRY_RUNS[script])
    bad = run_script(script, "--dry-run", *DRY_RUNS[script], "--bogus", check=False)
    unknown = "unrecognized arguments: --bogus" if script in KEEPER_SCRIPTS else "unknown argument --bogus"
    assert bad.returncode == 2 and unknown in bad.stderr


def test_create_single_host_vm():
    create, install = commands("create_tpu.sh", *DRY_RUNS["create_tpu.sh"])
    assert create == ["gcloud", "compute", "tpus", "tpu-vm", "create", "vm", f"--zone={ZONE}",
                      "--accelerator-type=v3-8", "--version=tpu-vm-tf-2.18.0-pjrt"]
    assert install[:8] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "vm", f"--zone={ZONE}", "--worker=0"]


@pytest.mark.parametrize("size", [32, 64, 128, 256, 512, 1024, 2048])
def test_create_pod_slice(size):
    create, install = commands("create_tpu.sh", "--name", "pod", "--zone", ZONE, "--type", f"v3-{size}", "--spot",
                               "--project", "my-project")
    assert f"--accelerator-type=v3-{size}" in create and "--version=tpu-vm-tf-2.18.0-pod-pjrt" in create
    assert "--spot" in create and create[-1] == install[-1] == "--project=my-project"
    assert "--worker=0" in install and not any("--worker=all" in w for w in install)  # Python runs on worker 0 only
    note = run_script("create_tpu.sh", "--name", "pod", "--zone", ZONE, "--type", f"v3-{size}", "--dry-run").stdout
    assert f"{size // 8} host(s)" in note


@pytest.mark.parametrize("accelerator, devices, hosts, image", [
    ("v4-32", 16, 4, "tpu-vm-tf-2.18.0-pod-pjrt"), ("v4-8", 4, 1, "tpu-vm-tf-2.18.0-pjrt"),
    ("v5litepod-16", 16, 2, "tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6"),
    ("v5litepod-8", 8, 1, "tpu-vm-tf-2.18.0-pjrt-v5e-and-v6"),
    ("v5p-128", 64, 16, "tpu-vm-tf-2.18.0-pod-pjrt")])
def test_create_other_generations(accelerator, devices, hosts, image):
    """The accelerator type passes through as Google spells it; devices and hosts come from the device table (v4-32:
    32 cores = 16 chips, one TensorFlow device each, 4 per host; v5litepod-16: 16 chips, 8 per host)."""
    create, _ = commands("create_tpu.sh", "--name", "s", "--zone", ZONE, "--type", accelerator)
    assert f"--accelerator-type={accelerator}" in create and f"--version={image}" in create
    note = run_script("create_tpu.sh", "--name", "s", "--zone", ZONE, "--type", accelerator, "--dry-run").stdout
    assert f"{accelerator}: {devices} TensorFlow devices on {hosts} host(s)" in note


def test_create_image_overrides():
    (create,) = commands("create_tpu.sh", "--name", "vm", "--zone", ZONE, "--type", "v3-8", "--image", "my-image",
                         "--no-install")
    assert "--version=my-image" in create
    for capacity in ("--preemptible", "--reserved"):
        create, _ = commands("create_tpu.sh", "--name", "pod", "--zone", ZONE, "--type", "v3-2048", capacity)
        assert create[-1] == capacity and "--spot" not in create


@pytest.mark.parametrize("args, message", [
    (["--type", "v3-4096"], "--type v3-4096: not a TPU v3 slice: expected one of v3-8, v3-32"),
    (["--spot", "--reserved"], "--spot, --preemptible and --reserved: one at most"),
    (["--type", "v5litepod-3"], "--type v5litepod-3: not a TPU v5e slice: expected one of v5litepod-1, v5litepod-4"),
    (["--type", "v6e-64"], "--type v6e-64: TPU v6e is refused: TensorFlow failed in every public attempt"),
    (["--zone", "europe"], "--zone europe: expected a zone such as europe-west4-a"),
    (["--name"], "--name needs a value"),
])
def test_create_refuses_bad_input(args, message):
    base = {"--name": "vm", "--zone": ZONE, "--type": "v3-8"}
    words = [w for k, v in base.items() if k not in args for w in (k, v)] + args
    result = run_script("create_tpu.sh", *words, "--dry-run", check=False)
    assert result.returncode == 2 and message in result.stderr and not result.stdout


def install_words(env=None):
    """What install.sh runs on worker 0, as shell words, and the worker."""
    (install,) = commands("install.sh", *DRY_RUNS["install.sh"], env=env)
    assert install[:8] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "vm", f"--zone={ZONE}", "--worker=0"]
    return inner(install)


CHECK = ["TPU_LOAD_LIBRARY=0", "python3", "-c",
         'import albert_tf, tensorflow as tf; print("albert_tf", albert_tf.__version__, "tensorflow", tf.__version__)']
TEXT = ["python3", "-m", "pip", "install", "--no-deps", "tensorflow-text==2.18.*"]


@pytest.mark.parametrize("source, fetch, requirement", [
    (None, [], "albert_tf[cloud-tpu] @ git+https://github.com/OWNER/albert_tf.git"),   # the placeholder (dry run)
    ("git+https://example.com/a/albert_tf.git@v1", [],
     "albert_tf[cloud-tpu] @ git+https://example.com/a/albert_tf.git@v1"),
    ("https://example.com/albert_tf-0.1.0-py3-none-any.whl", [],
     "albert_tf[cloud-tpu] @ https://example.com/albert_tf-0.1.0-py3-none-any.whl"),
    # pip cannot read gs://: the wheel is copied to worker 0 first, under its own name (pip parses wheel names)
    ("gs://b/dist/albert_tf-0.1.0-py3-none-any.whl",
     ["mkdir", "-p", "albert_tf_wheel", "&&", "gcloud", "storage", "cp", "gs://b/dist/albert_tf-0.1.0-py3-none-any.whl",
      "albert_tf_wheel/", "&&"], "./albert_tf_wheel/albert_tf-0.1.0-py3-none-any.whl[cloud-tpu]"),
])
def test_install_on_worker_0_from_a_source_pip_can_read(source, fetch, requirement):
    words = install_words({"ALBERT_TF_SOURCE": source} if source else None)
    assert words == fetch + ["python3", "-m", "pip", "install", requirement, "&&"] + TEXT + ["&&"] + CHECK


def test_install_overrides_and_refusals():
    assert install_words({"INSTALL_CMD": "pip install --no-deps x"})[:4] == ["pip", "install", "--no-deps", "x"]
    python = "/opt/py/bin/python"
    assert install_words({"ALBERT_TF_PYTHON": python})[:4] == [python, "-m", "pip", "install"]
    for source in ("gs://b/dist/", "albert_tf==0.1.0", "/home/me/albert_tf.whl"):
        result = run_script("install.sh", *DRY_RUNS["install.sh"], "--dry-run", env={"ALBERT_TF_SOURCE": source},
                            check=False)
        assert result.returncode == 2 and not result.stdout
        assert f"ALBERT_TF_SOURCE {source}: expected a git URL (git+https://...), an https:// wheel or a gs://" \
            in result.stderr
    # a real run with the placeholder source stops before calling gcloud
    result = run_script("install.sh", *DRY_RUNS["install.sh"], check=False)
    assert result.returncode == 2 and "set ALBERT_TF_SOURCE" in result.stderr


@pytest.mark.parametrize("script", ["install.sh", "launch_pretrain.sh"])
@pytest.mark.parametrize("source", ["git+https://me:s3cret-token@example.com/a/albert_tf.git@v1",
                                    "https://s3cret-token@example.com/albert_tf-0.1.0-py3-none-any.whl"])
def test_a_credential_in_the_source_is_refused_before_gcloud_sees_it(script, source):
    """The install goes to worker 0 on gcloud's command line, which gcloud's logs keep: a source URL carrying a
    credential is refused, naming the variable without the credential, and nothing is run."""
    for dry_run in (["--dry-run"], []):
        result = run_script(script, *DRY_RUNS[script], *dry_run, env={"ALBERT_TF_SOURCE": source}, check=False)
        assert result.returncode == 2 and not result.stdout, result
        assert "s3cret-token" not in result.stderr and "ALBERT_TF_SOURCE " in result.stderr
        assert "a credential in the URL" in result.stderr and "albert-tf keep-alive" in result.stderr
    # (a git URL naming a revision, an @ after the host, is no credential: test_install_on_worker_0_from_a_source_...)


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
    assert evaluation[evaluation.index("--num-shards") + 1] == "64"  # one per host of a v3-512
    assert cmds[4] == ["gcloud", "storage", "cp", "-r", "albert_tf_data/records", "gs://b/albert/"]
    assert cmds[5] == ["gcloud", "storage", "cp", "albert_tf_data/spm.model", "gs://b/albert/spm.model"]


def test_prepare_data_on_dataflow():
    cmds = commands("prepare_data.sh", "--root", "gs://b/albert", "--corpus", "gs://b/corpus/*.txt", "--dataflow",
                    "--region", "europe-west4", "--vocab-corpus", "sample/*.txt", "--project", "p", "--",
                    "--extra_package", "dist/albert_tf.whl")
    vocab, upload, beam = cmds
    assert vocab[:4] == ["albert-tf", "vocab", "--input", "sample/*.txt"]
    assert upload[:5] == ["gcloud", "storage", "cp", "albert_tf_data/spm.model", "gs://b/albert/spm.model"]
    assert beam[:3] == ["albert-tf", "create-data", "--beam"]
    ours, theirs = beam[3:beam.index("--")], beam[beam.index("--") + 1:]  # create-data's flags; Beam's after --
    pairs, beam_pairs = dict(zip(ours[::2], ours[1::2])), dict(zip(theirs[::2], theirs[1::2]))
    assert pairs["--input"] == "gs://b/corpus/*.txt" and beam_pairs["--runner"] == "DataflowRunner"
    assert beam_pairs["--region"] == "europe-west4" and beam_pairs["--temp_location"] == "gs://b/albert/tmp"
    assert beam_pairs["--project"] == "p" and beam_pairs["--extra_package"] == "dist/albert_tf.whl"
    result = run_script("prepare_data.sh", "--root", "gs://b/a", "--corpus", "local/*.txt", "--dataflow", "--region",
                        "r", "--vocab-corpus", "s", "--dry-run", check=False)
    assert result.returncode == 2 and "--corpus local/*.txt: expected a gs:// path" in result.stderr


def launch(*args, env=None):
    """launch_pretrain.sh's dry run: (scp, ssh, what the ssh runs on worker 0 as
    {"install": [words], "env": {NAME: VALUE}, "pretrain": [words], "log": LOG_URL, "follow": bool})."""
    scp, ssh = commands("launch_pretrain.sh", *args, env=env)
    words = inner(ssh)
    start = words.index("start")
    assert words[:9] == ["mkdir", "-p", "albert_tf_run", "&&", "mv", "-f", "albert_tf_on_worker.sh",
                         "albert_tf_run/on_worker.sh", "&&"]
    assert words[start - 3:start] == ["&&", "bash", "albert_tf_run/on_worker.sh"]
    assert words[start + 1] == "albert_tf_run"
    dashes = words.index("--", start)
    end = words.index("&&", dashes) if "&&" in words[dashes:] else len(words)
    env_words = words[start + 3:dashes]
    remote = {"env": dict(w.split("=", 1) for w in env_words), "env_order": [w.split("=")[0] for w in env_words],
              "pretrain": words[dashes + 1:end], "log": words[start + 2], "follow": words[end:],
              "install": words[9:start - 3]}
    return scp, ssh, remote


def test_launch_installs_when_albert_tf_is_missing():
    """The import check (no TPU runtime loaded: a running job holds the TPU), else the install: a failed install
    fails this launch, and the next launch checks again."""
    _, _, remote = launch(*DRY_RUNS["launch_pretrain.sh"], env={"INSTALL_CMD": "my-install --now"})
    assert remote["install"] == ["{", "TPU_LOAD_LIBRARY=0", "python3", "-c", "import albert_tf", "2>/dev/null", "||",
                                 "{", "echo", "albert_tf is missing on worker 0: installing it", "&&", "my-install",
                                 "--now;", "};", "}"]
    _, _, remote = launch(*DRY_RUNS["launch_pretrain.sh"])
    assert remote["install"][11:16] == ["python3", "-m", "pip", "install",
                                        "albert_tf[cloud-tpu] @ git+https://github.com/OWNER/albert_tf.git"]
    # a real launch with the placeholder source: the remote install fails saying what to set (here, run in bash)
    from_placeholder = subprocess.run(["bash", "-c", ". tpu/lib.sh; DRY_RUN=0; eval \"$(install_command)\""],
                                      cwd=REPO, capture_output=True, text=True, check=False,
                                      env={k: v for k, v in os.environ.items()
                                           if k not in ("INSTALL_CMD", "ALBERT_TF_SOURCE")})
    assert from_placeholder.returncode == 1
    assert "albert_tf is not installed on worker 0; set ALBERT_TF_SOURCE" in from_placeholder.stderr


def test_launch_on_a_single_host_vm_runs_detached_with_the_pjrt_variables():
    scp, ssh, remote = launch(*DRY_RUNS["launch_pretrain.sh"])
    assert scp[:6] == ["gcloud", "compute", "tpus", "tpu-vm", "scp", os.path.join(TPU, "on_worker.sh")]
    assert scp[6:] == ["vm:albert_tf_on_worker.sh", f"--zone={ZONE}", "--worker=0"]
    assert ssh[:8] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "vm", f"--zone={ZONE}", "--worker=0"]
    assert remote["env"] == {"TPU_NAME": "local", "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
                             "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/lib/libtpu.so",
                             "ALBERT_TF_TPU_IMAGE": "tpu-vm-tf-2.18.0-pjrt"}
    pretrain = remote["pretrain"]
    assert pretrain[:4] == ["python3", "-m", "albert_tf", "pretrain"]
    flags = dict(zip(pretrain[4::2], pretrain[5::2]))
    assert flags == {"--tpu": "local", "--recipe": "paper_v2", "--config": "albert_base",
                     "--train-data": "gs://b/albert/records/train-*", "--model-dir": "gs://b/albert/models/albert_base",
                     "--spm-model": "gs://b/albert/spm.model", "--eval-data": "gs://b/albert/records/eval-*"}
    assert remote["log"] == "gs://b/albert/logs/albert_base" and remote["follow"] == []
    _, _, remote = launch(*DRY_RUNS["launch_pretrain.sh"], "--follow", env={"TPU_PJRT_LIBRARY": "/opt/libtpu.so"})
    assert remote["follow"] == ["&&", "bash", "albert_tf_run/on_worker.sh", "follow", "albert_tf_run"]
    assert remote["env"]["TF_PLUGGABLE_DEVICE_LIBRARY_PATH"] == "/opt/libtpu.so"


@pytest.mark.parametrize("size", [32, 512])
def test_launch_on_a_pod_runs_on_worker_0_with_the_slice_name_and_no_local_runtime(size):
    scp, ssh, remote = launch("--name", "pod", "--zone", ZONE, "--type", f"v3-{size}", "--root", "gs://b/albert",
                              "--config", "gs://b/albert_config.json", "--recipe", "paper_v1", "--no-eval", "--",
                              "--num-train-steps", "1000")
    assert "--worker=0" in ssh and "--worker=0" in scp and not any("--worker=all" in c for c in (scp, ssh))
    assert remote["env"] == {"TPU_NAME": "pod", "TPU_LOAD_LIBRARY": "0",
                             "ALBERT_TF_TPU_IMAGE": "tpu-vm-tf-2.18.0-pod-pjrt"}
    pretrain = remote["pretrain"]
    flags = dict(zip(pretrain[4::2], pretrain[5::2]))
    assert flags["--tpu"] == "pod" and flags["--recipe"] == "paper_v1" and "--eval-data" not in flags
    assert flags["--model-dir"] == "gs://b/albert/models/albert_config" and flags["--num-train-steps"] == "1000"
    note = run_script("launch_pretrain.sh", "--dry-run", "--name", "pod", "--zone", ZONE, "--type", f"v3-{size}",
                      "--root", "gs://b/a", "--config", "albert_base").stdout
    assert f"{size // 8} host(s)" in note and "detached on worker 0 with --tpu pod" in note


def test_launch_follows_the_image_and_refuses_a_mismatch():
    base = ["--name", "vm", "--zone", ZONE, "--root", "gs://b/albert", "--config", "albert_base"]
    _, _, remote = launch(*base, "--type", "v3-8", "--image", "tpu-vm-tf-2.16.0-se")
    assert remote["env"] == {"TPU_NAME": "local", "ALBERT_TF_TPU_IMAGE": "tpu-vm-tf-2.16.0-se"}  # StreamExecutor
    _, _, remote = launch(*base, "--type", "v3-8", "--image", "v2-alpha-tpuv5")  # a pip-installed TensorFlow
    assert remote["env"]["NEXT_PLUGGABLE_DEVICE_USE_C_API"] == "true"
    for size, image, message in ((32, "tpu-vm-tf-2.18.0-pjrt", "is a single-host image; v3-32 is a pod slice"),
                                 (8, "tpu-vm-tf-2.18.0-pod-pjrt", "is a pod image; v3-8 is a single host")):
        result = run_script("launch_pretrain.sh", *base, "--type", f"v3-{size}", "--image", image, "--dry-run",
                            check=False)
        assert result.returncode == 2 and message in result.stderr and not result.stdout


def test_launch_refuses_local_paths():
    args = dict(zip(DRY_RUNS["launch_pretrain.sh"][::2], DRY_RUNS["launch_pretrain.sh"][1::2]))
    for flag, value, message in (("--config", "configs/albert_base.json", "expected a preset name"),
                                 ("--root", "/data/albert", "expected a gs:// path")):
        words = [w for k, v in {**args, flag: value}.items() for w in (k, v)]
        result = run_script("launch_pretrain.sh", *words, "--dry-run", check=False)
        assert result.returncode == 2 and message in result.stderr


@pytest.mark.parametrize("script", KEEPER_SCRIPTS)
def test_keeper_dry_run_shows_a_poll_a_launch_a_recreation_and_the_end(script):
    cmds = commands(script, *DRY_RUNS[script], "--steps", "5000", "--reserved", "--image", "tpu-vm-tf-2.17.0-pod-pjrt",
                    "--project", "p1", "--", "--remat")
    *cmds, on_worker_0, launched = cmds  # what the launch script runs on worker 0; the command it starts
    heads = [" ".join(c[:5]) for c in cmds]
    assert heads == ["gcloud storage ls gs://b/albert/models/albert_base/ckpt-*.index --project=p1",
                     "gcloud compute tpus tpu-vm describe", "gcloud compute tpus tpu-vm ssh",   # a poll
                     "gcloud compute tpus tpu-vm scp", "gcloud compute tpus tpu-vm ssh",        # a launch
                     "gcloud compute tpus tpu-vm delete", "gcloud compute tpus tpu-vm create",  # a recreation
                     "gcloud compute tpus tpu-vm delete"]                                       # the end
    assert all(c[-2:] == [f"--zone={ZONE}", "--project=p1"] for c in cmds[1:])
    assert launched[1:4] == ["-m", "albert_tf", "pretrain"] and "--remat" in launched
    assert cmds[6][5:-2] == ["pod", "--accelerator-type=v3-32", "--version=tpu-vm-tf-2.17.0-pod-pjrt", "--reserved"]
    assert cmds[4][7] == "--command=bash albert_tf_launch.sh"  # the launch is a file scp copied: no argv carries it
    comments = run_script(script, "--dry-run", *DRY_RUNS[script], "--steps", "5000", "--reserved", "--image",
                          "tpu-vm-tf-2.17.0-pod-pjrt", "--project", "p1", "--", "--remat").stdout
    assert "#   TPU_LOAD_LIBRARY=0\n" in comments and "#   ALBERT_TF_RUN_ID=RUN_ID\n" in comments
    words = on_worker_0[on_worker_0.index("start"):]
    assert words[words.index("--num-train-steps") + 1] == "5000" and words[words.index("--tpu") + 1] == "pod"
    assert "--remat" in words and "--env-file" in words and not any(w.startswith("TPU_") for w in words)
    assert words[-len(launched):] == launched


@pytest.mark.parametrize("args, message", [
    (["--poll", "soon"], "argument --poll: invalid float value: 'soon'"),
    (["--spot", "--reserved"], "--spot, --preemptible and --reserved: one at most"),
    (["--model-dir", "/local/dir"], "--model-dir /local/dir: expected a gs:// path"),
    (["--", "--model-dir", "gs://b/other"], "--model-dir after --: the keeper sets it itself (use keep-alive's "
                                             "--model-dir instead)"),
    (["--image", "tpu-vm-tf-2.18.0-pjrt"], "--image tpu-vm-tf-2.18.0-pjrt is a single-host image"),
])
def test_keeper_refuses_bad_flags(args, message):
    result = run_script("keep_alive.sh", "--dry-run", *DRY_RUNS["keep_alive.sh"], *args, check=False)
    assert result.returncode == 2 and message in result.stderr and not result.stdout
    assert result.stderr.strip().splitlines()[-1].startswith("albert-tf keep-alive: error: ")


# ---------------------------------------------------------------------------------------------- on_worker.sh
def worker(*args, check=True):
    result = subprocess.run(["bash", os.path.join(TPU, "on_worker.sh"), *args], capture_output=True, text=True,
                            timeout=30, check=False)
    assert not check or result.returncode == 0, result.stderr
    return result


def test_on_worker_runs_detached_survives_the_session_and_stops_on_sigterm(tmp_path):
    """`start` from a shell standing in for the ssh session; that session's process group gets SIGHUP (a dropped
    ssh) and dies; the run lives on, a second start is a no-op, `stop` is a SIGTERM the run handles, and the exit
    code is recorded."""
    run_dir = str(tmp_path / "run")
    assert worker("status", run_dir, check=False).stdout.strip() == "never started"
    program = ('echo "A=$A"; trap "echo saved; exit 0" TERM; '
               'while true; do sleep 0.1; done')
    session = subprocess.Popen(["bash", "-c", f'bash {os.path.join(TPU, "on_worker.sh")} start {run_dir} - A=1 -- '
                                              f'bash -c \'{program}\' && echo session-idle && exec sleep 60'],
                               start_new_session=True, stdout=subprocess.PIPE, text=True,
                               preexec_fn=default_signals)  # a dropped ssh session's SIGHUP ends it
    wait_until(lambda: worker("status", run_dir, check=False).returncode == 0, 20, 0.1)
    # the session drops once `start` has returned (under load the run can be up before `start` has exited)
    # (`exec sleep`: a SIGHUP that reached a forked child of bash before its exec could be lost, the session then
    # outliving it by a minute)
    for line in session.stdout:
        if line.strip() == "session-idle":
            break
    os.killpg(session.pid, signal.SIGHUP)
    session.wait(timeout=10)
    time.sleep(0.5)
    status = worker("status", run_dir)
    assert status.stdout.startswith("running ")
    assert "already running" in worker("start", run_dir, "-", "--", "true").stdout
    assert worker("stop", run_dir).stdout.strip() == "stopped after SIGTERM"
    assert worker("status", run_dir, check=False).stdout.splitlines() == ["stopped 0", "saved"]
    log = open(os.path.join(run_dir, "pretrain.log"), encoding="utf-8").read()
    assert "A=1\nsaved\n" in log and log.rstrip().endswith("exit 0")
    # a failing command: its exit code is kept
    worker("start", run_dir, "-", "--", "bash", "-c", "exit 7")
    wait_until(lambda: worker("status", run_dir, check=False).stdout.startswith("stopped 7\n"), 20, 0.1)
    assert worker("stop", run_dir).stdout.strip() == "not running"


def test_on_worker_stop_kills_a_run_that_ignores_sigterm(tmp_path):
    """A client hung on a lost host may never act on SIGTERM: `stop RUN_DIR SECONDS` sends SIGKILL SECONDS later."""
    run_dir = str(tmp_path / "run")
    worker("start", run_dir, "-", "--", "bash", "-c", 'trap "echo ignored" TERM; while true; do sleep 0.1; done')
    wait_until(lambda: worker("status", run_dir, check=False).returncode == 0, 20, 0.1)
    began = time.time()
    assert worker("stop", run_dir, "0.5").stdout.strip() == "killed (SIGKILL) after 0.5s"
    assert 0.5 <= time.time() - began < 10
    assert worker("status", run_dir, check=False).stdout.splitlines() == ["stopped 137", "ignored"]
    assert worker("stop", run_dir, "soon", check=False).returncode == 2


def test_tensorboard_export_delete():
    assert commands("tensorboard.sh", *DRY_RUNS["tensorboard.sh"], "--port", "7000") == [
        ["tensorboard", "--logdir", "gs://b/albert/models/albert_base", "--port", "7000"]]
    assert commands("export.sh", *DRY_RUNS["export.sh"]) == [
        ["albert-tf", "export", "--init", "gs://b/albert/models/albert_base", "--output",
         "gs://b/albert/export/albert_base"]]
    (ssh,) = commands("export.sh", "--model-dir", "gs://b/m", "--name", "pod", "--zone", ZONE)
    assert "--worker=0" in ssh and inner(ssh) == ["python3", "-m", "albert_tf", "export", "--init", "gs://b/m",
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

"""What the keeper runs on worker 0, as shell command lines: the run's status, its detached start (a launch script
copied by scp: the install of albert_tf first when needed), the check that the install's tools are there, a stop.
The run itself is supervised there by on_worker.sh (this directory), which each launch script writes there. No
TensorFlow here.

Only worker 0 runs Python of ours: on a pod slice the other hosts run the TPU runtime (docs/tpu_runtime.md).
"""
import dataclasses
import os
import re
import shlex

from albert_tf.runtime import devices

ON_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "on_worker.sh")
RUN_DIR = "albert_tf_run"  # on worker 0, relative to the ssh user's home: the script, the log, the lock
WORKER_SCRIPT = f"{RUN_DIR}/on_worker.sh"
WORKER_SCRIPT_COPY = "albert_tf_on_worker.sh"  # where `tpu-vm scp` puts it first (tpu/launch_pretrain.sh)
LAUNCH_SCRIPT = "albert_tf_launch.sh"  # the keeper's launch, copied to worker 0's home by scp, run by ssh
LAUNCH_ENV = f"{RUN_DIR}/launch.env"  # the run's environment on worker 0 (mode 600), read by on_worker.sh
WHEEL_DIR = "albert_tf_wheel"  # a wheel is fetched here; WHEEL_DIR/installed.sha256: the one installed
PLACEHOLDER_SOURCE = "git+https://github.com/OWNER/albert_tf.git"


@dataclasses.dataclass(frozen=True)
class Install:
    """How worker 0 gets albert_tf: `source` (a git URL, an https:// or gs:// wheel) or a whole `command`."""
    source: str | None = None
    command: str | None = None
    python: str = "python3"
    tensorflow_release: str | None = None  # tensorflow-text of this release (the image's), without dependencies

    def check(self):
        """ValueError (one line) when nothing installable is given."""
        if self.command:
            return
        if not self.source or self.source == PLACEHOLDER_SOURCE:
            raise ValueError("worker 0 needs albert_tf: set ALBERT_TF_SOURCE (a git URL, an https:// or gs:// wheel) "
                             "or INSTALL_CMD")
        if not (self.source.startswith("git+https://") or self.source.endswith(".whl")):
            raise ValueError(f"ALBERT_TF_SOURCE {self.source}: expected a git URL (git+https://...), an https:// or "
                             "a gs:// wheel (.whl)")

    @property
    def wheel(self):
        return bool(self.source) and not self.command and self.source.endswith(".whl")

    def tools(self):
        """The command that checks, before the first launch, that worker 0 can fetch the wheel (None: nothing to
        check): it prints the first tool found, or nothing."""
        if self.wheel and self.source.startswith("gs://"):
            return "command -v gcloud || command -v gsutil || true"
        if self.wheel:
            return "command -v curl || true"
        return None

    def missing_tools_line(self):
        if self.source.startswith("gs://"):
            return (f"worker 0 has neither gcloud nor gsutil, which copy the wheel {self.source} there: use an image "
                    "with the Google Cloud CLI, or an https:// wheel or a git URL in ALBERT_TF_SOURCE")
        return f"worker 0 has no curl to fetch the wheel {self.source}: use a gs:// wheel or a git URL"

    def script(self):
        """The shell line that makes albert_tf current on worker 0. A wheel is fetched each time and reinstalled when
        its sha256 differs from the one installed (a rebuilt wheel of the same version included: pip alone would
        skip it); otherwise albert_tf is installed when it does not import (checked loading no TPU runtime)."""
        python = shlex.quote(self.python)
        imports = f"TPU_LOAD_LIBRARY=0 {python} -c {shlex.quote('import albert_tf')} 2>/dev/null"
        if self.command:
            return f"{{ {imports} || {{ echo 'albert_tf is missing on worker 0: installing it' && {self.command}; }}; }}"
        pip = f"{python} -m pip install"
        text = (f" && {pip} --no-deps {shlex.quote(f'tensorflow-text=={self.tensorflow_release}.*')}"
                if self.tensorflow_release else "")
        if not self.wheel:
            requirement = shlex.quote(f"albert_tf[cloud-tpu] @ {self.source}")
            return f"{{ {imports} || {{ echo 'installing albert_tf on worker 0' && {pip} {requirement}{text}; }}; }}"
        wheel = f"{WHEEL_DIR}/{os.path.basename(self.source)}"
        source = shlex.quote(self.source)
        if self.source.startswith("gs://"):
            fetch = (f"{{ if command -v gcloud >/dev/null; then gcloud storage cp {source} {WHEEL_DIR}/; "
                     f"else gsutil cp {source} {WHEEL_DIR}/; fi; }}")
        else:
            fetch = f"curl -fsSL -o {shlex.quote(wheel)} {source}"
        new = f"$(sha256sum {shlex.quote(wheel)} | cut -d' ' -f1)"
        installed = f"$(cat {WHEEL_DIR}/installed.sha256 2>/dev/null)"
        install = (f"echo 'installing {os.path.basename(self.source)} on worker 0' && "
                   f"{pip} {shlex.quote(f'./{wheel}[cloud-tpu]')} && "
                   f"{pip} --force-reinstall --no-deps {shlex.quote(f'./{wheel}')}{text} && "
                   f"sha256sum {shlex.quote(wheel)} | cut -d' ' -f1 > {WHEEL_DIR}/installed.sha256")
        return (f"mkdir -p {WHEEL_DIR} && {fetch} && {{ if [ \"{new}\" = \"{installed}\" ] && {imports}; then :; "
                f"else {install}; fi; }}")


def status_command():
    """Prints "running PID", "stopped CODE" (and the log's last line) or "never started"."""
    status = shlex.join(["bash", WORKER_SCRIPT, "status", RUN_DIR])
    return f"if [ -e {WORKER_SCRIPT} ]; then {status}; else echo 'never started'; fi"


def stop_command(seconds=120):
    """Stops the run (on_worker.sh stop: SIGTERM, then SIGKILL after `seconds`)."""
    return shlex.join(["bash", WORKER_SCRIPT, "stop", RUN_DIR, f"{seconds:g}"])


def start_command(install, log_url, words):
    """Installs what is needed, then starts `words` detached under on_worker.sh with the environment in LAUNCH_ENV
    (the last lines of launch_script)."""
    start = shlex.join(["bash", WORKER_SCRIPT, "start", RUN_DIR, log_url, "--env-file", LAUNCH_ENV, "--", *words])
    return f"{install.script()} && {start}"


def launch_script(install, log_url, env, words):
    """The shell script that starts a run on worker 0: copied there by scp (LAUNCH_SCRIPT) and run by ssh (`bash
    LAUNCH_SCRIPT`), so that nothing of the launch is on a command line (gcloud's or ssh's argv, `ps`, gcloud's
    logs): it deletes itself, writes on_worker.sh and the run's environment `env` ({NAME: VALUE}) to LAUNCH_ENV
    (mode 600: on_worker.sh exports it, no argv carries it), installs what is needed and starts `words`."""
    for name, value in env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or "\n" in str(value):
            raise ValueError(f"the launch's environment: {name}={value!r} is not one NAME=VALUE line")
    with open(ON_WORKER, encoding="utf-8") as f:
        on_worker = f.read()
    lines = "".join(f"{k}={v}\n" for k, v in env.items())
    return (f"#!/usr/bin/env bash\n# albert-tf keep-alive: one launch on worker 0 (albert_tf/cloud/worker.py, "
            f"launch_script)\nset -euo pipefail\numask 077\nrm -f -- \"$0\"\nmkdir -p {RUN_DIR}\n"
            f"cat > {WORKER_SCRIPT} <<'ALBERT_TF_ON_WORKER'\n{on_worker}ALBERT_TF_ON_WORKER\n"
            f"cat > {LAUNCH_ENV} <<'ALBERT_TF_LAUNCH_ENV'\n{lines}ALBERT_TF_LAUNCH_ENV\n"
            f"{start_command(install, log_url, words)}\n")


def launch_command():
    """What ssh runs for a launch: the script scp put there (launch_script)."""
    return f"bash {LAUNCH_SCRIPT}"


def runtime_env(name, hosts, image, run_id, pjrt_library="/lib/libtpu.so"):
    """(the value of --tpu, the variables for pretrain) as Google's TF-on-TPU tests set them (docs/tpu_runtime.md),
    the same on every generation: a pod slice's client on worker 0 names the slice and loads no runtime (`hosts`,
    from the device table, > 1); a single host loads it, through PJRT unless the image is a StreamExecutor one
    (devices.parse_image: tpu-vm-tf-X without -pjrt, or -se; an image without TensorFlow is taken as PJRT)."""
    if hosts > 1:
        tpu, env = name, {"TPU_NAME": name, "TPU_LOAD_LIBRARY": "0"}
    else:
        tpu, env = "local", {"TPU_NAME": "local"}
        parsed = devices.parse_image(image)
        if parsed is None or parsed.api == "pjrt":
            env.update(NEXT_PLUGGABLE_DEVICE_USE_C_API="true", TF_PLUGGABLE_DEVICE_LIBRARY_PATH=pjrt_library)
    env["ALBERT_TF_TPU_IMAGE"] = image
    env["ALBERT_TF_RUN_ID"] = run_id
    return tpu, env


STATUS_LINE = re.compile(r"^(running(?: \d+)?|never started|stopped (\d+|unknown))$")


def parse_status(stdout):
    """(status, last log line) from the status command's output: status is "running", "never started", an exit code
    (int), "unknown" (the host went down under the run), or None when no line is one of these (no answer). The
    whole output is read: the first status line counts, and the line after it is the log's last; lines before it
    (a login banner, a message of the day) are not the status."""
    lines = [line.strip() for line in stdout.splitlines()]
    for i, line in enumerate(lines):
        match = STATUS_LINE.match(line)
        if match:
            last = lines[i + 1] if i + 1 < len(lines) else ""
            if match.group(2):
                return (int(match.group(2)) if match.group(2).isdigit() else "unknown"), last
            return ("never started" if line == "never started" else "running"), last
    return None, ""


__all__ = ["ON_WORKER", "PLACEHOLDER_SOURCE", "RUN_DIR", "WORKER_SCRIPT", "WORKER_SCRIPT_COPY", "LAUNCH_SCRIPT",
           "LAUNCH_ENV", "Install", "status_command", "start_command", "launch_script", "launch_command",
           "stop_command", "runtime_env", "parse_status"]

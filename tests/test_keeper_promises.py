"""The keeper's promises (docs/tpu.md, "The keeper's promises": P1-P5), one scenario per way a week-long run lost
money or days (issue 47's K1-K12), each through the public call `keep_alive(KeepAliveConfig(...))` against the
in-process fake gcloud (tests/fake_gcloud.py) with a fake clock; K2 in a second process, which gets real signals.
Random orders of the same events: tests/test_keeper_simulation.py."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from albert_tf.jobs import keep_alive as job
from albert_tf.runtime import exit_codes
from fake_gcloud import FakeClock, FakeGcloud, PREFLIGHT, short
from helpers import REPO

pytestmark = pytest.mark.usefixtures("keeper_worker_env")
ZONE = "europe-west4-a"
MODEL_DIR = "gs://b/albert/models/albert_base"
POD_IMAGE = "tpu-vm-tf-2.18.0-pod-pjrt"


def config(tmp_path, **values):
    values = {"name": "pod", "zone": ZONE, "root": "gs://b/albert", "config": "albert_base", "num_train_steps": 6,
              "pretrain_flags": ["--num-warmup-steps", "1"], "project": "p1", "state_file": str(tmp_path / "keeper.state"), **values}
    return job.KeepAliveConfig(**values)


def keep(fake, clock, tmp_path, **values):
    """(result, notes, the calls cut short) of one keeper run."""
    notes = []
    result = job.keep_alive(config(tmp_path, **values), runner=fake, clock=clock, say=notes.append)
    return result, notes, [short(c) for c in fake.calls]


def owned(tmp_path, cloud, state="READY", capacity="on-demand", wedged=False):
    """A slice the keeper created earlier (its state file, the node with its label) is there; `wedged`: every run
    on it loses its TPU at once."""
    cloud.make_node(state, capacity=capacity, labels={"albert-tf-run": "pod-run"})
    cloud.node["wedged"] = wedged
    (tmp_path / "keeper.state").write_text(json.dumps({
        "project": "p1", "zone": ZONE, "name": "pod", "accelerator_type": "v3-32", "runtime_version": POD_IMAGE,
        "capacity": capacity, "owned": True, "requested_at": 1.0, "node_id": cloud.node["id"], "run_id": "pod.run",
        "model_dir": MODEL_DIR}))


def deletes(calls):
    return [c for c in calls if c in ("delete", "queued delete")]


def test_k1_an_ssh_outage_longer_than_settle_timeout_never_deletes_a_training_slice(cloud, clock, tmp_path):
    """P1. Port 22 blocked for 40 min (settle 10 min) while every poll lists a newer checkpoint: the keeper waits,
    then the run finishes; the only delete is the end's. Then an outage with no progress: it stops deleting
    nothing, and its last line names what bills."""
    owned(tmp_path, cloud)
    cloud.run = {"polls": 100, "end": 0}
    cloud.statuses = ["refused"] * 8
    cloud.steps = 40

    def advance(args):
        if args[0] == "storage" and "ckpt-" in args[2]:
            cloud.checkpoints.append(max(cloud.checkpoints, default=0) + 2)
            if not cloud.statuses:  # ssh answers again: the run has finished
                cloud.checkpoints.append(40)
                cloud.run = {"polls": 0, "end": 0}
    cloud.hook = advance
    result, notes, calls = keep(cloud, clock, tmp_path, num_train_steps=40, settle_timeout=600.0)
    assert result.exit_code == exit_codes.DONE, notes
    assert calls[-2:] == ["delete", "describe"] and deletes(calls) == ["delete"]

    stuck = FakeGcloud(clock)
    owned(tmp_path, stuck)
    stuck.run, stuck.statuses = {"polls": 100, "end": 0}, ["refused"] * 8
    result, notes, calls = keep(stuck, clock, tmp_path, num_train_steps=40, settle_timeout=600.0)
    assert result.exit_code == exit_codes.GAVE_UP and not deletes(calls) and stuck.node is not None
    assert result.line.endswith(f"delete it with: gcloud compute tpus tpu-vm delete pod --zone={ZONE} --project=p1 "
                                "--quiet")


SIGNALLED = """
import json, os, signal, sys
sys.path.insert(0, {tests!r})
os.environ["INSTALL_CMD"] = "fake-install"
from fake_gcloud import FakeClock, FakeGcloud
from albert_tf.jobs import keep_alive as job
clock = FakeClock()
cloud = FakeGcloud(clock)
def hook(args):
    if any(a.endswith("albert_tf_launch.sh") for a in args):
        os.kill(os.getpid(), signal.{signal})
cloud.hook = hook
config = job.KeepAliveConfig(name="pod", zone="europe-west4-a", root="gs://b/albert", config="albert_base",
                             num_train_steps=6, project="p1", type="v3-32", state_file={state!r},
                             pretrain_flags=["--num-warmup-steps", "1"])
result = job.keep_alive(config, runner=cloud, clock=clock, say=lambda line: None)
print(json.dumps({{"code": result.exit_code, "line": result.line, "node": cloud.node}}))
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_k2_sigterm_and_sighup_delete_what_the_keeper_made(tmp_path, name):
    """P2. A closed terminal (SIGHUP) or `kill` (SIGTERM) while the run starts: the keeper deletes the slice it
    made, confirms it gone, exits 143 and says so in its last line (a real signal, in a second process)."""
    program = SIGNALLED.format(tests=os.path.join(REPO, "tests"), signal=name, state=str(tmp_path / "state"))
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", REPO)),
                          preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM,
                                                                                       signal.SIGHUP)])
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["code"] == exit_codes.TERMINATED and out["node"] is None
    assert out["line"] == "TPU pod deleted (describe: not found): nothing is left billing"


def test_k3_bad_input_touches_nothing(cloud, clock, tmp_path):
    """P2. A restart with a wrong --type, or another project's state file, is one line and exit 2: the live slice
    the state file records as the keeper's is neither deleted nor described."""
    owned(tmp_path, cloud)
    result, notes, calls = keep(cloud, clock, tmp_path, type="v3-64")
    assert result.exit_code == exit_codes.BAD_INPUT and cloud.node is not None
    assert calls == PREFLIGHT and "records pod as v3-32" in notes[-2]
    other = FakeGcloud(clock, project="p2", configured=["p2"])
    result, _, calls = keep(other, clock, tmp_path, project="p2")
    assert result.exit_code == exit_codes.BAD_INPUT and calls == PREFLIGHT and cloud.node is not None


def test_k4_preemptions_do_not_count_and_a_wedged_slice_is_recreated(cloud, clock, tmp_path):
    """P3. Twelve preemptions before the first checkpoint, with --max-restarts 10: the run still finishes. Then a
    READY slice whose every run exits 76 with no new checkpoint: after three such runs the owned slice is
    recreated, and the run finishes on the new one."""
    cloud.runs = [{"steps": 0, "end": "preempt"}] * 12
    result, notes, calls = keep(cloud, clock, tmp_path, type="v3-32", max_restarts=10)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert calls.count(f"create --accelerator-type=v3-32 --version={POD_IMAGE}") == 13

    wedged = FakeGcloud(FakeClock())
    owned(tmp_path, wedged, wedged=True)
    result, notes, calls = keep(wedged, wedged.clock, tmp_path, max_restarts=10)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert len(wedged.launches) == 4  # three lost runs on the wedged slice, then one on the new slice
    assert calls.count("delete") == 2 and calls.count(f"create --accelerator-type=v3-32 --version={POD_IMAGE}") == 1


def test_k5_a_failed_queue_reads_its_error_backs_off_and_stops_on_a_permanent_one(cloud, clock, tmp_path):
    """P3. A queued resource FAILED with a transient error is requeued after --wait, then twice that; one FAILED
    with a permanent error (a bad request) stops the keeper at once, with the error in its line."""
    cloud.queued_failures, cloud.queued_error = 2, "Internal error: the zone could not provision the slice"
    result, notes, calls = keep(cloud, clock, tmp_path, type="v3-32", spot=True, wait=60.0)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    queued = [i for i, c in enumerate(calls) if c.startswith("queue ")]
    assert len(queued) == 3
    assert [n for n in notes if "queueing it again in" in n] == [
        "the queued resource of pod FAILED (Internal error: the zone could not provision the slice): queueing it "
        "again in 60s",
        "the queued resource of pod FAILED (Internal error: the zone could not provision the slice): queueing it "
        "again in 120s"]

    bad = FakeGcloud(FakeClock())
    bad.queued_failures = 5
    bad.queued_error = "INVALID_ARGUMENT: the runtime version is not supported for v3-32"
    result, notes, calls = keep(bad, bad.clock, tmp_path, type="v3-32", spot=True,
                                state_file=str(tmp_path / "second.state"))
    assert result.exit_code == exit_codes.GAVE_UP
    assert sum(c.startswith("queue ") for c in calls) == 1
    assert notes[-2] == ("the queued resource of pod FAILED with a permanent error: INVALID_ARGUMENT: the runtime "
                         "version is not supported for v3-32")


def test_k6_rate_limits_are_transient_and_a_failed_describe_never_deletes(cloud, clock, tmp_path):
    """P1, P3. Ten polls answered "Quota exceeded for quota metric 'Read requests' ... per minute": waited on, the
    run finishes. A permanent describe failure stops the keeper without deleting the slice."""
    owned(tmp_path, cloud)
    cloud.describes = ["rate"] * 30
    result, notes, calls = keep(cloud, clock, tmp_path)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert deletes(calls) == ["delete"] and calls[-2:] == ["delete", "describe"]

    denied = FakeGcloud(clock)
    owned(tmp_path, denied)
    denied.describes = ["permanent"]
    result, notes, calls = keep(denied, clock, tmp_path)
    assert result.exit_code == exit_codes.GAVE_UP and not deletes(calls) and denied.node is not None
    assert "delete it with: gcloud compute tpus tpu-vm delete pod" in result.line


def test_k7_done_waits_for_worker_0_to_stop_0(cloud, clock, tmp_path):
    """P4. The last checkpoint is listed while pretrain still runs its final eval and copies: the slice is deleted
    only after worker 0 says `stopped 0`."""
    owned(tmp_path, cloud)
    cloud.checkpoints = [2, 4, 6]
    cloud.run = {"polls": 3, "end": 0}
    seen = []
    cloud.hook = lambda args: seen.append(dict(cloud.run)) if args[3:4] == ["delete"] else None
    result, notes, calls = keep(cloud, clock, tmp_path)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert seen == [{"polls": 0, "end": 0}]  # deleted after the run had stopped
    assert calls.count("ssh status") == 4


@pytest.mark.parametrize("run, said", [
    ({"polls": 1, "end": 76, "message": "TPU lost in the final evaluation"},
     "pretrain on pod stopped 76 after its last checkpoint"),
    ({"polls": 0, "end": "unknown"}, "pretrain on pod stopped unknown after its last checkpoint"),
    ({"polls": 10 ** 6, "end": 0}, "pretrain on pod did not say it stopped within --settle-timeout of its last "
                                   "checkpoint"),
    ({"polls": 0, "end": 0, "state": "PREEMPTED"}, "TPU pod was PREEMPTED before worker 0 said how pretrain ended"),
])
def test_p4_a_run_that_stops_badly_after_its_last_checkpoint_is_done_with_what_may_be_missing(
        cloud, clock, tmp_path, run, said):
    """P4. The last checkpoint is listed, then worker 0's run stops 76 (its final eval lost the TPU), goes down with
    its host, never says it stopped within --settle-timeout, or the slice is preempted first. The keeper ends done
    and deletes the slice (the checkpoint is complete; a re-run of pretrain evaluates a missing final eval on any
    machine), and its last line says that what pretrain writes after the checkpoint may be missing, how to check,
    and how to redo the evaluation."""
    run = dict(run)
    owned(tmp_path, cloud, state=run.pop("state", "READY"))
    cloud.checkpoints = [2, 4, 6]
    cloud.run = run
    result, notes, calls = keep(cloud, clock, tmp_path, settle_timeout=600.0)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert not cloud.launches and deletes(calls) == ["delete"] and cloud.node is None
    assert result.line == (
        f"done, but {said}: the checkpoint of step 6 is complete; the final eval "
        f"row of {MODEL_DIR}/metrics.jsonl, the steps/ copy and the last log copy in gs://b/albert/logs/albert_base/ "
        f"may be missing (check with: gcloud storage cat {MODEL_DIR}/metrics.jsonl | tail -n 2; the same pretrain "
        "command, run again anywhere that reads the bucket, evaluates a missing final eval row); TPU pod deleted "
        "(describe: not found): nothing is left billing")
    if run.get("message"):
        assert any(n.endswith(": TPU lost in the final evaluation (log: albert_tf_run/pretrain.log on worker 0, "
                              "gs://b/albert/logs/albert_base/)") for n in notes), notes[-4:]


def test_p4_a_slice_gone_while_done_waits_for_worker_0_is_named_in_the_last_line(cloud, clock, tmp_path):
    """P4. The last checkpoint is listed while the run still says "running"; before the next poll the slice is
    gone: the keeper ends done, and its last line says worker 0 never said how the run ended."""
    owned(tmp_path, cloud)
    cloud.checkpoints = [2, 4, 6]
    cloud.run = {"polls": 5, "end": 0}

    def vanish(args):
        if short(args) == "ls" and cloud.run["polls"] < 5:  # the poll after the first "running"
            cloud.node = None
    cloud.hook = vanish
    result, notes, calls = keep(cloud, clock, tmp_path)
    assert result.exit_code == exit_codes.DONE and calls.count("ssh status") == 1, notes[-3:]
    assert result.line.startswith("done, but TPU pod was not found before worker 0 said how pretrain ended: the "
                                  "checkpoint of step 6 is complete;")
    assert result.line.endswith("; nothing is left billing (TPU pod does not exist)")


def test_k8_one_keeper_per_state_file_and_never_a_strangers_node(cloud, clock, tmp_path):
    """P5, P1. A second keeper on the same state file, started while the first runs, exits 77 touching nothing.
    A stranger's node that appears as the keeper creates one (ALREADY_EXISTS) is not adopted: not deleted."""
    second = []

    def start_another(args):
        if any(a.endswith("albert_tf_launch.sh") for a in args) and not second:
            other = FakeGcloud(clock)
            second.append(job.keep_alive(config(tmp_path, type="v3-32"), runner=other, clock=clock,
                                         say=lambda line: None))
            second.append([short(c) for c in other.calls])
    cloud.hook = start_another
    result, _, _ = keep(cloud, clock, tmp_path, type="v3-32")
    assert result.exit_code == exit_codes.DONE
    assert second[0].exit_code == exit_codes.LOCK_HELD and second[1] == PREFLIGHT

    stranger = FakeGcloud(clock)

    def appears(args):
        if args[3:4] == ["create"] and stranger.node is None:
            stranger.make_node("READY", labels={"owner": "someone-else"})
    stranger.hook = appears
    result, notes, calls = keep(stranger, clock, tmp_path, type="v3-32", state_file=str(tmp_path / "second.state"))
    assert stranger.node is not None and not deletes(calls), notes
    assert result.line.startswith("TPU pod was not created by this keeper and is left as it is")


def test_k9_the_final_delete_is_retried_and_confirmed_and_a_second_ctrl_c_does_not_stop_it(cloud, clock, tmp_path):
    """P2. Two 503s on the final delete: tried again with backoff until describe says not found. Ctrl-C pressed
    again during that delete is noted, and the delete goes on."""
    owned(tmp_path, cloud)
    cloud.deletes = ["5xx", "5xx"]

    def ctrl_c_during_delete(args):
        if args[3:4] == ["delete"]:
            handler = signal.getsignal(signal.SIGINT)
            handler(signal.SIGINT, None)
    cloud.hook = ctrl_c_during_delete
    try:
        result, notes, calls = keep(cloud, clock, tmp_path)
    except KeyboardInterrupt:
        pytest.fail("a Ctrl-C during the final delete stopped the clean-up")
    assert result.exit_code == exit_codes.DONE and cloud.node is None, notes[-4:]
    assert calls[-4:] == ["delete", "delete", "delete", "describe"]
    assert result.line == "done: TPU pod deleted (describe: not found): nothing is left billing"
    assert clock.sleeps[-2:] == [10.0, 20.0]


def test_k11_a_login_banner_does_not_hide_the_status(cloud, clock, tmp_path):
    """P3. Every ssh answer starts with a login banner: the status line is found below it."""
    owned(tmp_path, cloud)
    cloud.statuses = ["banner"] * 10
    result, notes, calls = keep(cloud, clock, tmp_path, settle_timeout=600.0)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert len(cloud.launches) == 1 and not any("not answering" in n for n in notes)


@pytest.mark.parametrize("values, line", [
    ({"pretrain_flags": ["--remta"]},
     "pretrain would refuse the launch (after --: --remta): unrecognized arguments: --remta; did you mean --remat?"),
    ({"pretrain_flags": ["--learning-rate", "fast"]},
     "pretrain would refuse the launch (after --: --learning-rate fast): argument --learning-rate: invalid float "
     "value: 'fast'"),
    ({"config": "albert_bsae"},
     "pretrain would refuse the launch (after --: --num-warmup-steps 1): unknown preset 'albert_bsae'"),
])
def test_k10_a_typo_in_the_launch_is_caught_before_anything_is_made(cloud, clock, tmp_path, values, line):
    """P2 (bad input touches nothing). A typo in a pretrain flag, a value pretrain refuses or an unknown preset is
    found here by pretrain's own parser and config, in one line, before any gcloud call: not on worker 0 after
    the Spot queue's wait."""
    with pytest.raises(ValueError) as raised:
        keep(cloud, clock, tmp_path, type="v3-32", spot=True, **values)
    assert str(raised.value).startswith(line) and "\n" not in str(raised.value)
    assert not cloud.calls and cloud.queued is None and cloud.node is None


@pytest.mark.parametrize("missing, calls, line", [
    ("train_records", ["ls train"], "gs://b/albert/records/train-*: no such object; the run reads the training "
                                    "records (albert-tf create-data) there"),
    ("spm", ["ls train", "ls spm"], "gs://b/albert/spm.model: no such object; the run reads the SentencePiece model "
                                    "(albert-tf vocab) there"),
])
def test_k10_a_root_without_records_or_spm_model_is_one_line_before_anything_is_made(cloud, clock, tmp_path, missing,
                                                                                   calls, line):
    setattr(cloud, missing, False)
    with pytest.raises(ValueError, match=line.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        keep(cloud, clock, tmp_path, type="v3-32", spot=True)
    assert [short(c) for c in cloud.calls] == calls and cloud.queued is None


def test_k10_the_command_line_says_did_you_mean_and_exits_2(cli, tmp_path):
    code, out, err = cli("keep-alive", "--name", "pod", "--zone", ZONE, "--root", "gs://b/albert", "--config",
                         "albert_base", "--type", "v3-32", "--project", "p1", "--state-file", tmp_path / "s", "--",
                         "--remta")
    assert code == exit_codes.BAD_INPUT and not out
    assert err.strip().splitlines() == ["albert-tf keep-alive: error: pretrain would refuse the launch (after --: "
                                        "--remta): unrecognized arguments: --remta; did you mean --remat?"]


def test_k12_a_run_that_says_running_with_no_checkpoint_for_settle_timeout_is_stopped_and_relaunched(
        cloud, clock, tmp_path):
    """P3. pretrain with --step-timeout 0 hangs after its checkpoint of step 2 and says "running" forever: once no
    new checkpoint came for --settle-timeout (600 s here) it is stopped on worker 0 and relaunched; the relaunch
    finishes. A run whose model dir advances is never stopped (test_keeper.py: compiling for 20 minutes)."""
    owned(tmp_path, cloud)
    cloud.checkpoints = [2]
    cloud.run = {"polls": 10 ** 6, "end": 0}
    result, notes, calls = keep(cloud, clock, tmp_path, settle_timeout=600.0, poll=300.0)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert calls.count("ssh stop") == 1
    stop = calls.index("ssh stop")
    assert calls[stop - 3:stop + 3] == ["ls", "describe", "ssh status", "ssh stop", "scp", "ssh start"]
    assert sum(c == "ssh status" for c in calls[:stop]) == 4  # at 0 s, 300 s, 600 s: waited; at 900 s: stopped
    assert any(n.startswith("pretrain on pod says running but wrote no checkpoint for 900s (more than "
                            "--settle-timeout 600s; at step 2)") for n in notes)


ON_WORKER = os.path.join(REPO, "albert_tf", "cloud", "on_worker.sh")


def on_worker_run(tmp_path, command, **env):
    """Starts `command` under on_worker.sh with `env`; (the status line once it is not "running", seconds to it, at
    most 45: the hangs below last 60 s or more, their bounds 1 s, and a loaded machine's bash takes its time)."""
    run_dir = str(tmp_path / "run")
    environ = dict(os.environ, **env)
    subprocess.run(["bash", ON_WORKER, "start", run_dir, "gs://b/logs", "--", "bash", "-c", command], env=environ,
                   check=True, capture_output=True, timeout=30)
    started = time.time()
    while time.time() - started < 45:
        status = subprocess.run(["bash", ON_WORKER, "status", run_dir], capture_output=True, text=True, timeout=30,
                                check=False).stdout.splitlines()[0]
        if status.startswith("stopped"):  # "never started" until the supervisor has written its pid
            return status, time.time() - started
        time.sleep(0.2)
    os.killpg(int((tmp_path / "run" / "pid").read_text()), signal.SIGKILL)  # this test's supervisor (setsid)
    return status, time.time() - started


def test_k12_a_wedged_log_copy_on_worker_0_is_bounded(tmp_path):
    """A `gcloud storage cp` of the log that never ends (a wedged bucket connection) is killed after
    $LOG_COPY_TIMEOUT: the run reads "stopped 0", not "running" forever."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "gcloud").write_text("#!/bin/sh\nexec sleep 600\n")
    (tools / "gcloud").chmod(0o755)
    status, seconds = on_worker_run(tmp_path, "echo trained", PATH=f"{tools}:{os.environ['PATH']}",
                                    LOG_COPY_TIMEOUT="1")
    assert status == "stopped 0" and seconds < 40


def test_k12_a_teardown_that_hangs_after_the_exit_code_is_bounded(tmp_path):
    """pretrain wrote its exit code (3) to $ALBERT_TF_EXIT_FILE, then hangs in Python's teardown, deaf to SIGTERM:
    killed $TEARDOWN_SECONDS later, and the status is the code it wrote."""
    status, seconds = on_worker_run(tmp_path, 'echo 3 > "$ALBERT_TF_EXIT_FILE"; trap "" TERM; sleep 60',
                                    TEARDOWN_SECONDS="1")
    assert status == "stopped 3" and seconds < 40
    assert "teardown did not end within 1s of its exit code: killed" in (tmp_path / "run" / "pretrain.log").read_text()


def test_k12_albert_tf_writes_its_exit_code_before_the_teardown(tmp_path, monkeypatch):
    """The other half: `albert-tf` run as the program writes the code it returns to $ALBERT_TF_EXIT_FILE."""
    from albert_tf import cli  # pylint: disable=import-outside-toplevel

    target = tmp_path / "exit_reported"
    monkeypatch.setenv(cli.EXIT_FILE, str(target))
    monkeypatch.setattr(sys, "argv", ["albert-tf", "plan", "--config", "albert_base", "--topology", "v5litepod-3"])
    code = cli.main()
    assert code == exit_codes.BAD_INPUT and target.read_text() == f"{exit_codes.BAD_INPUT}\n"

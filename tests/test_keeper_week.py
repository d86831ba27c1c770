"""Where the keeper runs for a week (issue 47, item 4): a queued request's bound (--valid-until-duration), the
slice without external IP (--internal-ip, --tunnel-through-iap) and its service account passed to every create and
ssh, the slice's own health report and maintenance read from describe (an owned slice that says it cannot run is
recreated, another's only noted), and the systemd unit `--print-service` prints, whose ExecStart parses back into
the same KeepAliveConfig. In process against tests/fake_gcloud.py with a fake clock."""
import shlex

import pytest

from albert_tf.cloud import decisions
from albert_tf.jobs import keep_alive as job
from albert_tf.runtime import exit_codes
from fake_gcloud import FakeGcloud
from test_keeper_promises import deletes, keep, owned

pytestmark = pytest.mark.usefixtures("keeper_worker_env")
SA = "keeper@p1.iam.gserviceaccount.com"


@pytest.mark.parametrize("values, create, reach", [
    ({"spot": True, "valid_until_duration": "6h", "internal_ip": True, "service_account": SA},
     ["--internal-ips", f"--service-account={SA}", "--valid-until-duration=6h"], ["--internal-ip"]),
    ({"valid_until_duration": "6h", "internal_ip": True, "tunnel_through_iap": True},  # on demand: no queue
     ["--internal-ips"], ["--tunnel-through-iap"]),
    ({"spot": True}, [], []),
])
def test_create_and_ssh_carry_the_flags_of_where_it_runs(cloud, clock, tmp_path, values, create, reach):
    result, notes, _ = keep(cloud, clock, tmp_path, type="v3-32", **values)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    made = [c for c in cloud.calls if c[3] == "create" and c[0] == "compute"]
    assert len(made) == 1
    extra = [w for w in made[0] if w.startswith(("--internal", "--service-account", "--valid-until"))]
    assert extra == create
    worker_calls = [c for c in cloud.calls if c[0] == "compute" and c[3] in ("ssh", "scp")]
    assert worker_calls and all([w for w in c if w in ("--internal-ip", "--tunnel-through-iap")] == reach
                                for c in worker_calls)


@pytest.mark.parametrize("value", ["6 hours", "6", "1.5h", "-6h"])
def test_a_bad_valid_until_duration_is_one_line(tmp_path, value):
    with pytest.raises(ValueError, match=f"--valid-until-duration {value}: expected a duration as gcloud takes it"):
        job.KeepAliveConfig(name="pod", zone="z", root="gs://b/a", config="albert_base", valid_until_duration=value)


UNHEALTHY = {"health": "UNHEALTHY_TENSORFLOW", "healthDescription": "the TPU runtime does not answer",
             "symptoms": [{"symptomType": "MESH_BUILD_FAIL", "details": "worker 3", "workerId": "3"}]}


def test_an_owned_slice_that_reports_it_cannot_run_is_recreated(cloud, clock, tmp_path):
    """P3. READY, but health UNHEALTHY_TENSORFLOW and a MESH_BUILD_FAIL symptom, and the run writes no checkpoint:
    at the third such poll the keeper's own slice is deleted and made again; the run finishes on the new one."""
    owned(tmp_path, cloud)
    cloud.node.update(UNHEALTHY)
    cloud.checkpoints = [2]
    cloud.run = {"polls": 10 ** 6, "end": 0}
    result, notes, calls = keep(cloud, clock, tmp_path)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert deletes(calls) == ["delete", "delete"]  # the recreation, then the end's
    assert calls.count("ssh status") >= decisions.LOST_RUNS_BEFORE_RECREATE
    assert ("TPU pod reports UNHEALTHY_TENSORFLOW, MESH_BUILD_FAIL: the TPU runtime does not answer (3 polls in a "
            "row with no new checkpoint)") in notes
    assert any(n.endswith("the slice cannot make progress") for n in notes)


def test_a_failed_delete_of_an_unhealthy_slice_is_tried_again_at_the_next_poll(cloud, clock, tmp_path):
    """P3. The recreation's delete answers 503: the slice is still the one that cannot run, so the next poll
    deletes it again (the note's "trying again in 60s"), with no status asked and no run relaunched on it and no
    three polls counted anew; then it is made again and the run finishes on the new one."""
    owned(tmp_path, cloud)
    cloud.node.update(UNHEALTHY)
    cloud.checkpoints = [2]
    cloud.run = {"polls": 10 ** 6, "end": 0}
    cloud.deletes = ["5xx"]
    result, notes, calls = keep(cloud, clock, tmp_path)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    first = calls.index("delete")
    assert calls[first:first + 4] == ["delete", "ls", "describe", "delete"]
    assert calls[first + 4].startswith("create") and deletes(calls) == ["delete", "delete", "delete"]
    assert notes.count("TPU pod reported UNHEALTHY_TENSORFLOW, MESH_BUILD_FAIL at 4 polls with no new checkpoint: "
                       "the slice cannot make progress") == 1
    assert sum(n.startswith("the delete failed (transient") for n in notes) == 1


def test_another_s_unhealthy_slice_and_maintenance_are_only_noted(cloud, clock, tmp_path):
    """P1. A slice the keeper did not make reports itself unhealthy for many polls: never deleted. Upcoming
    maintenance is noted once. UNHEALTHY_MAINTENANCE resumes by itself: not counted."""
    cloud.make_node("READY", labels={"owner": "someone-else"})
    cloud.node.update(UNHEALTHY, upcomingMaintenance={"type": "SCHEDULED", "maintenanceStatus": "PENDING",
                                                      "windowStartTime": "2027-01-16T02:00:00Z",
                                                      "windowEndTime": "2027-01-16T06:00:00Z"})
    cloud.checkpoints, cloud.run = [2], {"polls": 8, "end": 0}  # running, no new checkpoint, then done
    result, notes, calls = keep(cloud, clock, tmp_path)
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert not deletes(calls) and cloud.node is not None
    assert sum("reports UNHEALTHY_TENSORFLOW" in n for n in notes) >= 5
    assert [n for n in notes if "upcoming maintenance" in n] == [
        "TPU pod has upcoming maintenance: SCHEDULED PENDING (2027-01-16T02:00:00Z to 2027-01-16T06:00:00Z) (the "
        "run goes on; a preemption it causes is handled as any)"]
    assert decisions.unhealthy("UNHEALTHY_MAINTENANCE", ("HBM_OUT_OF_MEMORY",)) is None


def exec_start(unit):
    """The words of a unit's ExecStart, its systemd escapes (%% and $$) undone."""
    line = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    return shlex.split(line[len("ExecStart="):].replace("%%", "%").replace("$$", "$"))


def test_the_printed_service_runs_the_same_keeper(cli, tmp_path):
    """--print-service prints a systemd unit whose ExecStart, parsed by the keeper's own command line, is the
    KeepAliveConfig that printed it (without --print-service); it restarts only on a failure a restart can mend,
    and gives the final deletes the time they need."""
    from albert_tf import cli as albert_cli  # pylint: disable=import-outside-toplevel

    flags = ["--name", "pod", "--zone", "europe-west4-a", "--root", "gs://b/albert", "--config", "albert_base",
             "--type", "v5litepod-16", "--spot", "--valid-until-duration", "6h", "--internal-ip", "--service-account",
             SA, "--project", "p1", "--state-file", str(tmp_path / "state%1"), "--num-train-steps", "5000"]
    code, out, _ = cli("keep-alive", *flags, "--print-service", "--", "--remat", "--learning-rate", "0.001")
    assert code == exit_codes.DONE
    words = exec_start(out)
    assert words[1:4] == ["-m", "albert_tf", "keep-alive"] and "--print-service" not in words
    argv = words[words.index("keep-alive"):]
    parsed = job.config_from_args(albert_cli.build_parser(argv).parse_args(argv))
    expected = job.config_from_args(albert_cli.build_parser(["keep-alive", *flags]).parse_args(
        ["keep-alive", *flags, "--", "--remat", "--learning-rate", "0.001"]))
    assert parsed == expected and parsed.state_file.endswith("state%1")
    assert "RestartPreventExitStatus=2 4 77" in out.splitlines() and "Restart=on-failure" in out.splitlines()
    stop = next(int(line.split("=")[1]) for line in out.splitlines() if line.startswith("TimeoutStopSec="))
    assert stop > decisions.FINAL_DELETE_SECONDS


def test_no_secret_of_the_launch_is_on_a_command_line(cloud, clock, tmp_path, monkeypatch):
    """The install's source (a git URL with a token here) and the run's environment reach worker 0 in the launch
    script scp copies (a private file), never in the argv of a gcloud call (what `ps` and gcloud's logs show)."""
    monkeypatch.delenv("INSTALL_CMD")
    monkeypatch.setenv("ALBERT_TF_SOURCE", "git+https://keeper:s3cret-token@example.com/albert_tf.git")
    result, notes, _ = keep(cloud, clock, tmp_path, type="v3-32")
    assert result.exit_code == exit_codes.DONE, notes[-3:]
    assert not [c for c in cloud.calls if any("s3cret-token" in w or "ALBERT_TF_RUN_ID" in w for w in c)]
    assert "s3cret-token" in cloud.uploaded and "\nALBERT_TF_RUN_ID=pod." in cloud.uploaded
    assert [c for c in cloud.calls if c[3:4] == ["ssh"] and "--command=bash albert_tf_launch.sh" in c]

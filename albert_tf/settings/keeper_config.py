"""`albert-tf keep-alive`'s settings and result: `KeepAliveConfig`, `KeepAliveResult` (the call:
albert_tf/jobs/keep_alive.py; the keeper: albert_tf/cloud/). No TensorFlow."""
import dataclasses

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.runtime.devices import TOPOLOGIES
from albert_tf.settings.defaults import PAPER


@dataclasses.dataclass
class KeepAliveConfig:  # pylint: disable=too-many-instance-attributes
    """Every setting of the keeper (`albert-tf keep-alive --help` shows the same)."""
    name: str = option(help="the TPU's name")
    zone: str = option(help="the TPU's zone, e.g. europe-west4-a")
    root: str = option(help="gs:// directory holding spm.model and records/ (tpu/prepare_data.sh's output)")
    config: str = option(help="a preset name (albert_base, ...) or a gs:// albert_config.json")
    project: str | None = option(None, "the Google Cloud project (default: gcloud's configured one, read once at "
                                       "start and pinned)")
    type: str | None = option(None, f"the slice to create when it does not exist: {', '.join(TOPOLOGIES)}",
                              choices=tuple(TOPOLOGIES))
    image: str | None = option(None, "the runtime image of a slice it creates (default: the one "
                                     "albert_tf/cloud/images.py names for one host or for a pod)")
    spot: bool = option(False, "Spot capacity, through a queued resource (requeued after a preemption)")
    preemptible: bool = option(False, "preemptible capacity (tpu-vm create --preemptible)")
    reserved: bool = option(False, "the project's reserved capacity")
    allow_replace: bool = option(False, "may delete and recreate a lost slice that it did not create")
    keep_slice: bool = option(False, "leave the slice up when the keeper ends (it bills; the last line says how to "
                                     "delete it)")
    recipe: str = option("paper_v2", "pretrain's recipe (flags after -- win over it)")
    model_dir: str | None = option(None, "the run's gs:// model dir (default ROOT/models/CONFIG)")
    num_train_steps: int = option(PAPER["num_train_steps"], "the run's last step: done when MODEL_DIR/ckpt-STEPS.index "
                                                             "exists (passed to pretrain)", aliases=("--steps",))
    no_eval: bool = option(False, "no --eval-data (by default passed when ROOT/records/eval-* exist)")
    poll: float = option(300.0, "seconds between checks")
    retries: int = option(3, "describe calls per check before the state counts as unknown (--retry-wait s apart)")
    retry_wait: float = option(10.0, "seconds between those describe calls")
    settle_timeout: float = option(3600.0, "seconds a slice may stay transitional, unknown or unanswering; then "
                                           "the keeper stops (waiting for capacity is not bounded)")
    wait: float = option(60.0, "seconds between tries to create a slice (no capacity) or delete a lost one")
    max_restarts: int = option(10, "give up after this many relaunches in a row with no new checkpoint")
    state_file: str | None = option(None, "what the keeper records (default ~/.albert_tf/keeper/PROJECT.ZONE.NAME)")
    dry_run: bool = option(False, "print the gcloud commands of each branch once, run none")
    pretrain_flags: list = option(default_factory=list, flag="--pretrain-flag", metavar="FLAG",
                                  help="one word for pretrain (repeatable; on the command line: the words after --)")
    hang_factor: float | None = option(None, "no longer used: pretrain's own --step-timeout ends a hung run",
                                       hidden=True)
    kill_after: float | None = option(None, "no longer used", hidden=True)

    def __post_init__(self):
        run_config.check_fields(self)


@dataclasses.dataclass
class KeepAliveResult:
    """exit_code: 0 done, 1 stopped for the reason in `line`'s note, 2 bad flags, 130 Ctrl-C. line: the last line
    (what is left billing, and how to delete it)."""
    exit_code: int
    line: str
    state_file: str | None = None


__all__ = ["KeepAliveConfig", "KeepAliveResult"]

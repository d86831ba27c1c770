"""`albert-tf keep-alive`'s settings and result: `KeepAliveConfig`, `KeepAliveResult` (the call:
albert_tf/jobs/keep_alive.py; the keeper: albert_tf/cloud/). No TensorFlow.

A KeepAliveConfig is checked when it is made: a bad value raises ValueError with the one line the command line
prints (exit 2), each flag named as the command line spells it (`flag`).
"""
import dataclasses
import re

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.runtime import devices
from albert_tf.settings.defaults import PAPER
from albert_tf.settings.pretrain_config import PretrainConfig

CAPACITY_KINDS = ("spot", "preemptible", "reserved")  # the fields that choose one; none: on-demand
ON_DEMAND = "on-demand"
# pretrain's settings that the keeper sets itself (given after `--` they would make it watch another run): pretrain's
# field -> the keeper's fields to use instead.
OWNED_BY_KEEPER = {"model_dir": ("model_dir",), "num_train_steps": ("num_train_steps",), "train_data": ("root",),
                   "eval_data": ("root", "no_eval"), "tpu": ("name",)}
POSITIVE = ("num_train_steps", "retries")
NON_NEGATIVE = ("poll", "retry_wait", "settle_timeout", "wait", "max_restarts")


@dataclasses.dataclass
class KeepAliveConfig:  # pylint: disable=too-many-instance-attributes
    """Every setting of the keeper (`albert-tf keep-alive --help` shows the same)."""
    name: str = option(help="the TPU's name")
    zone: str = option(help="the TPU's zone, e.g. europe-west4-a")
    root: str = option(help="gs:// directory holding spm.model and records/ (tpu/prepare_data.sh's output)")
    config: str = option(help="a preset name (albert_base, ...) or a gs:// albert_config.json")
    project: str | None = option(None, "the Google Cloud project (default: gcloud's configured one, read once at "
                                       "start and pinned)")
    type: str | None = option(None, "the slice to create when it does not exist, as Google spells its accelerator "
                                    f"type: {devices.TOPOLOGY_GRAMMAR}")
    image: str | None = option(None, "the runtime image of a slice it creates (default: the newest suitable "
                                     "TensorFlow image of the zone's versions list, chosen once at start)")
    spot: bool = option(False, "Spot capacity, through a queued resource (requeued after a preemption)")
    preemptible: bool = option(False, "preemptible capacity (tpu-vm create --preemptible)")
    reserved: bool = option(False, "the project's reserved capacity")
    valid_until_duration: str | None = option(None, "how long a queued request (Spot, v5e, v5p) may wait for capacity, "
                                                     "e.g. 6h (passed to queued-resources create as gcloud's flag of "
                                                     "this name); an expired one is requeued after its backoff "
                                                     "(default: no bound)")
    internal_ip: bool = option(False, "the slice gets no external IP (gcloud's internal-ips at create); ssh and scp "
                                      "reach worker 0 by its internal IP: the keeper runs in the slice's network, "
                                      "e.g. on a small VM (docs/tpu.md)")
    tunnel_through_iap: bool = option(False, "ssh and scp to worker 0 through Identity-Aware Proxy: a slice without "
                                             "external IP, from outside its network")
    service_account: str | None = option(None, "the service account of the slice's VMs, passed to create: what "
                                               "worker 0 reads and writes gs:// as (default: Compute Engine's, of "
                                               "the project)")
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
    print_service: bool = option(False, "print a systemd unit that runs this keeper detached (on a small VM with a "
                                        "service account: docs/tpu.md), run nothing")
    pretrain_flags: list = option(default_factory=list, flag="--pretrain-flag", metavar="FLAG",
                                  help="one word for pretrain (repeatable; on the command line: the words after --)")
    hang_factor: float | None = option(None, "no longer used: pretrain's own --step-timeout ends a hung run",
                                       hidden=True)
    kill_after: float | None = option(None, "no longer used", hidden=True)

    def __post_init__(self):
        run_config.check_fields(self)
        for name in ("root", "model_dir"):
            value = getattr(self, name)
            if value and not value.startswith("gs://"):
                raise ValueError(f"{flag(name)} {value}: expected a gs:// path (TPU hosts read and write Cloud "
                                 "Storage only)")
        if "/" in self.config and not self.config.startswith("gs://"):
            raise ValueError(f"{flag('config')} {self.config}: expected a preset name (albert_base, ...) or a gs:// "
                             "path")
        if self.type:
            self.check_type()
        if self.valid_until_duration is not None and not re.fullmatch(r"\d+[smhd]", self.valid_until_duration):
            raise ValueError(f"{flag('valid_until_duration')} {self.valid_until_duration}: expected a duration as "
                             "gcloud takes it: an integer and s, m, h or d (6h, 2d)")
        if sum(getattr(self, kind) for kind in CAPACITY_KINDS) > 1:
            raise ValueError(f"{', '.join(flag(k) for k in CAPACITY_KINDS[:-1])} and {flag(CAPACITY_KINDS[-1])}: "
                             "one at most")
        for name in POSITIVE:
            if getattr(self, name) <= 0:
                raise ValueError(f"{flag(name)} {getattr(self, name)}: expected a positive integer")
        for name in NON_NEGATIVE:
            if getattr(self, name) < 0:
                raise ValueError(f"{flag(name)} {getattr(self, name)}: expected a non-negative number")
        check_pretrain_flags(self.pretrain_flags)

    def check_type(self):
        """--type is a slice of a generation the package runs on (devices.parse_topology's one line otherwise); a
        generation made only through queued resources has no preemptible kind."""
        try:
            generation = devices.parse_topology(self.type).generation
        except ValueError as e:
            raise ValueError(f"{flag('type')} {e}") from None
        if self.preemptible and generation.provisioning == devices.QUEUED_RESOURCES:
            raise ValueError(f"{flag('preemptible')} with {flag('type')} {self.type}: {generation.label} slices are "
                             f"made through queued resources, which have no preemptible kind; use {flag('spot')}")

    @property
    def capacity(self):
        """"spot", "preemptible", "reserved" or "on-demand"."""
        return next((kind for kind in CAPACITY_KINDS if getattr(self, kind)), ON_DEMAND)

    @property
    def run_model_dir(self):
        """The run's model dir: --model-dir, or ROOT/models/CONFIG (the preset's or the JSON file's name)."""
        name = self.config.rstrip("/").rsplit("/", 1)[-1].removesuffix(".json")
        return (self.model_dir or f"{self.root.rstrip('/')}/models/{name}").rstrip("/")


def flag(name):
    """The command line's spelling of KeepAliveConfig's field `name` (its messages name flags so)."""
    return run_config.flag_for(KeepAliveConfig, name)


def check_pretrain_flags(words):
    """Refuses pretrain's flags that the keeper sets itself, by any spelling pretrain accepts (it would watch a
    directory the run never writes)."""
    owned = {}
    for field in dataclasses.fields(PretrainConfig):
        if field.name in OWNED_BY_KEEPER:
            owned.update(dict.fromkeys((run_config.flag_of(field), *field.metadata["aliases"]), field.name))
    for word in words:
        spelled = word.split("=", 1)[0]
        if spelled in owned:
            instead = " or ".join(flag(name) for name in OWNED_BY_KEEPER[owned[spelled]])
            raise ValueError(f"{spelled} after --: the keeper sets it itself (use keep-alive's {instead} instead)")


@dataclasses.dataclass
class KeepAliveResult:
    """exit_code (albert_tf.runtime.exit_codes): 0 done, 4 stopped on purpose for the reason its notes give (gave
    up, a permanent error, a state that did not settle), 2 bad flags, 77 another keeper holds the state file,
    130 Ctrl-C, 143 SIGTERM or SIGHUP. line: the last line (what is left billing, and how to delete it)."""
    exit_code: int
    line: str
    state_file: str | None = None


__all__ = ["KeepAliveConfig", "KeepAliveResult", "flag", "check_pretrain_flags", "OWNED_BY_KEEPER"]

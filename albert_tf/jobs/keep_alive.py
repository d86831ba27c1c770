"""`albert-tf keep-alive`, the pod's keeper: keeps `albert-tf pretrain` going on a Cloud TPU slice until its last
checkpoint exists, through preemptions, failed API calls and failed installs, and deletes the slice it created when
it ends. It runs on your machine with the Google Cloud CLI (`gcloud`) logged in; no TensorFlow is needed there.

    albert-tf keep-alive --name albert --zone europe-west4-a --type v3-512 --spot --root gs://b/albert \\
        --config albert_xxlarge --num-train-steps 125000 -- --remat          # flags after -- go to pretrain

    result = albert_tf.jobs.keep_alive.keep_alive(KeepAliveConfig(name=..., zone=..., root=..., config=...))
    result.exit_code (0 done, 1 stopped for a reason in result.line, 2 bad flags, 130 Ctrl-C)

What it does in each state: albert_tf/cloud/decisions.py, and the table in docs/tpu.md. What worker 0 installs:
ALBERT_TF_SOURCE (a git URL, an https:// or gs:// wheel) or INSTALL_CMD; ALBERT_TF_PYTHON names worker 0's Python.
"""
import argparse
import dataclasses
import os
import shlex
import sys

from albert_tf import layout, run_config
from albert_tf.cloud import gcloud, images, tpu_node, worker
from albert_tf.cloud.keeper import Clock, Keeper, Launch, Settings
from albert_tf.runtime import exit_codes
from albert_tf.runtime.devices import topology_hosts
from albert_tf.settings.keeper_config import KeepAliveConfig, KeepAliveResult
from albert_tf.settings.pretrain_config import PretrainConfig, read_recipe

PROG = "albert-tf keep-alive"
# pretrain's flags that the keeper sets itself (given after `--` they would make it watch another run): the
# keeper's flag to use instead.
OWNED_FLAGS = {"model_dir": "--model-dir", "num_train_steps": "--num-train-steps", "train_data": "--root",
               "eval_data": "--root (or --no-eval)", "tpu": "--name"}
TRAIN_RECORDS, EVAL_RECORDS, SPM = "records/train-*", "records/eval-*", "spm.model"  # under ROOT (prepare_data.sh)



def check(config):
    """One line (ValueError) for a bad setting, before anything is called."""
    for name in ("root", "model_dir"):
        value = getattr(config, name)
        if value and not value.startswith("gs://"):
            raise ValueError(f"--{name.replace('_', '-')} {value}: expected a gs:// path (TPU hosts read and write "
                             "Cloud Storage only)")
    if "/" in config.config and not config.config.startswith("gs://"):
        raise ValueError(f"--config {config.config}: expected a preset name (albert_base, ...) or a gs:// path")
    if config.spot + config.preemptible + config.reserved > 1:
        raise ValueError("--spot, --preemptible and --reserved: one at most")
    for name in ("num_train_steps", "retries"):
        if getattr(config, name) <= 0:
            raise ValueError(f"--{name} {getattr(config, name)}: expected a positive integer")
    for name in ("poll", "retry_wait", "settle_timeout", "wait", "max_restarts"):
        if getattr(config, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(config, name)}: expected a non-negative number")
    check_pretrain_flags(config.pretrain_flags)
    if config.type and config.image:
        images.check_image(config.image, hosts_of(config.type))


def check_pretrain_flags(words):
    """Refuses the flags the keeper sets itself (it would watch a directory the run never writes)."""
    owned = {run_config.flag_of(f): f.name for f in dataclasses.fields(PretrainConfig) if f.name in OWNED_FLAGS}
    for word in words:
        flag = word.split("=", 1)[0]
        if flag in owned:
            raise ValueError(f"{flag} after --: the keeper sets it itself (use keep-alive's "
                             f"{OWNED_FLAGS[owned[flag]]} instead)")


def hosts_of(accelerator_type):
    """TPU VM hosts of a slice type (runtime.devices)."""
    return topology_hosts(accelerator_type)


def capacity_of(config):
    return next((c for c in ("spot", "preemptible", "reserved") if getattr(config, c)), "on-demand")


def pretrain_words(config, model_dir, tpu, steps, eval_data):
    """The `albert-tf pretrain` command worker 0 runs, made from a PretrainConfig (its flags' own spellings)."""
    root, recipe = config.root.rstrip("/"), read_recipe(config.recipe)
    run = PretrainConfig(**{**recipe, "config": config.config, "train_data": f"{root}/{TRAIN_RECORDS}",
                            "model_dir": model_dir, "tpu": tpu, "spm_model": f"{root}/{SPM}", "num_train_steps": steps,
                            "eval_data": f"{root}/{EVAL_RECORDS}" if eval_data else None})
    words = run_config.to_argv(run, base=recipe)  # what differs from the recipe: the keeper's own settings
    cli = shlex.split(os.environ.get("ALBERT_TF") or f"{shlex.quote(install_of(config).python)} -m albert_tf")
    return [*cli, "pretrain", "--recipe", config.recipe, *words, *config.pretrain_flags]


def install_of(config, image=None):
    release = images.tensorflow_release(image) if image else None
    return worker.Install(source=os.environ.get("ALBERT_TF_SOURCE") or worker.PLACEHOLDER_SOURCE, command=os.environ.get("INSTALL_CMD"),
                          python=os.environ.get("ALBERT_TF_PYTHON") or "python3", tensorflow_release=release)


def make_launch(config, model_dir, eval_data):
    def words(spec, run_id):
        tpu, env = worker.runtime_env(config.name, hosts_of(spec.accelerator_type), spec.runtime_version, run_id,
                                      os.environ.get("TPU_PJRT_LIBRARY") or "/lib/libtpu.so")
        return pretrain_words(config, model_dir, tpu, config.num_train_steps, eval_data), env

    log_url = f"{config.root.rstrip('/')}/logs/{os.path.basename(model_dir.rstrip('/'))}"
    image = config.image or (images.default_image(hosts_of(config.type)) if config.type else None)
    return Launch(install_of(config, image), log_url, words)


def settings_of(config, project):
    model_dir = (config.model_dir or f"{config.root.rstrip('/')}/models/"
                 f"{os.path.basename(config.config.rstrip('/')).removesuffix('.json')}").rstrip("/")
    spec = None
    if config.type:
        spec = tpu_node.Spec(config.type, config.image or images.default_image(hosts_of(config.type)),
                             capacity_of(config))
    state_file = config.state_file or os.path.join(os.path.expanduser("~"), ".albert_tf", "keeper",
                                                   f"{project}.{config.zone}.{config.name}")
    return Settings(name=config.name, zone=config.zone, project=project, model_dir=model_dir, steps=config.num_train_steps,
                    state_file=state_file, spec=spec, allow_replace=config.allow_replace, keep_slice=config.keep_slice,
                    poll=config.poll, wait=config.wait, retries=config.retries, retry_wait=config.retry_wait,
                    settle_timeout=config.settle_timeout, max_restarts=config.max_restarts)


def keep_alive(config, runner=gcloud.run, clock=None, say=None):
    """Runs the keeper to its end (KeepAliveResult). `runner(args, timeout)`: gcloud (tests pass a fake); `clock`:
    albert_tf.cloud.keeper.Clock or a fake; `say(line)`: where notes go (default: stderr). ValueError: bad input."""
    say = say or (lambda line: print(f"{PROG}: {line}", file=sys.stderr, flush=True))
    check(config)
    if config.hang_factor is not None or config.kill_after is not None:
        say("--hang-factor and --kill-after are no longer used: pretrain's own --step-timeout ends a hung run")
    if config.dry_run:
        settings = settings_of(config, config.project or "PROJECT")
        return dry_run(settings, make_launch(config, settings.model_dir, not config.no_eval))
    project = config.project or tpu_node.configured_project(runner)
    settings = settings_of(config, project)
    cloud = tpu_node.Cloud(runner, project, config.zone, config.name)
    eval_data = False
    if not config.no_eval:  # tpu/prepare_data.sh writes eval records only when asked
        found, _ = cloud.list_objects(f"{config.root.rstrip('/')}/{EVAL_RECORDS}")
        eval_data = bool(found)
    launch = make_launch(config, settings.model_dir, eval_data)
    launch.install.check()
    outcome = Keeper(settings, cloud, launch, clock=clock or Clock(), say=say).run()
    say(outcome.line)
    return KeepAliveResult(outcome.exit_code, outcome.line, settings.state_file)


def dry_run(settings, launch):
    """Prints the commands of each branch once (a poll, a launch, a recreation, the end), quoted for a shell."""
    printed = []

    def runner(args, timeout):
        printed.append(shlex.join(["gcloud", *args]))
        return gcloud.Result(tuple(args), stdout="")

    cloud = tpu_node.Cloud(runner, settings.project, settings.zone, settings.name)
    spec = settings.spec or tpu_node.Spec("TYPE", "IMAGE", "on-demand")
    steps = [("each poll: the newest checkpoint, the slice, the run on worker 0",
              lambda: (cloud.list_objects(f"{settings.model_dir}/{layout.CHECKPOINT_PREFIX}-*.index"), cloud.describe(),
                       cloud.ssh(worker.status_command()))),
             ("a (re)launch", lambda: (cloud.scp(worker.ON_WORKER, worker.WORKER_SCRIPT_COPY),
                                       cloud.ssh(start_line(launch, spec)))),
             ("a lost slice (PREEMPTED, TERMINATED, NOT_FOUND twice): delete, create as recorded",
              lambda: (cloud.delete_queued() if spec.queued else cloud.delete(), cloud.create(spec))),
             ("the end (done, stopped, Ctrl-C): what it created is deleted",
              lambda: cloud.delete_queued() if spec.queued else cloud.delete())]
    for comment, calls in steps:
        print(f"# {comment}")
        calls()
        print("\n".join(printed))
        printed.clear()
    return KeepAliveResult(exit_codes.DONE, "dry run", settings.state_file)


def start_line(launch, spec, run_id="RUN_ID"):
    words, env = launch.words(spec, run_id)
    return worker.start_command(launch.install, launch.log_url, env, words)


# ---------------------------------------------------------------------------------------------- the command line
def add_extra_arguments(parser):
    """The words after `--`: flags for pretrain (KeepAliveConfig.pretrain_flags)."""
    parser.add_argument("pretrain_words", nargs="*", metavar="-- PRETRAIN FLAGS", default=argparse.SUPPRESS,
                        help="flags for pretrain, after --")


def config_from_args(args):
    """The KeepAliveConfig of parsed flags: --pretrain-flag words, then the words after --."""
    typed = run_config.given(KeepAliveConfig, args)
    typed["pretrain_flags"] = [*typed.get("pretrain_flags", []), *getattr(args, "pretrain_words", [])]
    return KeepAliveConfig(**typed)


__all__ = ["KeepAliveConfig", "KeepAliveResult", "keep_alive", "pretrain_words"]

"""`albert-tf keep-alive`, the pod's keeper: keeps `albert-tf pretrain` going on a Cloud TPU slice until its last
checkpoint exists, through preemptions, failed API calls and failed installs, and deletes the slice it created when
it ends. It runs on your machine with the Google Cloud CLI (`gcloud`) logged in; no TensorFlow is needed there.

    albert-tf keep-alive --name albert --zone europe-west4-a --type v3-512 --spot --root gs://b/albert \\
        --config albert_xxlarge --num-train-steps 125000 -- --remat          # flags after -- go to pretrain

    result = albert_tf.jobs.keep_alive.keep_alive(KeepAliveConfig(name=..., zone=..., root=..., config=...))
    result.exit_code (albert_tf.runtime.exit_codes: 0 done, 4 stopped for a reason its notes give, 2 bad flags,
    130 Ctrl-C, 143 SIGTERM or SIGHUP)

What it does in each state: albert_tf/cloud/decisions.py, and the table in docs/tpu.md. What worker 0 installs:
ALBERT_TF_SOURCE (a git URL, an https:// or gs:// wheel) or INSTALL_CMD; ALBERT_TF_PYTHON names worker 0's Python.
"""
import argparse
import os
import shlex
import sys

from albert_tf import layout, run_config
from albert_tf.cloud import gcloud, images, tpu_node, worker
from albert_tf.cloud.keeper import LAUNCH_NOTE, Clock, Keeper, Launch, Settings
from albert_tf.runtime import exit_codes
from albert_tf.runtime.devices import topology_hosts
from albert_tf.settings.keeper_config import KeepAliveConfig, KeepAliveResult
from albert_tf.settings.pretrain_config import PretrainConfig, over_recipe, read_recipe

PROG = "albert-tf keep-alive"
TRAIN_RECORDS, EVAL_RECORDS, SPM = "records/train-*", "records/eval-*", "spm.model"  # under ROOT (prepare_data.sh)


class _PretrainFlags(argparse.ArgumentParser):
    """pretrain's flags, read as pretrain's own parser reads them; a bad word is a ValueError, not an exit."""

    def error(self, message):
        raise ValueError(f"the flags for pretrain after --: {message}")


def launched_config(config, model_dir, tpu, eval_data):
    """The PretrainConfig worker 0 runs: the recipe's values, the keeper's own (config, data, model dir, steps, TPU),
    then the flags after `--` (config.pretrain_flags, read with pretrain's flags). A misspelled flag or a run pretrain
    would refuse (its checks are the config's own) is one-line ValueError, here, before anything is created."""
    root, recipe = config.root.rstrip("/"), read_recipe(config.recipe)
    parser = _PretrainFlags(prog="albert-tf pretrain", add_help=False, allow_abbrev=False)
    run_config.add_fields_as_arguments(parser, PretrainConfig, required=False)
    typed = run_config.given(PretrainConfig, parser.parse_args(config.pretrain_flags))
    keeper = {"config": config.config, "train_data": f"{root}/{TRAIN_RECORDS}", "model_dir": model_dir, "tpu": tpu,
              "spm_model": f"{root}/{SPM}", "num_train_steps": config.num_train_steps,
              "eval_data": f"{root}/{EVAL_RECORDS}" if eval_data else None}
    return PretrainConfig(**over_recipe(recipe, {**keeper, **typed}))


def pretrain_words(config, model_dir, tpu, eval_data):
    """The `albert-tf pretrain` command worker 0 runs, printed from its PretrainConfig (launched_config) in the
    flags' own spellings: --recipe, then what differs from the recipe."""
    run = launched_config(config, model_dir, tpu, eval_data)
    words = run_config.to_argv(run, base=read_recipe(config.recipe))
    cli = shlex.split(os.environ.get("ALBERT_TF") or f"{shlex.quote(install_of(None).python)} -m albert_tf")
    return [*cli, "pretrain", "--recipe", config.recipe, *words]


def install_of(spec):
    """How worker 0 gets albert_tf (the environment's ALBERT_TF_SOURCE, INSTALL_CMD, ALBERT_TF_PYTHON), with the
    tensorflow-text release of `spec`'s image (None: unknown)."""
    release = images.tensorflow_release(spec.runtime_version) if spec else None
    return worker.Install(source=os.environ.get("ALBERT_TF_SOURCE") or worker.PLACEHOLDER_SOURCE,
                          command=os.environ.get("INSTALL_CMD"), python=os.environ.get("ALBERT_TF_PYTHON") or "python3",
                          tensorflow_release=release)


def make_launch(settings, eval_data):
    """The Launch of `settings` (Settings): the install, the log's gs:// folder, and the words of each start."""
    config = settings.config

    def words(spec, run_id):
        tpu, env = worker.runtime_env(config.name, topology_hosts(spec.accelerator_type), spec.runtime_version,
                                      run_id, os.environ.get("TPU_PJRT_LIBRARY") or "/lib/libtpu.so")
        return pretrain_words(config, settings.model_dir, tpu, eval_data), env

    log_url = f"{config.root.rstrip('/')}/logs/{os.path.basename(settings.model_dir)}"
    return Launch(install_of(settings.spec), log_url, words)


def keep_alive(config, runner=gcloud.run, clock=None, say=None):
    """Runs the keeper to its end (KeepAliveResult). `runner(args, timeout)`: gcloud (tests pass a fake); `clock`:
    albert_tf.cloud.keeper.Clock or a fake; `say(line)`: where notes go (default: stderr). ValueError: bad input."""
    say = say or (lambda line: print(f"{PROG}: {line}", file=sys.stderr, flush=True))
    if config.type and config.image:
        images.check_image(config.image, topology_hosts(config.type))
    if config.hang_factor is not None or config.kill_after is not None:
        say("--hang-factor and --kill-after are no longer used: pretrain's own --step-timeout ends a hung run")
    launched_config(config, "gs://MODEL_DIR", "TPU", eval_data=True)  # pretrain's checks, before any call
    if config.dry_run:
        settings = Settings.of(config, config.project or "PROJECT")
        return dry_run(settings, make_launch(settings, not config.no_eval))
    settings = Settings.of(config, config.project or tpu_node.configured_project(runner))
    cloud = tpu_node.Cloud(runner, settings.project, config.zone, config.name)
    eval_data = False
    if not config.no_eval:  # tpu/prepare_data.sh writes eval records only when asked
        found, _ = cloud.list_objects(f"{config.root.rstrip('/')}/{EVAL_RECORDS}")
        eval_data = bool(found)
    launch = make_launch(settings, eval_data)
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

    cloud = tpu_node.Cloud(runner, settings.project, settings.config.zone, settings.config.name)
    spec = settings.spec or tpu_node.Spec("TYPE", "IMAGE", "on-demand")
    steps = [("each poll: the newest checkpoint, the slice, the run on worker 0",
              lambda: (cloud.list_objects(f"{settings.model_dir}/{layout.CHECKPOINT_PREFIX}-*.index"), cloud.describe(),
                       cloud.ssh(worker.status_command()))),
             ("a (re)launch", lambda: (cloud.scp(worker.ON_WORKER, worker.WORKER_SCRIPT_COPY),
                                       cloud.ssh(start_line(launch, spec)))),
             ("a lost slice (PREEMPTED, TERMINATED, not found twice): delete, create as recorded",
              lambda: (cloud.delete_queued() if spec.queued else cloud.delete(), cloud.create(spec))),
             ("the end (done, stopped, Ctrl-C): what it created is deleted",
              lambda: cloud.delete_queued() if spec.queued else cloud.delete())]
    for comment, calls in steps:
        print(f"# {comment}")
        calls()
        print("\n".join(printed))
        printed.clear()
    print(f"# {LAUNCH_NOTE}: the command, in pretrain's own words\n{shlex.join(launch.words(spec, 'RUN_ID')[0])}")
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

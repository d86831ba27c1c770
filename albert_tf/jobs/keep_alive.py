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
import dataclasses
import functools
import os
import shlex
import sys

from albert_tf import config as albert_config
from albert_tf import layout, run_config
from albert_tf.cloud import decisions, gcloud, images, tpu_node, worker
from albert_tf.cloud.keeper import LAUNCH_NOTE, Clock, Keeper, Launch, Settings
from albert_tf.jobs import pretrain as pretrain_job
from albert_tf.runtime import exit_codes
from albert_tf.runtime.devices import parse_topology, pod_note, topology_hosts
from albert_tf.settings.keeper_config import KeepAliveConfig, KeepAliveResult
from albert_tf.settings.pretrain_config import PretrainConfig, over_recipe, read_recipe

PROG = "albert-tf keep-alive"
TRAIN_RECORDS, EVAL_RECORDS, SPM = "records/train-*", "records/eval-*", "spm.model"  # under ROOT (prepare_data.sh)


def pretrain_words(config, model_dir, tpu, eval_data):
    """The `albert-tf pretrain` command worker 0 runs: --recipe, then what its PretrainConfig (launched_words) sets
    differently from the recipe, in the flags' own spellings."""
    words = launched_words(config.recipe, config.config, config.root.rstrip("/"), model_dir, tpu,
                           config.num_train_steps, eval_data, tuple(config.pretrain_flags))
    cli = shlex.split(os.environ.get("ALBERT_TF") or f"{shlex.quote(install_of().python)} -m albert_tf")
    return [*cli, "pretrain", "--recipe", config.recipe, *words]


@functools.lru_cache(maxsize=32)
def launched_words(recipe_name, model, root, model_dir, tpu, steps, eval_data, pretrain_flags):
    """The flags of the run worker 0 makes, printed from its PretrainConfig: the recipe's values, the keeper's own
    settings, then the flags after `--` (read by pretrain's flags: a misspelled one is a ValueError naming the
    closest) — so a run pretrain would refuse is refused here (its checks are the config's). Made once per distinct
    settings: a PretrainConfig's checks cost milliseconds, and the keeper relaunches often."""
    recipe = read_recipe(recipe_name)
    parser = PretrainParser(prog="albert-tf pretrain", add_help=False)
    run_config.add_fields_as_arguments(parser, PretrainConfig, required=False)
    typed = run_config.given(PretrainConfig, parser.parse_args(list(pretrain_flags)))
    keeper = {"config": model, "train_data": f"{root}/{TRAIN_RECORDS}", "model_dir": model_dir, "tpu": tpu,
              "spm_model": f"{root}/{SPM}", "num_train_steps": steps,
              "eval_data": f"{root}/{EVAL_RECORDS}" if eval_data else None}
    run = PretrainConfig(**over_recipe(recipe, {**keeper, **typed}))
    return tuple(run_config.to_argv(run, base=recipe))


def install_of():
    """How worker 0 gets albert_tf (the environment's ALBERT_TF_SOURCE, INSTALL_CMD, ALBERT_TF_PYTHON); the
    tensorflow-text release is the slice's image's (Launch.install_for)."""
    return worker.Install(source=os.environ.get("ALBERT_TF_SOURCE") or worker.PLACEHOLDER_SOURCE,
                          command=os.environ.get("INSTALL_CMD"), python=os.environ.get("ALBERT_TF_PYTHON") or "python3")


def make_launch(settings, eval_data):
    """The Launch of `settings` (Settings): the install, the log's gs:// folder, and the words of each start."""
    config = settings.config

    def words(spec, run_id):
        tpu, env = worker.runtime_env(config.name, topology_hosts(spec.accelerator_type), spec.runtime_version,
                                      run_id, os.environ.get("TPU_PJRT_LIBRARY") or "/lib/libtpu.so")
        return pretrain_words(config, settings.model_dir, tpu, eval_data), env

    log_url = f"{config.root.rstrip('/')}/logs/{os.path.basename(settings.model_dir)}"
    return Launch(install_of(), log_url, words)


def keep_alive(config, runner=gcloud.run, clock=None, say=None):
    """Runs the keeper to its end (KeepAliveResult). `runner(args, timeout)`: gcloud (tests pass a fake); `clock`:
    albert_tf.cloud.keeper.Clock or a fake; `say(line)`: where notes go (default: stderr). ValueError: bad input."""
    say = say or (lambda line: print(f"{PROG}: {line}", file=sys.stderr, flush=True))
    if config.type and config.image:
        found = parse_topology(config.type)
        images.check_image(config.image, found.hosts, found.generation)
    check_launch(config)
    if config.print_service:
        print(service_unit(config))
        return KeepAliveResult(exit_codes.DONE, "service unit printed", config.state_file)
    if config.type and (pods := pod_note(parse_topology(config.type))):
        say(pods)  # a slice of a generation whose pods others report broken: said, not refused
    if config.hang_factor is not None or config.kill_after is not None:
        say("--hang-factor and --kill-after are no longer used: pretrain's own --step-timeout ends a hung run")
    if config.dry_run:
        settings = Settings.of(config, config.project or dry_run_project(runner))
        return dry_run(settings, make_launch(settings, not config.no_eval), runner)
    settings = Settings.of(config, config.project or tpu_node.configured_project(runner))
    cloud = tpu_node.Cloud(runner, settings.project, config.zone, config.name, options=options_of(config))
    launch = make_launch(settings, check_root(config, cloud))
    launch.install.check()
    outcome = Keeper(settings, cloud, launch, clock=clock or Clock(), say=say).run()
    say(outcome.line)
    return KeepAliveResult(outcome.exit_code, outcome.line, settings.state_file)


# ---------------------------------------------------------------------------------------------- preflight
class PretrainParser(argparse.ArgumentParser):
    """pretrain's own flags (its config's fields and --recipe), as its command line parses them; an error raises
    ValueError with its one line, an unknown flag's naming the closest ("did you mean --remat?")."""

    def error(self, message):
        flags = [f for action in self._actions for f in action.option_strings if f.startswith("--")]
        words = message.split(":", 1)[1].split() if message.startswith("unrecognized arguments") else []
        raise ValueError(f"{message}{run_config.did_you_mean(words, flags)}")


def check_launch(config):
    """The launch checked here, before anything is made or queued (issue 47, K10): the words worker 0 would run,
    parsed by pretrain's parser into its PretrainConfig (its own checks), and a preset --config resolved with the
    run's --set. The PretrainConfig; ValueError (one line) otherwise."""
    try:
        words = pretrain_words(config, config.run_model_dir, config.name, eval_data=True)
        return parsed_launch(tuple(words[words.index("pretrain") + 1:]))
    except ValueError as e:
        after = f"after --: {shlex.join(config.pretrain_flags)}" if config.pretrain_flags else "no flags after --"
        raise ValueError(f"pretrain would refuse the launch ({after}): {e}") from None


@functools.lru_cache(maxsize=32)
def parsed_launch(words):
    """The PretrainConfig of pretrain's `words` (after `pretrain`), its preset --config resolved; ValueError."""
    parser = PretrainParser(prog="albert-tf pretrain", add_help=False)
    run_config.add_fields_as_arguments(parser, PretrainConfig)
    pretrain_job.add_extra_arguments(parser)
    base, typed = pretrain_job.recipe_and_typed(parser.parse_args(list(words)))
    run = PretrainConfig(**over_recipe(base, typed))
    if "/" not in run.config:  # a preset (a gs:// file is listed: check_root); vocab_size auto: the spm model's
        albert_config.resolve(run.config, {k: v for k, v in run.config_overrides.items() if v != "auto"})
    return run


def check_root(config, cloud):
    """What the run reads, listed before anything is made or queued (K10): ROOT/records/train-*, ROOT/spm.model and
    a gs:// --config must be there (ValueError, one line, naming what is missing or the listing's failure).
    Whether --eval-data is passed: ROOT/records/eval-* exist (never with --no-eval)."""
    root = config.root.rstrip("/")
    needed = [(f"{root}/{TRAIN_RECORDS}", "the training records (albert-tf create-data)"),
              (f"{root}/{SPM}", "the SentencePiece model (albert-tf vocab)")]
    if config.config.startswith("gs://"):
        needed.append((config.config, "the model's config (--config)"))
    for pattern, what in needed:
        found, failed = cloud.list_objects(pattern)
        if failed is not None:
            raise ValueError(f"could not list {pattern} ({failed.failure}: {failed.line}): the run reads {what} "
                             "there; nothing was made")
        if not found:
            raise ValueError(f"{pattern}: no such object; the run reads {what} there (tpu/prepare_data.sh writes "
                             "it); nothing was made")
    if config.no_eval:  # tpu/prepare_data.sh writes eval records only when asked
        return False
    found, _ = cloud.list_objects(f"{root}/{EVAL_RECORDS}")
    return bool(found)


def options_of(config):
    """The tpu_node.Options of a KeepAliveConfig: what every create adds, and how worker 0 is reached."""
    return tpu_node.Options(internal_ips=config.internal_ip, service_account=config.service_account,
                            valid_until=config.valid_until_duration, iap=config.tunnel_through_iap)


def dry_run_project(runner):
    """The project a dry run shows: gcloud's configured one (a read-only call), or PROJECT when there is none."""
    try:
        return tpu_node.configured_project(runner)
    except ValueError:
        return "PROJECT"


def dry_run(settings, launch, runner=gcloud.run):
    """Prints the commands of each branch once (a poll, a launch, a recreation, the end), quoted for a shell. The
    one call it makes is the zone's versions list (read-only, through `runner`), to show the image the keeper would
    choose; when gcloud cannot answer it, the fixed default image is shown, and said so."""
    printed = []

    def printer(args, timeout):
        printed.append(shlex.join(["gcloud", *args]))
        return gcloud.Result(tuple(args), stdout="")

    config = settings.config
    cloud = tpu_node.Cloud(printer, settings.project, config.zone, config.name, options=options_of(config))
    spec = settings.spec or tpu_node.Spec("TYPE", "IMAGE", "on-demand")
    if not spec.runtime_version:
        listing, failed = tpu_node.Cloud(runner, settings.project, config.zone, config.name).versions()
        cloud.versions()
        print("# the image: the newest suitable of the zone's runtime versions, chosen once at start\n" + printed.pop())
        if failed is not None:
            print(f"# (not answered here: {failed.line}; the fixed default shown)")
        try:
            image = (images.default_image_for(spec.accelerator_type) if failed else
                     images.zone_image(listing, spec.accelerator_type))
        except ValueError as e:
            raise ValueError(f"{config.zone}: {e}") from None
        spec = dataclasses.replace(spec, runtime_version=image)
    if settings.spec:
        print(f"# {slice_note(spec, config.name)}")
    steps = [("each poll: the newest checkpoint, the slice, the run on worker 0",
              lambda: (cloud.list_objects(f"{settings.model_dir}/{layout.CHECKPOINT_PREFIX}-*.index"), cloud.describe(),
                       cloud.ssh(worker.status_command()))),
             ("a (re)launch: a script copied to worker 0 and run there (nothing of it on a command line)",
              lambda: (cloud.scp(f"./{worker.LAUNCH_SCRIPT}", worker.LAUNCH_SCRIPT),
                       cloud.ssh(worker.launch_command()))),
             ("a lost slice (PREEMPTED, TERMINATED, not found twice): delete, create as recorded",
              lambda: (cloud.delete_queued() if spec.queued else cloud.delete(), cloud.create(spec))),
             ("the end (done, stopped, Ctrl-C): what it created is deleted",
              lambda: cloud.delete_queued() if spec.queued else cloud.delete())]
    for comment, calls in steps:
        print(f"# {comment}")
        calls()
        print("\n".join(printed))
        printed.clear()
    words, env = launch.words(spec, "RUN_ID")
    print(f"# the launch script writes {worker.WORKER_SCRIPT} and {worker.LAUNCH_ENV} (mode 600):\n"
          + "".join(f"#   {k}={v}\n" for k, v in env.items()) + "# and runs on worker 0:\n"
          + worker.start_command(launch.install_for(spec), launch.log_url, words))
    print(f"# {LAUNCH_NOTE}: the command, in pretrain's own words\n{shlex.join(words)}")
    return KeepAliveResult(exit_codes.DONE, "dry run", settings.state_file)


def slice_note(spec, name):
    """What a slice made as `spec` is, from the device table, and where the run goes on it."""
    found = parse_topology(spec.accelerator_type)
    made = "a queued resource" if spec.queued else "tpu-vm create"
    where = ("its one host runs pretrain with --tpu local" if found.hosts == 1 else
             f"worker 0 runs pretrain with --tpu {name}, the client of all {found.hosts} hosts, each feeding its own "
             f"{found.devices_per_host} devices from its share of the records")
    return (f"the slice: {spec.accelerator_type} ({found.generation.label}, {found.devices} TensorFlow devices on "
            f"{found.hosts} host{'s' if found.hosts > 1 else ''}), {spec.runtime_version}, {spec.capacity}, through "
            f"{made}; {where}")


# ---------------------------------------------------------------------------------------------- detached
SERVICE_ENV = "/etc/albert-tf/keeper.env"  # the unit's EnvironmentFile: ALBERT_TF_SOURCE, INSTALL_CMD (mode 600)


def service_words(config):
    """The command line of `config` without --print-service and --dry-run, pretrain's flags after --."""
    plain = dataclasses.replace(config, print_service=False, dry_run=False, pretrain_flags=[])
    words = [sys.executable, "-m", "albert_tf", "keep-alive", *run_config.to_argv(plain)]
    return words + (["--", *config.pretrain_flags] if config.pretrain_flags else [])


def service_unit(config):
    """A systemd unit that runs the keeper of `config` detached: restarted on a crash or a reboot (the state file
    makes a restarted keeper go on with the same slice and run id), not after it ended on purpose (0 done, 2 bad
    input, 4 stopped for a reason it logged, 77 another keeper holds the state file); `systemctl stop` is a
    SIGTERM: what the keeper made is deleted (TimeoutStopSec covers its 15 min of confirmed deletes). What worker 0
    installs comes from SERVICE_ENV, not from the unit (no secret in the unit or on a command line)."""
    command = " ".join(shlex.quote(w).replace("%", "%%").replace("$", "$$") for w in service_words(config))
    return "\n".join([
        "# albert-tf keep-alive as a systemd service (docs/tpu.md, \"Running the keeper for a week\"):",
        f"#   albert-tf keep-alive ... --print-service | sudo tee /etc/systemd/system/albert-tf-keeper-{config.name}"
        ".service",
        f"#   {SERVICE_ENV} (chmod 600): ALBERT_TF_SOURCE=... or INSTALL_CMD=..., one NAME=VALUE a line",
        f"#   sudo systemctl daemon-reload && sudo systemctl enable --now albert-tf-keeper-{config.name}",
        f"#   journalctl -u albert-tf-keeper-{config.name} -f       (its notes and last line)",
        *(["#   no --project: the service user's gcloud configuration names it (--project pins it)"]
          if config.project is None else []),
        "[Unit]",
        f"Description=albert-tf keeper of TPU {config.name} in {config.zone}",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"EnvironmentFile=-{SERVICE_ENV}",
        f"ExecStart={command}",
        "Restart=on-failure",
        "RestartSec=60",
        f"RestartPreventExitStatus={exit_codes.BAD_INPUT} {exit_codes.GAVE_UP} {exit_codes.LOCK_HELD}",
        "KillMode=mixed",
        f"TimeoutStopSec={decisions.FINAL_DELETE_SECONDS + 300:.0f}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ])


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

"""The keeper: keeps a pretraining run going on a Cloud TPU slice until its last checkpoint exists, from this
machine, with short gcloud calls (no ssh held open). Every `poll` seconds it lists the model dir's checkpoints
(done?), describes the slice and, on a READY slice, asks worker 0 about the run; what it does for each answer is
albert_tf/cloud/decisions.py's table. No TensorFlow here.

    settings = Settings.of(config, project)    # a KeepAliveConfig and the pinned project
    outcome = Keeper(settings, cloud, launch, clock=Clock(), say=print_to_stderr).run()
    outcome.exit_code (albert_tf.runtime.exit_codes: 0 done, 4 stopped for a reason it names, 130 Ctrl-C),
    outcome.line (the last line)

It never leaves a slice billing by mistake: whenever it ends (done, gave up, a permanent error, Ctrl-C, a state
that did not settle) it deletes the slice (and queued resource) it created, unless `keep_slice`, and its last line
says whether anything is left billing and the command that deletes it. Which slice is its own is decided when it
asks for one (recorded in the state file with the node's id), not after a create that succeeded.
"""
import dataclasses
import fcntl
import json
import os
import re
import shlex
import signal
import tempfile
import threading
import time

from albert_tf import layout
from albert_tf.cloud import decisions, gcloud, images, worker
from albert_tf.cloud.gcloud import NOT_FOUND
from albert_tf.cloud.tpu_node import Spec
from albert_tf.runtime import exit_codes
from albert_tf.settings.keeper_config import KeepAliveConfig, flag

LAUNCH_NOTE = "starting on worker 0"  # the note before each start: the command, in the words pretrain parses


class Clock:
    """Wall time and sleep (tests pass a fake one)."""

    def time(self):
        return time.time()

    def sleep(self, seconds):
        time.sleep(seconds)


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the keeper keeps, and how: its `config` (every setting is read from there) and what is derived from it
    once, at start: the pinned `project`, the run's model dir, the state file, and the `spec` of a slice to create
    (None without --type; its runtime_version "" until the keeper chooses it from the zone's versions list)."""
    config: KeepAliveConfig
    project: str
    spec: Spec | None

    @classmethod
    def of(cls, config, project):
        spec = Spec(config.type, config.image or "", config.capacity) if config.type else None
        return cls(config, project, spec)

    @property
    def model_dir(self):
        return self.config.run_model_dir

    @property
    def state_file(self):
        c = self.config
        return c.state_file or os.path.join(os.path.expanduser("~"), ".albert_tf", "keeper",
                                            f"{self.project}.{c.zone}.{c.name}")


@dataclasses.dataclass
class Launch:
    """How a run is started on worker 0: `words(spec)` → (the pretrain command's words, the environment)."""
    install: worker.Install
    log_url: str
    words: object  # callable(spec, run_id) -> (words, env)

    def install_for(self, spec):
        """The install on a slice made as `spec`: tensorflow-text of its image's TensorFlow release."""
        return dataclasses.replace(self.install, tensorflow_release=images.tensorflow_release(spec.runtime_version))


@dataclasses.dataclass
class Outcome:
    exit_code: int
    line: str


class Stop(Exception):
    """Ends the keeper: one line, and its exit code. `keep`: the keeper stops on what it failed to learn (an ssh or
    describe that does not answer, its own bad input): it deletes nothing, and its last line names what bills."""

    def __init__(self, line, exit_code=exit_codes.GAVE_UP, keep=False):
        super().__init__(line)
        self.exit_code, self.keep = exit_code, keep


class Terminated(BaseException):
    """SIGTERM or SIGHUP (a closed terminal, a shutdown, `kill`): the keeper ends as after Ctrl-C, cleaning up."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_label(run_id):
    """The value of the label LABEL that everything the keeper creates carries: the run id as a label allows
    (lower-case letters, digits, - and _; at most 63 characters)."""
    return re.sub(r"[^a-z0-9_-]", "-", run_id.lower())[:63]


LABEL = "albert-tf-run"


# ---------------------------------------------------------------------------------------------- the state file
@dataclasses.dataclass
class State:  # pylint: disable=too-many-instance-attributes
    """What the keeper records (the state file, JSON): where, what the slice is made of (`spec`), whether it is the
    keeper's own (asked for by it: `requested_at`, then the node's id), the run's id and model dir."""
    project: str = ""
    zone: str = ""
    name: str = ""
    spec: Spec | None = None
    owned: bool = False
    requested_at: float | None = None
    node_id: str = ""
    create_time: str = ""
    run_id: str = ""
    model_dir: str = ""


SPEC_KEYS = tuple(f.name for f in dataclasses.fields(Spec))


def read_state(path):
    """The State a state file records (an empty one when there is none). A file of an earlier version, with the
    spec's keys at its top level, reads the same."""
    if not os.path.exists(path):
        return State()
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
        spec = values.get("spec") or ({k: values[k] for k in SPEC_KEYS} if values.get(SPEC_KEYS[0]) else None)
        known = {f.name for f in dataclasses.fields(State)} - {"spec"}
        return State(**{k: v for k, v in values.items() if k in known}, spec=Spec(**spec) if spec else None)
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{flag('state_file')} {path}: not a keeper's state file ({e}); delete it to start "
                         "over") from None


def write_state(path, state):
    """Written atomically (a local file: albert_tf.files would import TensorFlow for its writes)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(json.dumps(dataclasses.asdict(state), indent=2, sort_keys=True) + "\n")
    os.replace(path + ".tmp", path)


# ---------------------------------------------------------------------------------------------- the keeper
class Keeper:  # pylint: disable=too-many-instance-attributes
    """One keeper run (see the module's docstring). `say(line)` prints a note."""

    def __init__(self, settings, cloud, launch, clock=None, say=None):
        self.s, self.c, self.cloud, self.launch = settings, settings.config, cloud, launch
        self.clock = clock or Clock()
        self.say = say or (lambda line: None)
        self.state = State()
        self.spec = settings.spec  # what a create asks for when the state records nothing (its image chosen at start)
        self.lock = None  # the state file's lock (one keeper per state file)
        self.not_found = 0  # NOT_FOUND answers in a row
        self.create_pending = False  # the last create failed (no capacity, or may not have been made)
        self.create_in_flight = False  # a create call was under way when the keeper was stopped
        self.unsettled_since = None
        self.step_when_unsettled = None  # the newest step when the unsettled wait began
        self.latest = None  # the newest checkpoint's step seen (None: none listed yet)
        self.relaunches = 0  # on this slice, in a row without progress
        self.lost_runs = 0  # runs in a row that lost their TPU, without a new checkpoint
        self.step_at_launch = None
        self.tools_checked = False
        self.requeues, self.requeue_at = 0, None  # a FAILED queued resource's backoff
        self.finished_since = None  # the last checkpoint is there: waiting for worker 0's `stopped 0`
        self.unfinished = ""  # done without `stopped 0`: what happened instead (on_finished)
        self.progress = None  # (the newest step, when it was first seen) while worker 0 says "running"
        self.sick = None  # [polls in a row reporting unhealthy, the newest step when they began]
        self.maintenance = ""  # the last upcoming maintenance noted

    # ------------------------------------------------------------------------------------------ the loop
    def run(self):
        """Keeps the run going; returns its Outcome after cleaning up (what it created is deleted and confirmed
        gone, or the last line names what bills). Bad input (a state file of another slice or keeper, a --type
        that differs from the recorded one) touches nothing."""
        previous = self.take_signals()
        try:
            try:
                self.start()
            except Stop as stop:  # before anything is touched
                self.say(str(stop))
                return Outcome(stop.exit_code, "nothing was touched: no gcloud call was made about the slice")
            except (KeyboardInterrupt, Terminated) as ended:  # a signal while it starts: nothing is made yet
                code = exit_codes.TERMINATED if isinstance(ended, Terminated) else exit_codes.INTERRUPTED
                self.say(f"ended by {ended or 'Ctrl-C'} while starting")
                return Outcome(code, "nothing was touched: no gcloud call was made about the slice")
            code, line, keep = self.loop()
            if line:
                self.say(line)
            self.defer_signals()
            last = self.clean_up(code == exit_codes.DONE, keep)
            if code == exit_codes.DONE and self.unfinished:
                last = f"{self.unfinished_line()}; {last.removeprefix('done: ')}"
            return Outcome(code, last)
        finally:
            self.restore_signals(previous)
            self.release()

    def loop(self):
        """(exit code, line, keep) of how the loop ended."""
        try:
            while True:
                self.clock.sleep(self.check())
        except Stop as stop:
            return stop.exit_code, str(stop), stop.keep
        except KeyboardInterrupt:
            return exit_codes.INTERRUPTED, "interrupted (Ctrl-C)", False
        except Terminated as ended:
            return exit_codes.TERMINATED, f"ended by {ended}", False

    # ------------------------------------------------------------------------------------------ signals and the lock
    def take_signals(self):
        """SIGTERM and SIGHUP end the loop as Ctrl-C does (Terminated); the handlers they had, to restore. Only in
        the main thread (Python's rule for signal handlers)."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {signum: signal.getsignal(signum) for signum in ENDING_SIGNALS}

        def terminated(signum, frame):  # pylint: disable=unused-argument
            raise Terminated(signum)

        signal.signal(signal.SIGTERM, terminated)
        signal.signal(signal.SIGHUP, terminated)
        if previous[signal.SIGINT] in (signal.SIG_IGN, signal.SIG_DFL, None):
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return previous

    def defer_signals(self):
        """During the clean-up a signal (a second Ctrl-C included) does not stop the delete: it is noted."""
        if threading.current_thread() is not threading.main_thread():
            return

        def noted(signum, frame):  # pylint: disable=unused-argument
            self.say(f"{signal.Signals(signum).name} during the clean-up: it goes on until what was made is deleted "
                     "(kill -9 stops it, and may leave the slice billing)")

        for signum in ENDING_SIGNALS:
            signal.signal(signum, noted)

    @staticmethod
    def restore_signals(previous):
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

    def take_lock(self):
        """One keeper per state file: an exclusive lock on STATE_FILE.lock, held until the keeper ends (the
        system drops it when the process dies)."""
        path = self.s.state_file + ".lock"
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.lock = open(path, "a+", encoding="utf-8")  # pylint: disable=consider-using-with
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.lock.seek(0)
            holder = self.lock.read().strip() or "another process"
            self.lock.close()
            self.lock = None
            raise Stop(f"{flag('state_file')} {self.s.state_file} is in use by another keeper ({holder}): one "
                       "keeper per state file", exit_codes.LOCK_HELD) from None
        self.lock.truncate(0)
        self.lock.write(f"pid {os.getpid()}\n")
        self.lock.flush()

    def release(self):
        if self.lock is not None:
            self.lock.close()
            self.lock = None

    # ------------------------------------------------------------------------------------------ the start
    def start(self):
        """Takes the state file's lock, reads it; pins project, zone and name there; a new run id when the model
        dir is new. Stop (touching nothing) on a state file that is another's or records another type."""
        s, c = self.s, self.c
        self.take_lock()
        self.state = read_state(s.state_file)
        recorded = (self.state.project, self.state.zone, self.state.name)
        if self.state.name and recorded != (s.project, c.zone, c.name):
            raise Stop(f"{flag('state_file')} {s.state_file} records {'/'.join(recorded)}, not "
                       f"{s.project}/{c.zone}/{c.name}: use another state file", exit_codes.BAD_INPUT)
        if s.spec and self.state.spec and s.spec.accelerator_type != self.state.spec.accelerator_type:
            raise Stop(f"{flag('type')} {s.spec.accelerator_type}: {s.state_file} records {c.name} as "
                       f"{self.state.spec.accelerator_type} (delete that file to start over)", exit_codes.BAD_INPUT)
        self.state.project, self.state.zone, self.state.name = s.project, c.zone, c.name
        if self.state.model_dir != s.model_dir or not self.state.run_id:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self.clock.time()))
            self.state.run_id = f"{c.name}.{os.path.basename(s.model_dir.rstrip('/'))}.{stamp}"
            self.state.model_dir = s.model_dir
        if self.spec is not None and not self.spec.runtime_version and not (self.state.owned and self.state.spec):
            self.spec = self.zone_spec()  # it may create from its flags: not a recreation as recorded
        self.save()
        owner = "this keeper's" if self.state.owned else "not this keeper's"
        self.say(f"keeping {c.name} in {s.project}/{c.zone} ({owner}); run id {self.state.run_id}; state in "
                 f"{s.state_file}")

    def zone_spec(self):
        """The spec to create with its image chosen once from the zone's versions list (images.zone_image); Stop,
        touching nothing, when the list cannot be read or offers nothing suitable."""
        listing, failed = self.ask(self.cloud.versions)
        if failed is not None:
            raise Stop(f"could not list the runtime versions of {self.c.zone} ({failed.failure}: {failed.line}); "
                       f"give {flag('image')} to name one", exit_codes.BAD_INPUT if failed.failure == gcloud.PERMANENT
                       else exit_codes.GAVE_UP)
        try:
            image = images.zone_image(listing, self.spec.accelerator_type)
        except ValueError as e:
            raise Stop(f"{self.c.zone}: {e}", exit_codes.BAD_INPUT) from None
        self.say(f"image {image}: the newest suitable of the runtime versions {self.c.zone} offers "
                 f"({flag('image')} names another)")
        return dataclasses.replace(self.spec, runtime_version=image)

    # ------------------------------------------------------------------------------------------ one poll
    def check(self):
        """One poll: returns the seconds until the next."""
        latest = self.latest_step()
        if latest is not None:
            self.latest = max(latest, self.latest or 0)
        node, failed = self.describe()
        finished = latest is not None and latest >= self.c.num_train_steps
        if finished and (node is not None or failed.failure == NOT_FOUND):  # a failed describe: waited on as ever
            return self.on_finished(node)
        if node is not None:
            self.not_found, self.create_pending = 0, False
            return self.on_node(node, latest)
        if failed.failure == NOT_FOUND:
            return self.on_not_found()
        action, why = decisions.FAILED_DESCRIBE.get(failed.failure, decisions.FAILED_DESCRIBE[gcloud.TRANSIENT])
        if action == decisions.STOP:  # it failed to learn the state: it deletes nothing
            raise Stop(f"describe {self.c.name} failed ({failed.failure}: {why}): {failed.line}", keep=True)
        return self.wait_on(f"UNKNOWN ({failed.line})", learned=False)

    def describe(self):
        """The node, asking up to `retries` times while the answer is a transient failure."""
        return self.ask(self.cloud.describe)

    def ask(self, call):
        """`call()` → (answer, None) or (None, the failed Result), asked up to --retries times (--retry-wait apart)
        while it fails transiently."""
        for attempt in range(self.c.retries):
            answer, failed = call()
            if answer is not None or failed.failure != gcloud.TRANSIENT or attempt == self.c.retries - 1:
                return answer, failed
            self.clock.sleep(self.c.retry_wait)
        raise AssertionError("unreachable")

    def on_finished(self, node):
        """The last checkpoint is there: done once worker 0 says `stopped 0` (pretrain's final eval, its steps/
        copy and the last log copy come after that checkpoint), or when the slice is not READY, or after
        --settle-timeout of waiting (`node` None: not found). Done without `stopped 0` (another code, the host gone,
        no answer, the slice lost) records in `unfinished` what happened, for the last line: a relaunch would not
        redo what may be missing (pretrain finds the run complete and exits 0)."""
        done = Stop(f"done: {self.s.model_dir} has its checkpoint of step {self.c.num_train_steps}", exit_codes.DONE)
        if node is None:
            if self.finished_since is not None:  # it was waiting for worker 0's word
                self.unfinished = f"TPU {self.c.name} was not found before worker 0 said how pretrain ended"
            raise done
        if node.state != "READY":
            self.unfinished = f"TPU {self.c.name} was {node.state} before worker 0 said how pretrain ended"
            raise done
        now = self.clock.time()
        self.finished_since = now if self.finished_since is None else self.finished_since
        status, last = worker.parse_status(self.cloud.ssh(worker.status_command()).stdout)
        if status == decisions.RUNNING or status is None:
            if now - self.finished_since <= self.c.settle_timeout:
                self.say(f"the last checkpoint is there; pretrain on {self.c.name} is "
                         f"{'still running' if status else 'not answering'}: waiting for it to finish")
                return min(self.c.poll, 60.0)
            self.say(f"pretrain on {self.c.name} did not finish within {flag('settle_timeout')} of its last checkpoint")
            self.unfinished = (f"pretrain on {self.c.name} did not say it stopped within {flag('settle_timeout')} "
                               "of its last checkpoint")
        elif status not in (exit_codes.DONE, decisions.NEVER_STARTED):
            self.say(f"pretrain on {self.c.name} stopped {status} after its last checkpoint: {last or 'no log line'} "
                     f"(log: {worker.RUN_DIR}/pretrain.log on worker 0, {self.launch.log_url}/)")
            self.unfinished = f"pretrain on {self.c.name} stopped {status} after its last checkpoint"
        raise done

    def unfinished_line(self):
        """The start of the last line of a run done without worker 0's `stopped 0`: what may be missing, and how
        to check."""
        metrics = layout.ModelDir(self.s.model_dir).metrics
        return (f"done, but {self.unfinished}: the checkpoint of step {self.c.num_train_steps} is complete; the "
                f"final eval row of {metrics}, the steps/ copy and the last log copy in {self.launch.log_url}/ may "
                f"be missing (check with: gcloud storage cat {metrics} | tail -n 2; the same pretrain command, run "
                "again anywhere that reads the bucket, evaluates a missing final eval row)")

    # ------------------------------------------------------------------------------------------ the slice
    def on_node(self, node, latest):
        self.claim(node)
        action, why = decisions.node_decision(node.state)
        if action == decisions.CHECK_RUN:
            self.requeues = 0
            if node.maintenance and node.maintenance != self.maintenance:
                self.say(f"TPU {self.c.name} has upcoming maintenance: {node.maintenance} (the run goes on; a "
                         "preemption it causes is handled as any)")
            self.maintenance = node.maintenance
            if self.cannot_run(node, latest):
                return self.replace("READY but unhealthy")
            return self.on_ready(latest)
        if action == decisions.REPLACE:
            return self.replace(node.state)
        if action == decisions.STOP:
            raise Stop(f"TPU {self.c.name} is {node.state} ({why})")
        return self.wait_on(node.state)

    def cannot_run(self, node, latest):
        """Whether a READY slice's health report (decisions.unhealthy) has said it cannot run at
        LOST_RUNS_BEFORE_RECREATE polls in a row with no new checkpoint; only an owned slice (or --allow-replace)
        is then recreated: another's is noted and left (P1). The count lasts until a create (a new slice): a
        replacing delete that failed is tried again at the next poll, with no run relaunched on the slice."""
        signs = decisions.unhealthy(node.health, node.symptoms)
        if signs is None:
            self.sick = None
            return False
        if self.sick is None or (latest is not None and latest > self.sick[1]):
            self.sick = [0, latest or 0]
        self.sick[0] += 1
        detail = f": {node.health_description}" if node.health_description else ""
        self.say(f"TPU {self.c.name} reports {signs}{detail} ({self.sick[0]} polls in a row with no new checkpoint)")
        if self.sick[0] < decisions.LOST_RUNS_BEFORE_RECREATE or not (self.state.owned or self.c.allow_replace):
            return False
        self.say(f"TPU {self.c.name} reported {signs} at {self.sick[0]} polls with no new checkpoint: the slice "
                 "cannot make progress")
        return True

    def claim(self, node):
        """Records what the node is. A node the keeper asked for is its own only when it carries the keeper's
        label (LABEL: the run id): an ALREADY_EXISTS answer or a create that timed out may show a stranger's node
        of the same name. One with another id than the keeper's recorded one is not its own (someone replaced
        it)."""
        st = self.state
        if st.owned and st.node_id and node.node_id and node.node_id != st.node_id:
            self.say(f"TPU {self.c.name} is another node (id {node.node_id}, not {st.node_id}): not this keeper's")
            st.owned = False
        if st.owned and not st.node_id:
            if node.labels.get(LABEL) == run_label(st.run_id):
                st.node_id, st.create_time = node.node_id, node.create_time
            else:
                self.say(f"TPU {self.c.name} exists without this run's label ({LABEL}={run_label(st.run_id)}): "
                         "another's node, not this keeper's")
                st.owned, st.spec = False, None
        if st.spec is None:
            st.spec = node.spec
            if not st.owned and not self.c.allow_replace:
                self.say(f"TPU {self.c.name} was not created by this keeper: it will not be deleted or recreated "
                         f"({flag('allow_replace')})")
        self.save()

    def wait_on(self, what, learned=True):
        """A transitional, unknown or unanswered state: touch nothing, bounded by --settle-timeout. `learned`
        False (an ssh or describe that does not answer): while the model dir advances the run is alive and the
        wait starts over; past the bound the keeper stops without deleting anything."""
        now = self.clock.time()
        if self.unsettled_since is None or (not learned and (self.latest or 0) > (self.step_when_unsettled or 0)):
            self.unsettled_since, self.step_when_unsettled = now, self.latest
        age = now - self.unsettled_since
        if age > self.c.settle_timeout:
            raise Stop(f"TPU {self.c.name} has been {what} for {age:.0f}s (more than {flag('settle_timeout')} "
                       f"{self.c.settle_timeout:g}s)", keep=not learned)
        self.say(f"TPU {self.c.name} is {what}: waiting ({age:.0f}s so far)")
        return self.c.poll

    def on_not_found(self):
        self.unsettled_since = None
        if self.state.spec and self.state.spec.queued and self.state.owned:
            queued = self.on_queued()
            if queued is not None:
                return queued
        self.not_found += 1
        if self.create_pending or self.state.spec is None:
            return self.create("does not exist")
        if self.not_found < 2:
            self.say(f"TPU {self.c.name} was not found: checking again before recreating it")
            return self.c.poll
        self.not_found = 0
        return self.replace(NOT_FOUND)

    def on_queued(self):
        """A Spot slice not found: its queued resource says why (None: there is none, go on as for any slice)."""
        queued, failed = self.cloud.describe_queued()
        if failed is not None and failed.failure == NOT_FOUND:
            return None
        if failed is not None:
            return self.wait_on(f"not found, its queued resource unknown ({failed.line})", learned=False)
        action, why = decisions.queued_decision(queued.state)
        if queued.state == "FAILED":
            return self.on_failed_queue(queued.error)
        if action == decisions.REQUEUE:
            self.say(f"the queued resource of {self.c.name} is {queued.state} ({why}): deleting it and queueing it "
                     "again")
            return self.delete_and_create()
        self.unsettled_since = None  # waiting for capacity is not bounded
        self.say(f"TPU {self.c.name} is queued: {queued.state} ({why})")
        return self.c.poll

    def on_failed_queue(self, error):
        """A FAILED queued resource: its error read. A permanent one (quota, permission, a bad request) stops the
        keeper; otherwise it is requeued after a backoff (--wait, doubling, up to REQUEUE_BACKOFF_CAP)."""
        if gcloud.classify(1, error) == gcloud.PERMANENT:
            raise Stop(f"the queued resource of {self.c.name} FAILED with a permanent error: {error}")
        now = self.clock.time()
        if self.requeue_at is None:
            pause = min(self.c.wait * 2 ** self.requeues, decisions.REQUEUE_BACKOFF_CAP)
            self.requeue_at = now + pause
            self.say(f"the queued resource of {self.c.name} FAILED ({error or 'no error given'}): queueing it again "
                     f"in {pause:g}s")
        if now < self.requeue_at:
            return self.requeue_at - now
        self.requeues, self.requeue_at = self.requeues + 1, None
        return self.delete_and_create()

    def replace(self, state):
        """A lost slice: deleted (unless gone) and created again as recorded, if it is the keeper's to replace."""
        if not self.state.owned and not self.c.allow_replace:
            if state == NOT_FOUND and self.spec is not None:  # another's slice is gone: nothing of it is touched
                self.say(f"TPU {self.c.name}, not this keeper's, is gone: creating one as {flag('type')} says")
                self.state.spec = None
                return self.create("does not exist")
            raise Stop(f"TPU {self.c.name} is {state}; it was not created by this keeper, so it is neither deleted "
                       f"nor recreated (delete it yourself, or run the keeper with {flag('allow_replace')})")
        self.say(f"TPU {self.c.name} is {state}: recreating it as {self.state.spec.text}")
        if state == NOT_FOUND and not self.state.spec.queued:
            return self.create(state)
        return self.delete_and_create()

    def delete_and_create(self):
        result = self.delete_slice()
        if not result.ok and result.failure != NOT_FOUND:
            self.say(f"the delete failed ({result.failure}: {result.line}): trying again in {self.c.wait:g}s")
            return self.c.wait
        return self.create("deleted")

    def delete_slice(self):
        """Deletes the slice: a Spot one's queued resource with it (--force); a node made without one (another's
        Spot slice) by itself."""
        if self.state.spec.queued:
            result = self.cloud.delete_queued()
            if result.failure != NOT_FOUND:
                return result
        return self.cloud.delete()

    def create(self, why):
        """Asks for the slice as recorded (or as the flags say, the first time), labelled with the run id.
        Ownership is recorded first; the label decides it when the node shows (claim)."""
        st = self.state
        if st.spec is None:
            if self.spec is None:
                raise Stop(f"TPU {self.c.name} does not exist and no {flag('type')} was given to create it",
                           exit_codes.BAD_INPUT, keep=True)
            st.spec = self.spec
        st.owned, st.requested_at, st.node_id, st.create_time = True, self.clock.time(), "", ""
        self.save()
        self.say(f"TPU {self.c.name} {why}: {'queueing' if st.spec.queued else 'creating'} it ({st.spec.text})")
        self.tools_checked, self.relaunches, self.lost_runs, self.sick = False, 0, 0, None  # a new slice: new counts
        self.create_in_flight = True
        result = self.cloud.create(st.spec, {LABEL: run_label(st.run_id)})
        self.create_in_flight = False
        self.create_pending = not result.ok
        if result.ok or result.failure == gcloud.ALREADY_EXISTS:
            self.create_pending = False
            return 0
        action, why = decisions.FAILED_CREATE.get(result.failure, decisions.FAILED_CREATE[gcloud.TRANSIENT])
        if action == decisions.STOP:
            raise Stop(f"could not create TPU {self.c.name} ({result.failure}: {why}): {result.line}")
        self.say(f"could not create TPU {self.c.name} ({result.failure}: {result.line}): trying again in "
                 f"{self.c.wait:g}s")
        return self.c.wait

    # ------------------------------------------------------------------------------------------ the run
    def on_ready(self, latest):
        result = self.cloud.ssh(worker.status_command())
        status, last = worker.parse_status(result.stdout)
        if status is None:  # decisions.NO_ANSWER
            return self.wait_on(f"READY, worker 0 not answering ({result.line if not result.ok else 'no status'})",
                                learned=False)
        self.unsettled_since = None
        action, why = decisions.run_decision(status)
        if action == decisions.NOTHING:
            return self.on_running(latest)
        self.progress = None
        if action == decisions.FINISHED:
            raise Stop(f"done: pretrain on {self.c.name} finished (exit 0)", exit_codes.DONE)
        if action == decisions.STOP:
            raise Stop(f"pretrain on {self.c.name} exited {status} ({why}), not relaunched: {last or 'no log line'} "
                       f"(log: {worker.RUN_DIR}/pretrain.log on worker 0, {self.launch.log_url}/)")
        if status in (exit_codes.RUNTIME_LOST, decisions.HOST_LOST):
            wedged = self.on_lost_run(latest)
            if wedged is not None:
                return wedged
        if action == decisions.RECHECK:
            self.say(f"pretrain on {self.c.name} exited {status} ({why}): checking the slice again")
            self.clock.sleep(self.c.retry_wait)
            node, _ = self.cloud.describe()
            if node is None or node.state != "READY":
                return 0
        elif action == decisions.LAUNCH:
            self.say(f"no run on {self.c.name} yet: launching")
        else:
            self.say(f"pretrain on {self.c.name} ended ({status}: {why}): relaunching")
        return self.relaunch(latest)

    def on_running(self, latest):
        """A run that says "running" is left alone while the model dir advances. One with no new checkpoint for
        --settle-timeout hangs where pretrain's own watchdog does not reach (--step-timeout 0, a wedged start): it
        is stopped and relaunched (a relaunch without progress: counted against --max-restarts). A listing that
        failed (`latest` None) teaches nothing: nothing is stopped on it."""
        now = self.clock.time()
        if latest is None:
            return self.c.poll
        if self.progress is None or latest > self.progress[0]:
            self.progress = (latest, now)
            return self.c.poll
        age = now - self.progress[1]
        if age <= self.c.settle_timeout:
            return self.c.poll
        self.say(f"pretrain on {self.c.name} says running but wrote no checkpoint for {age:.0f}s (more than "
                 f"{flag('settle_timeout')} {self.c.settle_timeout:g}s; at step {latest}): stopping and relaunching it")
        self.progress = None
        self.cloud.ssh(worker.stop_command())
        return self.relaunch(latest)

    def on_lost_run(self, latest):
        """A run that lost its TPU: counted while no new checkpoint comes; at LOST_RUNS_BEFORE_RECREATE the slice
        cannot make progress (a wedged host under READY) and an owned one is recreated (the decision recorded in
        the notes). None: relaunch as usual."""
        if latest is not None and self.step_at_launch is not None and latest > self.step_at_launch:
            self.lost_runs = 0
        self.lost_runs += 1
        if self.lost_runs < decisions.LOST_RUNS_BEFORE_RECREATE or not (self.state.owned or self.c.allow_replace):
            return None
        self.say(f"{self.lost_runs} runs in a row lost their TPU on {self.c.name} with no new checkpoint: the slice "
                 "cannot make progress (a failed repair)")
        return self.replace("READY but failing every run")

    def relaunch(self, latest):
        if latest is not None and self.step_at_launch is not None and latest > self.step_at_launch:
            self.relaunches = 0
        if self.relaunches >= self.c.max_restarts + 1:
            raise Stop(f"gave up: {self.c.max_restarts} relaunches in a row made no progress in {self.s.model_dir}")
        self.relaunches += 1
        self.step_at_launch = latest if latest is not None else self.step_at_launch
        self.check_tools()
        words, env = self.launch.words(self.state.spec, self.state.run_id)
        self.say(f"{LAUNCH_NOTE}: {shlex.join(words)}")
        script = worker.launch_script(self.launch.install_for(self.state.spec), self.launch.log_url, env, words)
        with tempfile.TemporaryDirectory(prefix="albert_tf_launch-") as local:  # mode 700: the launch is private
            path = os.path.join(local, worker.LAUNCH_SCRIPT)
            with open(path, "w", encoding="utf-8") as f:
                f.write(script)
            copied = self.cloud.scp(path, worker.LAUNCH_SCRIPT)
        started = copied if not copied.ok else self.cloud.ssh(worker.launch_command())
        if not started.ok:
            self.say(f"the launch failed ({started.line}): trying again at the next check")
        return self.c.poll

    def check_tools(self):
        """Before the first launch on a worker 0: can it fetch what it must install?"""
        command = self.launch.install.tools()
        if self.tools_checked or command is None:
            return
        result = self.cloud.ssh(command)
        if result.ok and not result.stdout.strip():
            raise Stop(self.launch.install.missing_tools_line())
        self.tools_checked = result.ok

    def latest_step(self):
        """The newest checkpoint's step in the model dir (0: none yet), or None when the listing failed."""
        names, _ = self.cloud.list_objects(f"{self.s.model_dir.rstrip('/')}/{layout.CHECKPOINT_PREFIX}-*.index")
        if names is None:
            return None
        steps = [int(m.group(1)) for n in names for m in [re.search(r"-(\d+)\.index$", n)] if m]
        return max(steps, default=0)

    # ------------------------------------------------------------------------------------------ the end
    def clean_up(self, done, keep=False):
        """Deletes what the keeper created (unless --keep-slice, or `keep`: it stopped on what it failed to learn)
        and confirms it gone; the last line says what is left billing."""
        name, spec = self.c.name, self.state.spec
        queued = bool(spec and spec.queued and self.state.owned)  # another's slice may have no queued resource
        command = self.cloud.delete_commands(queued)
        what = f"TPU {name}" + (" and its queued resource" if queued else "")
        prefix = "done: " if done else ""
        if not self.state.owned:
            node, failed = self.cloud.describe()
            if node is None and failed.failure == NOT_FOUND:
                return f"{prefix}nothing is left billing (TPU {name} does not exist)"
            return (f"TPU {name} was not created by this keeper and is left as it is: it bills while it exists; "
                    f"delete it with: {command}")
        if self.c.keep_slice or keep:
            why = flag("keep_slice") if self.c.keep_slice else "not deleted (the keeper did not learn its state)"
            return f"{why}: {what} left up and billing; delete it with: {command}"
        deleted = self.delete_confirmed()
        if deleted is None:
            return (f"could not delete {what} within {decisions.FINAL_DELETE_SECONDS:g}s: it may still bill; delete "
                    f"it with: {command}")
        if self.create_in_flight:
            return (f"{what} was being created when the keeper stopped: it may still appear and bill; check with "
                    f"gcloud compute tpus tpu-vm describe {name} --zone={self.c.zone} --project={self.s.project}, "
                    f"delete it with: {command}")
        if not deleted:
            return f"{prefix}nothing is left billing ({what} does not exist)"
        return f"{prefix}{what} deleted (describe: not found): nothing is left billing"

    def delete_confirmed(self):
        """Deletes the slice until describe says not found (its queued resource too), with backoff, for at most
        FINAL_DELETE_SECONDS. True: deleted; False: there was nothing to delete; None: not confirmed gone. After a
        describe that failed the next try describes first: a node of the slice's name made meanwhile may be a
        stranger's (P1)."""
        first, longest = decisions.FINAL_DELETE_BACKOFF
        deadline, pause, deleted, delete = self.clock.time() + decisions.FINAL_DELETE_SECONDS, first, False, True
        while True:
            result = self.delete_slice() if delete else None
            deleted = deleted or bool(result and result.ok)
            if result is None or result.ok or result.failure == NOT_FOUND:
                node, failed = self.cloud.describe()
                gone = (node is None and failed.failure == NOT_FOUND) or (node is not None and not self.ours(node))
                if gone and self.state.spec.queued:
                    _, failed = self.cloud.describe_queued()
                    gone = failed is not None and failed.failure == NOT_FOUND
                if gone:
                    return deleted
                delete = failed is None or failed.failure == NOT_FOUND
            else:
                self.say(f"the delete failed ({result.failure}: {result.line}): trying again in {pause:g}s")
            if self.clock.time() + pause > deadline:
                return None
            self.clock.sleep(pause)
            pause = min(pause * 2, longest)

    def ours(self, node):
        """Whether `node` is the one the keeper made (its recorded id, or its run's label): a node of the same name
        made by someone else after the keeper's was deleted is not."""
        if self.state.node_id and node.node_id:
            return node.node_id == self.state.node_id
        return node.labels.get(LABEL) == run_label(self.state.run_id)

    def save(self):
        write_state(self.s.state_file, self.state)


__all__ = ["Keeper", "Settings", "Launch", "Outcome", "Clock", "State", "read_state", "write_state", "Stop",
           "Terminated", "LABEL", "run_label", "LAUNCH_NOTE"]

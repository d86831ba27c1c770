"""The pretraining run behind `albert-tf pretrain`: `run(config)` takes a PretrainConfig and returns a PretrainResult
(albert_tf/settings/pretrain_config.py, where the config's ranges are checked when it is made). It checks every
input before anything is written, picks the strategy and the batch plan (albert_tf/training/batch_plan.py),
builds the model, the optimizer and the data, restores the latest checkpoint, and runs the loop. One step is
albert_tf/training/pretrain_step.py; the records' checks and the input pipeline are
albert_tf/data/pretraining_input.py; what the run shares with fine-tuning (the progress line, the TensorBoard
layout, the runtime-lost line) is albert_tf/training/run.py, the run record albert_tf/run_config.py.

Read it top to bottom: the checks (`check_before_lock`, `check_inputs`), `prepare`, `build`, then `train`. Up to
`--steps-per-loop` steps run inside one compiled tf.function (`loop.make_train_loop`), the original's
iterations_per_loop, and a call lasts about LOOP_SECONDS of wall time once the step time is known
(`loop.LoopLength`): between calls the host acts on signals, prints progress (`loop.Progress`, a line at least
every PROGRESS_SECONDS) and checks the save clock. Every
--steps-per-loop span ends with a metrics row (log line, TensorBoard summaries, metrics.jsonl: `loop.MetricsLog`), a
checkpoint when due (every --save-checkpoints-steps steps or --save-checkpoints-secs seconds), eval when due. The
model dir (its names: albert_tf/layout.py) gets its first file only after the first step has run.

Faults: the checkpoint holds the model, the optimizer (m, v and the step counter, so the learning rate resumes
exactly) and nothing else; the data order is a function of (seed, step): the input pipeline is rebuilt from the seed
and skips the batches already consumed, so neither a resume nor the call lengths change the result. SIGTERM and
SIGINT save at the end of the call in flight and exit 75 / 130 (`runtime.signals.StopSignal`; before the first step
has finished they exit at once, nothing being trained; a second SIGINT aborts). A non-finite loss stops before any
save (exit 3). The TPU, its runtime or a peer worker going away (a compiled call or a collective fails: a preempted
pod slice, a killed worker, a collective past --collective-timeout-secs) ends the run with one line naming the step
and the last checkpoint, exit 76: a relaunch resumes from that checkpoint, so --save-checkpoints-secs bounds the
loss. Exit codes: albert_tf/runtime/exit_codes.py.
"""
import dataclasses
import json
import os
import re
import sys
import time

import keras
import tensorflow as tf

from albert_tf import layout, messages, run_config
from albert_tf.checkpoints import handles, pretrained
from albert_tf.data import pretraining_input, record_index
from albert_tf.data.pretraining_input import (changed_files, check_records, data_error, eval_steps, make_dataset_fn,
                                              record_counts)
from albert_tf.files import check_input_file, check_output_dir, exists, read_text
from albert_tf.layout import EVAL_SPLIT, TRAIN_SPLIT
from albert_tf.runtime import devices, exit_codes, leftovers, lock, precision, random_state
from albert_tf.settings.pretrain_config import PretrainConfig, PretrainResult, check_cpu_run
from albert_tf.settings.run_length import repeat_index, steps_for_hours
from albert_tf.runtime.signals import LOOP_SECONDS, StopSignal, duration_text
from albert_tf.runtime.watchdog import StepWatchdog, exit_lost
from albert_tf.text import vocabulary
from albert_tf.training import costs, distribute
from albert_tf.training.batch_plan import BatchPlan, plan_batches
from albert_tf.training.loop import LoopLength, MetricsLog, Progress, evaluate, make_train_loop
from albert_tf.training.pretrain_step import (EVAL_KEYS, SUM_KEYS, build_model_and_optimizer, make_eval_step,
                                              make_train_step, metrics_from_sums)
from albert_tf.training.run import remove_leftovers, runtime_lost
from albert_tf.training.schedules import make_schedule

PROGRESS_SECONDS = 20.0   # a progress line at least this often (loop.Progress)


def check_before_lock(config: PretrainConfig):
    """What the PretrainConfig could not check when it was made, before the output lock: that this TensorFlow can
    drive the TPU --tpu names (checked once, here: the strategy is made without checking again), that the model dir
    can be written, that --spm-model is a SentencePiece model."""
    if config.tpu:  # refused before the output lock touches the bucket
        distribute.check_tpu_support(tpu=config.tpu)
    check_output_dir(config.model_dir, "--model-dir")
    if config.spm_model:
        check_input_file(config.spm_model, "--spm-model", vocabulary.SPM_FILE)


def check_inputs(config: PretrainConfig, model_config):
    """Everything that can be checked before the model dir gets its first file: the model config (`model_config`,
    an AlbertConfig) against the flags, the vocabulary, the records, the model dir's own config and --init's model.
    Returns ({flag: {file: size at start}} for --train-data, each --phase-data and --eval-data, --init's InitSource
    or None)."""
    model_config.check_seq_length(config.max_seq_length)
    if config.spm_model:
        vocabulary.check_vocabulary(model_config, config.spm_model)
    sizes = {"--train-data": check_records(config.train_data, "--train-data", config, model_config.vocab_size)}
    for phase in config.run_phases():  # --phases: each shorter phase's records, at its length
        if phase_flag(config, phase) not in sizes:
            sizes[phase_flag(config, phase)] = check_records(config.phase_data_of(phase), phase_flag(config, phase),
                                                             phase_config(config, phase), model_config.vocab_size)
    if config.eval_data:
        sizes["--eval-data"] = check_records(config.eval_data, "--eval-data", config, model_config.vocab_size)
    pretrained.check_config(config.model_dir, model_config)
    source = init_source(config.init, model_config) if config.init else None
    vocabulary.check_same_vocabulary(config.model_dir, config.spm_model)  # the vocabulary is part of the model
    spm_model = config.spm_model or vocabulary.spm_model_path(config.model_dir)
    for flag, files in sizes.items():  # records tokenized with another vocabulary are refused
        note = pretraining_input.check_record_vocabulary(list(files), flag, spm_model,
                                                         config.allow_unchecked_records)
        if note:
            messages.say("note", note, "pretrain")
    return sizes, source


def init_source(init, model_config):
    """--init's InitSource (albert_tf.checkpoints.handles) for a warm start: the whole pretrainer, encoder and heads
    (its weights: the optimizer, its step and the schedule start afresh), from a pretrained-model directory, a
    released model's name or a Hugging Face AlbertForPreTraining directory, of the same shapes as --config (dropout
    may differ). An export is refused: it holds the encoder only, not the heads pretraining continues to train."""
    source = handles.resolve_init(init, flag="--init")
    if source.kind == "export":
        raise ValueError(f"--init {init}: an export holds the encoder only, not the MLM and sentence-order heads that "
                         "pretraining continues to train; give the pretrained-model directory it was exported from")
    ours, theirs = model_config.to_dict(), source.config.to_dict()
    free = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")
    differ = sorted(k for k in set(ours) | set(theirs) if k not in free and ours.get(k) != theirs.get(k))
    if differ:
        raise ValueError(f"--init {init}: holds a model of another config (differs in {', '.join(differ)}: "
                         + ", ".join(f"{k} {theirs.get(k)} there, {ours.get(k)} in --config" for k in differ)
                         + "); give --config its albert_config.json")
    return source


def data_error_line(detail, config: PretrainConfig, setup, manager, step):
    """The error a data error mid-run ends the run with, once the last good state is saved (`save_last_good`):
    which file changed and how (its size at start and now), or the reader's own line (`detail`) when no file
    changed size (corrupt in place)."""
    changed = changed_files(setup.data_sizes)
    saved = save_last_good(config, setup, manager, step)
    if not changed:
        flag = ("--eval-data" if any(detail.startswith(p) for p in setup.data_sizes.get("--eval-data", {}))
                else "--train-data")
        return f"{flag}: {detail}; {saved}"
    flag, path, before, now = changed[0]
    more = f" (and {len(changed) - 1} more file(s))" if len(changed) > 1 else ""
    return (f"{flag}: {path} changed during the run{more}: {before:,} bytes at start, "
            f"{'gone' if now is None else f'{now:,} bytes'} now; {saved}. Put the data back as it was and run the "
            "same command to resume, or train on new data in a new --model-dir")


def save_last_good(config: PretrainConfig, setup, manager, step):
    """Saves the state of the last completed step `step` (the variables hold it: a step's update runs only after
    its batch was read) when no checkpoint has it yet; one client only (a multi-worker save needs every worker).
    Returns the phrase that says what was kept."""
    latest = manager.latest_checkpoint
    if latest and int(latest.rsplit("-", 1)[1]) == step:
        return f"the last checkpoint ({latest}, step {step}) is intact"
    if isinstance(setup.strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return f"stopped at step {step}, the last checkpoint ({latest or 'none'}) is intact"
    try:
        save(config, setup, manager, step)
    except Exception as e:  # pylint: disable=broad-except  # the device may be unusable after the error
        return f"saving step {step} failed ({type(e).__name__}); the last checkpoint ({latest or 'none'}) is intact"
    return f"saved step {step}, the last completed one, first ({manager.latest_checkpoint})"


# ---------------------------------------------------------------------------------------------- the run
def loop_end(step, config: PretrainConfig, undecided=False):
    """Where the span starting at `step` ends (the next multiple of --steps-per-loop, a checkpoint, an eval, the
    dropout switch, a phase switch (--phases), the end, and while a --budget-hours count is `undecided` the end of
    the warm-up), and whether it trains with dropout. No compiled call crosses the end; the metrics row of the span
    is written there."""
    boundaries = [config.num_train_steps, (step // config.steps_per_loop + 1) * config.steps_per_loop,
                  (step // config.save_checkpoints_steps + 1) * config.save_checkpoints_steps]
    boundaries += [end for _, _, end in config.phase_steps() if end > step]
    if undecided and step < config.num_warmup_steps:
        boundaries.append(config.num_warmup_steps)
    if config.eval_every_steps:
        boundaries.append((step // config.eval_every_steps + 1) * config.eval_every_steps)
    if config.no_dropout_after_step is not None and step < config.no_dropout_after_step:
        boundaries.append(config.no_dropout_after_step)
    training = not config.no_dropout and not (config.no_dropout_after_step is not None
                                            and step >= config.no_dropout_after_step)
    return min(boundaries), training


def restore(manager, model, config: PretrainConfig, source):
    """The latest checkpoint of this run, else --init's weights (`source`: its InitSource, resolved once by
    check_inputs; None without --init). Returns a line saying which, or None. Every worker restores the chief's
    checkpoint (the model dir's), not its own temporary save directory."""
    latest = tf.train.latest_checkpoint(config.model_dir)
    if latest:
        manager.checkpoint.restore(latest).assert_existing_objects_matched()
        return f"resumed from {latest}"
    if source is not None:
        try:
            path = handles.restore(model, source)
        except (ValueError, FileNotFoundError) as e:
            raise ValueError(f"--init {config.init}: {e}") from None
        return f"initialized the weights from {path}"
    return None


def check_host_memory(config: PretrainConfig, model_config, batch: BatchPlan, dtype, total=None):
    """Refuses a CPU run whose model cannot fit in this machine's memory (e.g. the paper's batch 4096 on a laptop),
    saying what to change, instead of being killed by the kernel minutes later without a word. The need is
    albert_tf.training.costs' host estimate (its activation model measured on CPU: benchmarks/plan_memory.py) with
    its slack and overhead (`costs.host_need_bytes`) for `model_config` (an AlbertConfig) split as `batch` says.
    The advice keeps the global batch first (--gradient-accumulation-steps, --remat), then halves it."""
    if total is None:
        total = costs.host_total_bytes()

    replicas = batch.replicas

    def need(global_batch, remat=config.remat, steps=batch.accumulation_steps):
        return costs.host_need_bytes(model_config, global_batch, config.max_seq_length, config.max_predictions,
                                     replicas=replicas, dtype=dtype, remat=remat, accumulation_steps=steps)

    if need(batch.global_batch) <= total:
        return
    hint = None
    for remat in sorted({config.remat, True}):
        steps = next((n for n in range(batch.accumulation_steps, batch.per_replica + 1)
                      if batch.per_replica % n == 0 and need(batch.global_batch, remat, n) <= total), None)
        if steps is not None:
            hint = " ".join(filter(None, ("--remat" if remat and not config.remat else "",
                                          f"--gradient-accumulation-steps {steps}" if steps > 1 else "")))
            hint += f" fits ({need(batch.global_batch, remat, steps) / 2**30:,.1f} GiB; same global batch)"
            break
    if hint is None:
        smaller = batch.global_batch
        while smaller > replicas and need(smaller, steps=1) > total:
            smaller //= 2
        smaller -= smaller % replicas
        hint = (f"--batch-size {smaller} fits" if smaller >= replicas and need(smaller, steps=1) <= total
                else "no batch fits: use a smaller config or a shorter --max-seq-length")
    extra = "" if dtype == "bfloat16" else "; --dtype bfloat16 needs about half the activation memory"
    raise ValueError(f"--batch-size {batch.global_batch} at --max-seq-length {config.max_seq_length} needs "
                     f"about {need(batch.global_batch) / 2**30:,.1f} GiB on this CPU run, the machine has "
                     f"{total / 2**30:,.1f} GiB ({hint}{extra}; the paper's batch 4096 is for TPU pods)")


# ---------------------------------------------------------------------------------------------- the run
@dataclasses.dataclass
class Setup:
    """What `prepare` decided from the PretrainConfig and the machine."""
    strategy: object
    model_config: object    # the AlbertConfig
    on_tpu: bool
    chief: bool
    batch: BatchPlan
    dtype: str
    jit: bool
    peak_flops: object      # one replica's peak FLOP/s, or None where the device is unknown
    dtype_choice: object = None  # albert_tf.runtime.precision.DtypeChoice: why `dtype` (kept in the run record)
    budget_steps: int | None = None  # --budget-hours: the step count decided (kept in the run record)
    data_sizes: dict = dataclasses.field(default_factory=dict)  # {flag: {file: bytes}} at start (check_inputs)
    init_source: object = None   # --init's InitSource (albert_tf.checkpoints.handles), resolved once; None without
    step_manager: object = None  # the CheckpointManager of MODEL_DIR/steps (--keep-step-checkpoints), set by build


def prepare(config: PretrainConfig):
    """Everything decided before the model is built, after check_before_lock and the output lock: the strategy (on a
    TPU, the connection and the TPU system's initialization), every check of the inputs (nothing is written before
    they pass; a model dir's run record must agree), the model config, the batch plan, dtype and XLA; prints the
    plan's line. Returns a Setup."""
    strategy = distribute.create_strategy(tpu=config.tpu, cpu_replicas=config.cpu_replicas,
                                          collective_timeout_secs=config.collective_timeout_secs,
                                          check_support=False)  # writes nothing; check_before_lock checked the TPU
    use_gpu = bool(tf.config.list_physical_devices("GPU"))
    on_tpu = distribute.is_tpu_strategy(strategy)
    if not on_tpu and not use_gpu:
        check_cpu_run(config)
    model_config = vocabulary.model_config(config.config, config.config_overrides, config.spm_model)
    data_sizes, source = check_inputs(config, model_config)
    record_path, current = layout.ModelDir(config.model_dir).run_record, run_config.run_record(config)
    recorded = run_config.check_record(record_path, current, run_config.resume_names(config), "--model-dir")
    note = schedule_change_note(current, recorded, record_path)
    if note:
        messages.say("note", note, "pretrain")
    batch = plan_batches(config, strategy.num_replicas_in_sync, on_tpu or use_gpu)
    choice = precision.choose(config.dtype, on_tpu, use_gpu, precision.probe_shape(
        batch.micro_batch, config.max_seq_length, model_config.hidden_size, model_config.intermediate_size))
    print(choice.describe(), flush=True)
    dtype = choice.dtype
    if not on_tpu and not use_gpu:
        check_host_memory(config, model_config, batch, dtype)
    peak, memory = devices.peak_flops_for(distribute.local_device_kind()), None
    if on_tpu:  # the figures of one TensorFlow device of the running generation (a TensorCore or a chip)
        tpu = distribute.running_tpu(strategy)
        print(tpu.line, flush=True)
        peak, memory = tpu.peak_per_device, tpu.hbm_per_device
    print(costs.summary_line(costs.estimate(
        model_config, batch.global_batch, config.max_seq_length, config.max_predictions, cores=batch.replicas,
        dtype=dtype, steps=config.num_train_steps, peak_flops_per_core=peak, memory_per_core=memory, remat=config.remat,
        accumulation_steps=batch.accumulation_steps)), flush=True)
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if dtype == "bfloat16" else "float32")
    keras.utils.set_random_seed(config.seed)
    return Setup(strategy=strategy, model_config=model_config, on_tpu=on_tpu, chief=distribute.is_chief(strategy),
                 batch=batch, dtype=dtype, dtype_choice=choice, jit=distribute.use_xla(config.xla, on_tpu, use_gpu),
                 peak_flops=peak, data_sizes=data_sizes, init_source=source)


def build(config: PretrainConfig, setup):
    """The model, the optimizer (--optimizer) and its schedule (--schedule; with --budget-hours its total deferred:
    training/schedules.py), variables created under the strategy (mirrored / on TPU), and the checkpoint manager,
    restored from this run's latest checkpoint or --init. Returns (model, optimizer, schedule, manager)."""
    with setup.strategy.scope():
        schedule = make_schedule(config.schedule, config.learning_rate, config.num_train_steps,
                                 config.num_warmup_steps, config.poly_power, config.decay_start, config.decay_length,
                                 deferred_total=config.budget_hours is not None)
        model, optimizer, schedule = build_model_and_optimizer(
            setup.model_config, config.learning_rate, config.num_train_steps, config.num_warmup_steps,
            config.poly_power, setup.batch.streams, remat=config.remat, schedule=schedule,
            optimizer=config.optimizer)
    # Every worker takes part in a multi-worker save; only the chief's copy is kept.
    checkpoint_dir = config.model_dir if setup.chief else os.path.join(
        config.model_dir, f".worker_{setup.strategy.cluster_resolver.task_id}")
    checkpoint = pretrained.checkpoint_for(model, optimizer)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=config.keep_checkpoint_max,
                                         step_counter=optimizer.iterations)
    if config.keep_step_checkpoints != 0:  # the step saves, kept apart from the rotation (a worker's: in its temp dir)
        setup.step_manager = tf.train.CheckpointManager(
            checkpoint, os.path.join(checkpoint_dir, layout.STEP_CHECKPOINTS_DIR),
            max_to_keep=config.keep_step_checkpoints, step_counter=optimizer.iterations)
    restored = restore(manager, model, config, setup.init_source)
    if restored:
        print(f"{restored} at step {int(optimizer.iterations.numpy())}", flush=True)
    return model, optimizer, schedule, manager


def save(config: PretrainConfig, setup, manager, step):
    """Writes the checkpoint of `step` (and, first time, albert_config.json, spm.model and the run record)."""
    if setup.chief:
        pretrained.write_files(config.model_dir, setup.model_config, config.spm_model)
        run_config.write_record(layout.ModelDir(config.model_dir).run_record, run_config.run_record(config),
                                setup.dtype_choice)
        if setup.budget_steps is not None:  # (a record written before the count was decided gets it now)
            run_config.add_to_record(layout.ModelDir(config.model_dir).run_record,
                                     **{HOURS_RECORD_KEY: setup.budget_steps})
    managers = [manager] + ([setup.step_manager] if setup.step_manager is not None
                            and step % config.save_checkpoints_steps == 0 else [])
    for each in managers:  # a failed save (a full disk) leaves nothing: the last complete one stays
        leftovers.save_checkpoint(each, step)
    if not setup.chief:  # other workers take part in the save but keep nothing
        tf.io.gfile.rmtree(manager.directory)


def leftover_places(model_dir):
    """Where a killed run of `model_dir` leaves temporaries (training.run.remove_leftovers): the files it writes
    atomically and its checkpoints', at the top; the step saves' in steps/."""
    names = (*layout.ModelDir.names(), os.path.basename(vocabulary.casing_path(layout.SPM_FILE)), lock.LOCK_FILE)
    return ((model_dir, "|".join(re.escape(n) for n in names), True),
            (layout.ModelDir(model_dir).step_checkpoints, None, True))


def run_steps(train_loop, iterator, num_steps, training, clock=time.time):
    """One compiled call of `num_steps` steps. Returns (a list of `num_steps` dicts, step by step, {key: float}: each
    step's sums over replicas, seconds by `clock`)."""
    start = clock()
    values = {k: v.numpy()[:num_steps].tolist() for k, v in train_loop(iterator, tf.constant(num_steps),
                                                                        training).items()}
    seconds = clock() - start
    return [{k: values[k][i] for k in values} for i in range(num_steps)], seconds


def non_finite(steps, first, manager):
    """The error line for a call whose loss is not finite (`steps`: its per-step sums, the first of them step
    `first`), naming the first step whose loss is not, or None."""
    for step, sums in enumerate(steps, first):
        metrics = metrics_from_sums(sums)
        if not all(v == v and abs(v) != float("inf") for v in metrics.values()):
            return (f"albert-tf pretrain: error: non-finite loss at step {step} ({metrics}); stopped without saving, "
                    f"the last checkpoint ({manager.latest_checkpoint or 'none'}) is intact. Lower --learning-rate "
                    "or check the data.")
    return None


class TrainRow:
    """The sums of the steps since the last `train` row of the metrics log (a row every --steps-per-loop steps, at
    checkpoints, evaluations and the end; its steps may span several compiled calls). The per-step values are added
    in step order (float64), so a row is the same however its steps were split into calls."""

    def __init__(self):
        self.sums, self.steps, self.seconds = {}, 0, 0.0

    def add(self, steps, seconds):
        """`steps`: one call's per-step sums (run_steps), in order; `seconds`: the call's wall time."""
        for sums in steps:
            self.sums = {k: self.sums.get(k, 0.0) + v for k, v in sums.items()}
        self.steps, self.seconds = self.steps + len(steps), self.seconds + seconds

    def metrics(self, seq_length, batch, learning_rate, flops_per_example, peak_flops):
        """The row: metrics_from_sums plus learning rate, mean grad norm and throughput of the calls (`batch`: the
        run's BatchPlan, `seq_length`: tokens per example)."""
        metrics = metrics_from_sums(self.sums)
        examples_per_sec = self.steps * batch.global_batch / self.seconds
        metrics.update(learning_rate=learning_rate, grad_norm=self.sums["grad_norm_sum"] / self.steps,
                       examples_per_sec=examples_per_sec, tokens_per_sec=examples_per_sec * seq_length)
        if peak_flops:
            metrics["mfu"] = examples_per_sec * flops_per_example / (peak_flops * batch.replicas)
        return metrics


def agree(strategy, num_steps, save_now, stop_now):
    """Host decisions taken from local clocks and signals, made the same on every worker: with several workers
    (MultiWorkerMirroredStrategy) each must run calls of the same length and save together, so the chief's length
    and save and any worker's stop win (one small all-reduce). One client (one process, TPU pods included):
    unchanged. Returns (num_steps, save_now, stop_now)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return num_steps, save_now, stop_now
    agreed = summed_over_workers(strategy, [num_steps, int(save_now), int(stop_now)], [0, 0, int(stop_now)])
    return int(agreed[0]), bool(agreed[1]), bool(agreed[2])


def summed_over_workers(strategy, chief_values, other_values):
    """The sum over a multi-worker strategy's workers of int vectors: the chief's `chief_values`, every other
    worker's `other_values` (one small all-reduce). Returns a numpy array."""
    chief_part = tf.constant(chief_values, tf.int32)
    other_part = tf.constant(other_values, tf.int32)

    def proposal():  # replica 0 of the group lives on the chief
        first = tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group, 0)
        return tf.where(first, chief_part, other_part)

    return strategy.reduce("sum", strategy.run(proposal), axis=None).numpy()


# ---------------------------------------------------------------------------------------------- the run's length
def decide_hours(config: PretrainConfig, setup, schedule, step, seconds_per_step):
    """--budget-hours turned into the run's step count, once, from `seconds_per_step` (the chief's, on every
    worker): the schedule's deferred total is set, the count is kept for the run record (setup.budget_steps).
    Refuses a count within the steps already trained or the warm-up. Returns the config of that length."""
    steps = steps_for_hours(config.budget_hours, seconds_per_step)
    if isinstance(setup.strategy, tf.distribute.MultiWorkerMirroredStrategy):
        steps = int(summed_over_workers(setup.strategy, [steps], [0])[0])
    if steps <= max(step, config.num_warmup_steps):
        raise ValueError(f"--budget-hours {config.budget_hours:g} buys {steps:,} steps at the measured "
                         f"{seconds_per_step:.4g} s per step, not more than the warm-up ({config.num_warmup_steps:,} "
                         "steps): give more hours or fewer warm-up steps")
    schedule.set_total(steps)
    setup.budget_steps = steps
    print(f"--budget-hours {config.budget_hours:g}: {seconds_per_step:.4g} s per step measured at step {step}: "
          f"{steps:,} steps", flush=True)
    return dataclasses.replace(config, num_train_steps=steps)


# The fields the learning rate's schedule is made of: a resume may change them (a wsd run extended, a recipe whose
# schedule changed between releases), and says so.
SCHEDULE_FIELDS = ("learning_rate", "num_warmup_steps", "schedule", "poly_power", "decay_start", "decay_length")


def schedule_change_note(current, recorded, path):
    """The line a resumed run prints when its schedule's settings (SCHEDULE_FIELDS of `current`, the run's
    run_config.run_record) differ from those its run record at `path` was started with (`recorded`: the record,
    None for a new run), else None:

        PATH: resuming with another learning-rate schedule than the run started with: schedule 'wsd' (started
        'polynomial'); the rate follows it from the resumed step (give the started values to keep the run's)"""
    changed = recorded and run_config.differing(recorded, current, SCHEDULE_FIELDS)
    if not changed:
        return None
    said = ", ".join(f"{name} {now!r} (started {then!r})" for name, now, then in changed)
    return (f"{path}: resuming with another learning-rate schedule than the run started with: {said}; the rate "
            "follows it from the resumed step (give the started values to keep the run's)")


def recorded_hours(config: PretrainConfig, setup, schedule):
    """A --budget-hours run's config of the count its run record holds (a resume; the schedule's total set), or
    the config as it is while no count was decided."""
    if config.budget_hours is None:
        return config
    recorded = (run_config.read_record(layout.ModelDir(config.model_dir).run_record) or {}).get(HOURS_RECORD_KEY)
    if recorded is None:
        return config
    schedule.set_total(recorded)
    setup.budget_steps = recorded
    return dataclasses.replace(config, num_train_steps=recorded)


HOURS_RECORD_KEY = "budget_hours_steps"  # the run record's key of a --budget-hours run's step count


# ---------------------------------------------------------------------------------------------- the phases
@dataclasses.dataclass
class PhaseLoop:
    """The phase that trains a span of steps (--phases; a run without is one phase): its compiled loop and its
    input pipeline positioned at the step within the phase. One per phase, made when the run enters it: one trace
    (one compile) per phase's static shapes."""
    phase: object      # settings.run_length.Phase, its batch set
    first: int         # the phase's steps: first..end-1
    end: int
    batch: BatchPlan
    iterator: object
    loop: object
    flops_per_example: float


def phase_config(config: PretrainConfig, phase, repeat=0):
    """The config one phase reads its data and batch from: the run's at the phase's length, batch and records;
    the `repeat`-th phase at a length already trained (a batch-size ramp: run_length.repeat_index) draws its data
    order with the seed + `repeat`, so it does not read the earlier phase's examples again in their order."""
    return dataclasses.replace(config, max_seq_length=phase.seq_length, batch_size=phase.batch_size,
                               train_data=config.phase_data_of(phase), phases=None, phase_data={},
                               budget_tokens=None, budget_hours=None, seed=config.seed + repeat)


def phase_flag(config: PretrainConfig, phase):
    """The flag of `phase`'s records: --train-data for the longest, else --phase-data SEQ."""
    return "--train-data" if phase.seq_length == config.max_seq_length else f"--phase-data {phase.seq_length}"


def phase_loop(config: PretrainConfig, setup, model, optimizer, step):
    """The PhaseLoop of the phase that trains `step`: its data positioned at `step` − the phase's first step (the
    data order of a phase is a function of the seed and the step within it), its batch plan (the streams the
    model was built with must divide it), its train step and compiled loop."""
    steps = config.phase_steps()
    index = next(i for i, (_, first, end) in enumerate(steps) if first <= step < end)
    phase, first, end = steps[index]
    one = dataclasses.replace(phase_config(config, phase, repeat_index([p for p, _, _ in steps], index)),
                              streams=setup.batch.streams)  # the model's streams
    batch = plan_batches(one, setup.batch.replicas, setup.on_tpu)
    counts = record_counts(one, one.train_data, setup.chief) if step > first else None
    sizes = setup.data_sizes[phase_flag(config, phase)]
    known = counts or record_index.known_counts(list(sizes), list(sizes.values()),
                                                layout.ModelDir(config.model_dir).record_counts)
    iterator = iter(setup.strategy.distribute_datasets_from_function(make_dataset_fn(
        one, setup.model_config, one.train_data, batch.global_batch, True, skip_global_batches=step - first,
        counts=counts, known_counts=(list(sizes), known))))  # positioned, not skipped
    loop = make_train_loop(setup.strategy, make_train_step(
        model, optimizer, batch.global_batch, setup.jit, batch.accumulation_steps, config.sop_weight), SUM_KEYS,
        per_step=config.steps_per_loop)  # LoopLength's cap: no call runs more steps
    if config.phases:
        print(f"phase {phase.seq_length}:{phase.fraction:g}: steps {first + 1}..{end} at sequence length "
              f"{phase.seq_length}, global batch {batch.global_batch}", flush=True)
    return PhaseLoop(phase, first, end, batch, iterator, loop, costs.training_flops_per_example(
        setup.model_config, phase.seq_length, config.max_predictions))


def make_evaluation(config: PretrainConfig, setup, model, step):
    """A function () → the eval metrics: every --eval-data record once (at most --max-eval-steps global batches),
    padded batches masked out, through one compiled eval loop for the whole run; None without --eval-data."""
    if not config.eval_data:
        return None
    eval_batch = setup.batch.eval_global_batch
    eval_loop = make_train_loop(setup.strategy, make_eval_step(model, eval_batch), EVAL_KEYS)
    counts = record_counts(config, config.eval_data, setup.chief and step > 0)
    dataset_fn = make_dataset_fn(config, setup.model_config, config.eval_data, eval_batch, False, counts=counts)
    num_steps = eval_steps(config, counts, eval_batch)

    def evaluation():
        dataset = setup.strategy.distribute_datasets_from_function(dataset_fn)
        return metrics_from_sums(evaluate(eval_loop, dataset, num_steps))

    return evaluation


def start_line(config: PretrainConfig, setup, step):
    """The line a run prints before its first step: what trains, from where to where, on what."""
    batch = setup.batch
    undecided = config.budget_hours is not None and setup.budget_steps is None
    return (f"training {setup.model_config.num_hidden_layers}-layer ALBERT from step {step} to "
            + ("the step --budget-hours buys (decided after the first steps)" if undecided
               else f"{config.num_train_steps}")
            + f" on {batch.replicas} replica(s) ({type(setup.strategy).__name__}), global batch {batch.global_batch}, "
            f"dtype {setup.dtype}, xla {'yes' if setup.jit or setup.on_tpu else 'no'}, streams {batch.streams}"
            f"{', remat' if config.remat else ''}"
            + (f", {batch.accumulation_steps} accumulated micro-batches of {batch.micro_batch} per replica"
               if batch.accumulation_steps > 1 else ""))


def train(config: PretrainConfig, setup, model, optimizer, schedule, manager, stop, started,  # pylint: disable=R0913
          watchdog, clock=time.time):
    """The loop (`watchdog` is beaten after each call, save and evaluation). Each compiled call runs
    1..--steps-per-loop steps and about LOOP_SECONDS of wall time (loop.LoopLength): between calls the host acts
    on a stop signal, the save clock and progress. After a call: the progress line, the metrics row when a
    --steps-per-loop span ends, a checkpoint and an evaluation when due; at a phase's end the next phase's loop
    (PhaseLoop). A --budget-hours run without a recorded count decides it after its second call (`clock` times the
    calls), within the warm-up. Returns a PretrainResult."""
    strategy, step, rows = setup.strategy, int(optimizer.iterations.numpy()), {}
    current = phase_loop(config, setup, model, optimizer, step)
    evaluation = make_evaluation(config, setup, model, step)
    log = MetricsLog(config.model_dir, setup.chief)
    log.truncate_after(step)
    print(start_line(config, setup, step), flush=True)
    lengths = LoopLength(config.steps_per_loop, LOOP_SECONDS)
    row, last_save, calls = TrainRow(), time.time(), 0
    undecided = config.budget_hours is not None and setup.budget_steps is None
    end, training = loop_end(step, config, undecided)
    num_steps = lengths.next(end - step)  # 1 on every worker: the first call traces and compiles
    with Progress(step, config.num_train_steps, current.batch.global_batch, started, PROGRESS_SECONDS) as progress:
        try:
            while True:
                progress.doing(f"steps {step + 1}..{step + num_steps} running")
                per_step, seconds = run_steps(current.loop, current.iterator, num_steps, training, clock)
                watchdog.beat()
                stop.at_once = None  # trained: from now on a signal saves first
                lengths.record(num_steps, seconds)
                error = non_finite(per_step, step + 1, manager)
                if error:
                    print(error, file=sys.stderr, flush=True)
                    return result(config, "non-finite", step, manager, rows, exit_code=exit_codes.NON_FINITE)
                step, calls = step + num_steps, calls + 1
                if undecided and (calls == 2 or step >= config.num_warmup_steps):  # the compiled call, then one
                    config, undecided = decide_hours(config, setup, schedule, step, seconds / num_steps), False
                    progress.total_steps, current.end = config.num_train_steps, config.num_train_steps  # one phase
                progress.advanced(step)
                row.add(per_step, seconds)
                done = step >= config.num_train_steps
                metrics = row.metrics(current.phase.seq_length, current.batch, float(schedule(step - 1)),
                                      current.flops_per_example, setup.peak_flops)  # (before a phase switch)
                if not done and step >= current.end:  # the phase switch: the next phase's loop, compiled anew
                    current, lengths = phase_loop(config, setup, model, optimizer, step), LoopLength(
                        config.steps_per_loop, LOOP_SECONDS)
                    progress.batch_size = current.batch.global_batch
                next_end, next_training = loop_end(step, config, undecided)
                save_by_clock = 0 < config.save_checkpoints_secs <= time.time() - last_save
                next_steps, save_by_clock, stopping = agree(strategy, 0 if done else lengths.next(next_end - step),
                                                            save_by_clock, stop.requested is not None and not done)
                if step == end or stopping:
                    rows[TRAIN_SPLIT] = metrics
                    log.write(TRAIN_SPLIT, step, rows[TRAIN_SPLIT])
                    row = TrainRow()
                if step % config.save_checkpoints_steps == 0 or done or save_by_clock or stopping:
                    progress.doing(f"saving step {step}")
                    save(config, setup, manager, step)
                    last_save = time.time()
                    watchdog.beat()
                if config.eval_data and step == end and not stopping and (
                        step % (config.eval_every_steps or config.save_checkpoints_steps) == 0 or done):
                    progress.doing(f"evaluating at step {step}")
                    rows[EVAL_SPLIT] = evaluation()
                    watchdog.beat()
                    progress.doing(None)  # (no progress line in the middle of the eval row)
                    log.write(EVAL_SPLIT, step, rows[EVAL_SPLIT])
                progress.doing(None)
                if stopping:
                    print(f"{stop.name or 'a stop on another worker'}: saved step {step} "
                          f"({manager.latest_checkpoint}); exiting, the same command resumes", flush=True)
                    return result(config, "stopped", step, manager, rows, exit_code=stop.exit_code)
                if done:
                    break
                end, training, num_steps = next_end, next_training, next_steps
        except (tf.errors.InvalidArgumentError, tf.errors.DataLossError, tf.errors.NotFoundError) as e:
            detail = data_error(e)
            if detail is None:
                raise
            line = data_error_line(detail, config, setup, manager, int(optimizer.iterations.numpy()))
            raise ValueError(line) from None
        except distribute.RUNTIME_ERRORS as e:  # the TPU, its runtime or a peer worker went away mid-run
            raise runtime_lost("pretrain", e, step, manager.latest_checkpoint) from None
        finally:
            log.close()
    print(f"done: step {step} in {duration_text(progress.elapsed())}, checkpoint {manager.latest_checkpoint}",
          flush=True)
    return result(config, "done", step, manager, rows)


def metric_rows(model_dir):
    """The rows of the model dir's metrics.jsonl ({"split", "step", **metrics}), [] without the file."""
    path = layout.ModelDir(model_dir).metrics
    if not exists(path):
        return []
    return [json.loads(line) for line in read_text(path).splitlines() if line.strip()]


def recorded_rows(rows, step):
    """{split: the metrics of its last row at or before `step`} of a run found complete (`rows`: metric_rows):
    what its result carries, as the run that trained it returned."""
    last = {}
    for row in rows:
        if row.get("split") in (TRAIN_SPLIT, EVAL_SPLIT) and row.get("step", step + 1) <= step:
            last[row["split"]] = {k: v for k, v in row.items() if k not in ("split", "step")}
    return last


def final_eval_recorded(rows, step):
    """Whether `rows` (metric_rows) hold an eval row of `step` (a run whose process ended in its final evaluation,
    after the last checkpoint, has none)."""
    return any(row.get("split") == EVAL_SPLIT and row.get("step") == step for row in rows)


def evaluate_final(config: PretrainConfig, setup, model, step):
    """The evaluation a complete run is missing at its last step (`model` restored from that checkpoint), written
    as the run would have written it; returns its metrics."""
    print(f"its evaluation at step {step} is missing from {layout.ModelDir(config.model_dir).metrics}: evaluating "
          "the final checkpoint", flush=True)
    metrics = make_evaluation(config, setup, model, step)()
    log = MetricsLog(config.model_dir, setup.chief)
    log.write(EVAL_SPLIT, step, metrics)
    log.close()
    return metrics


def result(config: PretrainConfig, status, step, manager, rows, exit_code=0):
    """The PretrainResult of a run that ends at `step` with `status`; `rows`: the last metrics rows by split."""
    return PretrainResult(status=status, step=step, model_dir=config.model_dir, checkpoint=manager.latest_checkpoint,
                          metrics=rows.get(TRAIN_SPLIT, {}), eval_metrics=rows.get(EVAL_SPLIT, {}),
                          exit_code=exit_code)


def run(config: PretrainConfig, exits, clock=time.time):
    """Pretrains as `config` (a PretrainConfig) says; returns a PretrainResult. `exits` (the CLI): a signal before
    the first step has finished exits the process at once (nothing to save), and a second SIGINT aborts it
    (runtime.signals.StopSignal). Keras' global dtype policy, which the run sets to its compute
    dtype, is restored when it ends: a notebook's later models (or a test's) are not built in the run's dtype.
    `clock` times the compiled calls (the step rate a --budget-hours run turns into its count; a test's fake
    clock)."""
    policy = keras.mixed_precision.global_policy()
    try:
        with random_state.kept():  # the global generators the run seeds, given back as they were
            return _run(config, exits, clock)
    finally:
        keras.mixed_precision.set_global_policy(policy)


def _run(config: PretrainConfig, exits, clock=time.time):
    """The body of `run`."""
    started = time.time()
    at_once = "before the first training step finished, nothing to save" if exits else None
    # The step watchdog ends the process (exit 76): the command line's only (a notebook's kernel is not ended).
    limits = (config.first_step_timeout, config.step_timeout) if exits else (0, 0)
    with (StopSignal("albert-tf pretrain", at_once=at_once, exits=exits) as stop,
          StepWatchdog(*limits, on_expire=exit_lost("albert-tf pretrain")) as watchdog):
        check_before_lock(config)
        # The lock before the strategy: a second client started by mistake on a TPU is refused before it connects
        # to the TPU and initializes (resets) it under the running job.
        with lock.output_lock(config.model_dir, "--model-dir") as held:  # one run per model dir (runtime.lock)
            remove_leftovers(held, leftover_places(config.model_dir))
            try:
                setup = prepare(config)
                stop.reinstall()  # after the strategy: a multi-worker one installs TensorFlow's own SIGTERM handler
                model, optimizer, schedule, manager = build(config, setup)
                config = recorded_hours(config, setup, schedule)  # a --budget-hours resume: its recorded count
            except distribute.RUNTIME_ERRORS as e:  # the runtime or a peer went away while starting
                raise runtime_lost("pretrain", e, None, None) from None
            step = int(optimizer.iterations.numpy())
            if step >= config.num_train_steps:
                print(f"the run in {config.model_dir} is already complete at step {step} (--num-train-steps "
                      f"{config.num_train_steps}): nothing to train; raise --num-train-steps to train further",
                      flush=True)
                written = metric_rows(config.model_dir)
                rows = recorded_rows(written, step)
                if config.eval_data and not final_eval_recorded(written, step):
                    rows[EVAL_SPLIT] = evaluate_final(config, setup, model, step)
                return result(config, "complete", step, manager, rows)
            return train(config, setup, model, optimizer, schedule, manager, stop, started, watchdog, clock)

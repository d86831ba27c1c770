"""The pretraining run behind `albert-tf pretrain` (albert_tf/settings/pretrain_config.py holds its settings, PretrainConfig):
check every input before anything is written, pick the strategy, build the model, the optimizer and the data,
restore the latest checkpoint, and run the loop. One step is albert_tf/training/pretrain_step.py; the records'
checks and the input pipeline are albert_tf/data/pretraining_input.py; what the run shares with fine-tuning (the
run record, the progress line, the TensorBoard layout, the runtime-lost line) is albert_tf/training/run.py.

Read it top to bottom: the checks, `prepare`, `build`, then `train`. Up to `--steps-per-loop` steps run inside one
compiled tf.function (`loop.make_train_loop`), the original's iterations_per_loop, and a call lasts about
LOOP_SECONDS of wall time once the step time is known (`loop.LoopLength`): between calls the host acts on signals,
prints progress (`loop.Progress`, a line at least every PROGRESS_SECONDS) and checks the save clock. Every
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
import sys
import time

import keras
import tensorflow as tf

from albert_tf import layout, messages
from albert_tf.checkpoints import handles, pretrained
from albert_tf.data import pretraining_input, record_index
from albert_tf.data.pretraining_input import (changed_files, check_records, data_error, eval_steps, make_dataset_fn,
                                              record_counts)
from albert_tf.files import check_input_file, check_output_dir, exists, read_text
from albert_tf.layout import EVAL_SPLIT, TRAIN_SPLIT
from albert_tf.runtime import devices, exit_codes, lock, precision, random_state
from albert_tf.runtime.signals import LOOP_SECONDS, StopSignal, duration_text
from albert_tf.runtime.watchdog import StepWatchdog, exit_lost
from albert_tf.text import vocabulary
from albert_tf.training import costs, distribute
from albert_tf.training.loop import LoopLength, MetricsLog, Progress, evaluate, make_train_loop
from albert_tf.training.pretrain_step import (EVAL_KEYS, SUM_KEYS, build_model_and_optimizer, make_eval_step,
                                              make_train_step, metrics_from_sums)
from albert_tf.training.run import check_record, resume_names, run_record, runtime_lost, write_record

PROGRESS_SECONDS = 20.0   # a progress line at least this often (loop.Progress)


def check_flags(cfg):
    positive = ("max_seq_length", "max_predictions", "batch_size", "num_train_steps", "steps_per_loop",
                "save_checkpoints_steps", "keep_checkpoint_max", "max_eval_steps", "gradient_accumulation_steps")
    for name in positive:
        if getattr(cfg, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(cfg, name)}")
    for name in ("num_warmup_steps", "save_checkpoints_secs", "collective_timeout_secs", "step_timeout",
                 "first_step_timeout", "keep_step_checkpoints"):
        if getattr(cfg, name) is not None and getattr(cfg, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(cfg, name)}")
    if cfg.streams is not None and cfg.streams <= 0:
        raise ValueError(f"--streams must be positive, got {cfg.streams}")
    if not 0 < cfg.masked_lm_prob <= 1:
        raise ValueError(f"--masked-lm-prob must be in (0, 1], got {cfg.masked_lm_prob}")
    default_prob = next(f.default for f in dataclasses.fields(cfg) if f.name == "masked_lm_prob")
    if cfg.masked_lm_prob != default_prob and not cfg.dynamic_masking:
        raise ValueError(f"--masked-lm-prob {cfg.masked_lm_prob} needs --dynamic-masking: records made with masks "
                         "carry their own (create-data --masked-lm-prob)")
    if cfg.max_predictions > cfg.max_seq_length:
        raise ValueError(f"--max-predictions {cfg.max_predictions} exceeds --max-seq-length {cfg.max_seq_length}")
    if cfg.num_warmup_steps >= cfg.num_train_steps:
        raise ValueError(f"--num-warmup-steps {cfg.num_warmup_steps:,} is not less than --num-train-steps "
                         f"{cfg.num_train_steps:,}: the learning rate would still be warming up when the run ends; "
                         f"give fewer warm-up steps (the paper's share, 2.5%, is {cfg.num_train_steps * 25 // 1000:,})")
    if cfg.tpu:  # paths, then what cannot drive a TPU: refused before the output lock touches the bucket
        distribute.check_cloud_paths({"--train-data": cfg.train_data, "--eval-data": cfg.eval_data,
                                      "--model-dir": cfg.model_dir, "--init": cfg.init})
        distribute.check_tpu_support(tpu=cfg.tpu)
    check_output_dir(cfg.model_dir, "--model-dir")
    if cfg.spm_model:
        check_input_file(cfg.spm_model, "--spm-model", vocabulary.SPM_FILE)


def check_inputs(cfg, config):
    """Everything that can be checked before the model dir gets its first file: the config against the flags, the
    vocabulary, the records, the model dir's own config, and (TPU) the paths. Returns {flag: {file: size at start}}
    for --train-data and --eval-data."""
    if cfg.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max-seq-length {cfg.max_seq_length} exceeds the config's max_position_embeddings "
                         f"{config.max_position_embeddings}")
    if cfg.spm_model:
        vocabulary.check_vocabulary(config, cfg.spm_model)
    sizes = {"--train-data": check_records(cfg.train_data, "--train-data", cfg, config.vocab_size)}
    if cfg.eval_data:
        sizes["--eval-data"] = check_records(cfg.eval_data, "--eval-data", cfg, config.vocab_size)
    pretrained.check_config(cfg.model_dir, config)
    if cfg.init:
        init_source(cfg.init, config)
    vocabulary.check_same_vocabulary(cfg.model_dir, cfg.spm_model)  # the vocabulary is part of the model
    spm_model = cfg.spm_model or vocabulary.spm_model_path(cfg.model_dir)
    for flag, files in sizes.items():  # records tokenized with another vocabulary are refused
        note = pretraining_input.check_record_vocabulary(list(files), flag, spm_model)
        if note:
            messages.say("note", note, "pretrain")
    return sizes


def init_source(init, config):
    """--init's InitSource (albert_tf.checkpoints.handles) for a warm start: the whole pretrainer, encoder and heads
    (its weights: the optimizer, its step and the schedule start afresh), from a pretrained-model directory, a
    released model's name or a Hugging Face AlbertForPreTraining directory, of the same shapes as --config (dropout
    may differ). An export is refused: it holds the encoder only, not the heads pretraining continues to train."""
    source = handles.resolve_init(init, flag="--init")
    if source.kind == "export":
        raise ValueError(f"--init {init}: an export holds the encoder only, not the MLM and sentence-order heads that "
                         "pretraining continues to train; give the pretrained-model directory it was exported from")
    ours, theirs = config.to_dict(), source.config.to_dict()
    free = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")
    differ = sorted(k for k in set(ours) | set(theirs) if k not in free and ours.get(k) != theirs.get(k))
    if differ:
        raise ValueError(f"--init {init}: holds a model of another config (differs in {', '.join(differ)}: "
                         + ", ".join(f"{k} {theirs.get(k)} there, {ours.get(k)} in --config" for k in differ)
                         + "); give --config its albert_config.json")
    return source


def data_error_line(detail, cfg, setup, manager, step):
    """The error a data error mid-run ends the run with, once the last good state is saved (`save_last_good`):
    which file changed and how (its size at start and now), or the reader's own line (`detail`) when no file
    changed size (corrupt in place)."""
    changed = changed_files(setup.data_sizes)
    saved = save_last_good(cfg, setup, manager, step)
    if not changed:
        flag = "--eval-data" if any(detail.startswith(p) for p in setup.data_sizes.get("--eval-data", {})) else \
            "--train-data"
        return f"{flag}: {detail}; {saved}"
    flag, path, before, now = changed[0]
    more = f" (and {len(changed) - 1} more file(s))" if len(changed) > 1 else ""
    return (f"{flag}: {path} changed during the run{more}: {before:,} bytes at start, "
            f"{'gone' if now is None else f'{now:,} bytes'} now; {saved}. Put the data back as it was and run the "
            "same command to resume, or train on new data in a new --model-dir")


def save_last_good(cfg, setup, manager, step):
    """Saves the state of the last completed step `step` (the variables hold it: a step's update runs only after
    its batch was read) when no checkpoint has it yet; one client only (a multi-worker save needs every worker).
    Returns the phrase that says what was kept."""
    latest = manager.latest_checkpoint
    if latest and int(latest.rsplit("-", 1)[1]) == step:
        return f"the last checkpoint ({latest}, step {step}) is intact"
    if isinstance(setup.strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return f"stopped at step {step}, the last checkpoint ({latest or 'none'}) is intact"
    try:
        save(cfg, setup, manager, step)
    except Exception as e:  # pylint: disable=broad-except  # the device may be unusable after the error
        return f"saving step {step} failed ({type(e).__name__}); the last checkpoint ({latest or 'none'}) is intact"
    return f"saved step {step}, the last completed one, first ({manager.latest_checkpoint})"


# ---------------------------------------------------------------------------------------------- the run
def loop_end(step, cfg):
    """Where the span starting at `step` ends (the next multiple of --steps-per-loop, a checkpoint, an eval, the
    dropout switch or the end), and whether it trains with dropout. No compiled call crosses the end; the metrics
    row of the span is written there."""
    boundaries = [cfg.num_train_steps, (step // cfg.steps_per_loop + 1) * cfg.steps_per_loop,
                  (step // cfg.save_checkpoints_steps + 1) * cfg.save_checkpoints_steps]
    if cfg.eval_every_steps:
        boundaries.append((step // cfg.eval_every_steps + 1) * cfg.eval_every_steps)
    if cfg.no_dropout_after_step is not None and step < cfg.no_dropout_after_step:
        boundaries.append(cfg.no_dropout_after_step)
    training = not cfg.no_dropout and not (cfg.no_dropout_after_step is not None
                                            and step >= cfg.no_dropout_after_step)
    return min(boundaries), training


def restore(manager, model, cfg):
    """The latest checkpoint of this run, else --init's weights. Returns a line saying which.
    Every worker restores the chief's checkpoint (the model dir's), not its own temporary save directory."""
    latest = tf.train.latest_checkpoint(cfg.model_dir)
    if latest:
        manager.checkpoint.restore(latest).assert_existing_objects_matched()
        return f"resumed from {latest}"
    if cfg.init:
        source = init_source(cfg.init, model.config)
        try:
            path = handles.restore(model, source)
        except (ValueError, FileNotFoundError) as e:
            raise ValueError(f"--init {cfg.init}: {e}") from None
        return f"initialized the weights from {path}"
    return None


def check_accumulation(cfg, replicas):
    """The per-replica micro-batch (--batch-size / replicas / --gradient-accumulation-steps); ValueError when
    the accumulation steps do not divide the per-replica batch."""
    per_replica = cfg.batch_size // replicas
    if per_replica % cfg.gradient_accumulation_steps:
        raise ValueError(f"--gradient-accumulation-steps {cfg.gradient_accumulation_steps} does not divide the "
                         f"per-replica batch {per_replica} (--batch-size {cfg.batch_size} / {replicas} "
                         "replicas)")
    return per_replica // cfg.gradient_accumulation_steps


POD_DEFAULTS = {"batch_size": 4096, "num_train_steps": 125_000}  # PretrainConfig's defaults: the paper's pod run


def check_cpu_run(cfg):
    """Refuses a run on this machine's CPU left at the pod recipe's batch and steps (4096 x 125,000: weeks here):
    one line asking for both, and where to size them."""
    if all(getattr(cfg, name) == value for name, value in POD_DEFAULTS.items()):
        raise ValueError(
            f"--batch-size {cfg.batch_size} and --num-train-steps {cfg.num_train_steps:,} are the pod recipe's "
            "defaults (weeks of training on a CPU); give both for this machine, e.g. --batch-size 32 "
            "--num-train-steps 2000 --num-warmup-steps 200 (`albert-tf plan --config CONFIG --topology cpu "
            "--batch-size B --num-train-steps N` says what fits and how long it takes)")


def check_host_memory(cfg, config, replicas, dtype, total=None):
    """Refuses a CPU run whose model cannot fit in this machine's memory (e.g. the paper's batch 4096 on a laptop),
    saying what to change, instead of being killed by the kernel minutes later without a word. The need is
    albert_tf.training.costs' host estimate (its activation model measured on CPU: benchmarks/plan_memory.py) with
    its slack and overhead (`costs.host_need_bytes`). The advice keeps the global batch first
    (--gradient-accumulation-steps, --remat), then halves it."""
    if total is None:
        total = costs.host_total_bytes()

    def need(batch, remat=cfg.remat, steps=cfg.gradient_accumulation_steps):
        return costs.host_need_bytes(config, batch, cfg.max_seq_length, cfg.max_predictions, replicas=replicas,
                                       dtype=dtype, remat=remat, accumulation_steps=steps)

    if need(cfg.batch_size) <= total:
        return
    per_replica = cfg.batch_size // replicas
    hint = None
    for remat in sorted({cfg.remat, True}):
        steps = next((n for n in range(cfg.gradient_accumulation_steps, per_replica + 1)
                      if per_replica % n == 0 and need(cfg.batch_size, remat, n) <= total), None)
        if steps is not None:
            hint = " ".join(filter(None, ("--remat" if remat and not cfg.remat else "",
                                          f"--gradient-accumulation-steps {steps}" if steps > 1 else "")))
            hint += f" fits ({need(cfg.batch_size, remat, steps) / 2**30:,.1f} GiB; same global batch)"
            break
    if hint is None:
        batch = cfg.batch_size
        while batch > replicas and need(batch, steps=1) > total:
            batch //= 2
        batch -= batch % replicas
        hint = (f"--batch-size {batch} fits" if batch >= replicas and need(batch, steps=1) <= total
                else "no batch fits: use a smaller config or a shorter --max-seq-length")
    extra = "" if dtype == "bfloat16" else "; --dtype bfloat16 needs about half the activation memory"
    raise ValueError(f"--batch-size {cfg.batch_size} at --max-seq-length {cfg.max_seq_length} needs "
                     f"about {need(cfg.batch_size) / 2**30:,.1f} GiB on this CPU run, the machine has "
                     f"{total / 2**30:,.1f} GiB ({hint}{extra}; the paper's batch 4096 is for TPU pods)")


# ---------------------------------------------------------------------------------------------- the run
@dataclasses.dataclass
class Setup:
    """What `prepare` decided from the flags and the machine."""
    strategy: object
    config: object
    on_tpu: bool
    chief: bool
    replicas: int
    eval_batch_size: int
    dtype: str
    jit: bool
    streams: int
    peak_flops: object      # one replica's peak FLOP/s, or None where the device is unknown
    dtype_choice: object = None  # albert_tf.runtime.precision.DtypeChoice: why `dtype` (kept in the run record)
    data_sizes: dict = dataclasses.field(default_factory=dict)  # {flag: {file: bytes}} at start (check_inputs)
    step_manager: object = None  # the CheckpointManager of MODEL_DIR/steps (--keep-step-checkpoints), set by build


def choose_streams(cfg, micro_batch, on_tpu, use_gpu):
    """--streams, or its default: 2 on CPU, 1 on GPU/TPU and with --remat (with two, TensorFlow's graph optimizer,
    Grappler, keeps most of what remat frees: benchmarks/plan_memory.py, docs/benchmarks.md);
    1 where 2 does not divide the per-replica (micro-)batch."""
    streams = cfg.streams or (1 if on_tpu or use_gpu or cfg.remat else 2)
    if micro_batch % streams:
        if cfg.streams:
            accumulating = cfg.gradient_accumulation_steps > 1
            raise ValueError(f"--streams {streams} does not divide the per-replica {'micro-' if accumulating else ''}"
                             f"batch {micro_batch} (--batch-size / replicas"
                             f"{' / --gradient-accumulation-steps' if accumulating else ''})")
        streams = 1
    return streams


def prepare(cfg):
    """Everything decided before the model is built, after check_flags and the output lock: the strategy (on a TPU,
    the connection and the TPU system's initialization), every check of the inputs (nothing is written before they
    pass; a model dir's run record must agree), the model config, dtype, XLA and streams; prints the plan's line.
    Returns a Setup."""
    strategy = distribute.create_strategy(tpu=cfg.tpu, cpu_replicas=cfg.cpu_replicas,
                                          collective_timeout_secs=cfg.collective_timeout_secs)  # writes nothing
    use_gpu = bool(tf.config.list_physical_devices("GPU"))
    if not distribute.is_tpu_strategy(strategy) and not use_gpu:
        check_cpu_run(cfg)
    config = vocabulary.model_config(cfg.config, cfg.config_overrides, cfg.spm_model)
    data_sizes = check_inputs(cfg, config)
    check_record(layout.ModelDir(cfg.model_dir).run_record, run_record(cfg), resume_names(cfg), "--model-dir")
    on_tpu, replicas = distribute.is_tpu_strategy(strategy), strategy.num_replicas_in_sync
    eval_batch_size = cfg.eval_batch_size or cfg.batch_size
    for flag, size in (("--batch-size", cfg.batch_size), ("--eval-batch-size", eval_batch_size)):
        if size % replicas:
            raise ValueError(f"{flag} {size} is not divisible by the {replicas} replicas")
    micro_batch = check_accumulation(cfg, replicas)
    choice = precision.choose(cfg.dtype, on_tpu, use_gpu, precision.probe_shape(
        micro_batch, cfg.max_seq_length, config.hidden_size, config.intermediate_size))
    print(choice.describe(), flush=True)
    dtype = choice.dtype
    streams = choose_streams(cfg, micro_batch, on_tpu, use_gpu)
    if not on_tpu and not use_gpu:
        check_host_memory(cfg, config, replicas, dtype)
    peak = devices.peak_flops_for(distribute.local_device_kind())
    print(costs.summary_line(costs.estimate(
        config, cfg.batch_size, cfg.max_seq_length, cfg.max_predictions, cores=replicas, dtype=dtype,
        steps=cfg.num_train_steps, peak_flops_per_core=peak,
        memory_per_core=devices.V3_HBM_PER_CORE if on_tpu else None, remat=cfg.remat,
        accumulation_steps=cfg.gradient_accumulation_steps)), flush=True)
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if dtype == "bfloat16" else "float32")
    keras.utils.set_random_seed(cfg.seed)
    return Setup(strategy=strategy, config=config, on_tpu=on_tpu, chief=distribute.is_chief(strategy),
                 replicas=replicas, eval_batch_size=eval_batch_size, dtype=dtype, dtype_choice=choice,
                 jit=distribute.use_xla(cfg.xla, on_tpu, use_gpu), streams=streams, peak_flops=peak,
                 data_sizes=data_sizes)


def build(cfg, setup):
    """The model, LAMB and its schedule (variables created under the strategy: mirrored / on TPU) and the
    checkpoint manager, restored from this run's latest checkpoint or --init. Returns
    (model, optimizer, schedule, manager)."""
    with setup.strategy.scope():
        model, optimizer, schedule = build_model_and_optimizer(
            setup.config, cfg.learning_rate, cfg.num_train_steps, cfg.num_warmup_steps, cfg.poly_power,
            setup.streams, remat=cfg.remat)
    # Every worker takes part in a multi-worker save; only the chief's copy is kept.
    checkpoint_dir = cfg.model_dir if setup.chief else os.path.join(
        cfg.model_dir, f".worker_{setup.strategy.cluster_resolver.task_id}")
    checkpoint = pretrained.checkpoint_for(model, optimizer)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=cfg.keep_checkpoint_max,
                                         step_counter=optimizer.iterations)
    if cfg.keep_step_checkpoints != 0:  # the step saves, kept apart from the rotation (a worker's: in its temp dir)
        setup.step_manager = tf.train.CheckpointManager(
            checkpoint, os.path.join(checkpoint_dir, layout.STEP_CHECKPOINTS_DIR),
            max_to_keep=cfg.keep_step_checkpoints, step_counter=optimizer.iterations)
    restored = restore(manager, model, cfg)
    if restored:
        print(f"{restored} at step {int(optimizer.iterations.numpy())}", flush=True)
    return model, optimizer, schedule, manager


def save(cfg, setup, manager, step):
    """Writes the checkpoint of `step` (and, first time, albert_config.json, spm.model and the run record)."""
    if setup.chief:
        pretrained.write_files(cfg.model_dir, setup.config, cfg.spm_model)
        write_record(layout.ModelDir(cfg.model_dir).run_record, run_record(cfg), setup.dtype_choice)
    managers = [manager] + ([setup.step_manager] if setup.step_manager is not None
                            and step % cfg.save_checkpoints_steps == 0 else [])
    for each in managers:
        try:
            each.save(checkpoint_number=step)
        except tf.errors.OpError:  # a full disk: the half-written save goes, the last complete one stays
            remove_partial_save(each.directory, step)
            raise
    if not setup.chief:  # other workers take part in the save but keep nothing
        tf.io.gfile.rmtree(manager.directory)


def remove_partial_save(directory, step):
    """Removes what a failed save of `step` left in `directory` (TensorFlow's CKPT_temp directory, the files of a
    checkpoint the `checkpoint` state file does not name): the state file still names the last complete save."""
    prefix = os.path.join(directory, f"ckpt-{step}")
    for path in tf.io.gfile.glob(prefix + "_temp*") + tf.io.gfile.glob(prefix + ".*"):
        try:
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            else:
                tf.io.gfile.remove(path)
        except tf.errors.OpError:
            pass


def run_steps(train_loop, iterator, num_steps, training):
    """One compiled call of `num_steps` steps. Returns (sums {key: float}, wall seconds)."""
    start = time.time()
    sums = {k: float(v) for k, v in train_loop(iterator, tf.constant(num_steps), training).items()}
    return sums, time.time() - start


def non_finite(sums, first, last, manager):
    """The error line for a call whose loss is not finite (steps first..last), or None."""
    metrics = metrics_from_sums(sums)
    if all(v == v and abs(v) != float("inf") for v in metrics.values()):
        return None
    steps = f"step {last}" if first == last else f"steps {first}..{last}"
    return (f"albert-tf pretrain: error: non-finite loss in {steps} ({metrics}); stopped without saving, the last "
            f"checkpoint ({manager.latest_checkpoint or 'none'}) is intact. Lower --learning-rate or check the data.")


class TrainRow:
    """The sums of the steps since the last `train` row of the metrics log (a row every --steps-per-loop steps, at
    checkpoints, evaluations and the end; its steps may span several compiled calls)."""

    def __init__(self):
        self.sums, self.steps, self.seconds = {}, 0, 0.0

    def add(self, sums, steps, seconds):
        self.sums = {k: self.sums.get(k, 0.0) + v for k, v in sums.items()}
        self.steps, self.seconds = self.steps + steps, self.seconds + seconds

    def metrics(self, cfg, learning_rate, flops_per_example, peak_flops, replicas):
        """The row: metrics_from_sums plus learning rate, mean grad norm and throughput of the calls."""
        metrics = metrics_from_sums(self.sums)
        examples_per_sec = self.steps * cfg.batch_size / self.seconds
        metrics.update(learning_rate=learning_rate, grad_norm=self.sums["grad_norm_sum"] / self.steps,
                       examples_per_sec=examples_per_sec, tokens_per_sec=examples_per_sec * cfg.max_seq_length)
        if peak_flops:
            metrics["mfu"] = examples_per_sec * flops_per_example / (peak_flops * replicas)
        return metrics


def agree(strategy, num_steps, save_now, stop_now):
    """Host decisions taken from local clocks and signals, made the same on every worker: with several workers
    (MultiWorkerMirroredStrategy) each must run calls of the same length and save together, so the chief's length
    and save and any worker's stop win (one small all-reduce). One client (one process, TPU pods included):
    unchanged. Returns (num_steps, save_now, stop_now)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return num_steps, save_now, stop_now
    chief_part = tf.constant([num_steps, int(save_now), int(stop_now)], tf.int32)
    other_part = tf.constant([0, 0, int(stop_now)], tf.int32)

    def proposal():  # replica 0 of the group lives on the chief
        first = tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group, 0)
        return tf.where(first, chief_part, other_part)

    agreed = strategy.reduce("sum", strategy.run(proposal), axis=None).numpy()
    return int(agreed[0]), bool(agreed[1]), bool(agreed[2])


def make_evaluation(cfg, setup, model, step):
    """A function () → the eval metrics: every --eval-data record once (at most --max-eval-steps global batches),
    padded batches masked out, through one compiled eval loop for the whole run; None without --eval-data."""
    if not cfg.eval_data:
        return None
    eval_loop = make_train_loop(setup.strategy, make_eval_step(model, setup.eval_batch_size), EVAL_KEYS)
    counts = record_counts(cfg, cfg.eval_data, setup.chief and step > 0)
    dataset_fn = make_dataset_fn(cfg, setup.config, cfg.eval_data, setup.eval_batch_size, False, counts=counts)
    num_steps = eval_steps(cfg, counts, setup.eval_batch_size)

    def evaluation():
        dataset = setup.strategy.distribute_datasets_from_function(dataset_fn)
        return metrics_from_sums(evaluate(eval_loop, dataset, num_steps))

    return evaluation


def train(cfg, setup, model, optimizer, schedule, manager, stop, started, watchdog):  # pylint: disable=R0913
    """The loop (`watchdog` is beaten after each call, save and evaluation). Each compiled call runs 1..--steps-per-loop steps and about LOOP_SECONDS of wall time
    (loop.LoopLength): between calls the host acts on a stop signal, the save clock and progress. After a call:
    the progress line, the metrics row when a --steps-per-loop span ends, a checkpoint and an evaluation when
    due. Returns a PretrainResult."""
    strategy, step, rows = setup.strategy, int(optimizer.iterations.numpy()), {}
    counts = record_counts(cfg, cfg.train_data, setup.chief) if step else None
    sizes = setup.data_sizes["--train-data"]
    known = counts or record_index.known_counts(list(sizes), list(sizes.values()),
                                                layout.ModelDir(cfg.model_dir).record_counts)
    train_iterator = iter(strategy.distribute_datasets_from_function(make_dataset_fn(
        cfg, setup.config, cfg.train_data, cfg.batch_size, True, skip_global_batches=step,
        counts=counts, known_counts=(list(sizes), known))))  # positioned, not skipped
    train_loop = make_train_loop(strategy, make_train_step(
        model, optimizer, cfg.batch_size, setup.jit, cfg.gradient_accumulation_steps), SUM_KEYS)
    evaluation = make_evaluation(cfg, setup, model, step)
    log = MetricsLog(cfg.model_dir, setup.chief)
    log.truncate_after(step)
    flops_per_example = costs.training_flops_per_example(setup.config, cfg.max_seq_length, cfg.max_predictions)
    print(f"training {setup.config.num_hidden_layers}-layer ALBERT from step {step} to {cfg.num_train_steps} on "
          f"{setup.replicas} replica(s) ({type(strategy).__name__}), global batch {cfg.batch_size}, "
          f"dtype {setup.dtype}, xla {'yes' if setup.jit or setup.on_tpu else 'no'}, streams {setup.streams}"
          f"{', remat' if cfg.remat else ''}"
          + (f", {cfg.gradient_accumulation_steps} accumulated micro-batches of "
             f"{cfg.batch_size // setup.replicas // cfg.gradient_accumulation_steps} per replica"
             if cfg.gradient_accumulation_steps > 1 else ""), flush=True)
    lengths = LoopLength(cfg.steps_per_loop, LOOP_SECONDS)
    row, last_save = TrainRow(), time.time()
    end, training = loop_end(step, cfg)
    num_steps = lengths.next(end - step)  # 1 on every worker: the first call traces and compiles
    with Progress(step, cfg.num_train_steps, cfg.batch_size, started, PROGRESS_SECONDS) as progress:
        try:
            while True:
                progress.doing(f"steps {step + 1}..{step + num_steps} running")
                sums, seconds = run_steps(train_loop, train_iterator, num_steps, training)
                watchdog.beat()
                stop.at_once = None  # trained: from now on a signal saves first
                lengths.record(num_steps, seconds)
                error = non_finite(sums, step + 1, step + num_steps, manager)
                if error:
                    print(error, file=sys.stderr, flush=True)
                    return result(cfg, "non-finite", step, manager, rows, exit_code=exit_codes.NON_FINITE)
                step += num_steps
                progress.advanced(step)
                row.add(sums, num_steps, seconds)
                done = step >= cfg.num_train_steps
                next_end, next_training = loop_end(step, cfg)
                save_by_clock = 0 < cfg.save_checkpoints_secs <= time.time() - last_save
                next_steps, save_by_clock, stopping = agree(strategy, 0 if done else lengths.next(next_end - step),
                                                            save_by_clock, stop.requested is not None and not done)
                if step == end or stopping:
                    rows[TRAIN_SPLIT] = row.metrics(cfg, float(schedule(step - 1)), flops_per_example,
                                                    setup.peak_flops, setup.replicas)
                    log.write(TRAIN_SPLIT, step, rows[TRAIN_SPLIT])
                    row = TrainRow()
                if step % cfg.save_checkpoints_steps == 0 or done or save_by_clock or stopping:
                    progress.doing(f"saving step {step}")
                    save(cfg, setup, manager, step)
                    last_save = time.time()
                    watchdog.beat()
                if cfg.eval_data and step == end and not stopping and (
                        step % (cfg.eval_every_steps or cfg.save_checkpoints_steps) == 0 or done):
                    progress.doing(f"evaluating at step {step}")
                    rows[EVAL_SPLIT] = evaluation()
                    watchdog.beat()
                    progress.doing(None)  # (no progress line in the middle of the eval row)
                    log.write(EVAL_SPLIT, step, rows[EVAL_SPLIT])
                progress.doing(None)
                if stopping:
                    print(f"{stop.name or 'a stop on another worker'}: saved step {step} ({manager.latest_checkpoint}); "
                          "exiting, the same command resumes", flush=True)
                    return result(cfg, "stopped", step, manager, rows, exit_code=stop.exit_code)
                if done:
                    break
                end, training, num_steps = next_end, next_training, next_steps
        except (tf.errors.InvalidArgumentError, tf.errors.DataLossError, tf.errors.NotFoundError) as e:
            detail = data_error(e)
            if detail is None:
                raise
            raise ValueError(data_error_line(detail, cfg, setup, manager, int(optimizer.iterations.numpy()))) \
                from None
        except distribute.RUNTIME_ERRORS as e:  # the TPU, its runtime or a peer worker went away mid-run
            raise runtime_lost("pretrain", e, step, manager.latest_checkpoint) from None
        finally:
            log.close()
    print(f"done: step {step} in {duration_text(progress.elapsed())}, checkpoint {manager.latest_checkpoint}",
          flush=True)
    return result(cfg, "done", step, manager, rows)


def recorded_rows(model_dir, step):
    """{split: the metrics of its last metrics.jsonl row at or before `step`} of a run found complete: what its
    result carries, as the run that trained it returned."""
    path = layout.ModelDir(model_dir).metrics
    if not exists(path):
        return {}
    rows = {}
    for line in read_text(path).splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("split") in (TRAIN_SPLIT, EVAL_SPLIT) and row.get("step", step + 1) <= step:
            rows[row["split"]] = {k: v for k, v in row.items() if k not in ("split", "step")}
    return rows


def result(cfg, status, step, manager, rows, exit_code=0):
    """The fields of the PretrainResult of a run that ends at `step` with `status`; `rows`: the last metrics rows by
    split."""
    return dict(status=status, step=step, model_dir=cfg.model_dir, checkpoint=manager.latest_checkpoint,
                metrics=rows.get(TRAIN_SPLIT, {}), eval_metrics=rows.get(EVAL_SPLIT, {}), exit_code=exit_code)


def run(cfg, exits):
    """Pretrains as `cfg` (a PretrainConfig) says; returns the PretrainResult's fields (a dict). `exits` (the
    CLI): a signal before the first step has finished exits the process at once (nothing to save), and a second
    SIGINT aborts it (runtime.signals.StopSignal). Keras' global dtype policy, which the run sets to its compute
    dtype, is restored when it ends: a notebook's later models (or a test's) are not built in the run's dtype."""
    policy = keras.mixed_precision.global_policy()
    try:
        with random_state.kept():  # the global generators the run seeds, given back as they were
            return _run(cfg, exits)
    finally:
        keras.mixed_precision.set_global_policy(policy)


def _run(cfg, exits):
    """The body of `run`."""
    started = time.time()
    at_once = "before the first training step finished, nothing to save" if exits else None
    # The step watchdog ends the process (exit 76): the command line's only (a notebook's kernel is not ended).
    limits = (cfg.first_step_timeout, cfg.step_timeout) if exits else (0, 0)
    with StopSignal("albert-tf pretrain", at_once=at_once, exits=exits) as stop, \
            StepWatchdog(*limits, on_expire=exit_lost("albert-tf pretrain")) as watchdog:
        check_flags(cfg)
        # The lock before the strategy: a second client started by mistake on a TPU is refused before it connects
        # to the TPU and initializes (resets) it under the running job.
        with lock.output_lock(cfg.model_dir, "--model-dir"):  # one run per model dir (albert_tf.runtime.lock)
            try:
                setup = prepare(cfg)
                stop.reinstall()  # after the strategy: a multi-worker one installs TensorFlow's own SIGTERM handler
                model, optimizer, schedule, manager = build(cfg, setup)
            except distribute.RUNTIME_ERRORS as e:  # the runtime or a peer went away while starting
                raise runtime_lost("pretrain", e, None, None) from None
            step = int(optimizer.iterations.numpy())
            if step >= cfg.num_train_steps:
                print(f"the run in {cfg.model_dir} is already complete at step {step} (--num-train-steps "
                      f"{cfg.num_train_steps}): nothing to train; raise --num-train-steps to train further",
                      flush=True)
                return result(cfg, "complete", step, manager, recorded_rows(cfg.model_dir, step))
            return train(cfg, setup, model, optimizer, schedule, manager, stop, started, watchdog)

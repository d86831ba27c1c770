"""`albert-tf pretrain`: ALBERT pretraining (MLM + SOP) with LAMB, on one CPU core, GPUs, or a TPU pod.

Read it top to bottom: the flags, the loss, one step, the checks, then `run()`, which checks every input before
anything is written, picks the strategy, builds the model, the optimizer and the data, restores the latest
checkpoint, and runs the loop. One training step is `train_step()`:

    forward → loss (MLM Σw·nll / Σw over the GLOBAL batch + SOP mean over the global batch)
           → gradients of this replica's share → sum over replicas → clip to global norm 1.0 → LAMB update

Up to `--steps-per-loop` steps run inside one compiled tf.function (`loop.make_train_loop`), the original's
iterations_per_loop, and a call lasts about LOOP_SECONDS of wall time once the step time is known
(`loop.LoopLength`): between calls the host acts on signals, prints progress (`loop.Progress`, a line at least every
PROGRESS_SECONDS) and checks the save clock. Every --steps-per-loop span ends with a metrics row (log line,
TensorBoard summaries, metrics.jsonl: `loop.MetricsLog`), a checkpoint when due (every --save-checkpoints-steps
steps or --save-checkpoints-secs seconds), eval when due. The model dir (albert_tf/checkpoints/pretrained.py's layout) gets its
first file only after the first step has run.

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
import os
import re
import sys
import time

import tensorflow as tf

from albert_tf.runtime import exit_codes, host_xla, lock
from albert_tf.runtime.exit_codes import RuntimeLost
from albert_tf.runtime.signals import StopSignal, duration_text
from albert_tf.runtime.watchdog import StepWatchdog, exit_lost
from albert_tf.checkpoints import pretrained
from albert_tf.files import check_input_file, check_output_dir, is_url
from albert_tf.text import vocabulary
from albert_tf import run_config
from albert_tf.training import distribute, flops, precision, pretrain_config
from albert_tf.training import plan as planner
from albert_tf.training.pretrain_config import PretrainConfig, PretrainResult
from albert_tf.training.loop import (LoopLength, MetricsLog, Progress, evaluate, make_train_loop)

# What one step returns per replica, summed over replicas and over the steps of a loop: the loss's sums
# (pretraining_loss) and the gradient norm.
LOSS_SUM_KEYS = ("mlm_nll", "mlm_weight", "mlm_correct", "sop_nll", "sop_correct", "sop_count")
SUM_KEYS = LOSS_SUM_KEYS + ("grad_norm_sum",)
EVAL_KEYS = LOSS_SUM_KEYS
LOOP_SECONDS = pretrain_config.LOOP_SECONDS  # the wall time of one compiled call once the step time is known
PROGRESS_SECONDS = 20.0   # a progress line at least this often (loop.Progress)


def add_arguments(parser):
    """The flags: one per PretrainConfig field (albert_tf/training/pretrain_config.py: `--help` needs no
    TensorFlow)."""
    pretrain_config.add_arguments(parser)


# ---------------------------------------------------------------------------------------------- the loss
def pretraining_loss(outputs, batch, global_batch_size, mlm_weight_total):
    """This replica's share of the loss, and metric sums.

    Args:
      outputs: the pretrainer's outputs; `mlm_logits` float32 [b, P, V], `sop_logits` float32 [b, 2].
      batch: `masked_lm_ids` int32 [b, P], `masked_lm_weights` float32 [b, P], `sentence_order_labels` int32 [b],
        optional `sentence_order_weights` float32 [b] (eval batches: 0 marks a padding example; default 1).
      global_batch_size: B, the batch summed over all replicas.
      mlm_weight_total: Σ masked_lm_weights over the global batch (a scalar, already summed over replicas).
    Returns:
      (loss, sums): loss is a scalar whose sum over replicas is the global loss
        Σ w·nll / (Σw + 1e-5) + Σ sop_nll / B (the original's 1e-5 guards an all-padding batch);
        sums holds float32 scalars summed later over replicas and steps for the metrics.
    """
    ids, weights = batch["masked_lm_ids"], batch["masked_lm_weights"]
    labels = batch["sentence_order_labels"]
    mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
    sop_logits = tf.cast(outputs["sop_logits"], tf.float32)

    mlm_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=mlm_logits)      # [b, P]
    sop_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=sop_logits)   # [b]
    sop_weights = batch.get("sentence_order_weights")
    sop_weights = tf.ones_like(sop_nll) if sop_weights is None else sop_weights
    mlm_nll_sum = tf.reduce_sum(weights * mlm_nll)
    sop_nll_sum = tf.reduce_sum(sop_weights * sop_nll)
    loss = mlm_nll_sum / (mlm_weight_total + 1e-5) + sop_nll_sum / float(global_batch_size)

    mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), ids), tf.float32)
    sop_correct = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), labels), tf.float32)
    sums = {
        "mlm_nll": mlm_nll_sum,
        "mlm_weight": tf.reduce_sum(weights),
        "mlm_correct": tf.reduce_sum(weights * mlm_correct),
        "sop_nll": sop_nll_sum,
        "sop_correct": tf.reduce_sum(sop_weights * sop_correct),
        "sop_count": tf.reduce_sum(sop_weights),
    }
    return loss, sums


def metrics_from_sums(sums):
    """The logged metrics from sums over replicas and steps (floats)."""
    mlm_loss = sums["mlm_nll"] / max(sums["mlm_weight"], 1e-5)
    sop_loss = sums["sop_nll"] / max(sums["sop_count"], 1.0)
    return {
        "loss": mlm_loss + sop_loss,
        "masked_lm_loss": mlm_loss,
        "masked_lm_accuracy": sums["mlm_correct"] / max(sums["mlm_weight"], 1e-5),
        "sentence_order_loss": sop_loss,
        "sentence_order_accuracy": sums["sop_correct"] / max(sums["sop_count"], 1.0),
    }


# ---------------------------------------------------------------------------------------------- one step
@host_xla.jit_function(autograph=False)
def _add_lists(totals, more):
    """[a + b for a, b in zip(totals, more)] as one XLA kernel where the host has XLA. (As plain adds inside the
    accumulation loop, Grappler's arithmetic optimizer merges them with the gradients' own sums into AccumulateNV2
    ops whose temporary variables collide across the loop's iterations: AlreadyExistsError, albert_base, 2 streams.)"""
    return [a + b for a, b in zip(totals, more)]


def make_train_step(model, optimizer, global_batch_size, jit_compile=False, accumulation_steps=1):
    """Returns train_step(batch, training) → metric sums, to run in a replica context (strategy.run).

    batch: a per-replica pretraining batch, static shapes [b, L] / [b, P] / [b].
    `jit_compile` compiles the forward/backward with XLA (the cross-replica sum and the update stay outside).
    `accumulation_steps` N: the batch runs as N micro-batches of b / N examples, one after the other (a while loop,
    one micro-batch's activations alive at a time), their gradients summed in float32; the loss normalizers are
    those of the whole global batch (Σw over all micro-batches and replicas, B), so the summed gradient is the
    gradient of the same loss, then clipped once and applied by one LAMB update.
    """
    variables = model.trainable_variables

    def forward_backward(batch, mlm_weight_total, training):
        with tf.GradientTape() as tape:
            outputs = model(batch, training=training)
            loss, sums = pretraining_loss(outputs, batch, global_batch_size, mlm_weight_total)
        grads = tape.gradient(loss, variables)
        return [tf.convert_to_tensor(g) for g in grads], sums  # embedding gathers give IndexedSlices

    if jit_compile:
        forward_backward = tf.function(forward_backward, jit_compile=True, reduce_retracing=True)

    def accumulated(batch, mlm_weight_total, training):
        """Σ of forward_backward over the N micro-batches of `batch`: (gradients, sums)."""
        micro = {k: tf.reshape(v, [accumulation_steps, v.shape[0] // accumulation_steps] + v.shape[1:])
                 for k, v in batch.items()}

        def body(index, grads, sums):
            more_grads, more_sums = forward_backward({k: v[index] for k, v in micro.items()}, mlm_weight_total,
                                                     training)
            totals = _add_lists(grads + [sums[k] for k in LOSS_SUM_KEYS],
                                more_grads + [more_sums[k] for k in LOSS_SUM_KEYS])
            return index + 1, totals[:len(grads)], dict(zip(LOSS_SUM_KEYS, totals[len(grads):]))

        zeros = ([tf.zeros(v.shape, tf.float32) for v in variables], {k: tf.constant(0.0) for k in LOSS_SUM_KEYS})
        _, grads, sums = tf.while_loop(lambda index, *_: index < accumulation_steps, body, (tf.constant(0), *zeros),
                                       parallel_iterations=1)  # one micro-batch at a time
        return grads, sums

    def train_step(batch, training):
        replica = tf.distribute.get_replica_context()
        mlm_weight_total = replica.all_reduce("sum", tf.reduce_sum(batch["masked_lm_weights"]))
        if accumulation_steps > 1:
            grads, sums = accumulated(batch, mlm_weight_total, training)
        else:
            grads, sums = forward_backward(batch, mlm_weight_total, training)
        grads = replica.all_reduce("sum", grads)                 # the gradient of the global-batch loss
        grads, grad_norm = tf.clip_by_global_norm(grads, 1.0)    # as the original: clip_norm=1.0
        optimizer.apply_reduced_gradients(grads, variables)     # (Keras' apply() would sum again)
        sums["grad_norm_sum"] = grad_norm / tf.cast(replica.num_replicas_in_sync, tf.float32)
        return sums

    return train_step


# ---------------------------------------------------------------------------------------------- evaluation
def make_eval_step(model, global_batch_size):
    """Returns eval_step(batch) → metric sums (replica context), the model without dropout. Padding examples of
    the last eval batches (sentence_order_weights 0, masked_lm_weights 0) count in no sum. Run it through one
    `loop.make_train_loop(strategy, eval_step, EVAL_KEYS)` per run: one trace, one compilation for every eval."""

    @tf.autograph.experimental.do_not_convert  # no control flow; spares a harmless AutoGraph warning
    def eval_step(batch):
        outputs = model(batch, training=False)
        total = tf.distribute.get_replica_context().all_reduce("sum", tf.reduce_sum(batch["masked_lm_weights"]))
        return pretraining_loss(outputs, batch, global_batch_size, total)[1]

    return eval_step


# ---------------------------------------------------------------------------------------------- inputs
def record_counts(cfg, file_pattern, write_cache):
    """{path: records} of the files `file_pattern` matches: from create-data's index, else from the count cache in
    the model dir (written back when `write_cache`: the chief of a resumed run), else counted."""
    from albert_tf.data import dataset, record_index  # pylint: disable=import-outside-toplevel

    files = dataset.data_files(file_pattern)
    return record_index.record_counts(files, dataset.file_sizes(files),
                                      cache=os.path.join(cfg.model_dir, record_index.CACHE_NAME),
                                      write_cache=write_cache)


def pipeline_line(files, counts, pipeline_id, num_pipelines):
    """The start-up line of one training input pipeline: the files it reads (files i, i + n, ... of the sorted
    list, as pretraining_dataset takes them) and the records they hold (`counts`: {file: records}, those known)."""
    mine = files[pipeline_id::num_pipelines]
    records = (f"{sum(counts[f] for f in mine):,} records" if all(f in counts for f in mine) else
               "records not counted (no record-count index beside the files)")
    return (f"input pipeline {pipeline_id + 1}/{num_pipelines}: {len(mine)} train file(s) (files "
            f"{pipeline_id}::{num_pipelines} of the {len(files)} sorted), {records}")


def make_dataset_fn(cfg, config, file_pattern, global_batch_size, is_training, skip_global_batches=0,
                    counts=None, known_counts=None):
    """A dataset_fn for strategy.distribute_datasets_from_function: per-replica batches, static shapes.

    Replicas of one input pipeline take consecutive per-replica batches, so a global batch is the same examples
    whatever the number of replicas. Resuming positions each pipeline at the global batch `skip_global_batches`
    without reading what comes before (the data order is a function of (seed, step); `counts`: the files' record
    counts, `record_counts()`). Eval (`is_training=False`): every pipeline yields the same number of padded
    batches, at most --max-eval-steps global batches in all (`eval_steps()`). Training prints each pipeline's
    `pipeline_line` (`known_counts`: (sorted files, {file: records known})).
    """
    from albert_tf.data import pretraining_dataset  # pylint: disable=import-outside-toplevel

    def dataset_fn(input_context):
        # batch_size is the global batch: with input_context the pipeline yields per-replica batches.
        replicas_per_pipeline = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        if is_training and known_counts:  # the share of the files this pipeline reads, and its records
            print(pipeline_line(*known_counts, input_context.input_pipeline_id, input_context.num_input_pipelines),
                  flush=True)
        return pretraining_dataset(
            file_pattern, seq_length=cfg.max_seq_length, max_predictions=cfg.max_predictions,
            batch_size=global_batch_size, is_training=is_training, input_context=input_context,
            dynamic_masking=cfg.dynamic_masking, seed=cfg.seed,
            vocab_size=config.vocab_size if cfg.dynamic_masking else None,
            start_batch=skip_global_batches * replicas_per_pipeline, record_counts=counts,
            max_batches=None if is_training else cfg.max_eval_steps)

    return dataset_fn


def eval_steps(cfg, counts, global_batch_size):
    """Global eval batches per evaluation: every eval record once, at most --max-eval-steps batches."""
    from albert_tf.data.dataset import eval_steps as steps  # pylint: disable=import-outside-toplevel

    try:
        return steps(sum(counts.values()), global_batch_size, cfg.max_eval_steps)
    except ValueError as e:
        raise ValueError(f"--eval-data {cfg.eval_data}: {e}") from None


# ---------------------------------------------------------------------------------------------- checks
def check_flags(cfg):
    positive = ("max_seq_length", "max_predictions", "batch_size", "num_train_steps", "steps_per_loop",
                "save_checkpoints_steps", "keep_checkpoint_max", "max_eval_steps", "gradient_accumulation_steps")
    for name in positive:
        if getattr(cfg, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(cfg, name)}")
    for name in ("num_warmup_steps", "save_checkpoints_secs", "collective_timeout_secs", "step_timeout",
                 "first_step_timeout"):
        if getattr(cfg, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(cfg, name)}")
    if cfg.streams is not None and cfg.streams <= 0:
        raise ValueError(f"--streams must be positive, got {cfg.streams}")
    if cfg.max_predictions > cfg.max_seq_length:
        raise ValueError(f"--max-predictions {cfg.max_predictions} exceeds --max-seq-length {cfg.max_seq_length}")
    if cfg.tpu:  # paths, then what cannot drive a TPU: refused before the output lock touches the bucket
        distribute.check_cloud_paths({"--train-data": cfg.train_data, "--eval-data": cfg.eval_data,
                                      "--model-dir": cfg.model_dir, "--init": cfg.init})
        distribute.check_tpu_support(tpu=cfg.tpu)
    check_output_dir(cfg.model_dir, "--model-dir")
    if cfg.spm_model:
        check_input_file(cfg.spm_model, "--spm-model", vocabulary.SPM_FILE)


def check_records(file_pattern, flag, cfg, vocab_size, walk=8):
    """Refuses, before anything is built: a pattern matching nothing; records whose lengths disagree with the flags
    or whose token ids run past the vocabulary (each file's first record); files cut short: a file that create-data's
    record-count index lists must have the size it records, and the record headers of up to `walk` other local
    files (spread over the list) are walked; create-data shards of one prefix from different runs
    (record_index.check_one_run). The files are checked in parallel (on gs:// each read is a round trip), so
    start-up hardly grows with the number of shards; the input pipeline checks every file again as it reads it.
    Returns {file: its size in bytes} (the sizes at start, which a data error mid-run is compared with)."""
    import concurrent.futures  # pylint: disable=import-outside-toplevel

    from albert_tf.data import dataset, record_index  # pylint: disable=import-outside-toplevel

    files = dataset.data_files(file_pattern, flag)
    record_index.check_one_run(files, flag)
    sizes = dataset.file_sizes(files)
    entries = record_index.index_entries(files)
    unlisted = [f for f in files if f not in entries and not is_url(f)]
    sample = set(unlisted if len(unlisted) <= walk else
                 [unlisted[i * (len(unlisted) - 1) // (walk - 1)] for i in range(walk)])

    def check(path, size):
        dataset.check_first_record(path, seq_length=cfg.max_seq_length, max_predictions=cfg.max_predictions,
                                   dynamic_masking=cfg.dynamic_masking, size=size)
        dataset.check_token_ids(path, vocab_size)
        if path in entries and entries[path][1] != size:
            raise ValueError(f"{path}: truncated or corrupt TFRecord file, or replaced: {size} bytes, but "
                             f"{entries[path][2]} lists {entries[path][1]} (delete that index if the file is right)")
        if path in sample:
            dataset.check_framing(path, size)

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(files))) as pool:
        futures = [pool.submit(check, path, size) for path, size in zip(files, sizes)]
        for future in futures:  # the first failure in file order
            try:
                future.result()
            except ValueError as e:
                raise ValueError(f"{flag}: {e}") from None
    return dict(zip(files, sizes))


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
    vocabulary.check_same_vocabulary(cfg.model_dir, cfg.spm_model)  # the vocabulary is part of the model
    return sizes


_ASSERTION = re.compile(r"assertion failed: \[(.*)\]")


def data_error(e):
    """A data error raised inside the compiled loop (the input pipeline's check of a truncated, corrupt or changed
    file, TensorFlow's own record check, a file gone) as one line naming the file, or None if `e` is something
    else."""
    if isinstance(e, tf.errors.NotFoundError):
        return str(e).strip().splitlines()[0] if str(e).strip() else None
    for line in str(e).splitlines():
        if "truncated or corrupt" in line or "corrupted record" in line.lower():
            match = _ASSERTION.search(line)
            return (match.group(1) if match else line).strip()
    return None


def changed_files(sizes):
    """[(flag, path, size at start, size now or None: gone)] of the data files whose size is not what it was
    (`sizes`: {flag: {path: size at start}}, from check_inputs)."""
    changed = []
    for flag, by_path in sizes.items():
        for path, size in by_path.items():
            now = tf.io.gfile.stat(path).length if tf.io.gfile.exists(path) else None
            if now != size:
                changed.append((flag, path, size, now))
    return changed


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


def build_model_and_optimizer(config, learning_rate, num_train_steps, num_warmup_steps, poly_power=1.0,
                              training_streams=1, fused=True, remat=False):
    """The pretrainer (`remat`: rematerialized blocks, see AlbertEncoder), LAMB with the original's settings and
    its schedule (call under strategy.scope()). Returns (model, optimizer, schedule)."""
    from albert_tf.modeling.pretrainer import AlbertPretrainer  # pylint: disable=import-outside-toplevel
    from albert_tf.training.lamb import LAMB  # pylint: disable=import-outside-toplevel
    from albert_tf.training.schedules import WarmupPolynomialDecay  # pylint: disable=import-outside-toplevel

    # One model whatever the dropout flags: --no-dropout and --no-dropout-after-step run it with training=False,
    # which in ALBERT removes dropout and nothing else. (Building it with the rates set to 0 would draw Keras'
    # seed stream differently and so change the initial weights of a seeded run.)
    model = AlbertPretrainer(config, fused=fused, training_streams=training_streams, remat=remat)
    schedule = WarmupPolynomialDecay(learning_rate, num_train_steps, num_warmup_steps, power=poly_power)
    optimizer = LAMB(schedule)
    optimizer.build(model.trainable_variables)
    return model, optimizer, schedule


def restore(manager, model, cfg):
    """The latest checkpoint of this run, else --init's weights. Returns a line saying which.
    Every worker restores the chief's checkpoint (the model dir's), not its own temporary save directory."""
    latest = tf.train.latest_checkpoint(cfg.model_dir)
    if latest:
        manager.checkpoint.restore(latest).assert_existing_objects_matched()
        return f"resumed from {latest}"
    if cfg.init:
        try:
            path = pretrained.restore(model, cfg.init)
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


def check_host_memory(cfg, config, replicas, dtype, total=None):
    """Refuses a CPU run whose model cannot fit in this machine's memory (e.g. the paper's batch 4096 on a laptop),
    saying what to change, instead of being killed by the kernel minutes later without a word. The need is
    albert_tf.training.plan's host estimate (its activation model measured on CPU: benchmarks/plan_memory.py) with
    its slack and overhead (`planner.host_need_bytes`). The advice keeps the global batch first
    (--gradient-accumulation-steps, --remat), then halves it."""
    if total is None:
        total = planner.host_total_bytes()

    def need(batch, remat=cfg.remat, steps=cfg.gradient_accumulation_steps):
        return planner.host_need_bytes(config, batch, cfg.max_seq_length, cfg.max_predictions, replicas=replicas,
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
    dtype_choice: object = None  # albert_tf.training.precision.DtypeChoice: why `dtype` (kept in the run record)
    data_sizes: dict = dataclasses.field(default_factory=dict)  # {flag: {file: bytes}} at start (check_inputs)


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
    import keras  # pylint: disable=import-outside-toplevel

    strategy = distribute.create_strategy(tpu=cfg.tpu, cpu_replicas=cfg.cpu_replicas,
                                          collective_timeout_secs=cfg.collective_timeout_secs)  # writes nothing
    config = pretrain_config.model_config(cfg.config, cfg.config_overrides, cfg.spm_model)
    data_sizes = check_inputs(cfg, config)
    record = os.path.join(cfg.model_dir, pretrain_config.RECORD_FILE)
    run_config.check_record(record, run_config.read_record(record), run_config.record(cfg),
                            run_config.same_on_resume(PretrainConfig), "use a new --model-dir or the same values")
    on_tpu, replicas = distribute.is_tpu_strategy(strategy), strategy.num_replicas_in_sync
    eval_batch_size = cfg.eval_batch_size or cfg.batch_size
    for flag, size in (("--batch-size", cfg.batch_size), ("--eval-batch-size", eval_batch_size)):
        if size % replicas:
            raise ValueError(f"{flag} {size} is not divisible by the {replicas} replicas")
    micro_batch = check_accumulation(cfg, replicas)
    use_gpu = bool(tf.config.list_physical_devices("GPU"))
    choice = precision.choose(cfg.dtype, on_tpu, use_gpu, precision.probe_shape(
        micro_batch, cfg.max_seq_length, config.hidden_size, config.intermediate_size))
    print(choice.describe(), flush=True)
    dtype = choice.dtype
    streams = choose_streams(cfg, micro_batch, on_tpu, use_gpu)
    if not on_tpu and not use_gpu:
        check_host_memory(cfg, config, replicas, dtype)
    peak = flops.peak_flops_for(flops.local_device_kind())
    print(planner.summary_line(planner.estimate(
        config, cfg.batch_size, cfg.max_seq_length, cfg.max_predictions, cores=replicas, dtype=dtype,
        steps=cfg.num_train_steps, peak_flops_per_core=peak,
        memory_per_core=planner.V3_HBM_PER_CORE if on_tpu else None, remat=cfg.remat,
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
    manager = tf.train.CheckpointManager(pretrained.checkpoint_for(model, optimizer), checkpoint_dir,
                                         max_to_keep=cfg.keep_checkpoint_max, step_counter=optimizer.iterations)
    restored = restore(manager, model, cfg)
    if restored:
        print(f"{restored} at step {int(optimizer.iterations.numpy())}", flush=True)
    return model, optimizer, schedule, manager


def save(cfg, setup, manager, step):
    """Writes the checkpoint of `step` (and, first time, albert_config.json, spm.model and the run record)."""
    if setup.chief:
        pretrained.write_files(cfg.model_dir, setup.config, cfg.spm_model)
        run_config.write_record(os.path.join(cfg.model_dir, pretrain_config.RECORD_FILE),
                                {**run_config.record(cfg), "dtype_choice": setup.dtype_choice and setup.dtype_choice.to_record()})
    manager.save(checkpoint_number=step)
    if not setup.chief:  # other workers take part in the save but keep nothing
        tf.io.gfile.rmtree(manager.directory)


def run_steps(train_loop, iterator, num_steps, training):
    """One compiled call of `num_steps` steps. Returns (sums {key: float}, wall seconds)."""
    start = time.time()
    sums = {k: float(v) for k, v in train_loop(iterator, tf.constant(num_steps), training).items()}
    return sums, time.time() - start


def runtime_lost(error, step, manager):
    """The RuntimeLost (exit 76) for a runtime failure (distribute.RUNTIME_ERRORS) after `step`: one line naming
    the step, what failed and the last checkpoint, which a relaunch of the same command resumes from."""
    where = f"after step {step}" if step is not None else "before training started"
    latest = manager.latest_checkpoint if manager is not None else None
    return RuntimeLost(f"the TPU / runtime or a peer worker went away {where} ({distribute.error_summary(error)}); "
                       f"the last checkpoint is {latest or 'none'}: relaunch the same command to resume from it")


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


def train(cfg, setup, model, optimizer, schedule, manager, stop, started, watchdog):  # pylint: disable=too-many-arguments
    """The loop (`watchdog` is beaten after each call, save and evaluation). Each compiled call runs 1..--steps-per-loop steps and about LOOP_SECONDS of wall time
    (loop.LoopLength): between calls the host acts on a stop signal, the save clock and progress. After a call:
    the progress line, the metrics row when a --steps-per-loop span ends, a checkpoint and an evaluation when
    due. Returns a PretrainResult."""
    from albert_tf.data import record_index  # pylint: disable=import-outside-toplevel

    strategy, step, rows = setup.strategy, int(optimizer.iterations.numpy()), {}
    counts = record_counts(cfg, cfg.train_data, setup.chief) if step else None
    sizes = setup.data_sizes["--train-data"]
    known = counts or record_index.known_counts(list(sizes), list(sizes.values()),
                                                os.path.join(cfg.model_dir, record_index.CACHE_NAME))
    train_iterator = iter(strategy.distribute_datasets_from_function(make_dataset_fn(
        cfg, setup.config, cfg.train_data, cfg.batch_size, True, skip_global_batches=step,
        counts=counts, known_counts=(list(sizes), known))))  # positioned, not skipped
    train_loop = make_train_loop(strategy, make_train_step(
        model, optimizer, cfg.batch_size, setup.jit, cfg.gradient_accumulation_steps), SUM_KEYS)
    evaluation = make_evaluation(cfg, setup, model, step)
    log = MetricsLog(cfg.model_dir, setup.chief)
    log.truncate_after(step)
    flops_per_example = flops.pretraining_flops_per_example(setup.config, cfg.max_seq_length, cfg.max_predictions)
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
                    rows["train"] = row.metrics(cfg, float(schedule(step - 1)), flops_per_example, setup.peak_flops,
                                                setup.replicas)
                    log.write("train", step, rows["train"])
                    row = TrainRow()
                if step % cfg.save_checkpoints_steps == 0 or done or save_by_clock or stopping:
                    progress.doing(f"saving step {step}")
                    save(cfg, setup, manager, step)
                    last_save = time.time()
                    watchdog.beat()
                if cfg.eval_data and step == end and not stopping and (
                        step % (cfg.eval_every_steps or cfg.save_checkpoints_steps) == 0 or done):
                    progress.doing(f"evaluating at step {step}")
                    rows["eval"] = evaluation()
                    watchdog.beat()
                    progress.doing(None)  # (no progress line in the middle of the eval row)
                    log.write("eval", step, rows["eval"])
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
            raise runtime_lost(e, step, manager) from None
        finally:
            log.close()
    print(f"done: step {step} in {duration_text(progress.elapsed())}, checkpoint {manager.latest_checkpoint}",
          flush=True)
    return result(cfg, "done", step, manager, rows)


def result(cfg, status, step, manager, rows, exit_code=0):
    """The PretrainResult of a run that ends at `step` with `status`; `rows`: the last metrics rows by split."""
    return PretrainResult(status=status, step=step, model_dir=cfg.model_dir, checkpoint=manager.latest_checkpoint,
                          metrics=rows.get("train", {}), eval_metrics=rows.get("eval", {}), exit_code=exit_code)


def pretrain(config):
    """Pretrains as `config` (a PretrainConfig) says: the flags' checks, the output lock, prepare (strategy, checks,
    plan), build and restore, train. Returns a PretrainResult. Usable from a notebook or a script: progress lines as
    the CLI prints them, errors as ValueError / FileNotFoundError (nothing written before the checks pass), the
    model dir held by another run as LockHeld, the TPU / runtime or a peer worker gone as RuntimeLost (both in
    albert_tf.runtime.exit_codes: the same config resumes), and on the main thread SIGINT / SIGTERM (a notebook's
    interrupt) stop at the end of the compiled call in flight with a checkpoint (status "stopped"; the same config
    resumes)."""
    return _pretrain(config, exits=False)


def _pretrain(cfg, exits):
    """`pretrain`; `exits` (the CLI): a signal before the first step has finished exits the process at once
    (nothing to save), and a second SIGINT aborts it (runtime.signals.StopSignal). Keras' global dtype policy,
    which the run sets to its compute dtype, is restored when it ends: a notebook's later models (or a test's) are
    not built in the run's dtype."""
    import keras  # pylint: disable=import-outside-toplevel

    policy = keras.mixed_precision.global_policy()
    try:
        return _run(cfg, exits)
    finally:
        keras.mixed_precision.set_global_policy(policy)


def _run(cfg, exits):
    """The body of `_pretrain`."""
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
                raise runtime_lost(e, None, None) from None
            step = int(optimizer.iterations.numpy())
            if step >= cfg.num_train_steps:
                print(f"the run in {cfg.model_dir} is already complete at step {step} (--num-train-steps "
                      f"{cfg.num_train_steps}): nothing to train; raise --num-train-steps to train further",
                      flush=True)
                return result(cfg, "complete", step, manager, {})
            return train(cfg, setup, model, optimizer, schedule, manager, stop, started, watchdog)


def run(args):
    """`albert-tf pretrain`: the flags over the --recipe as a PretrainConfig, then the run. SIGTERM and SIGINT stop
    it cleanly: before the first step has finished at once (nothing to save), afterwards at the end of the compiled
    call in flight, with a checkpoint; exit 75 after SIGTERM (not done: the same command resumes), 130 after
    SIGINT. Returns the exit code (albert_tf.runtime.exit_codes)."""
    config, applied = pretrain_config.from_args(args)
    if applied:
        flags = {f.name: run_config.flag_of(f) for f in dataclasses.fields(PretrainConfig)}
        print(f"recipe {args.recipe}: " + " ".join(flags[k] if v is True else f"{flags[k]} {v}"
                                                   for k, v in applied.items() if v is not False), flush=True)
    return _pretrain(config, exits=True).exit_code

"""`albert-tf pretrain`: ALBERT pretraining (MLM + SOP) with LAMB, on one CPU core, GPUs, or a TPU pod.

Read it top to bottom: the flags, the loss, one step, the checks, then `run()`, which checks every input before
anything is written, picks the strategy, builds the model, the optimizer and the data, restores the latest
checkpoint, and runs the loop. One training step is `train_step()`:

    forward → loss (MLM Σw·nll / Σw over the GLOBAL batch + SOP mean over the global batch)
           → gradients of this replica's share → sum over replicas → clip to global norm 1.0 → LAMB update

`--steps-per-loop` steps run inside one compiled tf.function (`loop.make_train_loop`), the original's
iterations_per_loop. Every loop ends on the host: log line, TensorBoard summaries, metrics.jsonl
(`loop.MetricsLog`), a checkpoint when due, eval when due. The model dir (albert_tf/pretrained.py's layout) gets its
first file only after the first loop has run.

Faults: the checkpoint holds the model, the optimizer (m, v and the step counter, so the learning rate resumes
exactly) and nothing else; the data order is a function of (seed, step): the input pipeline is rebuilt from the
seed and skips the batches already consumed. SIGTERM saves and exits 0 (`loop.StopSignal`). A non-finite loss stops
before any save.
"""
import argparse
import os
import signal
import sys
import time

import tensorflow as tf

from albert_tf import host_xla, pretrained
from albert_tf.training import distribute, flops, recipes
from albert_tf.training import plan as planner
from albert_tf.training.loop import MetricsLog, StopSignal, evaluate, make_train_loop

# What one step returns per replica, summed over replicas and over the steps of a loop: the loss's sums
# (pretraining_loss) and the gradient norm.
LOSS_SUM_KEYS = ("mlm_nll", "mlm_weight", "mlm_correct", "sop_nll", "sop_correct", "sop_count")
SUM_KEYS = LOSS_SUM_KEYS + ("grad_norm_sum",)
# What a CPU run needs besides the plan's host estimate (which matches TensorFlow's allocator statistics:
# benchmarks/plan_memory.py): TensorFlow's runtime, the program and the input pipeline (1 GiB), and the slack of
# the allocator's bins over the bytes in use (25%: albert_tiny at batch 4096 peaked at 14.7 GiB RSS where the
# estimate is 11.7 GiB).
HOST_OVERHEAD_BYTES = 2**30
HOST_SLACK = 1.25


def add_arguments(parser):
    a = parser.add_argument
    a("--config", required=True, help="albert_config.json, a directory holding one, or a preset name")
    a("--train-data", required=True, help="glob of pretraining TFRecords (create-data's output)")
    a("--model-dir", required=True, help="the pretrained-model directory to write (local or gs://)")
    a("--tpu", default=None, help="TPU name or address (`local` on a TPU VM); data and model dir must be gs://")
    a("--eval-data", default=None, help="glob of held-out pretraining TFRecords")
    a("--max-seq-length", type=int, default=512)
    a("--max-predictions", type=int, default=20, help="masked positions per sequence (max_predictions_per_seq)")
    a("--train-batch-size", type=int, default=4096, help="the global batch, split across replicas")
    a("--eval-batch-size", type=int, default=None, help="global eval batch (default: the train batch)")
    a("--max-eval-steps", type=int, default=100, help="batches per evaluation")
    a("--eval-every-steps", type=int, default=None, help="evaluate every N steps (default: at each checkpoint)")
    a("--learning-rate", type=float, default=0.00176, help="the peak learning rate")
    a("--num-train-steps", type=int, default=125000)
    a("--num-warmup-steps", type=int, default=3125)
    a("--poly-power", type=float, default=1.0, help="power of the polynomial decay")
    a("--steps-per-loop", type=int, default=100, help="steps per compiled host call (iterations_per_loop)")
    a("--save-checkpoints-steps", type=int, default=5000)
    a("--keep-checkpoint-max", type=int, default=5)
    a("--dtype", choices=("float32", "bfloat16"), default=None,
      help="compute dtype; variables stay float32 (default: bfloat16 on TPU, float32 elsewhere)")
    a("--xla", choices=("auto", "on", "off"), default="auto",
      help="jit-compile the forward/backward on GPU/CPU (TPU always compiles); auto: on for GPU, off for CPU")
    a("--no-dropout", action="store_true", help="train without dropout from the start")
    a("--no-dropout-after-step", type=int, default=None, help="remove dropout from this step on (paper §4.7)")
    a("--dynamic-masking", action="store_true", help="mask in the input pipeline (records made with --no-mask)")
    a("--init-checkpoint", default=None, help="a pretrained-model directory to start from (weights only)")
    a("--spm-model", default=None, help="SentencePiece model copied into the model dir as spm.model")
    a("--seed", type=int, default=12345, help="seeds the data order and masking (the model init too)")
    a("--cpu-replicas", type=int, default=None, help="split the CPU into N replicas (tests the distributed path)")
    a("--streams", type=int, default=None,
      help="split each replica's batch into N slices that run through the encoder concurrently (on CPU this "
           "overlaps elementwise kernels with matmuls; default: 2 on CPU without --remat, else 1)")
    a("--remat", action="store_true",
      help="rematerialization: keep only each block's input for the backward pass and recompute the block there "
           "(one more forward of the blocks per step; a fraction of the activation memory)")
    a("--gradient-accumulation-steps", type=int, default=1,
      help="run each replica's batch as N micro-batches whose gradients are summed before one LAMB update "
           "(activation memory of one micro-batch; the same loss, steps and schedule)")
    # Testing only: SIGKILL this process right after saving the checkpoint of step N (a crash at a known point).
    a("--debug-kill-after-step", type=int, default=None, help=argparse.SUPPRESS)
    recipes.add_arguments(parser)  # --recipe paper_v2 etc.: last, it marks the defaults above (typed flags win)


# ---------------------------------------------------------------------------------------------- the loss
def pretraining_loss(outputs, batch, global_batch_size, mlm_weight_total):
    """This replica's share of the loss, and metric sums.

    Args:
      outputs: the pretrainer's outputs; `mlm_logits` float32 [b, P, V], `sop_logits` float32 [b, 2].
      batch: `masked_lm_ids` int32 [b, P], `masked_lm_weights` float32 [b, P], `sentence_order_labels` int32 [b].
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
    mlm_nll_sum = tf.reduce_sum(weights * mlm_nll)
    sop_nll_sum = tf.reduce_sum(sop_nll)
    loss = mlm_nll_sum / (mlm_weight_total + 1e-5) + sop_nll_sum / float(global_batch_size)

    mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), ids), tf.float32)
    sop_correct = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), labels), tf.float32)
    sums = {
        "mlm_nll": mlm_nll_sum,
        "mlm_weight": tf.reduce_sum(weights),
        "mlm_correct": tf.reduce_sum(weights * mlm_correct),
        "sop_nll": sop_nll_sum,
        "sop_correct": tf.reduce_sum(sop_correct),
        "sop_count": tf.cast(tf.size(labels), tf.float32),
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
    """Returns eval_step(batch) → metric sums (replica context), the model without dropout."""

    @tf.autograph.experimental.do_not_convert  # no control flow; spares a harmless AutoGraph warning
    def eval_step(batch):
        outputs = model(batch, training=False)
        total = tf.distribute.get_replica_context().all_reduce("sum", tf.reduce_sum(batch["masked_lm_weights"]))
        return pretraining_loss(outputs, batch, global_batch_size, total)[1]

    return eval_step


# ---------------------------------------------------------------------------------------------- inputs
def make_dataset_fn(args, config, file_pattern, global_batch_size, is_training, skip_global_batches=0):
    """A dataset_fn for strategy.distribute_datasets_from_function: per-replica batches, static shapes.

    Replicas of one input pipeline take consecutive per-replica batches, so a global batch is the same examples
    whatever the number of replicas. Resuming skips the global batches already consumed: the data order is a
    function of (seed, step).
    """
    from albert_tf.data import pretraining_dataset  # pylint: disable=import-outside-toplevel

    def dataset_fn(input_context):
        # batch_size is the global batch: with input_context the pipeline yields per-replica batches.
        dataset = pretraining_dataset(
            file_pattern, seq_length=args.max_seq_length, max_predictions=args.max_predictions,
            batch_size=global_batch_size, is_training=is_training, input_context=input_context,
            dynamic_masking=args.dynamic_masking, seed=args.seed,
            vocab_size=config.vocab_size if args.dynamic_masking else None)
        replicas_per_pipeline = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        if skip_global_batches:
            dataset = dataset.skip(skip_global_batches * replicas_per_pipeline)
        return dataset

    return dataset_fn


# ---------------------------------------------------------------------------------------------- checks
def check_flags(args):
    positive = ("max_seq_length", "max_predictions", "train_batch_size", "num_train_steps", "steps_per_loop",
                "save_checkpoints_steps", "keep_checkpoint_max", "max_eval_steps", "gradient_accumulation_steps")
    for name in positive:
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.num_warmup_steps < 0:
        raise ValueError(f"--num-warmup-steps must be >= 0, got {args.num_warmup_steps}")
    if args.streams is not None and args.streams <= 0:
        raise ValueError(f"--streams must be positive, got {args.streams}")
    if args.max_predictions > args.max_seq_length:
        raise ValueError(f"--max-predictions {args.max_predictions} exceeds --max-seq-length {args.max_seq_length}")
    if args.tpu:
        distribute.check_cloud_paths({"--train-data": args.train_data, "--eval-data": args.eval_data,
                                      "--model-dir": args.model_dir, "--init-checkpoint": args.init_checkpoint})
    if args.spm_model and not tf.io.gfile.exists(args.spm_model):
        raise FileNotFoundError(f"--spm-model {args.spm_model}: no such file")


def check_records(file_pattern, flag, args, vocab_size):
    """Refuses, before anything is built: a pattern matching nothing; records whose lengths disagree with the flags
    or whose token ids run past the vocabulary (each file's first record); local files cut short (every record
    header is walked). The input pipeline checks every file again as it reads it."""
    from albert_tf.data.dataset import (  # pylint: disable=import-outside-toplevel
        check_first_record, check_framing, check_token_ids)
    from albert_tf.data.files import match_files  # pylint: disable=import-outside-toplevel

    files = match_files(file_pattern, flag)
    for path in files:
        try:
            check_first_record(path, seq_length=args.max_seq_length, max_predictions=args.max_predictions,
                               dynamic_masking=args.dynamic_masking)
            check_token_ids(path, vocab_size)
            if "://" not in path:
                check_framing(path)
        except ValueError as e:
            raise ValueError(f"{flag}: {e}") from None
    return files


def check_inputs(args, config):
    """Everything that can be checked before the model dir gets its first file: the config against the flags, the
    vocabulary, the records, the model dir's own config, and (TPU) the paths."""
    if args.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max-seq-length {args.max_seq_length} exceeds the config's max_position_embeddings "
                         f"{config.max_position_embeddings}")
    if args.spm_model:
        pretrained.check_vocabulary(config, args.spm_model)
    check_records(args.train_data, "--train-data", args, config.vocab_size)
    if args.eval_data:
        check_records(args.eval_data, "--eval-data", args, config.vocab_size)
    pretrained.check_config(args.model_dir, config)


def data_error(e):
    """A data error raised inside the compiled loop (the input pipeline's check of a truncated or corrupt file) as
    one line naming the file, or None if `e` is something else."""
    for line in str(e).splitlines():
        if "truncated or corrupt" in line or "corrupted record" in line.lower():
            return line.strip().strip("[]").strip()
    return None


# ---------------------------------------------------------------------------------------------- the run
def loop_end(step, args):
    """Where the loop starting at `step` stops (the next multiple of --steps-per-loop, a checkpoint, an eval, the
    dropout switch or the end), and whether it trains with dropout."""
    boundaries = [args.num_train_steps, (step // args.steps_per_loop + 1) * args.steps_per_loop,
                  (step // args.save_checkpoints_steps + 1) * args.save_checkpoints_steps]
    if args.eval_every_steps:
        boundaries.append((step // args.eval_every_steps + 1) * args.eval_every_steps)
    if args.no_dropout_after_step is not None and step < args.no_dropout_after_step:
        boundaries.append(args.no_dropout_after_step)
    training = not args.no_dropout and not (args.no_dropout_after_step is not None
                                            and step >= args.no_dropout_after_step)
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


def restore(manager, model, args):
    """The latest checkpoint of this run, else --init-checkpoint's weights. Returns a line saying which."""
    if manager.latest_checkpoint:
        manager.checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        return f"resumed from {manager.latest_checkpoint}"
    if args.init_checkpoint:
        try:
            path = pretrained.restore(model, args.init_checkpoint)
        except (ValueError, FileNotFoundError) as e:
            raise ValueError(f"--init-checkpoint {args.init_checkpoint}: {e}") from None
        return f"initialized the weights from {path}"
    return None


def check_accumulation(args, replicas):
    """The per-replica micro-batch (--train-batch-size / replicas / --gradient-accumulation-steps); ValueError when
    the accumulation steps do not divide the per-replica batch."""
    per_replica = args.train_batch_size // replicas
    if per_replica % args.gradient_accumulation_steps:
        raise ValueError(f"--gradient-accumulation-steps {args.gradient_accumulation_steps} does not divide the "
                         f"per-replica batch {per_replica} (--train-batch-size {args.train_batch_size} / {replicas} "
                         "replicas)")
    return per_replica // args.gradient_accumulation_steps


def check_host_memory(args, config, replicas, dtype, total=None):
    """Refuses a CPU run whose model cannot fit in this machine's memory (e.g. the paper's batch 4096 on a laptop),
    saying what to change, instead of being killed by the kernel minutes later without a word. The need is
    albert_tf.training.plan's host estimate (its activation model measured on CPU: benchmarks/plan_memory.py) with
    HOST_SLACK and HOST_OVERHEAD_BYTES. The advice keeps the global batch first (--gradient-accumulation-steps,
    --remat), then halves it."""
    if total is None:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def need(batch, remat=args.remat, steps=args.gradient_accumulation_steps):
        return HOST_OVERHEAD_BYTES + HOST_SLACK * planner.host_memory_bytes(
            config, batch, args.max_seq_length, args.max_predictions, replicas=replicas, dtype=dtype, remat=remat,
            accumulation_steps=steps)

    if need(args.train_batch_size) <= total:
        return
    per_replica = args.train_batch_size // replicas
    hint = None
    for remat in sorted({args.remat, True}):
        steps = next((n for n in range(args.gradient_accumulation_steps, per_replica + 1)
                      if per_replica % n == 0 and need(args.train_batch_size, remat, n) <= total), None)
        if steps is not None:
            hint = " ".join(filter(None, ("--remat" if remat and not args.remat else "",
                                          f"--gradient-accumulation-steps {steps}" if steps > 1 else "")))
            hint += f" fits ({need(args.train_batch_size, remat, steps) / 2**30:,.1f} GiB; same global batch)"
            break
    if hint is None:
        batch = args.train_batch_size
        while batch > replicas and need(batch, steps=1) > total:
            batch //= 2
        batch -= batch % replicas
        hint = (f"--train-batch-size {batch} fits" if batch >= replicas and need(batch, steps=1) <= total
                else "no batch fits: use a smaller config or a shorter --max-seq-length")
    extra = "" if dtype == "bfloat16" else "; --dtype bfloat16 needs about half the activation memory"
    raise ValueError(f"--train-batch-size {args.train_batch_size} at --max-seq-length {args.max_seq_length} needs "
                     f"about {need(args.train_batch_size) / 2**30:,.1f} GiB on this CPU run, the machine has "
                     f"{total / 2**30:,.1f} GiB ({hint}{extra}; the paper's batch 4096 is for TPU pods)")


def run(args):
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.config import load_config  # pylint: disable=import-outside-toplevel

    applied = recipes.apply_recipe(args)
    if applied:
        print(f"recipe {args.recipe}: {' '.join(f'{k}={v}' for k, v in applied.items())}", flush=True)
    check_flags(args)
    strategy = distribute.create_strategy(tpu=args.tpu, cpu_replicas=args.cpu_replicas)  # writes nothing
    config = load_config(args.config)
    check_inputs(args, config)
    on_tpu, chief = distribute.is_tpu_strategy(strategy), distribute.is_chief(strategy)
    replicas = strategy.num_replicas_in_sync
    eval_batch_size = args.eval_batch_size or args.train_batch_size
    for flag, size in (("--train-batch-size", args.train_batch_size), ("--eval-batch-size", eval_batch_size)):
        if size % replicas:
            raise ValueError(f"{flag} {size} is not divisible by the {replicas} replicas")
    micro_batch = check_accumulation(args, replicas)
    use_gpu = bool(tf.config.list_physical_devices("GPU"))
    dtype = args.dtype or ("bfloat16" if on_tpu else "float32")
    jit = distribute.use_xla(args.xla, on_tpu, use_gpu)
    # --remat on CPU runs one stream unless told: with two, TensorFlow's graph optimizer (Grappler) keeps most of
    # what remat frees (measured: benchmarks/plan_memory.py, README "Fitting a model on fewer cores").
    streams = args.streams or (1 if on_tpu or use_gpu or args.remat else 2)
    if micro_batch % streams:
        if args.streams:
            raise ValueError(f"--streams {streams} does not divide the per-replica "
                             f"{'micro-' if args.gradient_accumulation_steps > 1 else ''}batch {micro_batch} "
                             "(--train-batch-size / replicas"
                             f"{' / --gradient-accumulation-steps' if args.gradient_accumulation_steps > 1 else ''})")
        streams = 1
    if not on_tpu and not use_gpu:
        check_host_memory(args, config, replicas, dtype)
    peak = flops.peak_flops_for(flops.local_device_kind())
    print(planner.summary_line(planner.estimate(
        config, args.train_batch_size, args.max_seq_length, args.max_predictions, cores=replicas, dtype=dtype,
        steps=args.num_train_steps, peak_flops_per_core=peak,
        memory_per_core=planner.V3_HBM_PER_CORE if on_tpu else None, remat=args.remat,
        accumulation_steps=args.gradient_accumulation_steps)), flush=True)
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if dtype == "bfloat16" else "float32")
    keras.utils.set_random_seed(args.seed)

    # ---- model, optimizer and checkpoints (variables created under the strategy: mirrored / on TPU)
    with strategy.scope():
        model, optimizer, schedule = build_model_and_optimizer(
            config, args.learning_rate, args.num_train_steps, args.num_warmup_steps, args.poly_power, streams,
            remat=args.remat)
    # Every worker takes part in a multi-worker save; only the chief's copy is kept.
    checkpoint_dir = args.model_dir if chief else os.path.join(
        args.model_dir, f".worker_{strategy.cluster_resolver.task_id}")
    manager = tf.train.CheckpointManager(pretrained.checkpoint_for(model, optimizer), checkpoint_dir,
                                         max_to_keep=args.keep_checkpoint_max, step_counter=optimizer.iterations)
    restored = restore(manager, model, args)
    step = int(optimizer.iterations.numpy())
    if restored:
        print(f"{restored} at step {step}", flush=True)
    if step >= args.num_train_steps:
        print(f"the run in {args.model_dir} is already complete at step {step} (--num-train-steps "
              f"{args.num_train_steps}): nothing to train; raise --num-train-steps to train further", flush=True)
        return 0

    # ---- data (order = f(seed, step)), the compiled loop, evaluation, metrics
    train_iterator = iter(strategy.distribute_datasets_from_function(
        make_dataset_fn(args, config, args.train_data, args.train_batch_size, True, skip_global_batches=step)))
    train_loop = make_train_loop(strategy, make_train_step(
        model, optimizer, args.train_batch_size, jit, args.gradient_accumulation_steps), SUM_KEYS)
    eval_step = make_eval_step(model, eval_batch_size)
    log = MetricsLog(args.model_dir, chief)
    log.truncate_after(step)
    flops_per_example = flops.pretraining_flops_per_example(config, args.max_seq_length, args.max_predictions)

    def save(at_step):
        if chief:
            pretrained.write_files(args.model_dir, config, args.spm_model)
        manager.save(checkpoint_number=at_step)
        if not chief:  # other workers take part in the save but keep nothing
            tf.io.gfile.rmtree(checkpoint_dir)

    print(f"training {config.num_hidden_layers}-layer ALBERT from step {step} to {args.num_train_steps} on "
          f"{replicas} replica(s) ({type(strategy).__name__}), global batch {args.train_batch_size}, "
          f"dtype {dtype}, xla {'yes' if jit or on_tpu else 'no'}, streams {streams}"
          f"{', remat' if args.remat else ''}"
          + (f", {args.gradient_accumulation_steps} accumulated micro-batches of {micro_batch} per replica"
             if args.gradient_accumulation_steps > 1 else ""), flush=True)
    last_saved = step if manager.latest_checkpoint else None
    with StopSignal() as stop:
        try:
            while step < args.num_train_steps:
                end, training = loop_end(step, args)
                num_steps = end - step
                learning_rate = float(schedule(end - 1))
                start = time.time()
                try:
                    sums = {k: float(v) for k, v in train_loop(train_iterator, tf.constant(num_steps),
                                                               training).items()}
                except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as e:
                    if data_error(e) is None:
                        raise
                    raise ValueError(f"--train-data: {data_error(e)}; stopped at step {step}, the last "
                                     f"checkpoint ({manager.latest_checkpoint or 'none'}) is intact") from None
                seconds = time.time() - start
                step = end

                metrics = metrics_from_sums(sums)
                if not all(v == v and abs(v) != float("inf") for v in metrics.values()):
                    print(f"albert-tf pretrain: error: non-finite loss in steps {step - num_steps + 1}..{step} "
                          f"({metrics}); stopped without saving, the last checkpoint "
                          f"({manager.latest_checkpoint or 'none'}) is intact. Lower --learning-rate or check the "
                          "data.", file=sys.stderr, flush=True)
                    return 3
                examples_per_sec = num_steps * args.train_batch_size / seconds
                metrics.update(learning_rate=learning_rate, grad_norm=sums["grad_norm_sum"] / num_steps,
                               examples_per_sec=examples_per_sec,
                               tokens_per_sec=examples_per_sec * args.max_seq_length)
                if peak:
                    metrics["mfu"] = examples_per_sec * flops_per_example / (peak * replicas)
                log.write("train", step, metrics)

                done = step >= args.num_train_steps
                if step % args.save_checkpoints_steps == 0 or done or stop.requested:
                    save(step)
                    last_saved = step
                if args.eval_data and (step % (args.eval_every_steps or args.save_checkpoints_steps) == 0 or done):
                    eval_data = strategy.distribute_datasets_from_function(
                        make_dataset_fn(args, config, args.eval_data, eval_batch_size, is_training=False))
                    sums = evaluate(strategy, eval_step, eval_data, args.max_eval_steps,
                                    what=f"--eval-data {args.eval_data} (batch {eval_batch_size})")
                    log.write("eval", step, metrics_from_sums(sums))
                if stop.requested:
                    print(f"stop signal {stop.requested}: saved step {step}, exiting", flush=True)
                    return 0
                if args.debug_kill_after_step is not None and last_saved == step >= args.debug_kill_after_step:
                    os.kill(os.getpid(), signal.SIGKILL)
        finally:
            log.close()
    print(f"done: step {step}, checkpoint {manager.latest_checkpoint}", flush=True)
    return 0

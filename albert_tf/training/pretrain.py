"""`albert-tf pretrain`: ALBERT pretraining (MLM + SOP) with LAMB, on one CPU core, GPUs, or a TPU pod.

Read it top to bottom: the flags, then `run()`, which checks the inputs, picks the strategy, builds the model, the
optimizer and the data, restores the latest checkpoint, and runs the loop. One training step is `train_step()`:

    forward → loss (MLM Σw·nll / Σw over the GLOBAL batch + SOP mean over the global batch)
           → gradients of this replica's share → sum over replicas → clip to global norm 1.0 → LAMB update

`--steps-per-loop` steps run inside one compiled tf.function (`train_loop()`), the original's iterations_per_loop.
Every loop ends on the host: log line, TensorBoard summaries, metrics.jsonl, a checkpoint when due, eval when due.

Faults: the checkpoint holds the model, the optimizer (m, v and the step counter, so the learning rate resumes
exactly) and nothing else; the data order is a function of (seed, step): the input pipeline is rebuilt from the
seed and skips the batches already consumed. SIGTERM saves and exits 0. A non-finite loss stops before any save.
"""
import argparse
import json
import os
import signal
import sys
import time

import tensorflow as tf

from albert_tf.training import distribute, flops

STOP_SIGNALS = (signal.SIGTERM,)
# What one step returns per replica, summed over replicas and over the steps of a loop.
SUM_KEYS = ("mlm_nll", "mlm_weight", "mlm_correct", "sop_nll", "sop_correct", "sop_count", "grad_norm_sum")


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
           "overlaps elementwise kernels with matmuls; default: 2 on CPU, 1 on GPU/TPU)")
    # Testing only: SIGKILL this process right after saving the checkpoint of step N (a crash at a known point).
    a("--debug-kill-after-step", type=int, default=None, help=argparse.SUPPRESS)


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
def make_train_step(model, optimizer, global_batch_size, jit_compile=False):
    """Returns train_step(batch, training) → metric sums, to run in a replica context (strategy.run).

    batch: a per-replica pretraining batch, static shapes [b, L] / [b, P] / [b].
    `jit_compile` compiles the forward/backward with XLA (the cross-replica sum and the update stay outside).
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

    def train_step(batch, training):
        replica = tf.distribute.get_replica_context()
        mlm_weight_total = replica.all_reduce("sum", tf.reduce_sum(batch["masked_lm_weights"]))
        grads, sums = forward_backward(batch, mlm_weight_total, training)
        grads = replica.all_reduce("sum", grads)                 # the gradient of the global-batch loss
        grads, grad_norm = tf.clip_by_global_norm(grads, 1.0)    # as the original: clip_norm=1.0
        optimizer.apply_reduced_gradients(grads, variables)     # (Keras' apply() would sum again)
        sums["grad_norm_sum"] = grad_norm / tf.cast(replica.num_replicas_in_sync, tf.float32)
        return sums

    return train_step


# ---------------------------------------------------------------------------------------------- inputs
def check_records(file_pattern, seq_length, max_predictions, dynamic_masking, flag):
    """Refuses, before anything is built, a pattern matching nothing or records whose lengths disagree with the
    flags (the first file's first record; the input pipeline checks every file when it starts)."""
    from albert_tf.data.dataset import check_first_record, match_files  # pylint: disable=import-outside-toplevel

    try:
        files = match_files(file_pattern)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{flag}: {e}") from None
    check_first_record(files[0], seq_length=seq_length, max_predictions=max_predictions,
                       dynamic_masking=dynamic_masking)
    return files


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


def write_scalar_summary(name, value):
    """tf.summary.scalar without the tensorboard package (TF 2.21 no longer depends on it): the same event
    record, a float32 scalar tagged for TensorBoard's scalars plugin."""
    from tensorflow.core.framework import summary_pb2  # pylint: disable=import-outside-toplevel

    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata.SerializeToString())


# ---------------------------------------------------------------------------------------------- the model dir
def prepare_model_dir(args, config, write):
    """Refuses a model dir that holds a different config; writes albert_config.json and spm.model."""
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.utils import atomic_copy  # pylint: disable=import-outside-toplevel

    config_path = os.path.join(args.model_dir, "albert_config.json")
    if tf.io.gfile.exists(config_path):
        existing = AlbertConfig.from_json_file(config_path)
        if existing.to_dict() != config.to_dict():
            diff = sorted(k for k, v in config.to_dict().items() if existing.to_dict().get(k) != v)
            raise ValueError(f"{config_path}: the model dir holds a different config (differs in "
                             f"{', '.join(diff)}); use a new --model-dir or the same --config")
    if write:
        tf.io.gfile.makedirs(args.model_dir)
        if not tf.io.gfile.exists(config_path):
            config.to_json_file(config_path)
        if args.spm_model:
            atomic_copy(args.spm_model, os.path.join(args.model_dir, "spm.model"))


def check_flags(args):
    positive = ("max_seq_length", "max_predictions", "train_batch_size", "num_train_steps", "steps_per_loop",
                "save_checkpoints_steps", "keep_checkpoint_max", "max_eval_steps")
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


# ---------------------------------------------------------------------------------------------- run
def run(args):  # noqa: C901  (one readable function on purpose)
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.config import load_config  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.pretrainer import AlbertPretrainer  # pylint: disable=import-outside-toplevel
    from albert_tf.training.lamb import LAMB  # pylint: disable=import-outside-toplevel
    from albert_tf.training.schedules import WarmupPolynomialDecay  # pylint: disable=import-outside-toplevel

    check_flags(args)
    strategy = distribute.create_strategy(tpu=args.tpu, cpu_replicas=args.cpu_replicas)
    on_tpu = distribute.is_tpu_strategy(strategy)
    chief = distribute.is_chief(strategy)
    replicas = strategy.num_replicas_in_sync
    if args.train_batch_size % replicas:
        raise ValueError(f"--train-batch-size {args.train_batch_size} is not divisible by the {replicas} replicas")
    eval_batch_size = args.eval_batch_size or args.train_batch_size
    if eval_batch_size % replicas:
        raise ValueError(f"--eval-batch-size {eval_batch_size} is not divisible by the {replicas} replicas")

    config = load_config(args.config)
    if args.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max-seq-length {args.max_seq_length} exceeds the config's max_position_embeddings "
                         f"{config.max_position_embeddings}")
    check_records(args.train_data, args.max_seq_length, args.max_predictions, args.dynamic_masking, "--train-data")
    if args.eval_data:
        check_records(args.eval_data, args.max_seq_length, args.max_predictions, args.dynamic_masking, "--eval-data")
    prepare_model_dir(args, config, write=chief)

    dtype = args.dtype or ("bfloat16" if on_tpu else "float32")
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if dtype == "bfloat16" else "float32")
    use_gpu = bool(tf.config.list_physical_devices("GPU"))
    jit = distribute.use_xla(args.xla, on_tpu, use_gpu)
    keras.utils.set_random_seed(args.seed)

    # ---- model and optimizer, created under the strategy (variables mirrored / on TPU)
    with strategy.scope():
        # One model whatever the dropout flags: --no-dropout and --no-dropout-after-step run it with
        # training=False, which in ALBERT removes dropout and nothing else. (Building it with the rates set to 0
        # would draw Keras' seed stream differently and so change the initial weights of a seeded run.)
        model = AlbertPretrainer(config)
        streams = args.streams or (1 if on_tpu or use_gpu else 2)
        if (args.train_batch_size // replicas) % streams:
            if args.streams:
                raise ValueError(f"--streams {streams} does not divide the per-replica batch "
                                 f"{args.train_batch_size // replicas} (--train-batch-size / replicas)")
            streams = 1
        model.encoder.training_streams = streams
        schedule = WarmupPolynomialDecay(args.learning_rate, args.num_train_steps, args.num_warmup_steps,
                                         power=args.poly_power)
        optimizer = LAMB(schedule, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                         exclude_from_weight_decay=("LayerNorm", "layer_norm", "bias"))
        optimizer.build(model.trainable_variables)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    # Every worker takes part in a multi-worker save; only the chief's copy is kept.
    checkpoint_dir = args.model_dir if chief else os.path.join(
        args.model_dir, f".worker_{strategy.cluster_resolver.task_id}")
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=args.keep_checkpoint_max,
                                         step_counter=optimizer.iterations)

    # ---- restore: the latest checkpoint of this run, else --init-checkpoint's weights
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        print(f"resumed from {manager.latest_checkpoint} at step {int(optimizer.iterations.numpy())}", flush=True)
    elif args.init_checkpoint:
        path = tf.train.latest_checkpoint(args.init_checkpoint)
        if path is None:
            raise FileNotFoundError(f"--init-checkpoint {args.init_checkpoint}: no TF checkpoint in it")
        status = tf.train.Checkpoint(model=model).read(path).expect_partial()
        try:
            status.assert_existing_objects_matched()
        except AssertionError as e:
            raise ValueError(f"--init-checkpoint {path}: does not hold every weight of this config ({e})") from None
        print(f"initialized the weights from {path}", flush=True)
    step = int(optimizer.iterations.numpy())

    # ---- data: order = f(seed, step)
    train_dataset_fn = make_dataset_fn(args, config, args.train_data, args.train_batch_size, is_training=True,
                                       skip_global_batches=step)
    train_iterator = iter(strategy.distribute_datasets_from_function(train_dataset_fn))

    # ---- the compiled loop: steps_per_loop steps per host call
    train_step = make_train_step(model, optimizer, args.train_batch_size, jit_compile=jit)

    def train_loop(iterator, num_steps, training):
        sums = {k: tf.constant(0.0) for k in SUM_KEYS}
        for _ in tf.range(num_steps):
            per_replica = strategy.run(train_step, args=(next(iterator), training))
            sums = {k: sums[k] + strategy.reduce("sum", per_replica[k], axis=None) for k in SUM_KEYS}
        return sums

    # Two traces at most: with dropout (training=True) and without (after --no-dropout-after-step).
    train_loop = tf.function(train_loop)

    @tf.autograph.experimental.do_not_convert  # no control flow; spares a harmless AutoGraph warning
    def eval_step(batch):
        outputs = model(batch, training=False)
        replica = tf.distribute.get_replica_context()
        total = replica.all_reduce("sum", tf.reduce_sum(batch["masked_lm_weights"]))
        return pretraining_loss(outputs, batch, eval_batch_size, total)[1]

    @tf.function
    def eval_batch(batch):
        per_replica = strategy.run(eval_step, args=(batch,))
        return {k: strategy.reduce("sum", v, axis=None) for k, v in per_replica.items()}

    def evaluate():
        dataset = strategy.distribute_datasets_from_function(
            make_dataset_fn(args, config, args.eval_data, eval_batch_size, is_training=False))
        totals = None
        for i, batch in enumerate(dataset):
            if i >= args.max_eval_steps:
                break
            sums = {k: float(v) for k, v in eval_batch(batch).items()}
            totals = sums if totals is None else {k: totals[k] + sums[k] for k in totals}
        if totals is None:
            raise ValueError(f"--eval-data {args.eval_data}: fewer records than one eval batch of {eval_batch_size}")
        return metrics_from_sums(totals)

    # ---- logging: TensorBoard + a log line + metrics.jsonl (chief only)
    writers = {
        name: tf.summary.create_file_writer(os.path.join(args.model_dir, name)) if chief
        else tf.summary.create_noop_writer() for name in ("train", "eval")
    }
    device_kind = flops.local_device_kind()
    peak = flops.peak_flops_for(device_kind)
    flops_per_example = flops.pretraining_flops_per_example(config, args.max_seq_length, args.max_predictions)

    def log(split, at_step, metrics):
        with writers[split].as_default(step=at_step):
            for name, value in metrics.items():
                write_scalar_summary(name, value)
        text = " ".join(f"{k}={v:.6g}" for k, v in metrics.items())
        print(f"{split} step {at_step}: {text}", flush=True)
        if chief:
            with tf.io.gfile.GFile(os.path.join(args.model_dir, "metrics.jsonl"), "a") as f:
                f.write(json.dumps({"split": split, "step": at_step, **metrics}) + "\n")

    def save(at_step):
        manager.save(checkpoint_number=at_step)
        if not chief:  # other workers take part in the save but keep nothing
            tf.io.gfile.rmtree(checkpoint_dir)

    # ---- SIGTERM (a preemption notice): finish the current loop, save, exit 0
    stop_requested = []
    previous_handlers = {s: signal.signal(s, lambda signum, frame: stop_requested.append(signum))
                         for s in STOP_SIGNALS}

    print(f"training {config.num_hidden_layers}-layer ALBERT from step {step} to {args.num_train_steps} on "
          f"{replicas} replica(s) ({type(strategy).__name__}), global batch {args.train_batch_size}, "
          f"dtype {dtype}, xla {'yes' if jit or on_tpu else 'no'}, streams {streams}", flush=True)
    last_saved = step if manager.latest_checkpoint else None
    try:
        while step < args.num_train_steps:
            # The loop ends at the next multiple of steps_per_loop, checkpoint, eval, dropout switch or the end.
            boundaries = [args.num_train_steps, (step // args.steps_per_loop + 1) * args.steps_per_loop,
                          (step // args.save_checkpoints_steps + 1) * args.save_checkpoints_steps]
            if args.eval_every_steps:
                boundaries.append((step // args.eval_every_steps + 1) * args.eval_every_steps)
            if args.no_dropout_after_step is not None and step < args.no_dropout_after_step:
                boundaries.append(args.no_dropout_after_step)
            num_steps = min(boundaries) - step
            training = not args.no_dropout and not (
                args.no_dropout_after_step is not None and step >= args.no_dropout_after_step)

            learning_rate = float(schedule(step + num_steps - 1))
            start = time.time()
            sums = {k: float(v) for k, v in train_loop(train_iterator, tf.constant(num_steps), training).items()}
            seconds = time.time() - start
            step += num_steps

            metrics = metrics_from_sums(sums)
            if not all(map(lambda v: v == v and abs(v) != float("inf"), metrics.values())):
                print(f"albert-tf pretrain: error: non-finite loss in steps {step - num_steps + 1}..{step} "
                      f"({metrics}); stopped without saving, the last checkpoint "
                      f"({manager.latest_checkpoint or 'none'}) is intact. Lower --learning-rate or check the data.",
                      file=sys.stderr, flush=True)
                return 3
            examples_per_sec = num_steps * args.train_batch_size / seconds
            metrics.update({
                "learning_rate": learning_rate,
                "grad_norm": sums["grad_norm_sum"] / num_steps,
                "examples_per_sec": examples_per_sec,
                "tokens_per_sec": examples_per_sec * args.max_seq_length,
            })
            if peak:
                metrics["mfu"] = examples_per_sec * flops_per_example / (peak * replicas)
            log("train", step, metrics)

            done = step >= args.num_train_steps
            if step % args.save_checkpoints_steps == 0 or done or stop_requested:
                save(step)
                last_saved = step
            eval_due = step % (args.eval_every_steps or args.save_checkpoints_steps) == 0 or done
            if args.eval_data and eval_due:
                log("eval", step, evaluate())
            if stop_requested:
                print(f"stop signal {stop_requested[0]}: saved step {step}, exiting", flush=True)
                return 0
            if args.debug_kill_after_step is not None and last_saved == step >= args.debug_kill_after_step:
                os.kill(os.getpid(), signal.SIGKILL)
    finally:
        for s, handler in previous_handlers.items():
            signal.signal(s, handler)
        for writer in writers.values():
            writer.flush()
    print(f"done: step {step}, checkpoint {manager.latest_checkpoint}", flush=True)
    return 0

"""`albert-tf finetune`: fine-tune a pretrained ALBERT on GLUE, SQuAD v1.1/v2.0 or RACE with Keras `model.fit`.

Read it top to bottom: the per-task defaults (the paper's table), the flags, then `run()`:

    check the flags and the --init directory (config, spm.model, vocabulary)
    → read the task's official files (albert_tf.tasks.*) → featurize in tf.data (in-graph tokenizer)
    → task model (albert_tf.modeling: classifier, span_qa, multiple_choice) with the encoder restored from --init
    → the original's AdamWeightDecay (or Keras AdamW: --optimizer; LayerNorm and biases not decayed) on a linear
      warm-up + linear decay schedule, clip-norm 1.0
    → model.fit: one Keras "epoch" is one pass over the training data; at each epoch's end the dev set is scored
      with the task's official metric (logged to TensorBoard), the best model is kept in OUTPUT/best, and a
      checkpoint (model, optimizer, epoch, best so far) is written to OUTPUT/checkpoints
    → OUTPUT/eval_results.json: the best epoch's official dev metrics.

Faults: a run killed at any point and started again with the same flags resumes from the last epoch's checkpoint
and reaches the same result: the data order of epoch e is a function of (seed, e) alone, and the checkpoint holds
everything that changes during training (weights, optimizer moments and step, dropout seed state, the best
metric so far). SIGINT (Ctrl-C) and SIGTERM stop at the next step boundary (callbacks.StopOnSignal): the epoch in
progress is not kept, one line names the last epoch's checkpoint, and the run exits 130 after SIGINT, 0 after
SIGTERM (as `pretrain`); the same command resumes. A second Ctrl-C aborts at once (one line, exit 130).
"""
import argparse
import dataclasses
import json
import math
import os
import sys
import time

from albert_tf.data import vocab
from albert_tf.tasks import TASKS, make_task

#: `--optimizer`'s choices, the default first (albert_tf.training.optimizers.OPTIMIZERS, which imports TensorFlow).
OPTIMIZERS = ("adamw-original", "adamw-keras")

RUN_CONFIG_FILE = "finetune_config.json"  # OUTPUT/: the run's plan (a restart with other flags is refused)
EVAL_RESULTS_FILE = "eval_results.json"   # OUTPUT/: the best epoch's official dev metrics


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    """One row of the paper's fine-tuning table."""
    learning_rate: float
    batch_size: int
    train_steps: int
    warmup_steps: int
    max_seq_length: int
    albert_dropout: float        # dropout inside the encoder ("ALBERT DR")
    classifier_dropout: float    # dropout on the pooled output ("Classifier DR")


# The ALBERT paper (Lan et al., ICLR 2020), appendix A.4, Table 16 "Hyperparameters for ALBERT in downstream tasks":
# LR, batch size (BSZ), ALBERT dropout (ALBERT DR), classifier dropout (Classifier DR), training steps (TS),
# warm-up steps (WS), max sequence length (MSL). The GLUE rows are also the arguments of google-research/albert's
# run_glue.sh (warm-up, LR, steps, batch per task). Every value can be overridden by a flag.
PAPER_DEFAULTS = {
    "cola": Hyperparameters(1e-5, 16, 5336, 320, 512, 0.0, 0.1),
    "stsb": Hyperparameters(2e-5, 16, 3598, 214, 512, 0.0, 0.1),
    "sst2": Hyperparameters(1e-5, 32, 20935, 1256, 512, 0.0, 0.1),
    "mnli": Hyperparameters(3e-5, 128, 10000, 1000, 512, 0.0, 0.1),
    "qnli": Hyperparameters(1e-5, 32, 33112, 1986, 512, 0.0, 0.1),
    "qqp": Hyperparameters(5e-5, 128, 14000, 1000, 512, 0.1, 0.1),
    "rte": Hyperparameters(3e-5, 32, 800, 200, 512, 0.1, 0.1),
    "mrpc": Hyperparameters(2e-5, 32, 800, 200, 512, 0.0, 0.1),
    "wnli": Hyperparameters(2e-5, 16, 2000, 250, 512, 0.1, 0.1),
    "squad1": Hyperparameters(5e-5, 48, 3649, 365, 384, 0.0, 0.1),
    "squad2": Hyperparameters(3e-5, 48, 8144, 814, 512, 0.0, 0.1),
    "race": Hyperparameters(2e-5, 32, 12000, 1000, 512, 0.1, 0.1),
}

def add_arguments(parser):
    a = parser.add_argument
    a("--task", required=True, choices=TASKS, help="the task (its data layout, head and metric)")
    a("--data-dir", required=True, help="the task's files as downloaded (GLUE task folder, SQuAD json dir, RACE)")
    a("--init", required=True, help="the pretrained encoder: a pretrained-model directory (`pretrain`'s, "
      "`convert`'s: albert_config.json, checkpoint, spm.model) or an `albert-tf export` BASE/N or BASE (newest)")
    a("--output", required=True, help="output directory: checkpoints, TensorBoard logs, best model, results")
    a("--spm-model", default=None, help="SentencePiece model (default: --init's spm.model)")
    vocab.add_casing_arguments(parser)
    a("--epochs", type=float, default=None,
      help="passes over the training data (default: the paper's step count for the task, rounded up to passes)")
    a("--learning-rate", type=float, default=None, help="peak learning rate (default: the paper's, per task)")
    a("--batch-size", type=int, default=None, help="global batch (default: the paper's, per task)")
    a("--max-seq-length", type=int, default=None, 
      help="tokens per example (default: the paper's, per task, capped by the config)")
    a("--warmup-proportion", type=float, default=None,
      help="fraction of the steps spent warming up (default: the paper's warm-up/steps ratio for the task)")
    a("--albert-dropout", type=float, default=None, help="dropout inside the encoder (default: the paper's)")
    a("--classifier-dropout", type=float, default=None, help="dropout before the head (default: the paper's)")
    a("--seed", type=int, default=12345, help="seeds the head's init, the data order and dropout")
    a("--optimizer", choices=OPTIMIZERS, default=OPTIMIZERS[0],
      help="adamw-original (default): the original's AdamWeightDecay, with which the paper's learning rates were "
           "tuned (no bias correction); adamw-keras: Keras AdamW (bias-corrected: smaller early steps). Both: "
           "weight decay 0.01 except LayerNorm and biases, clip-norm 1.0")
    a("--collapsed-init", choices=("keep", "reset-biases"), default="keep",
      help="when the --init encoder maps every input to nearly the same output (a too briefly pretrained model, "
           "README 'Collapsed init'): keep its weights and warn (default), or zero its biases and LayerNorm betas "
           "before fine-tuning (reset-biases). Weights change only when asked")
    a("--tpu", default=None, help="TPU name or address (`local` on a TPU VM); paths must be gs://")
    a("--cpu-replicas", type=int, default=None, help="split the CPU into N replicas (tests the distributed path)")
    a("--steps-per-execution", type=int, default=1, help="training steps per compiled call (Keras)")
    a("--xla", choices=("auto", "on", "off"), default="auto",
      help="jit-compile the step on GPU/CPU (a TPU always compiles); auto: on for GPU, off for CPU")
    a("--length-bucket", type=int, default=None,
      help="pad each batch only to its longest example, rounded up to a multiple of N (fewer FLOPs on short "
           "text; outputs unchanged); 0: every batch at --max-seq-length. Default: 16, and 0 on TPU, whose "
           "compiled steps need static shapes")
    a("--log-every", type=int, default=100,
      help="when stdout is not a terminal (a log), print a progress line every N steps and at least every 30 s; "
           "on a terminal Keras' progress bar shows instead")
    a("--max-train-examples", type=int, default=None, help=argparse.SUPPRESS)  # quick runs on a prefix


# ---------------------------------------------------------------------------------------------- the plan
@dataclasses.dataclass
class Plan:
    """The resolved hyperparameters of a run."""
    learning_rate: float
    batch_size: int
    max_seq_length: int
    epochs: int
    steps_per_epoch: int
    warmup_steps: int
    albert_dropout: float
    classifier_dropout: float
    length_bucket: int = 0  # 0: batches at max_seq_length; N: at their longest example rounded up to N
    optimizer: str = OPTIMIZERS[0]  # albert_tf.training.optimizers.make_optimizer's name

    @property
    def total_steps(self):
        return self.epochs * self.steps_per_epoch


def resolve_length_bucket(flag, on_tpu):
    """--length-bucket resolved: 16 by default, 0 on TPU (static shapes); a positive value on TPU is refused."""
    if flag is None:
        return 0 if on_tpu else 16
    if flag < 0:
        raise ValueError(f"--length-bucket must be 0 or positive, got {flag}")
    if flag and on_tpu:
        raise ValueError(f"--length-bucket {flag}: a TPU's compiled step needs static shapes; use 0 (the default "
                         "on TPU)")
    return flag


def make_plan(args, num_train_examples, max_position_embeddings):
    """Flags over the paper's defaults. A Keras epoch is one pass over the training data (the examples that fill
    whole batches); the paper's step count is rounded up to whole passes."""
    paper = PAPER_DEFAULTS[args.task]
    batch = args.batch_size or paper.batch_size
    seq = args.max_seq_length or min(paper.max_seq_length, max_position_embeddings)
    if seq > max_position_embeddings:
        raise ValueError(f"--max-seq-length {seq} exceeds the config's max_position_embeddings "
                         f"{max_position_embeddings}")
    for flag, value in (("--batch-size", batch), ("--max-seq-length", seq)):
        if value <= 0:
            raise ValueError(f"{flag} must be positive, got {value}")
    steps_per_epoch = num_train_examples // batch
    if steps_per_epoch < 1:
        raise ValueError(f"--data-dir {args.data_dir}: {num_train_examples} training examples, fewer than one "
                         f"batch of {batch} (lower --batch-size)")
    if args.epochs is not None:
        if args.epochs <= 0:
            raise ValueError(f"--epochs must be positive, got {args.epochs}")
        epochs = max(1, math.ceil(args.epochs))
    else:
        epochs = max(1, math.ceil(paper.train_steps / steps_per_epoch))
    proportion = args.warmup_proportion if args.warmup_proportion is not None else \
        paper.warmup_steps / paper.train_steps
    if not 0 <= proportion < 1:
        raise ValueError(f"--warmup-proportion must be in [0, 1), got {proportion}")
    for flag, value in (("--albert-dropout", args.albert_dropout), ("--classifier-dropout", args.classifier_dropout)):
        if value is not None and not 0 <= value < 1:
            raise ValueError(f"{flag} must be in [0, 1), got {value}")
    return Plan(
        learning_rate=args.learning_rate or paper.learning_rate, batch_size=batch, max_seq_length=seq,
        epochs=epochs, steps_per_epoch=steps_per_epoch,
        warmup_steps=int(round(proportion * epochs * steps_per_epoch)),
        albert_dropout=paper.albert_dropout if args.albert_dropout is None else args.albert_dropout,
        classifier_dropout=paper.classifier_dropout if args.classifier_dropout is None else args.classifier_dropout,
        optimizer=args.optimizer)


def epoch_order(seed, epoch, num_examples, steps_per_epoch, batch_size):
    """The training examples of epoch `epoch`, in order: a permutation drawn from (seed, epoch) alone, cut to
    whole batches. int64 [steps_per_epoch · batch_size]."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng([seed, epoch])
    return rng.permutation(num_examples)[: steps_per_epoch * batch_size]


# ---------------------------------------------------------------------------------------------- the optimizer
def create_optimizer(plan, model):
    """plan.optimizer (albert_tf.training.optimizers.make_optimizer: β 0.9/0.999, ε 1e-6, weight decay 0.01 except
    LayerNorm and biases, gradients clipped to a dense global norm of 1.0) on a linear warm-up then linear decay to
    0 at the last step (the original's optimization.py), built for the model's trainable variables."""
    from albert_tf.training.optimizers import make_optimizer  # pylint: disable=import-outside-toplevel
    from albert_tf.training.schedules import WarmupPolynomialDecay  # pylint: disable=import-outside-toplevel

    schedule = WarmupPolynomialDecay(plan.learning_rate, plan.total_steps, plan.warmup_steps, power=1.0)
    return make_optimizer(plan.optimizer, schedule, model.trainable_variables)


# ---------------------------------------------------------------------------------------------- --init
def read_init(init, spm_flag, cased_flag=None):
    """What --init is (albert_tf.serving.encoder.resolve_init: a pretrained-model directory or an export BASE/N or
    BASE), its vocabulary and casing: (InitSource, spm model path, lower_case). Refuses a vocabulary that disagrees
    with the config, and a --cased/--uncased that contradicts the recorded casing."""
    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.serving.encoder import resolve_init  # pylint: disable=import-outside-toplevel
    from albert_tf.io import check_input_file  # pylint: disable=import-outside-toplevel

    try:
        source = resolve_init(init, flag="--init")
    except FileNotFoundError as e:
        message = str(e)
        raise FileNotFoundError(message if message.startswith("--init") else f"--init {message}") from None
    spm_model = spm_flag or source.spm_model
    if spm_model is None:
        raise FileNotFoundError(f"--init {init}: no vocabulary in it (no spm.model); give it with --spm-model")
    check_input_file(spm_model, "--spm-model", pretrained.SPM_FILE)
    try:
        pretrained.check_vocabulary(source.config, spm_model)
    except ValueError as e:
        raise ValueError(f"--init {init}: {e}") from None
    recorded, where = source.lower_case, f"--init {source.path}"
    if spm_flag:
        recorded, where = vocab.read_casing(spm_flag), vocab.casing_path(spm_flag)
    return source, spm_model, vocab.resolve_lower_case(recorded, cased_flag, where)


# ---------------------------------------------------------------------------------------------- the data


def train_order(seed, initial_epoch, plan, num_examples):
    """The training examples of epochs initial_epoch .. plan.epochs-1, concatenated (int64)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    return np.concatenate([epoch_order(seed, e, num_examples, plan.steps_per_epoch, plan.batch_size)
                           for e in range(initial_epoch, plan.epochs)])


# ---------------------------------------------------------------------------------------------- collapse check
#: An --init encoder whose token vectors vary across inputs less than this fraction of a randomly initialized
#: encoder's (same config, same inputs) is "collapsed": it maps every input to nearly the same output.
COLLAPSE_RATIO = 0.25


def input_spread(encoder, inputs):
    """How much the encoder's last-layer token vectors depend on the input: the std across all real tokens of
    the batch (input_mask 1, [CLS] excluded), averaged over the H features, divided by the mean std within one
    token vector. 0 when every token of every input gets the same vector.

    Args:
      encoder: an AlbertEncoder; inputs: dict of int32 [B, L] (numpy).
    Returns:
      float.
    """
    import numpy as np  # pylint: disable=import-outside-toplevel

    sequence = np.asarray(encoder(inputs, training=False)["sequence_output"], np.float64)  # [B, L, H]
    mask = np.asarray(inputs["input_mask"]).astype(bool).copy()
    mask[:, 0] = False
    tokens = sequence[mask]                                                                 # [T, H]
    if len(tokens) < 2:
        return float("nan")
    return float(tokens.std(axis=0).mean() / max(tokens.std(axis=1).mean(), 1e-12))


def reset_biases(encoder):
    """Zeroes the encoder's biases and LayerNorm betas (the input-independent terms). Returns how many."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    variables = [v for v in encoder.trainable_variables if v.path.endswith(("bias", "beta"))]
    for v in variables:
        v.assign(np.zeros(v.shape, v.dtype))
    return len(variables)


def check_collapse(encoder, inputs, seed):
    """(spread of `encoder`, spread of a fresh randomly initialized encoder of the same config) on `inputs`."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(seed)
    reference = AlbertEncoder(encoder.config)
    return input_spread(encoder, inputs), input_spread(reference, inputs)


def handle_collapse(encoder, task, tokenizer, plan, args):
    """Measures the --init encoder's input spread on a training batch against a random encoder's and prints both.
    When it is collapsed: one warning line with the advice, and only with --collapsed-init reset-biases are its
    biases and LayerNorm betas zeroed (a user's weights never change unasked). Returns True when collapsed."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    features = task.sample_inputs(tokenizer, plan, min(plan.batch_size, 64))
    features = {k: np.asarray(v).reshape(-1, np.asarray(v).shape[-1]) for k, v in features.items()}
    spread, reference = check_collapse(encoder, features, args.seed)
    print(f"--init input spread {spread:.4f} (a randomly initialized encoder: {reference:.4f})", flush=True)
    if not spread < COLLAPSE_RATIO * reference:
        return False
    if args.collapsed_init == "reset-biases":
        count = reset_biases(encoder)
        action = f"zeroed its {count} bias and LayerNorm beta tensors (--collapsed-init reset-biases)"
    else:
        action = ("kept as it is; if fine-tuning starts slowly, pretrain longer or pass --collapsed-init "
                  "reset-biases")
    print(f"albert-tf finetune: note: the --init encoder's token vectors vary across inputs "
          f"{spread / reference:.2f}x as much as a random encoder's (under {COLLAPSE_RATIO}x: it maps every input "
          f"to nearly the same output, as a briefly pretrained model does); {action}.", file=sys.stderr, flush=True)
    return True


# ---------------------------------------------------------------------------------------------- callbacks
def make_callbacks(task, tokenizer, plan, state, managers, output, progress):
    """(stop, epoch_end, callbacks) (albert_tf.training.callbacks): progress first (so that Keras' bar ends its line
    before an epoch's line), then SIGINT / SIGTERM (StopOnSignal), then the per-epoch work (EpochEnd). `progress`:
    "bar" (Keras' bar) or N > 0 (a ProgressLog line every N steps / 30 s)."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.training.callbacks import EpochEnd, ProgressLog, StopOnSignal  # pylint: disable=import-outside-toplevel

    if progress == "bar":
        first = keras.callbacks.ProgbarLogger()
    else:
        first = ProgressLog(plan.steps_per_epoch, plan.epochs, plan.batch_size, every_steps=progress)
    stop, epoch_end = StopOnSignal(), EpochEnd(task, tokenizer, plan, state, managers, output)
    return stop, epoch_end, [first, stop, epoch_end]


def stopped_line(stop, epoch_end, state, managers):
    """The one line a run stopped by a signal prints: where it stopped, the checkpoint a rerun resumes from."""
    epoch, steps = int(state["epoch"].numpy()), epoch_end.steps_done
    where = f"stopped after epoch {epoch}" if steps in (0, epoch_end.plan.steps_per_epoch) else \
        f"stopped at step {steps} of epoch {epoch + 1} (not kept: a run resumes from whole epochs)"
    checkpoint = managers["resume"].latest_checkpoint
    kept = f"the last checkpoint is {checkpoint} (epoch {epoch})" if checkpoint else "no epoch finished, no checkpoint"
    return f"{stop.name}: {where}; {kept}; the same command {'resumes' if checkpoint else 'starts again'}"


# ---------------------------------------------------------------------------------------------- run
def prepare(args):
    """Everything checked and read before any output is written: (source, config, task, tokenizer, strategy, plan,
    jit); source: what --init is (albert_tf.serving.encoder.InitSource)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.io import check_output_dir  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel
    from albert_tf.training import distribute  # pylint: disable=import-outside-toplevel

    if args.tpu:
        distribute.check_cloud_paths({"--data-dir": args.data_dir, "--init": args.init, "--output": args.output})
    check_output_dir(args.output, "--output")
    if args.log_every <= 0:
        raise ValueError(f"--log-every must be positive, got {args.log_every}")
    if args.steps_per_execution <= 0:
        raise ValueError(f"--steps-per-execution must be positive, got {args.steps_per_execution}")
    source, spm_model, lower_case = read_init(args.init, args.spm_model, args.cased)
    config = source.config
    task = make_task(args)
    tokenizer = AlbertTokenizer(spm_model, lower_case=lower_case)
    # The strategy first: connecting to a TPU (or splitting the CPU into replicas) must precede any TensorFlow
    # work, such as SQuAD's in-graph featurization below.
    strategy = distribute.create_strategy(tpu=args.tpu, cpu_replicas=args.cpu_replicas)
    plan = make_plan(args, len(task.train), config.max_position_embeddings)
    # SQuAD trains on one example per window: its count depends on the planned sequence length
    plan = make_plan(args, task.num_train(tokenizer, plan), config.max_position_embeddings)
    replicas = strategy.num_replicas_in_sync
    if plan.batch_size % replicas:
        raise ValueError(f"--batch-size {plan.batch_size} is not divisible by the {replicas} replicas")
    on_tpu = distribute.is_tpu_strategy(strategy)
    plan = dataclasses.replace(plan, length_bucket=resolve_length_bucket(args.length_bucket, on_tpu))
    jit = distribute.use_xla(args.xla, on_tpu, bool(tf.config.list_physical_devices("GPU")))
    return source, config, task, tokenizer, strategy, plan, jit


def record_run_config(args, plan):
    """Writes OUTPUT/finetune_config.json, or refuses an output directory that holds a run with other flags: the
    run's plan is part of the output (a restart with different flags would not resume the same run)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.io import atomic_write_text  # pylint: disable=import-outside-toplevel

    run_config = {"task": args.task, "init": args.init, "seed": args.seed, **dataclasses.asdict(plan)}
    run_config_path = os.path.join(args.output, RUN_CONFIG_FILE)
    if tf.io.gfile.exists(run_config_path):
        with tf.io.gfile.GFile(run_config_path) as f:
            existing = json.load(f)
        existing.setdefault("optimizer", "adamw-keras")  # written before --optimizer existed: Keras AdamW
        if existing != run_config:
            diff = sorted(k for k in run_config if existing.get(k) != run_config[k])
            raise ValueError(f"{run_config_path}: the output directory holds a different run (differs in "
                             f"{', '.join(diff)}); use a new --output or the same flags")
        return  # the same run: nothing to write
    tf.io.gfile.makedirs(args.output)
    atomic_write_text(run_config_path, json.dumps(run_config, indent=2) + "\n")


def completed_run(output, plan):
    """The export version a finished run wrote (OUTPUT/export/N), or None while the run has work left: a run is
    finished when its checkpoint is past the last epoch and `finish` wrote eval_results.json and an export (the
    export is its last write)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.serving.saved_model import latest_version  # pylint: disable=import-outside-toplevel

    checkpoint = tf.train.latest_checkpoint(os.path.join(output, "checkpoints"))
    export_base = os.path.join(output, "export")
    if checkpoint is None or not tf.io.gfile.exists(os.path.join(output, EVAL_RESULTS_FILE)):
        return None
    if tf.train.load_checkpoint(checkpoint).get_tensor("epoch/.ATTRIBUTES/VARIABLE_VALUE") < plan.epochs:
        return None
    return latest_version(export_base)


def build(args, source, config, task, strategy, plan, jit):
    """The compiled task model with its encoder from --init (`source`), and the run's state and checkpoint
    managers: (model, state, managers, init_path)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf.serving.encoder import restore_encoder  # pylint: disable=import-outside-toplevel

    with strategy.scope():
        model = task.build_model(AlbertEncoder(config), plan)
        init_path = restore_encoder(model, source)
        optimizer = create_optimizer(plan, model)
        loss, metrics = task.loss_and_metrics()
        model.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=jit,
                      steps_per_execution=args.steps_per_execution)
        state = {"epoch": tf.Variable(0, dtype=tf.int64, trainable=False),
                 "best_value": tf.Variable(-math.inf, dtype=tf.float64, trainable=False),
                 "best_epoch": tf.Variable(0, dtype=tf.int64, trainable=False)}
    # Dropout's seed-generator states are not in the model's checkpoint graph: saved beside it, so that a resumed
    # run draws the same masks as an uninterrupted one.
    seed_states = [layer.seed_generator.state.value for layer in model._flatten_layers()  # pylint: disable=protected-access
                   if getattr(layer, "seed_generator", None) is not None]
    managers = {
        "resume": tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer,
                                                                 dropout_seeds=seed_states, **state),
                                             os.path.join(args.output, "checkpoints"), max_to_keep=2),
        "best": tf.train.CheckpointManager(tf.train.Checkpoint(model=model), os.path.join(args.output, "best"),
                                           max_to_keep=1),
    }
    return model, state, managers, init_path


def finish(args, config, task, tokenizer, plan, model, state, managers, started):
    """The best epoch's model: its official dev metrics (OUTPUT/eval_results.json), OUTPUT/best as a model
    directory, and its raw-text export (OUTPUT/export/N)."""
    from albert_tf.config import config_path  # pylint: disable=import-outside-toplevel
    from albert_tf.io import atomic_write_text  # pylint: disable=import-outside-toplevel
    from albert_tf.training.loop import duration_text  # pylint: disable=import-outside-toplevel

    if managers["best"].latest_checkpoint:  # none when every epoch's metric was NaN: the last weights stay
        managers["best"].checkpoint.restore(managers["best"].latest_checkpoint).assert_existing_objects_matched()
    results = task.evaluate(model, tokenizer, plan)
    best_epoch = int(state["best_epoch"].numpy())
    report = {"task": args.task, "epoch": best_epoch, "global_step": best_epoch * plan.steps_per_epoch, **results}
    atomic_write_text(os.path.join(args.output, EVAL_RESULTS_FILE), json.dumps(report, indent=2) + "\n")
    config.to_json_file(config_path(os.path.join(args.output, "best")))
    path = task.export(model, tokenizer, plan, results, os.path.join(args.output, "export"))
    print(f"exported the best model to {path} (serving_default: raw text in)", flush=True)
    print(f"done in {duration_text(time.monotonic() - started)}: best epoch {best_epoch}: {json.dumps(results)}; "
          f"{os.path.join(args.output, 'eval_results.json')}", flush=True)


def run(args):
    from albert_tf import lock  # pylint: disable=import-outside-toplevel

    started = time.monotonic()
    prepared = prepare(args)
    with lock.output_lock(args.output, "--output"):  # one run per output directory (albert_tf.lock)
        return fine_tune(args, started, *prepared)


def fine_tune(args, started, source, config, task, tokenizer, strategy, plan, jit):
    """The run once its inputs are checked and its output directory is locked: the run config, the model, training
    (resumed from the last epoch), the best epoch's results and export. Returns the exit code."""
    import keras  # pylint: disable=import-outside-toplevel

    record_run_config(args, plan)
    exported = completed_run(args.output, plan)
    if exported:
        print(f"the run in {args.output} is already complete ({plan.epochs} epoch(s), exported to {exported}): "
              "nothing to do (a new --output trains again)", flush=True)
        return 0
    keras.utils.set_random_seed(args.seed)
    config = config.replace(hidden_dropout_prob=plan.albert_dropout,
                            attention_probs_dropout_prob=plan.albert_dropout)
    model, state, managers, init_path = build(args, source, config, task, strategy, plan, jit)
    if managers["resume"].latest_checkpoint:
        managers["resume"].checkpoint.restore(managers["resume"].latest_checkpoint).assert_existing_objects_matched()
        print(f"resumed from {managers['resume'].latest_checkpoint} after epoch {int(state['epoch'].numpy())}",
              flush=True)
    else:
        print(f"initialized the encoder from {init_path}", flush=True)
        handle_collapse(model.encoder, task, tokenizer, plan, args)
    initial_epoch = int(state["epoch"].numpy())

    print(f"fine-tuning {args.task}: {len(task.train)} training examples, {plan.epochs} epoch(s) of "
          f"{plan.steps_per_epoch} steps at batch {plan.batch_size}, seq {plan.max_seq_length}, lr "
          f"{plan.learning_rate:g} (warm-up {plan.warmup_steps} steps), {strategy.num_replicas_in_sync} replica(s) "
          f"({type(strategy).__name__})", flush=True)
    if initial_epoch < plan.epochs:
        bar = sys.stdout.isatty()
        order = train_order(args.seed, initial_epoch, plan, task.num_train(tokenizer, plan))
        stop, epoch_end, callbacks = make_callbacks(task, tokenizer, plan, state, managers, args.output,
                                                    "bar" if bar else args.log_every)
        model.fit(task.train_dataset(tokenizer, plan, order), epochs=plan.epochs, initial_epoch=initial_epoch,
                  steps_per_epoch=plan.steps_per_epoch, shuffle=False, verbose=1 if bar else 0, callbacks=callbacks)
        if stop.requested:
            print(stopped_line(stop, epoch_end, state, managers), flush=True)
            return stop.exit_code
    finish(args, config, task, tokenizer, plan, model, state, managers, started)
    return 0

"""`albert-tf finetune` and `albert_tf.finetune(config)`: fine-tune a pretrained ALBERT on GLUE, SQuAD v1.1/v2.0 or
RACE with Keras `model.fit`.

Read it top to bottom: the per-task defaults (the paper's table), the step and epoch budget, then `finetune()`
(its settings: albert_tf/training/finetune_config.py's FinetuneConfig):

    check the config and the --init directory (config, spm.model, vocabulary)
    → read the task's official files (albert_tf.tasks.*) → featurize in tf.data (in-graph tokenizer)
    → task model (albert_tf.modeling: classifier, span_qa, multiple_choice) with the encoder restored from --init
    → the original's AdamWeightDecay (or Keras AdamW: --optimizer; LayerNorm and biases not decayed) on a linear
      warm-up + linear decay schedule, clip-norm 1.0
    → model.fit: one Keras "epoch" is one pass over the training data; at each epoch's end the dev set is scored
      with the task's official metric (logged to TensorBoard), the best model is kept in OUTPUT/best, and a
      checkpoint (model, optimizer, epoch, best so far) is written to OUTPUT/checkpoints
    → OUTPUT/eval_results.json: the best epoch's official dev metrics.

Faults: a run killed at any point and started again with the same config resumes from the last epoch's checkpoint
and reaches the same result: the data order of epoch e is a function of (seed, e) alone, and the checkpoint holds
everything that changes during training (weights, optimizer moments and step, dropout seed state, the best
metric so far). SIGINT (Ctrl-C) and SIGTERM stop at the next step boundary (callbacks.StopOnSignal): the epoch in
progress is not kept, one line names the last epoch's checkpoint, and the run exits 130 after SIGINT, 75 after
SIGTERM (as `pretrain`: stopped before its end, albert_tf/runtime/exit_codes.py); the same command resumes. On the
command line a second Ctrl-C aborts at once (one line, exit 130).
"""
import dataclasses
import json
import math
import os
import sys
import time

from albert_tf import run_config
from albert_tf.text import vocabulary
from albert_tf.tasks import make_task
from albert_tf.training import finetune_config, precision
from albert_tf.training.finetune_config import EVAL_RESULTS_FILE, OPTIMIZERS, FinetuneConfig, FinetuneResult


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
    """The flags: one per FinetuneConfig field (albert_tf/training/finetune_config.py)."""
    finetune_config.add_arguments(parser)


# ---------------------------------------------------------------------------------------------- the budget
@dataclasses.dataclass
class Budget:
    """The resolved hyperparameters of a run: the config over the paper's values, the steps and epochs."""
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


def make_budget(cfg, num_train_examples, max_position_embeddings):
    """The config (a FinetuneConfig) over the paper's defaults. A Keras epoch is one pass over the training data (the
    examples that fill whole batches); the paper's step count is rounded up to whole passes."""
    paper = PAPER_DEFAULTS[cfg.task]
    batch = cfg.batch_size or paper.batch_size
    seq = cfg.max_seq_length or min(paper.max_seq_length, max_position_embeddings)
    if seq > max_position_embeddings:
        raise ValueError(f"--max-seq-length {seq} exceeds the config's max_position_embeddings "
                         f"{max_position_embeddings}")
    for flag, value in (("--batch-size", batch), ("--max-seq-length", seq)):
        if value <= 0:
            raise ValueError(f"{flag} must be positive, got {value}")
    steps_per_epoch = num_train_examples // batch
    if steps_per_epoch < 1:
        raise ValueError(f"--data-dir {cfg.data_dir}: {num_train_examples} training examples, fewer than one "
                         f"batch of {batch} (lower --batch-size)")
    if cfg.epochs is not None:
        if cfg.epochs <= 0:
            raise ValueError(f"--epochs must be positive, got {cfg.epochs}")
        epochs = max(1, math.ceil(cfg.epochs))
    else:
        epochs = max(1, math.ceil(paper.train_steps / steps_per_epoch))
    proportion = cfg.warmup_proportion if cfg.warmup_proportion is not None else \
        paper.warmup_steps / paper.train_steps
    if not 0 <= proportion < 1:
        raise ValueError(f"--warmup-proportion must be in [0, 1), got {proportion}")
    for flag, value in (("--albert-dropout", cfg.albert_dropout), ("--classifier-dropout", cfg.classifier_dropout)):
        if value is not None and not 0 <= value < 1:
            raise ValueError(f"{flag} must be in [0, 1), got {value}")
    return Budget(
        learning_rate=cfg.learning_rate or paper.learning_rate, batch_size=batch, max_seq_length=seq,
        epochs=epochs, steps_per_epoch=steps_per_epoch,
        warmup_steps=int(round(proportion * epochs * steps_per_epoch)),
        albert_dropout=paper.albert_dropout if cfg.albert_dropout is None else cfg.albert_dropout,
        classifier_dropout=paper.classifier_dropout if cfg.classifier_dropout is None else cfg.classifier_dropout,
        optimizer=cfg.optimizer)


#: More passes over the training data than this, from the paper's step count, get a warning (a small task).
MANY_EPOCHS = 20


def many_epochs_warning(cfg, budget, num_train_examples):
    """One line when the paper's step count (no --epochs given) means more than MANY_EPOCHS passes over the given
    training data, naming the flag that sets the passes; None otherwise."""
    if cfg.epochs is not None or budget.epochs <= MANY_EPOCHS:
        return None
    paper = PAPER_DEFAULTS[cfg.task]
    return (f"warning: the paper's {paper.train_steps} steps for {cfg.task} at batch {budget.batch_size} make "
            f"{budget.epochs} passes over these {num_train_examples} training examples "
            f"(a small task overfits); --epochs N sets the number of passes")


def epoch_order(seed, epoch, num_examples, steps_per_epoch, batch_size):
    """The training examples of epoch `epoch`, in order: a permutation drawn from (seed, epoch) alone, cut to
    whole batches. int64 [steps_per_epoch · batch_size]."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng([seed, epoch])
    return rng.permutation(num_examples)[: steps_per_epoch * batch_size]


# ---------------------------------------------------------------------------------------------- the optimizer
def create_optimizer(budget, model):
    """budget.optimizer (albert_tf.training.optimizers.make_optimizer: β 0.9/0.999, ε 1e-6, weight decay 0.01 except
    LayerNorm and biases, gradients clipped to a dense global norm of 1.0) on a linear warm-up then linear decay to
    0 at the last step (the original's optimization.py), built for the model's trainable variables."""
    from albert_tf.training.optimizers import make_optimizer  # pylint: disable=import-outside-toplevel
    from albert_tf.training.schedules import WarmupPolynomialDecay  # pylint: disable=import-outside-toplevel

    schedule = WarmupPolynomialDecay(budget.learning_rate, budget.total_steps, budget.warmup_steps, power=1.0)
    return make_optimizer(budget.optimizer, schedule, model.trainable_variables)


# ---------------------------------------------------------------------------------------------- --init
def read_init(init, spm_flag, cased_flag=None):
    """What --init is (albert_tf.checkpoints.load.resolve_init: a pretrained-model directory or an export BASE/N or
    BASE), its vocabulary and casing: (InitSource, spm model path, lower_case). Refuses a vocabulary that disagrees
    with the config, and a --cased/--uncased that contradicts the recorded casing."""
    from albert_tf.checkpoints.load import resolve_init  # pylint: disable=import-outside-toplevel
    from albert_tf.files import check_input_file  # pylint: disable=import-outside-toplevel

    try:
        source = resolve_init(init, flag="--init")
    except FileNotFoundError as e:
        message = str(e)
        raise FileNotFoundError(message if message.startswith("--init") else f"--init {message}") from None
    spm_model = spm_flag or source.spm_model
    if spm_model is None:
        raise FileNotFoundError(f"--init {init}: no vocabulary in it (no spm.model); give it with --spm-model")
    check_input_file(spm_model, "--spm-model", vocabulary.SPM_FILE)
    try:
        vocabulary.check_vocabulary(source.config, spm_model)
    except ValueError as e:
        raise ValueError(f"--init {init}: {e}") from None
    recorded, where = source.lower_case, f"--init {source.path}"
    if spm_flag:
        recorded, where = vocabulary.read_casing(spm_flag), vocabulary.casing_path(spm_flag)
    return source, spm_model, vocabulary.resolve_lower_case(recorded, cased_flag, where)


# ---------------------------------------------------------------------------------------------- the data


def train_order(seed, initial_epoch, budget, num_examples):
    """The training examples of epochs initial_epoch .. budget.epochs-1, concatenated (int64)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    return np.concatenate([epoch_order(seed, e, num_examples, budget.steps_per_epoch, budget.batch_size)
                           for e in range(initial_epoch, budget.epochs)])


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


def handle_collapse(encoder, task, tokenizer, budget, cfg):
    """Measures the --init encoder's input spread on a training batch against a random encoder's and prints both.
    When it is collapsed: one warning line with the advice, and only with --collapsed-init reset-biases are its
    biases and LayerNorm betas zeroed (a user's weights never change unasked). Returns True when collapsed."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    features = task.sample_inputs(tokenizer, budget, min(budget.batch_size, 64))
    features = {k: np.asarray(v).reshape(-1, np.asarray(v).shape[-1]) for k, v in features.items()}
    spread, reference = check_collapse(encoder, features, cfg.seed)
    print(f"--init input spread {spread:.4f} (a randomly initialized encoder: {reference:.4f})", flush=True)
    if not spread < COLLAPSE_RATIO * reference:
        return False
    if cfg.collapsed_init == "reset-biases":
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
def make_callbacks(task, tokenizer, budget, state, managers, output, progress, exits=True):
    """(stop, epoch_end, callbacks) (albert_tf.training.callbacks): progress first (so that Keras' bar ends its line
    before an epoch's line), then SIGINT / SIGTERM (StopOnSignal; `exits`: a second SIGINT aborts the process), then
    the per-epoch work (EpochEnd). `progress`: "bar" (Keras' bar) or N > 0 (a ProgressLog line every N steps / 30
    s)."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.training.callbacks import EpochEnd, ProgressLog, StopOnSignal  # pylint: disable=import-outside-toplevel

    if progress == "bar":
        first = keras.callbacks.ProgbarLogger()
    else:
        first = ProgressLog(budget.steps_per_epoch, budget.epochs, budget.batch_size, every_steps=progress)
    stop, epoch_end = StopOnSignal(exits=exits), EpochEnd(task, tokenizer, budget, state, managers, output)
    return stop, epoch_end, [first, stop, epoch_end]


def stopped_line(stop, epoch_end, state, managers):
    """The one line a run stopped by a signal prints: where it stopped, the checkpoint a rerun resumes from."""
    epoch, steps = int(state["epoch"].numpy()), epoch_end.steps_done
    where = f"stopped after epoch {epoch}" if steps in (0, epoch_end.budget.steps_per_epoch) else \
        f"stopped at step {steps} of epoch {epoch + 1} (not kept: a run resumes from whole epochs)"
    checkpoint = managers["resume"].latest_checkpoint
    kept = f"the last checkpoint is {checkpoint} (epoch {epoch})" if checkpoint else "no epoch finished, no checkpoint"
    return f"{stop.name}: {where}; {kept}; the same command {'resumes' if checkpoint else 'starts again'}"


# ---------------------------------------------------------------------------------------------- run
@dataclasses.dataclass
class Prepared:
    """What `prepare` read and decided before any output is written."""
    source: object      # what --init is: albert_tf.checkpoints.load.InitSource
    config: object      # the encoder's AlbertConfig
    task: object        # the adapter, albert_tf.tasks.base.FinetuneTask, its files read
    tokenizer: object   # AlbertTokenizer of --init's vocabulary
    strategy: object    # tf.distribute strategy
    budget: Budget
    jit: bool           # compile the step with XLA
    dtype_choice: object = None  # albert_tf.training.precision.DtypeChoice: the training's compute dtype and why


def check_settings(cfg):
    """The settings checked before anything is read: paths (TPU: gs://), the output, the positive counts."""
    from albert_tf.files import check_output_dir  # pylint: disable=import-outside-toplevel
    from albert_tf.training import distribute  # pylint: disable=import-outside-toplevel

    if cfg.tpu:
        distribute.check_cloud_paths({"--data-dir": cfg.data_dir, "--init": cfg.init, "--output": cfg.output})
    check_output_dir(cfg.output, "--output")
    for name in ("log_every", "steps_per_execution"):
        if getattr(cfg, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(cfg, name)}")


def prepare(cfg):
    """Everything checked and read before any output is written. Returns a Prepared."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel
    from albert_tf.training import distribute  # pylint: disable=import-outside-toplevel

    check_settings(cfg)
    source, spm_model, lower_case = read_init(cfg.init, cfg.spm_model, cfg.cased)
    config = source.config
    task = make_task(cfg.task, cfg.data_dir, cfg.max_train_examples)
    tokenizer = AlbertTokenizer(spm_model, lower_case=lower_case)
    # The strategy first: connecting to a TPU (or splitting the CPU into replicas) must precede any TensorFlow
    # work, such as SQuAD's in-graph featurization below.
    strategy = distribute.create_strategy(tpu=cfg.tpu, cpu_replicas=cfg.cpu_replicas)
    budget = make_budget(cfg, len(task.train), config.max_position_embeddings)
    # SQuAD trains on one example per window: its count depends on the budget's sequence length
    num_train = task.num_train(tokenizer, budget)
    budget = make_budget(cfg, num_train, config.max_position_embeddings)
    warning = many_epochs_warning(cfg, budget, num_train)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    replicas = strategy.num_replicas_in_sync
    if budget.batch_size % replicas:
        raise ValueError(f"--batch-size {budget.batch_size} is not divisible by the {replicas} replicas")
    on_tpu = distribute.is_tpu_strategy(strategy)
    budget = dataclasses.replace(budget, length_bucket=resolve_length_bucket(cfg.length_bucket, on_tpu))
    use_gpu = bool(tf.config.list_physical_devices("GPU"))
    jit = distribute.use_xla(cfg.xla, on_tpu, use_gpu)
    choice = precision.choose(cfg.dtype, on_tpu, use_gpu, precision.probe_shape(
        budget.batch_size // replicas, budget.max_seq_length, config.hidden_size, config.intermediate_size))
    print(choice.describe(), flush=True)
    return Prepared(source, config, task, tokenizer, strategy, budget, jit, choice)


def record_run(cfg, budget, dtype_choice=None):
    """Writes OUTPUT/finetune_config.json (the config and its resolved budget), or refuses an output directory that
    holds a run with other settings: the budget is part of the output (a restart with different settings would not
    resume the same run)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    path = os.path.join(cfg.output, finetune_config.RECORD_FILE)
    recorded = run_config.read_record(path)
    if recorded is not None:  # recorded before --optimizer existed: the run trained with Keras AdamW
        recorded.get("budget", recorded).setdefault("optimizer", "adamw-keras")
    current = {**run_config.record(cfg), "budget": dataclasses.asdict(budget)}
    names = run_config.same_on_resume(FinetuneConfig) + [f"budget.{k}" for k in current["budget"]]
    if recorded is not None and "budget" not in recorded:  # an older release's: the budget beside task, init, seed
        current = {"task": cfg.task, "init": cfg.init, "seed": cfg.seed, **current["budget"]}
        names = list(current)
    run_config.check_record(path, recorded, current, names, "use a new --output or the same settings")
    if recorded is None:
        tf.io.gfile.makedirs(cfg.output)
        run_config.write_record(path, {**run_config.record(cfg), "budget": dataclasses.asdict(budget),
                                       "dtype_choice": dtype_choice and dtype_choice.to_record()})


def completed_run(output, budget):
    """The export version a finished run wrote (OUTPUT/export/N), or None while the run has work left: a run is
    finished when its checkpoint is past the last epoch and `finish` wrote eval_results.json and an export (the
    export is its last write)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.serving.saved_model import latest_version  # pylint: disable=import-outside-toplevel

    checkpoint = tf.train.latest_checkpoint(os.path.join(output, "checkpoints"))
    export_base = os.path.join(output, "export")
    if checkpoint is None or not tf.io.gfile.exists(os.path.join(output, EVAL_RESULTS_FILE)):
        return None
    if tf.train.load_checkpoint(checkpoint).get_tensor("epoch/.ATTRIBUTES/VARIABLE_VALUE") < budget.epochs:
        return None
    return latest_version(export_base)


def build(cfg, prep):
    """The compiled task model with its encoder from --init (`prep.source`), and the run's state and checkpoint
    managers: (model, state, managers, init_path)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.load import restore_encoder  # pylint: disable=import-outside-toplevel

    with prep.strategy.scope():
        with precision.compute_policy(prep.dtype_choice.dtype if prep.dtype_choice else "float32"):
            model = prep.task.build_model(AlbertEncoder(prep.config), prep.budget)
        init_path = restore_encoder(model, prep.source)
        optimizer = create_optimizer(prep.budget, model)
        loss, metrics = prep.task.loss_and_metrics()
        model.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=prep.jit,
                      steps_per_execution=cfg.steps_per_execution)
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
                                             os.path.join(cfg.output, "checkpoints"), max_to_keep=2),
        "best": tf.train.CheckpointManager(tf.train.Checkpoint(model=model), os.path.join(cfg.output, "best"),
                                           max_to_keep=1),
    }
    return model, state, managers, init_path


def float32_model(prep, model):
    """`model` itself when it computes in float32; else (trained under mixed bfloat16) the same task model built in
    float32 with `model`'s weights (its variables are float32 already): the official metrics and the export are
    computed in float32, so a served model gives what an in-process float32 model gives."""
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel

    if prep.dtype_choice is None or prep.dtype_choice.dtype == "float32":
        return model
    with prep.strategy.scope(), precision.compute_policy("float32"):
        copy = prep.task.build_model(AlbertEncoder(prep.config), prep.budget)
    copy.set_weights(model.get_weights())
    return copy


def finish(cfg, prep, model, state, managers, started):
    """The best epoch's model: its official dev metrics (OUTPUT/eval_results.json), OUTPUT/best as a model
    directory, and its raw-text export (OUTPUT/export/N). Returns the FinetuneResult."""
    from albert_tf.config import config_path  # pylint: disable=import-outside-toplevel
    from albert_tf.files import atomic_write_text  # pylint: disable=import-outside-toplevel
    from albert_tf.runtime.signals import duration_text  # pylint: disable=import-outside-toplevel

    if managers["best"].latest_checkpoint:  # none when every epoch's metric was NaN: the last weights stay
        managers["best"].checkpoint.restore(managers["best"].latest_checkpoint).assert_existing_objects_matched()
    budget, task = prep.budget, prep.task
    model = float32_model(prep, model)
    results = task.evaluate(model, prep.tokenizer, budget)
    best_epoch = int(state["best_epoch"].numpy())
    report = {"task": cfg.task, "epoch": best_epoch, "global_step": best_epoch * budget.steps_per_epoch, **results}
    atomic_write_text(os.path.join(cfg.output, EVAL_RESULTS_FILE), json.dumps(report, indent=2) + "\n")
    prep.config.to_json_file(config_path(os.path.join(cfg.output, "best")))
    path = task.export(model, prep.tokenizer, budget, results, os.path.join(cfg.output, "export"))
    print(f"exported the best model to {path} (serving_default: raw text in)", flush=True)
    print(f"done in {duration_text(time.monotonic() - started)}: best epoch {best_epoch}: {json.dumps(results)}; "
          f"{os.path.join(cfg.output, EVAL_RESULTS_FILE)}", flush=True)
    return FinetuneResult("done", cfg.output, epoch=best_epoch, epochs=budget.epochs, metrics=results, export=path)


def finetune(config):
    """Fine-tunes as `config` (a FinetuneConfig) says. Returns a FinetuneResult. Usable from a notebook or a
    script: progress as the CLI prints it, errors as ValueError / FileNotFoundError (nothing written before the
    checks pass), and on the main thread SIGINT / SIGTERM (a notebook's interrupt) stop at the next step boundary,
    keeping the last whole epoch (status "stopped"; the same config resumes)."""
    return _finetune(config, exits=False)


def _finetune(cfg, exits):
    """`finetune`; `exits` (the CLI): a second SIGINT aborts the process at once."""
    from albert_tf.runtime import lock  # pylint: disable=import-outside-toplevel

    from albert_tf.training import distribute  # pylint: disable=import-outside-toplevel

    started = time.monotonic()
    prep = prepare(cfg)
    with lock.output_lock(cfg.output, "--output"):  # one run per output directory (albert_tf.runtime.lock)
        try:
            return fine_tune(cfg, started, prep, exits)
        except distribute.RUNTIME_ERRORS as e:  # the TPU / runtime or a peer went away: exit 76, as pretrain
            raise runtime_lost(cfg.output, e) from None


def runtime_lost(output, error):
    """The RuntimeLost (exit 76) for a runtime failure during fine-tuning: one line naming what failed and the last
    whole epoch's checkpoint, which a relaunch of the same command resumes from."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.runtime.exit_codes import RuntimeLost  # pylint: disable=import-outside-toplevel
    from albert_tf.training import distribute  # pylint: disable=import-outside-toplevel

    latest = tf.train.latest_checkpoint(os.path.join(output, "checkpoints"))
    return RuntimeLost(f"the TPU / runtime or a peer worker went away during fine-tuning "
                       f"({distribute.error_summary(error)}); the last checkpoint is {latest or 'none'}: relaunch the "
                       "same command to resume from it")


def run(args):
    """`albert-tf finetune`: the flags as a FinetuneConfig, then the run. Returns the exit code."""
    return _finetune(run_config.config_from_args(FinetuneConfig, args), exits=True).exit_code


def fine_tune(cfg, started, prep, exits=True):
    """The run once its inputs are checked and its output directory is locked: the run record, the model, training
    (resumed from the last epoch), the best epoch's results and export. Returns a FinetuneResult."""
    import keras  # pylint: disable=import-outside-toplevel

    budget, task, tokenizer = prep.budget, prep.task, prep.tokenizer
    record_run(cfg, budget, prep.dtype_choice)
    exported = completed_run(cfg.output, budget)
    if exported:
        print(f"the run in {cfg.output} is already complete ({budget.epochs} epoch(s), exported to {exported}): "
              "nothing to do (a new --output trains again)", flush=True)
        return completed_result(cfg, budget, exported)
    keras.utils.set_random_seed(cfg.seed)
    prep = dataclasses.replace(prep, config=prep.config.replace(hidden_dropout_prob=budget.albert_dropout,
                                                                attention_probs_dropout_prob=budget.albert_dropout))
    model, state, managers, init_path = build(cfg, prep)
    if managers["resume"].latest_checkpoint:
        managers["resume"].checkpoint.restore(managers["resume"].latest_checkpoint).assert_existing_objects_matched()
        print(f"resumed from {managers['resume'].latest_checkpoint} after epoch {int(state['epoch'].numpy())}",
              flush=True)
    else:
        print(f"initialized the encoder from {init_path}", flush=True)
        handle_collapse(model.encoder, task, tokenizer, budget, cfg)
    initial_epoch = int(state["epoch"].numpy())

    print(f"fine-tuning {cfg.task}: {len(task.train)} training examples, {budget.epochs} epoch(s) of "
          f"{budget.steps_per_epoch} steps at batch {budget.batch_size}, seq {budget.max_seq_length}, lr "
          f"{budget.learning_rate:g} (warm-up {budget.warmup_steps} steps), "
          f"{prep.strategy.num_replicas_in_sync} replica(s) ({type(prep.strategy).__name__}), dtype "
          f"{prep.dtype_choice.dtype if prep.dtype_choice else 'float32'}", flush=True)
    if initial_epoch < budget.epochs:
        bar = sys.stdout.isatty()
        order = train_order(cfg.seed, initial_epoch, budget, task.num_train(tokenizer, budget))
        stop, epoch_end, callbacks = make_callbacks(task, tokenizer, budget, state, managers, cfg.output,
                                                    "bar" if bar else cfg.log_every, exits)
        model.fit(task.train_dataset(tokenizer, budget, order), epochs=budget.epochs, initial_epoch=initial_epoch,
                  steps_per_epoch=budget.steps_per_epoch, shuffle=False, verbose=1 if bar else 0,
                  callbacks=callbacks)
        if stop.requested:
            print(stopped_line(stop, epoch_end, state, managers), flush=True)
            return FinetuneResult("stopped", cfg.output, epoch=int(state["best_epoch"].numpy()),
                                  epochs=budget.epochs, exit_code=stop.exit_code)
    return finish(cfg, prep, model, state, managers, started)


def completed_result(cfg, budget, exported):
    """The FinetuneResult of a run found complete: its eval_results.json's best epoch and metrics."""
    from albert_tf import files  # pylint: disable=import-outside-toplevel

    report = json.loads(files.read_text(os.path.join(cfg.output, EVAL_RESULTS_FILE)))
    metrics = {k: v for k, v in report.items() if isinstance(v, dict)}
    return FinetuneResult("complete", cfg.output, epoch=report.get("epoch", 0), epochs=budget.epochs,
                          metrics=metrics, export=exported)

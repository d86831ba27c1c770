"""The fine-tuning run behind `albert-tf finetune` and `albert_tf.finetune(config)`: a FinetuneConfig in, a
FinetuneResult out (both albert_tf/settings/finetune_config.py, the config checked when it was made): fine-tune a
pretrained ALBERT on GLUE, SQuAD v1.1/v2.0 or RACE with Keras `model.fit`. The tasks are registered in
albert_tf/settings/task_registry.py (with the paper's per-task defaults); the step and epoch budget, made once per
run and held by the task, is albert_tf/tasks/budget.py;
the collapsed-init check is albert_tf/training/collapse.py; what the run shares with pretraining (the run record,
the progress line, the TensorBoard layout, the runtime-lost line) is albert_tf/training/run.py.

Read it top to bottom:

    check the paths and the --init directory (config, spm.model, vocabulary)
    → read the task's official files (albert_tf.tasks.*) → featurize in tf.data (in-graph tokenizer)
    → task model (albert_tf.modeling: classifier, span_qa, multiple_choice) with the encoder restored from --init
    → the original's AdamWeightDecay (or Keras AdamW: --optimizer; LayerNorm and biases not decayed) on a linear
      warm-up + linear decay schedule, clip-norm 1.0
    → model.fit: one Keras "epoch" is one pass over the training data; at each epoch's end the dev set is scored
      with the task's official metric (TensorBoard: OUTPUT/train and OUTPUT/eval), the best model is kept in
      OUTPUT/best, and a checkpoint (model, optimizer, epoch, best so far) is written to OUTPUT/checkpoints
    → OUTPUT/eval_results.json: the best epoch's official dev metrics.

Faults: a run killed at any point and started again with the same config resumes from the last epoch's checkpoint
and reaches the same result: the data order of epoch e is a function of (seed, e) alone, and the checkpoint holds
everything that changes during training (weights, optimizer moments and step, dropout seed state, the best
metric so far). SIGINT (Ctrl-C) and SIGTERM stop at the next step boundary (callbacks.StopOnSignal): the epoch in
progress is not kept, one line names the last epoch's checkpoint, and the run exits 130 after SIGINT, 75 after
SIGTERM (as `pretrain`: stopped before its end, albert_tf/runtime/exit_codes.py); the same command resumes. On the
command line a second Ctrl-C aborts at once (one line, exit 130). The TPU, its runtime or a peer worker going away
ends the run with one line naming the last whole epoch and its checkpoint, exit 76 (as `pretrain`).
"""
import dataclasses
import json
import math
import re
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from albert_tf import files, layout, run_config
from albert_tf.checkpoints import handles
from albert_tf.config import config_path
from albert_tf.files import atomic_write_text, check_input_file, check_output_dir
from albert_tf.layout import FinetuneDir
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.runtime import lock, precision, random_state
from albert_tf.runtime.signals import duration_text
from albert_tf.serving.saved_model import latest_version
from albert_tf.settings.finetune_config import FinetuneConfig, FinetuneResult
from albert_tf.tasks.adapters import make_task
from albert_tf.tasks.budget import make_budget, many_epochs_warning, max_seq_length, resolve_length_bucket
from albert_tf.text import AlbertTokenizer, vocabulary
from albert_tf.training import distribute
from albert_tf.training.callbacks import EpochEnd, ProgressLog, StopOnSignal
from albert_tf.training.collapse import CollapseWatch, handle_collapse
from albert_tf.training.optimizers import make_optimizer
from albert_tf.training.run import remove_leftovers, runtime_lost
from albert_tf.training.schedules import WarmupPolynomialDecay


def epoch_order(seed, epoch, num_examples, steps_per_epoch, batch_size):
    """The training examples of epoch `epoch`, in order: a permutation drawn from (seed, epoch) alone, cut to
    whole batches. int64 [steps_per_epoch · batch_size]."""
    rng = np.random.default_rng([seed, epoch])
    return rng.permutation(num_examples)[: steps_per_epoch * batch_size]


# ---------------------------------------------------------------------------------------------- the optimizer
def create_optimizer(budget, model):
    """budget.optimizer (albert_tf.training.optimizers.make_optimizer: β 0.9/0.999, ε 1e-6, weight decay 0.01 except
    LayerNorm and biases, gradients clipped to a dense global norm of 1.0) on a linear warm-up then linear decay to
    0 at the last step (the original's optimization.py), built for the model's trainable variables."""
    schedule = WarmupPolynomialDecay(budget.learning_rate, budget.total_steps, budget.warmup_steps, power=1.0)
    return make_optimizer(budget.optimizer, schedule, model.trainable_variables)


# ---------------------------------------------------------------------------------------------- --init
def read_init(init, spm_flag, cased_flag=None):
    """What --init is (albert_tf.checkpoints.handles.resolve_init: a pretrained-model directory, an export BASE/N or
    BASE, a released model's name, a Hugging Face directory), its vocabulary and casing: (InitSource, spm model
    path, lower_case). Refuses a vocabulary that disagrees with the config, and a --cased/--uncased that
    contradicts the recorded casing."""
    try:
        source = handles.resolve_init(init, flag="--init")
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



def train_order(seed, initial_epoch, budget, num_examples):
    """The training examples of epochs initial_epoch .. budget.epochs-1, concatenated (int64)."""
    return np.concatenate([epoch_order(seed, e, num_examples, budget.steps_per_epoch, budget.batch_size)
                           for e in range(initial_epoch, budget.epochs)])



# ---------------------------------------------------------------------------------------------- callbacks
def make_callbacks(task, tokenizer, state, managers, output, progress, exits=True, watch=None):
    """(stop, epoch_end, callbacks) (albert_tf.training.callbacks) of the run whose budget `task` holds: progress
    first (so that Keras' bar ends its line before an epoch's line), then SIGINT / SIGTERM (StopOnSignal; `exits`: a
    second SIGINT aborts the process), then the per-epoch work (EpochEnd, with the collapse `watch`). `progress`:
    "bar" (Keras' bar) or N > 0 (a ProgressLog line every N steps / 30 s)."""
    budget = task.budget
    if progress == "bar":
        first = keras.callbacks.ProgbarLogger()
    else:
        first = ProgressLog(budget.steps_per_epoch, budget.epochs, budget.batch_size, every_steps=progress)
    stop, epoch_end = StopOnSignal(exits=exits), EpochEnd(task, tokenizer, state, managers, output, watch)
    return stop, epoch_end, [first, stop, epoch_end]


def stopped_line(stop, epoch_end, state, managers):
    """The one line a run stopped by a signal prints: where it stopped, the checkpoint a rerun resumes from."""
    epoch, steps = int(state["epoch"].numpy()), epoch_end.steps_done
    where = (f"stopped after epoch {epoch}" if steps in (0, epoch_end.budget.steps_per_epoch) else
             f"stopped at step {steps} of epoch {epoch + 1} (not kept: a run resumes from whole epochs)")
    checkpoint = managers["resume"].latest_checkpoint
    kept = f"the last checkpoint is {checkpoint} (epoch {epoch})" if checkpoint else "no epoch finished, no checkpoint"
    return f"{stop.name}: {where}; {kept}; the same command {'resumes' if checkpoint else 'starts again'}"


# ---------------------------------------------------------------------------------------------- run
@dataclasses.dataclass
class FinetuneSetup:
    """What `prepare` read and decided before any output is written."""
    source: object      # what --init is: albert_tf.checkpoints.handles.InitSource
    config: object      # the encoder's AlbertConfig
    task: object        # the adapter, albert_tf.tasks.base.FinetuneTask, its files read, holding the run's budget
    tokenizer: object   # AlbertTokenizer of --init's vocabulary
    strategy: object    # tf.distribute strategy
    num_train: int      # model examples per pass over the training data (SQuAD: windows): the budget's count
    jit: bool           # compile the step with XLA
    dtype_choice: object = None  # albert_tf.runtime.precision.DtypeChoice: the training's compute dtype and why

    @property
    def budget(self):
        """The run's albert_tf.tasks.budget.Budget, made once by `prepare` and held by the task."""
        return self.task.budget


def check_settings(cfg: FinetuneConfig):
    """The output directory, checked before anything is read. The config's ranges, combinations and (with --tpu)
    gs:// paths were checked when it was made (FinetuneConfig)."""
    check_output_dir(cfg.output, "--output")


def read_inputs(cfg: FinetuneConfig):
    """--init (its config and vocabulary) and the task's files, read before the output lock is looked at (a bad
    input is one line whoever holds the output; reading them touches no TPU). Returns (source, tokenizer, task)."""
    source, spm_model, lower_case = read_init(cfg.init, cfg.spm_model, cfg.cased)
    task = make_task(cfg.task, cfg.data_dir, cfg.max_train_examples)
    return source, AlbertTokenizer(spm_model, lower_case=lower_case), task


def prepare(cfg: FinetuneConfig, inputs):
    """Everything decided before any output is written, after check_settings, read_inputs (`inputs`) and the output
    lock: the strategy (on a TPU, its connection), the budget (made once, set on the task: `task.budget`), XLA and
    the compute dtype. Returns a FinetuneSetup."""
    source, tokenizer, task = inputs
    config = source.config
    # The strategy first: connecting to a TPU (or splitting the CPU into replicas) must precede any TensorFlow
    # work, such as SQuAD's in-graph featurization below.
    strategy = distribute.create_strategy(tpu=cfg.tpu, cpu_replicas=cfg.cpu_replicas)
    on_tpu = distribute.is_tpu_strategy(strategy)
    seq = max_seq_length(cfg, config.max_position_embeddings)
    num_train = task.num_train(tokenizer, seq)  # SQuAD trains on one example per window of `seq` tokens
    task.budget = budget = make_budget(cfg, num_train, seq, resolve_length_bucket(cfg.length_bucket, on_tpu))
    warning = many_epochs_warning(cfg, budget, num_train)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    replicas = strategy.num_replicas_in_sync
    if budget.batch_size % replicas:
        raise ValueError(f"--batch-size {budget.batch_size} is not divisible by the {replicas} replicas")
    use_gpu = bool(tf.config.list_physical_devices("GPU"))
    jit = distribute.use_xla(cfg.xla, on_tpu, use_gpu)
    choice = dtype_for_quality(precision.choose(cfg.dtype, on_tpu, use_gpu, precision.probe_shape(
        budget.batch_size // replicas, budget.max_seq_length, config.hidden_size, config.intermediate_size)),
        cfg.dtype, budget.optimizer)
    print(choice.describe(), flush=True)
    return FinetuneSetup(source, config, task, tokenizer, strategy, num_train, jit, choice)


def dtype_for_quality(choice, flag, optimizer):
    """Fine-tuning's `--dtype auto` decides by quality as well as speed: bfloat16 only with the bias-corrected
    optimizer. Under the original's (`adamw-original`), whose early steps are 3 to 6.5 times its rate, bfloat16
    ended 0.036 below float32 on average over 5 paired seeds of the quickstart's task (docs/fine-tuning-quality.md,
    "The compute dtype"), so auto keeps float32 there. An explicit --dtype is never changed.

    Args:
      choice: precision.choose's DtypeChoice; flag: the --dtype it was chosen for; optimizer: the run's optimizer
        name.
    Returns:
      a DtypeChoice.
    """
    if flag != "auto" or choice.dtype != "bfloat16" or optimizer != "adamw-original":
        return choice
    return dataclasses.replace(choice, dtype="float32", reason=f"{choice.reason} would be bfloat16; float32 with "
                               "--optimizer adamw-original, whose bfloat16 runs lose accuracy (docs/"
                               "fine-tuning-quality.md)")


def record_run(cfg: FinetuneConfig, budget, dtype_choice=None):
    """Writes OUTPUT/finetune_config.json (the config and its resolved budget), or refuses an output directory that
    holds a run with other settings (run_config.check_record): the budget is part of the output (a restart with
    different settings would not resume the same run)."""
    path = FinetuneDir(cfg.output).run_record
    recorded = run_config.read_record(path)
    if recorded is not None:  # recorded before --optimizer existed: the run trained with Keras AdamW
        recorded.get("budget", recorded).setdefault("optimizer", "adamw-keras")
    budget_values = dataclasses.asdict(budget)
    current = run_config.run_record(cfg, budget=budget_values)
    names = run_config.resume_names(cfg, budget=budget_values)
    if recorded is not None and "budget" not in recorded:  # an older release's: the budget beside task, init, seed
        legacy = {"task": cfg.task, "init": cfg.init, "seed": cfg.seed, **budget_values}
        run_config.check_record(path, legacy, list(legacy), "--output", recorded)
    else:
        run_config.check_record(path, current, names, "--output", recorded)
    if recorded is None:
        tf.io.gfile.makedirs(cfg.output)
        run_config.write_record(path, current, dtype_choice)


def completed_run(output, budget):
    """The export version a finished run wrote (OUTPUT/export/N), or None while the run has work left: a run is
    finished when its checkpoint is past the last epoch and `finish` wrote eval_results.json and an export (the
    export is its last write)."""
    checkpoint = tf.train.latest_checkpoint(FinetuneDir(output).checkpoints)
    export_base = FinetuneDir(output).export
    if checkpoint is None or not tf.io.gfile.exists(FinetuneDir(output).eval_results):
        return None
    if tf.train.load_checkpoint(checkpoint).get_tensor("epoch/.ATTRIBUTES/VARIABLE_VALUE") < budget.epochs:
        return None
    return latest_version(export_base)


def build(cfg: FinetuneConfig, setup):
    """The compiled task model with its encoder from --init (`setup.source`), and the run's state and checkpoint
    managers: (model, state, managers, init_path)."""
    with setup.strategy.scope():
        with precision.compute_policy(setup.dtype_choice.dtype if setup.dtype_choice else "float32"):
            model = setup.task.build_model(AlbertEncoder(setup.config))
        init_path = handles.restore(model, setup.source, part="encoder")
        optimizer = create_optimizer(setup.budget, model)
        loss, metrics = setup.task.loss_and_metrics()
        model.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=setup.jit,
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
                                             FinetuneDir(cfg.output).checkpoints, max_to_keep=2),
        "best": tf.train.CheckpointManager(tf.train.Checkpoint(model=model), FinetuneDir(cfg.output).best,
                                           max_to_keep=1),
    }
    return model, state, managers, init_path


def float32_model(setup, model):
    """`model` itself when it computes in float32; else (trained under mixed bfloat16) the same task model built in
    float32 with `model`'s weights (its variables are float32 already): the official metrics and the export are
    computed in float32, so a served model gives what an in-process float32 model gives."""
    if setup.dtype_choice is None or setup.dtype_choice.dtype == "float32":
        return model
    with setup.strategy.scope(), precision.compute_policy("float32"):
        copy = setup.task.build_model(AlbertEncoder(setup.config))
    copy.set_weights(model.get_weights())
    return copy


def collapse_watch(cfg: FinetuneConfig, setup, initial_epoch):
    """The run's CollapseWatch (albert_tf.training.collapse), or None for a task without a majority-class rate."""
    reference = setup.task.chance_reference()
    if reference is None:
        return None
    return CollapseWatch(FinetuneDir(cfg.output).epoch_history, *reference, setup.budget.optimizer,
                         setup.dtype_choice.dtype if setup.dtype_choice else "float32", initial_epoch)


def record_collapse(cfg: FinetuneConfig, collapse):
    """Adds the collapse finding (None: none) to the run record, OUTPUT/finetune_config.json."""
    run_config.add_to_record(FinetuneDir(cfg.output).run_record, collapse=collapse)


def finish(cfg: FinetuneConfig, setup, model, state, managers, started, watch=None) -> FinetuneResult:
    """The best epoch's model: its official dev metrics (OUTPUT/eval_results.json), OUTPUT/best as a model
    directory, and its raw-text export (OUTPUT/export/N). Returns the FinetuneResult."""
    if managers["best"].latest_checkpoint:  # none when every epoch's metric was NaN: the last weights stay
        managers["best"].checkpoint.restore(managers["best"].latest_checkpoint).assert_existing_objects_matched()
    budget, task = setup.budget, setup.task
    model = float32_model(setup, model)
    results = task.evaluate(model, setup.tokenizer)
    best_epoch = int(state["best_epoch"].numpy())
    report = {"task": cfg.task, "epoch": best_epoch, "global_step": best_epoch * budget.steps_per_epoch, **results}
    if watch is not None:  # the collapse finding (None: the run did not collapse)
        report["collapse"] = watch.collapse
        record_collapse(cfg, watch.collapse)
    atomic_write_text(FinetuneDir(cfg.output).eval_results, json.dumps(report, indent=2) + "\n")
    setup.config.to_json_file(config_path(FinetuneDir(cfg.output).best))
    path = task.export(model, setup.tokenizer, results, FinetuneDir(cfg.output).export)
    print(f"exported the best model to {path} (serving_default: raw text in)", flush=True)
    print(f"done in {duration_text(time.monotonic() - started)}: best epoch {best_epoch}: {json.dumps(results)}; "
          f"{FinetuneDir(cfg.output).eval_results}", flush=True)
    return FinetuneResult(status="done", output=cfg.output, epoch=best_epoch, epochs=budget.epochs, metrics=results,
                          export=path)


def leftover_places(output):
    """Where a killed run of `output` leaves temporaries (training.run.remove_leftovers): the files it writes
    atomically and its checkpoints' (its export's: serving.saved_model, under the export's own lock)."""
    out = FinetuneDir(output)
    names = (layout.FINETUNE_RECORD_FILE, layout.EVAL_RESULTS_FILE, layout.EPOCH_HISTORY_FILE, lock.LOCK_FILE)
    return ((out.path, "|".join(re.escape(n) for n in names), False), (out.checkpoints, None, True),
            (out.best, re.escape(layout.CONFIG_FILE), True))


def run(cfg: FinetuneConfig, exits) -> FinetuneResult:
    """Fine-tunes as `cfg` says; returns the FinetuneResult. `exits` (the CLI): a second SIGINT aborts the process at
    once. The global random generators the run seeds are given back as they were (runtime.random_state)."""
    with random_state.kept():
        return _run(cfg, exits)


def _run(cfg: FinetuneConfig, exits) -> FinetuneResult:
    """The body of `run`."""
    started = time.monotonic()
    check_settings(cfg)
    inputs = read_inputs(cfg)
    # The lock before the strategy, as pretrain: a second client started by mistake on a TPU is refused before it
    # connects to the TPU under the running job.
    with lock.output_lock(cfg.output, "--output") as held:  # one run per output directory (albert_tf.runtime.lock)
        remove_leftovers(held, leftover_places(cfg.output))
        try:
            setup = prepare(cfg, inputs)
            return fine_tune(cfg, started, setup, exits)
        except distribute.RUNTIME_ERRORS as e:  # the TPU / runtime or a peer went away: exit 76, as pretrain
            latest = tf.train.latest_checkpoint(FinetuneDir(cfg.output).checkpoints)
            epoch = int(latest.rsplit("-", 1)[1]) if latest else None  # checkpoint N: after epoch N
            raise runtime_lost("finetune", e, epoch, latest) from None


def fine_tune(cfg: FinetuneConfig, started, setup, exits=True) -> FinetuneResult:
    """The run once its inputs are checked and its output directory is locked: the run record, the model, training
    (resumed from the last epoch), the best epoch's results and export. Returns a FinetuneResult."""
    budget, task, tokenizer = setup.budget, setup.task, setup.tokenizer
    record_run(cfg, budget, setup.dtype_choice)
    exported = completed_run(cfg.output, budget)
    if exported:
        print(f"the run in {cfg.output} is already complete ({budget.epochs} epoch(s), exported to {exported}): "
              "nothing to do (a new --output trains again)", flush=True)
        return completed_result(cfg, budget, exported)
    keras.utils.set_random_seed(cfg.seed)
    setup = dataclasses.replace(setup, config=setup.config.replace(hidden_dropout_prob=budget.albert_dropout,
                                                                attention_probs_dropout_prob=budget.albert_dropout))
    model, state, managers, init_path = build(cfg, setup)
    if managers["resume"].latest_checkpoint:
        managers["resume"].checkpoint.restore(managers["resume"].latest_checkpoint).assert_existing_objects_matched()
        print(f"resumed from {managers['resume'].latest_checkpoint} after epoch {int(state['epoch'].numpy())}",
              flush=True)
    else:
        print(f"initialized the encoder from {init_path}", flush=True)
        handle_collapse(model.encoder, task, tokenizer, cfg)
    initial_epoch = int(state["epoch"].numpy())

    print(f"fine-tuning {cfg.task}: {len(task.train)} training examples, {budget.epochs} epoch(s) of "
          f"{budget.steps_per_epoch} steps at batch {budget.batch_size}, seq {budget.max_seq_length}, lr "
          f"{budget.learning_rate:g} (warm-up {budget.warmup_steps} steps), "
          f"{setup.strategy.num_replicas_in_sync} replica(s) ({type(setup.strategy).__name__}), dtype "
          f"{setup.dtype_choice.dtype if setup.dtype_choice else 'float32'}", flush=True)
    watch = collapse_watch(cfg, setup, initial_epoch)
    if initial_epoch < budget.epochs:
        bar = sys.stdout.isatty()
        order = train_order(cfg.seed, initial_epoch, budget, setup.num_train)
        stop, epoch_end, callbacks = make_callbacks(task, tokenizer, state, managers, cfg.output,
                                                    "bar" if bar else cfg.log_every, exits, watch)
        try:
            model.fit(task.train_dataset(tokenizer, order), epochs=budget.epochs,
                      initial_epoch=initial_epoch, steps_per_epoch=budget.steps_per_epoch, shuffle=False,
                      verbose=1 if bar else 0, callbacks=callbacks)
        finally:
            stop.on_train_end()  # Keras skips on_train_end when fit raises: the signal handlers go in any case
        if stop.requested:
            print(stopped_line(stop, epoch_end, state, managers), flush=True)
            return FinetuneResult(status="stopped", output=cfg.output, epoch=int(state["best_epoch"].numpy()),
                                  epochs=budget.epochs, exit_code=stop.exit_code)
    return finish(cfg, setup, model, state, managers, started, watch)


def completed_result(cfg: FinetuneConfig, budget, exported) -> FinetuneResult:
    """The FinetuneResult of a run found complete: its eval_results.json's best epoch and metrics."""
    report = json.loads(files.read_text(FinetuneDir(cfg.output).eval_results))
    metrics = {k: v for k, v in report.items() if isinstance(v, dict)}
    return FinetuneResult(status="complete", output=cfg.output, epoch=report.get("epoch", 0), epochs=budget.epochs,
                          metrics=metrics, export=exported)

"""The pretrained-model directory: the one place that knows what it holds and how it is read and written.

A pretrained-model directory (local or gs://) is what `albert-tf convert` writes, what `albert-tf pretrain` writes
as its `--model-dir`, and what `from_pretrained`, `pretrain --init`, `albert-tf export` and fine-tuning read:

    albert_config.json      the model config (the original albert_config.json keys)
    spm.model               the SentencePiece model, when known
    spm.casing.json         {"lower_case": true|false}: whether text is lowercased for it, when known
                            (albert_tf.text.vocabulary.casing_path; carried along with the SentencePiece model)
    checkpoint, ckpt-N.*    TF checkpoints (tf.train.CheckpointManager); the object graph's root holds the Keras
                            model under `model` (and, in a pretraining run, the optimizer under `optimizer`)
    pretrain_config.json    a pretraining run's settings (its run record; every name: albert_tf/layout.py)

Inside `model`, an AlbertPretrainer and every task model hold their AlbertEncoder as `encoder`, so the encoder of
any of them can be restored into any other (`restore(..., part="encoder")`).
"""
import os
import shutil
import tempfile

import tensorflow as tf

# The directory's config file: its name and its one reader live in albert_tf.config (re-exported here).
from albert_tf.config import CONFIG_FILE, AlbertConfig, config_path, read_config  # noqa: F401
from albert_tf.files import atomic_directory, atomic_output
from albert_tf.text import vocabulary

from albert_tf.layout import CHECKPOINT_STATE_FILE, METRICS_FILE  # noqa: F401  (names: albert_tf/layout.py)
MODEL_KEY = "model"          # the checkpoint's root → the Keras model
OPTIMIZER_KEY = "optimizer"  # the checkpoint's root → the optimizer (pretraining runs only)
ENCODER_KEY = "encoder"      # a pretrainer / task model → its AlbertEncoder
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


def latest_checkpoint(directory):
    """The newest checkpoint prefix in `directory` (e.g. DIR/ckpt-1000); FileNotFoundError naming it when none."""
    directory = os.fspath(directory)
    path = tf.train.latest_checkpoint(directory)
    if path is None:
        raise FileNotFoundError(f"{directory}: no TF checkpoint (expected a 'checkpoint' index file and ckpt-N "
                                "files, as written by `albert-tf convert` or `albert-tf pretrain`)")
    return path


def checkpoint_for(model, optimizer=None):
    """The checkpoint layout: tf.train.Checkpoint(model=model[, optimizer=optimizer])."""
    objects = {MODEL_KEY: model}
    if optimizer is not None:
        objects[OPTIMIZER_KEY] = optimizer
    return tf.train.Checkpoint(**objects)


def _checkpoint_values(path):
    """{key: shape} of the model variables stored in checkpoint `path`, keys without the value suffix."""
    try:
        names = tf.train.list_variables(path)
    except (tf.errors.NotFoundError, tf.errors.DataLossError, tf.errors.InvalidArgumentError, ValueError) as e:
        raise FileNotFoundError(f"{path}: not a readable TF checkpoint ({str(e).splitlines()[0]})") from None
    return {name[: -len(_VALUE_SUFFIX)]: tuple(shape) for name, shape in names if name.endswith(_VALUE_SUFFIX)}


def _model_values(obj, prefix):
    """{key: shape} of the variables `obj` would write under `prefix` (written to a temporary local checkpoint:
    only on the error path)."""
    directory = tempfile.mkdtemp(prefix="albert_tf_layout_")
    try:
        return _checkpoint_values(_nest(obj, prefix).write(os.path.join(directory, "ckpt")))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _nest(obj, prefix):
    """tf.train.Checkpoint objects that place `obj` at `prefix` ("model" or "model/encoder") of the object graph."""
    for name in reversed(prefix.split("/")):
        obj = tf.train.Checkpoint(**{name: obj})
    return obj


def _mismatch_report(obj, prefix, path, stored):
    expected = {k: v for k, v in _model_values(obj, prefix).items() if k.startswith(prefix + "/")}
    stored = {k: v for k, v in stored.items() if k.startswith(prefix + "/")}
    problems = [f"model weight '{k}' {expected[k]} has no tensor in the checkpoint"
                for k in sorted(set(expected) - set(stored))]
    problems += [f"checkpoint tensor '{k}' has shape {stored[k]}, the model expects {expected[k]}"
                 for k in sorted(set(expected) & set(stored)) if expected[k] != stored[k]]
    problems += [f"checkpoint tensor '{k}' {stored[k]} matches no model weight"
                 for k in sorted(set(stored) - set(expected))]
    return f"{path}: checkpoint does not fit this model:\n  " + "\n  ".join(problems or ["(object graph differs)"])


def restore(model, path_or_directory, part=None):
    """Restores the weights of `model` from a checkpoint (a prefix such as DIR/ckpt-100, or a directory: its latest).

    Args:
      model: any albert_tf model: AlbertEncoder, AlbertPretrainer, or a task model (which holds `.encoder`).
      path_or_directory: a checkpoint prefix or a pretrained-model directory.
      part: None restores the whole model from a checkpoint of the same kind of model; "encoder" restores only
        the encoder (`model` itself if it is an AlbertEncoder, else `model.encoder`) from a checkpoint of any
        albert_tf model (pretrainer, encoder or task model).
    Returns:
      the checkpoint prefix read.
    Raises:
      ValueError listing every model weight without a tensor, every misshaped tensor and every stored tensor
      without a home (within the part restored); FileNotFoundError for a missing or unreadable checkpoint.
    """
    path = os.fspath(path_or_directory)
    if tf.io.gfile.isdir(path):
        path = latest_checkpoint(path)
    stored = _checkpoint_values(path)
    obj = model
    candidates = [MODEL_KEY]
    if part == ENCODER_KEY:
        obj = getattr(model, ENCODER_KEY, model)
        # The encoder of a pretrainer's or task model's checkpoint, else an encoder's own checkpoint. (Matched by
        # the object graph: in a pretraining run's checkpoint the values sit under the optimizer's path.)
        candidates = [f"{MODEL_KEY}/{ENCODER_KEY}", MODEL_KEY]
    elif part is not None:
        raise ValueError(f"part must be None or 'encoder', got {part!r}")
    for prefix in candidates:
        try:
            status = _nest(obj, prefix).read(path).expect_partial()
            status.assert_existing_objects_matched()
            break
        except (AssertionError, ValueError, tf.errors.InvalidArgumentError):
            continue
    else:
        prefix = next((c for c in candidates if any(k.startswith(c + "/") for k in stored)), MODEL_KEY)
        raise ValueError(_mismatch_report(obj, prefix, path, stored))
    # Every weight found; more stored tensors than weights means a checkpoint of a bigger model (e.g. more layers).
    weights = len({id(v) for v in obj.weights})
    if sum(1 for k in stored if k.startswith(prefix + "/")) > weights:
        raise ValueError(_mismatch_report(obj, prefix, path, stored))
    return path


def save(model, directory, spm_model=None, step=0, lower_case=None, keep_accents=None):
    """Writes `model` as a new pretrained-model directory: albert_config.json, a TF checkpoint (ckpt-`step`) and
    spm.model (with its casing record, see `write_files`) when given. Atomic (albert_tf.files.atomic_directory): built
    under a temporary name, then renamed; on gs:// copied with albert_config.json and the `checkpoint` state file
    after the checkpoint data, so `latest_checkpoint` never names a partial checkpoint. An existing non-empty
    `directory` is refused. Returns `directory`."""
    directory = os.fspath(directory).rstrip("/")
    if tf.io.gfile.exists(directory) and tf.io.gfile.listdir(directory):
        raise ValueError(f"{directory}: exists and is not empty; give a new or empty directory")
    if spm_model is not None and not tf.io.gfile.exists(os.fspath(spm_model)):
        raise FileNotFoundError(f"{spm_model}: no such SentencePiece model")

    # replaces an empty `directory` (checked above); readers key on the config and the checkpoint state file
    with atomic_directory(directory, markers=(CONFIG_FILE, CHECKPOINT_STATE_FILE)) as tmp:
        write_files(tmp, model.config, spm_model, lower_case, keep_accents)
        tf.train.CheckpointManager(checkpoint_for(model), tmp, max_to_keep=1).save(checkpoint_number=step)
    return directory


def write_files(directory, config, spm_model=None, lower_case=None, keep_accents=None):
    """Writes albert_config.json and (when given) a copy of the SentencePiece model as spm.model, each atomically,
    with its record spm.casing.json (albert_tf.text.record): the model's fingerprint, and `lower_case` /
    `keep_accents` when given, else the source model's own record (casing null, accents stripped, when it has
    none). A config already in the directory is left as it is (`check_config` refuses a different one)."""
    tf.io.gfile.makedirs(directory)
    if not tf.io.gfile.exists(config_path(directory)):
        config.to_json_file(config_path(directory))
    if spm_model:
        target = os.path.join(directory, vocabulary.SPM_FILE)
        data = vocabulary.record.read_model_bytes(spm_model)
        source = vocabulary.read_text_record(spm_model, data)  # a record of another model is refused
        recorded = source.lower_case
        if lower_case is not None:  # a contradiction with the source's record is refused
            recorded = vocabulary.resolve_lower_case(recorded, not lower_case, source.path)
        keep = vocabulary.resolve_keep_accents(source.keep_accents, keep_accents, source.path)
        vocabulary.write_text_record(target, recorded, keep, model_bytes=data)
        with atomic_output(target, "wb") as f:  # the model after its record (vocab's order)
            f.write(data)


def check_config(directory, config):
    """Refuses a directory whose albert_config.json differs from `config` (naming the fields that differ)."""
    path = config_path(directory)
    if not tf.io.gfile.exists(path):
        return
    existing, wanted = AlbertConfig.from_json_file(path).to_dict(), config.to_dict()
    if existing != wanted:
        diff = sorted(k for k in set(existing) | set(wanted) if existing.get(k) != wanted.get(k))
        raise ValueError(f"{path}: the model dir holds a different config (differs in {', '.join(diff)}); use a "
                         "new --model-dir or the same --config")



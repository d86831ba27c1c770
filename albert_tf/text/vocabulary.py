"""A model's vocabulary files: the SentencePiece model, its casing record, and the checks that a vocabulary fits.

    spm.model           SPM_FILE: the SentencePiece model as a pretrained-model directory and an export hold it
    X.casing.json       beside X.model: {"lower_case": true|false}, whether text is lowercased for it
                        (`write_casing` / `read_casing`; `resolve_lower_case` weighs it against --cased/--uncased)
    check_vocabulary, check_same_vocabulary   a vocabulary against a config's vocab_size / a directory's own

The special ids (pad 0, unk 1, [CLS] 2, [SEP] 3, [MASK] 4) are albert_tf.text.sentencepiece's. No TensorFlow is
imported for local paths except where a function says so.
"""
import hashlib
import json
import os

from albert_tf import config as albert_config
from albert_tf import files, run_config
from albert_tf.layout import SPM_FILE  # pylint: disable=unused-import  (its one spelling)
from albert_tf.text.sentencepiece import AlbertTokenizer


def spm_model_path(directory):
    """DIR/spm.model if the directory has one, else None."""
    path = os.path.join(os.fspath(directory), SPM_FILE)
    return path if files.exists(path) else None


CASING_SUFFIX = ".casing.json"


def casing_path(spm_model):
    """The casing record of a SentencePiece model: X.model → X.casing.json (spm.model → spm.casing.json)."""
    spm_model = os.fspath(spm_model)
    stem = spm_model[: -len(".model")] if spm_model.endswith(".model") else spm_model
    return stem + CASING_SUFFIX


def write_casing(spm_model, lower_case):
    """Records beside `spm_model` whether its text is lowercased (atomically); returns the record's path."""
    path = casing_path(spm_model)
    files.atomic_write_text(path, json.dumps({"lower_case": bool(lower_case)}) + "\n")
    return path


def read_casing(spm_model):
    """True (uncased: lowercase), False (cased) or None (no record) for the SentencePiece model `spm_model`."""
    path = casing_path(spm_model)
    if not files.exists(path):
        return None
    try:
        value = json.loads(files.read_text(path)).get("lower_case")
    except (ValueError, AttributeError):
        value = None
    if not isinstance(value, bool):
        raise ValueError(f"{path}: expected {{\"lower_case\": true or false}}")
    return value


def resolve_lower_case(recorded, cased_flag, source):
    """The lowercasing to tokenize with: the `--cased`/`--uncased` flag (cased_flag True / False / None), else the
    recorded casing (`read_casing`, or an export's config), else uncased (ALBERT's releases). A flag that
    contradicts the record is a ValueError naming both (`source`: where the record was read)."""
    if cased_flag is None:
        return True if recorded is None else recorded
    wanted = not cased_flag
    if recorded is not None and recorded != wanted:
        said, was = ("--cased", "uncased (lowercased)") if cased_flag else ("--uncased", "cased")
        raise ValueError(f"{said} contradicts {source}: its vocabulary is recorded as {was}; drop the flag or "
                         "use the vocabulary the model was trained with")
    return wanted


def cased_option():
    """The one casing setting of every job that reads or writes text: `--cased` / `--uncased` (the field `cased`:
    True / False / None when neither, which means as recorded beside the vocabulary, else uncased)."""
    return run_config.option(
        None, "the vocabulary keeps case (default: as recorded beside the SentencePiece model, else uncased)",
        negative="--uncased",
        negative_help="the vocabulary is lowercased (default: as recorded beside the SentencePiece model, else "
                      "uncased)")


def _sha256(path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    with tf.io.gfile.GFile(os.fspath(path), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_same_vocabulary(directory, spm_model, what="--spm-model"):
    """`check_config`'s twin for the vocabulary: refuses a SentencePiece model whose bytes differ (SHA-256) from
    the directory's spm.model. The vocabulary is part of the model: the embedding rows belong to its pieces."""
    existing = spm_model_path(directory) if spm_model else None
    if existing is None:
        return
    if _sha256(existing) != _sha256(spm_model):
        raise ValueError(f"{what} {spm_model}: the model dir's {existing} is a different vocabulary (SHA-256 "
                         "differs); use a new --model-dir, the same --spm-model, or leave --spm-model out to keep "
                         "the model dir's")


def check_vocabulary(config, spm_model, what="--spm-model"):
    """Refuses a SentencePiece model whose size differs from the config's vocab_size (token ids would run past the
    embedding table, or leave rows no token reaches)."""
    size = AlbertTokenizer(spm_model).vocab_size  # also checks the special pieces' ids
    if size != config.vocab_size:
        raise ValueError(f"{what} {spm_model}: the SentencePiece model has {size:,} pieces but the config's "
                         f"vocab_size is {config.vocab_size:,}; they must be equal (set vocab_size to {size} or "
                         "use the vocabulary the model was built for)")


def model_config(config, overrides=None, spm_model=None):
    """The AlbertConfig of a run (albert_tf.config.resolve): `config` with `overrides` (`--set`); vocab_size "auto"
    is the size of `spm_model`."""
    size = (lambda: AlbertTokenizer(spm_model).vocab_size) if spm_model else None
    return albert_config.resolve(config, overrides, size)

"""A model's vocabulary files: the SentencePiece model, its casing record, and the checks that a vocabulary fits.

    spm.model           SPM_FILE: the SentencePiece model as a pretrained-model directory and an export hold it
    X.casing.json       beside X.model: its text-normalization record {"lower_case", "keep_accents", "sha256"}
                        (albert_tf.text.record, re-exported here: `write_text_record` / `read_text_record`;
                        `resolve_lower_case` / `resolve_keep_accents` weigh it against the flags)
    check_vocabulary, check_same_vocabulary   a vocabulary against a config's vocab_size / a directory's own

The special ids (pad 0, unk 1, [CLS] 2, [SEP] 3, [MASK] 4) are albert_tf.text.sentencepiece's. No TensorFlow is
imported for local paths except where a function says so.
"""
import hashlib
import json
import os

from albert_tf import config as albert_config
from albert_tf import files
from albert_tf.layout import SPM_FILE  # pylint: disable=unused-import  (its one spelling)
from albert_tf.text import record
from albert_tf.text.record import (CASING_SUFFIX, TextRecord, casing_path, file_fingerprint,  # noqa: F401
                                   read_casing, read_text_record, record_text, resolve_keep_accents,
                                   resolve_lower_case, write_casing, write_text_record)
from albert_tf.text.sentencepiece import AlbertTokenizer


def spm_model_path(directory):
    """DIR/spm.model if the directory has one, else None."""
    path = os.path.join(os.fspath(directory), SPM_FILE)
    return path if files.exists(path) else None


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
    """Refuses a SentencePiece model whose size differs from `config`'s (an AlbertConfig) vocab_size (token ids would
    run past the embedding table, or leave rows no token reaches)."""
    size = AlbertTokenizer(spm_model).vocab_size  # also checks the special pieces' ids
    if size != config.vocab_size:
        raise ValueError(f"{what} {spm_model}: the SentencePiece model has {size:,} pieces but the config's "
                         f"vocab_size is {config.vocab_size:,}; they must be equal (set vocab_size to {size} or "
                         "use the vocabulary the model was built for)")


def model_config(name_or_path, overrides=None, spm_model=None):
    """The AlbertConfig of a run (albert_tf.config.resolve): `name_or_path` (`--config`: a preset name, a file or a
    directory) with `overrides` (`--set`); vocab_size "auto" is the size of `spm_model`."""
    size = (lambda: AlbertTokenizer(spm_model).vocab_size) if spm_model else None
    return albert_config.resolve(name_or_path, overrides, size)

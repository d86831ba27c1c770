"""Reading a pretrained encoder, whatever holds it: a pretrained-model directory (`pretrain`'s, `convert`'s), an
`albert-tf export` (BASE/N, or BASE: its newest version), a released model by name (`albert_base_v2`,
`hf:OWNER/NAME`: converted once, cached) or a Hugging Face ALBERT directory (config.json + model.safetensors:
converted once into the cache, the directory left as it is). One call loads any of them:

    model = albert_tf.load_model("albert_base_v2")       # or a model dir, an export, a Hugging Face directory

    resolve_init(path)        what the path is: an InitSource (kind, directory, config, vocabulary, casing)
    restore_encoder(model, s) the encoder weights of an InitSource into a model (every weight must be found)
    load_encoder(path)        a trainable AlbertEncoder from either
    load_model(path)          what the path holds: an AlbertPretrainer (MLM and SOP heads) from a model directory
                              whose checkpoint has them, else an AlbertEncoder (an export holds the encoder only)

An export keeps its config (plus lower_case, keep_accents, spm_sha256, max_seq_length and dtype), spm.model and its
record spm.casing.json in assets.extra/ (the serving
side's layout, albert_tf.serving.saved_model), and its weights under the SavedModel's variables/.
"""
import dataclasses
import hashlib
import json
import os

import tensorflow as tf

from albert_tf.checkpoints import convert, pretrained, releases
from albert_tf.config import CONFIG_FILE, AlbertConfig
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.serving.saved_model import ASSETS_EXTRA, SAVED_MODEL_FILE, keras_weights, latest_version
from albert_tf.text import vocabulary


@dataclasses.dataclass(frozen=True)
class InitSource:
    """What a pretrained-encoder path is (`resolve_init`): a pretrained-model directory (`pretrain`'s, `convert`'s)
    or an `albert-tf export` version BASE/N."""
    kind: str         # "model_dir" or "export"
    path: str         # the directory read (an export base resolved to its newest version)
    config: object    # AlbertConfig
    spm_model: str    # its vocabulary, or None when it holds none
    lower_case: bool  # its recorded casing, or None when not recorded


def is_hf_directory(path):
    """True for a Hugging Face ALBERT directory (config.json and model.safetensors, no albert_config.json)."""
    return (tf.io.gfile.exists(os.path.join(path, "config.json"))
            and tf.io.gfile.exists(os.path.join(path, "model.safetensors"))
            and not tf.io.gfile.exists(pretrained.config_path(path)))


def local_handle(handle, cache=None):
    """The directory that holds `handle`: a released model's name → its conversion in the cache (downloaded and
    converted once: convert.convert_release); a Hugging Face ALBERT directory → its conversion in the cache (keyed
    by the directory and its weights file's size and time, so a changed directory is converted again); anything
    else as it is."""
    path = os.fspath(handle).rstrip("/")
    if not tf.io.gfile.exists(path):
        try:
            name = releases.canonical_name(path)
        except ValueError:
            return path  # not a name either: resolve_init says what was expected
        return convert.convert_release(name, cache_dir=cache)
    if tf.io.gfile.isdir(path) and is_hf_directory(path):
        weights = tf.io.gfile.stat(os.path.join(path, "model.safetensors"))
        key = hashlib.sha256(f"{os.path.abspath(path)}|{weights.length}|{weights.mtime_nsec}".encode()).hexdigest()
        output = os.path.join(releases.cache_dir(cache), "models", f"hf-dir--{key[:16]}")
        if not tf.io.gfile.exists(pretrained.config_path(output)):
            convert.convert("hf", path, output, log=convert.log_to_stderr)
        return output
    return path


def resolve_init(path, flag="--init"):
    """Resolves a pretrained-model directory, an export version dir BASE/N or an export base BASE (its newest
    version), a released model's name or a Hugging Face ALBERT directory (`local_handle`) to an InitSource.
    FileNotFoundError naming `flag` when it is none of them."""
    path = local_handle(path)
    if not tf.io.gfile.isdir(path):
        raise FileNotFoundError(f"{flag} {path}: no such directory (expected a pretrained-model directory, an "
                                "`albert-tf export` BASE or BASE/N, a Hugging Face ALBERT directory or a released "
                                f"model's name: {', '.join(releases.NAMES)}, hf:OWNER/NAME)")
    exported = tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE))
    if not exported and not tf.io.gfile.exists(pretrained.config_path(path)) and latest_version(path):
        path = latest_version(path)  # BASE: its newest version
        exported = tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE))
    if not exported:
        spm_model = vocabulary.spm_model_path(path) if tf.io.gfile.exists(pretrained.config_path(path)) else None
        return InitSource("model_dir", path, pretrained.read_config(path), spm_model,
                          vocabulary.read_casing(spm_model) if spm_model else None)
    config_file = os.path.join(path, ASSETS_EXTRA, CONFIG_FILE)
    if not tf.io.gfile.exists(config_file):
        raise FileNotFoundError(f"{flag} {path}: a SavedModel without {ASSETS_EXTRA}/{CONFIG_FILE} (not an encoder "
                                "written by `albert-tf export`; a fine-tuned task's export cannot be an --init)")
    with tf.io.gfile.GFile(config_file) as f:
        config = json.load(f)
    lower_case = config.pop("lower_case", None)
    for key in ("keep_accents", "spm_sha256"):  # the vocabulary's: its record beside assets.extra/spm.model
        config.pop(key, None)
    config.pop("max_seq_length", None)
    config.pop("dtype", None)  # the export's compute dtype; its variables are float32 either way
    spm_model = os.path.join(path, ASSETS_EXTRA, vocabulary.SPM_FILE)
    return InitSource("export", path, AlbertConfig.from_dict(config),
                      spm_model if tf.io.gfile.exists(spm_model) else None, lower_case)


def restore_encoder(model, source):
    """Restores the encoder of `model` (an AlbertEncoder, or a pretrainer / task model holding `.encoder`) from an
    InitSource; every encoder weight must be found. Returns the checkpoint path read."""
    if source.kind == "model_dir":
        return pretrained.restore(model, source.path, part="encoder")
    encoder = getattr(model, "encoder", model)
    variables = os.path.join(source.path, "variables", "variables")
    status = tf.train.Checkpoint(encoder_weights=keras_weights(encoder)).read(variables)
    status.expect_partial().assert_existing_objects_matched()
    return variables


def load_encoder(path, dropout=True):
    """A trainable Keras AlbertEncoder from any handle (`resolve_init`): an export (BASE/N, or BASE: its largest
    version), a pretrained-model directory, a released model's name or a Hugging Face ALBERT directory."""
    source = resolve_init(path, flag="load_encoder")
    encoder = AlbertEncoder(source.config, dropout=dropout)
    restore_encoder(encoder, source)
    return encoder


def load_model(path, flag="--init"):
    """(model, InitSource) for any handle (`resolve_init`): an AlbertPretrainer when the path's checkpoint holds a
    whole pretrainer (a model dir, a release, a Hugging Face AlbertForPreTraining), else its AlbertEncoder (an
    export, a task model's checkpoint)."""
    source = resolve_init(path, flag=flag)
    if source.kind == "model_dir":
        pretrainer = AlbertPretrainer(source.config)
        try:
            pretrained.restore(pretrainer, source.path)
            return pretrainer, source
        except ValueError:
            pass  # not a pretrainer's checkpoint: its encoder below
    encoder = AlbertEncoder(source.config)
    restore_encoder(encoder, source)
    return encoder, source


def load_pretrained(handle):
    """The model any handle holds, in one call (`load_model` without its InitSource): an AlbertPretrainer from a
    pretrained-model directory, a released model's name (`albert_base_v2`, `hf:OWNER/NAME`) or a Hugging Face
    ALBERT directory; an AlbertEncoder from an export."""
    return load_model(handle, flag="load_pretrained")[0]

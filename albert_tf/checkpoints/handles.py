"""What a handle to a pretrained encoder is, and its weights read into a model the caller built: the one resolution
behind every `from_pretrained`, `albert_tf.load_pretrained` and every command's `--init`. A handle is

    a pretrained-model directory    `pretrain`'s --model-dir, `convert`'s --output, `save_pretrained`'s directory
    an `albert-tf export`           BASE/N, or BASE: its newest version (the encoder only: no pretraining heads)
    a released model's name         albert_base_v2 (also albert-base-v2) ... xxlarge v1/v2: downloaded once into the
                                    cache (albert_tf.checkpoints.releases) and read from its TF1 checkpoint;
                                    hf:OWNER/NAME: fetched by huggingface_hub into its own cache
    a Hugging Face ALBERT directory config.json + model.safetensors (+ spiece.model, tokenizer_config.json), read
                                    as it is (nothing is written into it)

    resolve_init(handle, flag)    → InitSource (kind, path, config, vocabulary, casing); a bad handle: one line naming
                                    it and what was expected
    restore(model, source, part)  the source's weights into `model` (every weight must be found)

Nothing here imports albert_tf.modeling, so the models' `from_pretrained` (the one upward arrow, modeling →
checkpoints) reads through this module without an import cycle. Released and Hugging Face checkpoints are read by
name (albert_tf.checkpoints.tensors) straight into the model being built: no conversion is needed to load them
(`albert-tf convert` writes the same model as a pretrained-model directory).
"""
import dataclasses
import hashlib
import json
import os

import tensorflow as tf

from albert_tf import files
from albert_tf.checkpoints import hf_tokenizer, pretrained, releases, tensors
from albert_tf.config import CONFIG_FILE, AlbertConfig
from albert_tf.serving.saved_model import ASSETS_EXTRA, SAVED_MODEL_FILE, keras_weights, latest_version
from albert_tf.text import vocabulary

KINDS = ("model_dir", "export", "release", "hf")
EXPECTED = releases.EXPECTED  # what a handle may be


@dataclasses.dataclass(frozen=True)
class InitSource:
    """What a handle is (`resolve_init`)."""
    kind: str         # one of KINDS
    path: str         # what is read: the model dir, the export version BASE/N, the release's TF1 checkpoint prefix,
                      # the Hugging Face directory
    config: object    # AlbertConfig
    spm_model: str    # its vocabulary, or None when it holds none
    lower_case: bool  # its casing (recorded, or the release's), or None when not known


def is_hf_directory(path):
    """True for a Hugging Face ALBERT directory (config.json and model.safetensors, no albert_config.json)."""
    return (tf.io.gfile.exists(os.path.join(path, "config.json"))
            and tf.io.gfile.exists(os.path.join(path, "model.safetensors"))
            and not tf.io.gfile.exists(pretrained.config_path(path)))


def resolve_init(handle, flag="--init"):
    """The InitSource of `handle` (see the module's docstring). FileNotFoundError or ValueError in one line naming
    `flag`, the handle and what was expected when it is none of them."""
    path, name = releases.check_handle(handle, flag)
    if name:
        return _release_source(name)
    if is_hf_directory(path):
        return _hf_source(path)
    exported = tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE))
    if not exported and not tf.io.gfile.exists(pretrained.config_path(path)) and latest_version(path):
        path = latest_version(path)  # BASE: its newest version
        exported = tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE))
    if exported:
        return _export_source(path, flag)
    if not tf.io.gfile.exists(pretrained.config_path(path)):
        raise FileNotFoundError(f"{flag} {path}: a directory with neither {CONFIG_FILE}, a SavedModel nor a Hugging "
                                f"Face config.json + model.safetensors (expected {EXPECTED})")
    spm_model = vocabulary.spm_model_path(path)
    return InitSource("model_dir", path, pretrained.read_config(path), spm_model,
                      vocabulary.read_casing(spm_model) if spm_model else None)


def _export_source(path, flag):
    config_file = os.path.join(path, ASSETS_EXTRA, CONFIG_FILE)
    if not tf.io.gfile.exists(config_file):
        raise FileNotFoundError(f"{flag} {path}: a SavedModel without {ASSETS_EXTRA}/{CONFIG_FILE} (not an encoder "
                                "written by `albert-tf export`; a fine-tuned task's export cannot be an --init)")
    with tf.io.gfile.GFile(config_file) as f:
        config = json.load(f)
    lower_case = config.pop("lower_case", None)
    # the vocabulary's (its record sits beside assets.extra/spm.model), the export's length and compute dtype (its
    # variables are float32 either way)
    for key in ("keep_accents", "spm_sha256", "max_seq_length", "dtype"):
        config.pop(key, None)
    spm_model = os.path.join(path, ASSETS_EXTRA, vocabulary.SPM_FILE)
    return InitSource("export", path, AlbertConfig.from_dict(config),
                      spm_model if tf.io.gfile.exists(spm_model) else None, lower_case)


def _release_source(name):
    """A released model by name: Google's TF1 release from the cache (downloaded into it once), or hf:OWNER/NAME
    from Hugging Face's cache."""
    if name.startswith(releases.HF_PREFIX):
        return _hf_source(releases.fetch_hf(name))
    files = releases.fetch_release(name)
    return InitSource("release", files.checkpoint, AlbertConfig.from_json_file(files.config), files.spm_model,
                      tensors.release_casing("tf1", files.directory, None, files.spm_model))


def _cache_key(path, file):
    """A cache entry's name for FILE of directory PATH: the directory and the file's size and time."""
    stat = tf.io.gfile.stat(file)
    return hashlib.sha256(f"{os.path.abspath(path)}|{stat.length}|{stat.mtime_nsec}".encode()).hexdigest()[:16]


def _hf_vocabulary(path):
    """The SentencePiece model of Hugging Face directory PATH: its spiece.model; else (what transformers 5's
    save_pretrained writes) one built from its tokenizer.json (hf_tokenizer.spm_from_hf, as `convert --from hf`
    does) into the cache, keyed by the directory and tokenizer.json's size and time; neither file: None. A
    tokenizer.json no SentencePiece model holds: ValueError (one line)."""
    own = os.path.join(path, hf_tokenizer.HF_SPM_FILE)
    if tf.io.gfile.exists(own):
        return own
    tokenizer_json = os.path.join(path, hf_tokenizer.HF_TOKENIZER_FILE)
    if not tf.io.gfile.exists(tokenizer_json):
        return None
    built = os.path.join(releases.cache_dir(), "vocabularies", f"hf-json--{_cache_key(path, tokenizer_json)}",
                         hf_tokenizer.HF_SPM_FILE)
    if not tf.io.gfile.exists(built):
        spm_bytes = hf_tokenizer.spm_from_hf(path)
        tf.io.gfile.makedirs(os.path.dirname(built))
        with files.atomic_output(built) as f:
            f.write(spm_bytes)
    return built


def _hf_source(path):
    """A Hugging Face ALBERT directory: its config.json, vocabulary (`_hf_vocabulary`) and tokenizer_config.json's
    casing. When that keeps accents (which a SentencePiece model without a record of ours does not say), the
    vocabulary is a recorded copy in the cache (keyed by the directory and the model's size and time), so every
    reader tokenizes alike."""
    config = tensors.config_from_hf(os.path.join(path, "config.json"))
    spm_model = _hf_vocabulary(path)
    if spm_model is None:
        return InitSource("hf", path, config, None, None)
    lower_case = tensors.release_casing("hf", path, None, spm_model)
    if tensors.release_accents("hf", path, spm_model):
        copy = os.path.join(releases.cache_dir(), "vocabularies", f"hf-dir--{_cache_key(path, spm_model)}")
        if not tf.io.gfile.exists(os.path.join(copy, vocabulary.SPM_FILE)):
            pretrained.write_files(copy, config, spm_model, lower_case=lower_case, keep_accents=True)
        spm_model = os.path.join(copy, vocabulary.SPM_FILE)
    return InitSource("hf", path, config, spm_model, lower_case)


def restore(model, source, part=None):
    """Reads the weights of InitSource `source` into `model` (an AlbertEncoder, an AlbertPretrainer, or a task
    model holding `.encoder`). part: None for the whole model, "encoder" for its encoder only. Every weight read
    must be found: a pretrainer wants the pretraining heads, which an export and a Hugging Face AlbertModel do not
    hold (ValueError, one line). Returns the checkpoint (or weights file) read."""
    if part not in (None, pretrained.ENCODER_KEY):
        raise ValueError(f"part must be None or 'encoder', got {part!r}")
    if source.kind == "model_dir":
        return pretrained.restore(model, source.path, part=part)
    target = getattr(model, pretrained.ENCODER_KEY, model) if part else model
    if source.kind == "release":
        tensors.load_tf1_checkpoint(target, source.path, heads_optional=False)
        return source.path
    if source.kind == "hf":
        tensors.load_hf_checkpoint(target, source.path, heads_optional=False)
        return os.path.join(source.path, "model.safetensors")
    if tensors.has_heads(target):
        raise ValueError(f"{source.path}: an export holds the encoder only, not the MLM and sentence-order heads; "
                         "read its encoder (AlbertEncoder.from_pretrained) or give the pretrained-model directory it "
                         "was exported from")
    encoder = getattr(target, pretrained.ENCODER_KEY, target)
    variables = os.path.join(source.path, "variables", "variables")
    status = tf.train.Checkpoint(encoder_weights=keras_weights(encoder)).read(variables)
    status.expect_partial().assert_existing_objects_matched()
    return variables

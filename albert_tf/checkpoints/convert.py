"""Import released ALBERT checkpoints: google-research/albert TF1 checkpoints (and TF-Hub exports, whose names carry a
`module/` prefix) and Hugging Face directories (config.json + model.safetensors), into a pretrained-model directory;
`convert_release` fetches Google's released weights by name first (albert_tf.checkpoints.releases).

The `albert-tf convert` job (its settings and its Python call) is albert_tf/jobs/convert.py. The name maps, the
readers and the rules of what must fit are albert_tf.checkpoints.tensors; a checkpoint with no pretraining-head
tensors at all (an encoder-only export such as Hugging Face `AlbertModel`) is converted with the heads at their
initialization and a warning that says so.
"""
import contextlib
import os
import sys
import tempfile

import tensorflow as tf

from albert_tf import messages
from albert_tf.checkpoints import hf_tokenizer, pretrained, releases, tensors
from albert_tf.config import AlbertConfig
from albert_tf.modeling.base import count_params
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.settings.convert_config import source_config
from albert_tf.runtime import leftovers


def convert(source, checkpoint, output, config=None, spm_model=None, log=print, cased=None):
    """Converts a released checkpoint into a new pretrained-model directory `output` (written atomically by
    albert_tf.checkpoints.pretrained.save), recording its vocabulary's casing (`cased`: the --cased/--uncased
    flag, None: see `tensors.release_casing`). Returns the loaded AlbertPretrainer."""
    output = os.fspath(output).rstrip("/")
    if tf.io.gfile.exists(output) and tf.io.gfile.listdir(output):
        raise ValueError(f"{output}: output directory exists and is not empty; give a new or empty directory")
    config_file = source_config(source, checkpoint, config)
    if source == "tf1" or config:
        cfg = AlbertConfig.from_json_file(config_file)
    else:
        cfg = tensors.config_from_hf(config_file)
    with contextlib.ExitStack() as stack:
        if source == "hf":
            spm_model = stack.enter_context(hf_vocabulary(checkpoint, spm_model, log))
        lower_case = tensors.release_casing(source, checkpoint, cased, spm_model)
        keep_accents = tensors.release_accents(source, checkpoint, spm_model)
        model = AlbertPretrainer(cfg)
        warnings = (tensors.load_tf1_checkpoint if source == "tf1" else tensors.load_hf_checkpoint)(
            model, checkpoint, heads_optional=True)
        for w in warnings:
            log(messages.line("warning", w, "convert"))
        stack.enter_context(leftovers.new_directory(output, "--output"))  # what a killed conversion left goes first
        pretrained.save(model, output, spm_model=spm_model, lower_case=lower_case, keep_accents=keep_accents)
    return model


@contextlib.contextmanager
def hf_vocabulary(directory, spm_model, log):
    """Yields the SentencePiece model of the Hugging Face directory `directory`: `spm_model` (--spm-model) when
    given, else its spiece.model, else (what transformers 5's save_pretrained writes: tokenizer.json only) one built
    from its tokenizer.json (albert_tf.checkpoints.hf_tokenizer.spm_from_hf), in a temporary file removed after the
    block; a tokenizer.json that no SentencePiece model holds: ValueError naming --spm-model. Neither file: None,
    with a warning naming --spm-model."""
    own = os.path.join(directory, hf_tokenizer.HF_SPM_FILE)
    if spm_model is not None or tf.io.gfile.exists(own):
        yield spm_model or own
        return
    if not tf.io.gfile.exists(os.path.join(directory, hf_tokenizer.HF_TOKENIZER_FILE)):
        log(messages.line("warning", f"{directory} holds no {hf_tokenizer.HF_SPM_FILE} and no "
                          f"{hf_tokenizer.HF_TOKENIZER_FILE}: the model directory gets no vocabulary, which "
                          "finetune and export need; give it with --spm-model", "convert"))
        yield None
        return
    built = hf_tokenizer.spm_from_hf(directory)
    with tempfile.TemporaryDirectory(prefix="albert_tf-vocab-") as tmp:
        path = os.path.join(tmp, hf_tokenizer.HF_SPM_FILE)
        with open(path, "wb") as f:
            f.write(built)
        log(f"{directory}: no {hf_tokenizer.HF_SPM_FILE}; its vocabulary built from {hf_tokenizer.HF_TOKENIZER_FILE}")
        yield path


def log_to_stderr(message):
    """A progress line on stderr (conversions print their result on stdout)."""
    print(message, file=sys.stderr, flush=True)


def convert_release(name, output=None, cache_dir=None, cased=None, log=None):
    """Google's released weights by name (albert_tf.checkpoints.releases.NAMES: `albert_base_v2` ... v1/v2 of base,
    large, xlarge, xxlarge) or a Hugging Face hub id (`hf:albert/albert-base-v2`, needs huggingface_hub) → a
    pretrained-model directory. Downloads (resumed, checked, cached) when not cached, then converts like
    `convert --from tf1` / `--from hf`. `output`: a new or empty directory; None for CACHE/models/NAME, reused as
    it is when a conversion is already there. Returns the output directory."""
    output, _ = convert_release_model(name, output, cache_dir, cased, log or log_to_stderr)
    return output


def convert_release_model(name, output, cache_dir, cased, log):
    """(output directory, the converted AlbertPretrainer or None when a cached conversion was reused)."""
    name = releases.canonical_name(name)
    if output is None:
        output = os.path.join(releases.cache_dir(cache_dir), "models",
                              name.replace(releases.HF_PREFIX, "hf--").replace("/", "--"))
        if tf.io.gfile.exists(pretrained.config_path(output)) and tf.io.gfile.exists(
                os.path.join(output, pretrained.CHECKPOINT_STATE_FILE)):
            log(f"{name}: already converted in {output}")
            return output, None
    output = os.fspath(output).rstrip("/")
    if tf.io.gfile.exists(output) and tf.io.gfile.listdir(output):  # before any download
        raise ValueError(f"{output}: output directory exists and is not empty; give a new or empty directory")
    if name.startswith(releases.HF_PREFIX):
        model = convert("hf", releases.fetch_hf(name, log=log), output, log=log, cased=cased)
    else:
        files = releases.fetch_release(name, cache=cache_dir, log=log)
        model = convert("tf1", files.checkpoint, output, config=files.config, spm_model=files.spm_model, log=log,
                        cased=cased)
    return output, model


def parameter_counts(model):
    """(parameters of `model`, of its encoder)."""
    return count_params(model), count_params(model.encoder)

"""The encoder's SavedModel for TF Serving that takes raw text (albert_tf.serving.signatures): the work of
`albert-tf export` (the job, its settings and its Python call: albert_tf/jobs/export.py).

    export_encoder(init, output_base, version=None, seq_length=128, ...) → BASE/N   (init: a model dir or a
                                                                                  resolved handle, InitSource)

Writes BASE/N/ atomically, under BASE's lock (albert_tf.serving.saved_model). BASE/N/assets.extra/ keeps
albert_config.json (the config plus lower_case, keep_accents, spm_sha256 (the vocabulary's fingerprint),
max_seq_length and the compute dtype), spm.model and its record spm.casing.json, so an export is self-contained:
`load_encoder` rebuilds a trainable encoder from it and `albert-tf finetune --init BASE[/N]` fine-tunes from it
(albert_tf.checkpoints.load, the reading side).

--dtype is the encoder's compute dtype in the graph (`export_dtype`); the variables and the signatures' outputs are
float32 either way. float32 (the default) gives the Keras model's outputs (tested to 1e-5); bfloat16 runs the
matmuls and activations in bfloat16 (Keras' mixed_bfloat16), measured against float32 in docs/serving.md.
"""
import json
import os

import tensorflow as tf

from albert_tf import run_config
from albert_tf.config import CONFIG_FILE, config_path, read_config
from albert_tf.files import check_input_file, check_output_dir
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.runtime import precision
from albert_tf.serving.saved_model import export_version, warmup_records, write_saved_model
from albert_tf.serving.signatures import encoder_signatures
from albert_tf.settings.export_config import ExportConfig
from albert_tf.text import AlbertTokenizer, vocabulary


def export_dtype(flag, config, seq_length, probe=None):
    """(dtype, reason) of an export: `flag` as given, or for "auto" the faster dtype on the machine that exports
    (`albert_tf.runtime.precision`: bfloat16 on a GPU of compute capability 8.0 or more; on a CPU, whichever of a
    float32 and a bfloat16 matmul of the serving shapes ran faster, probed once per machine and cached). The export
    is served where it is loaded, so auto is right where the serving machine is of the exporting one's kind.
    probe: the CPU probe (tests pass a stand-in)."""
    if flag not in precision.CHOICES:
        raise ValueError(f"--dtype {flag!r}: expected one of {', '.join(precision.CHOICES)}")
    if flag != "auto":
        return flag, "--dtype"

    # a batch of 32 requests at half of L (the serving graph runs real tokens only)
    shape = precision.probe_shape(32, max(1, seq_length // 2), config.hidden_size, config.intermediate_size)
    choice = precision.choose("auto", on_tpu=False, use_gpu=bool(tf.config.list_physical_devices("GPU")),
                              shape=shape, **({} if probe is None else {"probe": probe}))
    return choice.dtype, choice.reason


def export_encoder(init, output_base, version=None, seq_length=128, spm_model=None, overwrite=False, warmup=True,
                   cased=None, dtype=run_config.default_for(ExportConfig, "dtype")):
    """`albert-tf export` as a function; returns the path of BASE/N. init: a pretrained-model directory, or the
    InitSource of any handle (albert_tf.checkpoints.handles.resolve_init, which the job calls once and passes on): a
    model dir, an export (exported again, e.g. at another length or dtype), a released model's name, a Hugging Face
    directory. cased: the --cased / --uncased flag (None: the vocabulary's recorded casing, uncased when none; a
    flag must agree with the record). dtype: "float32", "bfloat16" or "auto" (`export_dtype`); the chosen one is
    recorded as "dtype" in assets.extra/albert_config.json. seq_length: at least 3 (ExportConfig checks it)."""
    check_output_dir(output_base, "--output")
    if isinstance(init, (str, os.PathLike)):
        init = os.fspath(init)
        check_model_dir(init)
    if spm_model is not None:
        check_input_file(spm_model, "--spm-model", vocabulary.SPM_FILE)
    spm_model, recorded, where = _vocabulary(init, spm_model)
    config = read_config(init) if isinstance(init, str) else init.config
    config.check_seq_length(seq_length)
    dtype, reason = export_dtype(dtype, config, seq_length)
    if reason != "--dtype":
        print(f"albert-tf export: dtype {dtype} ({reason})", flush=True)
    with precision.compute_policy(dtype):  # a model dir read once here, a resolved handle from its InitSource
        encoder = (AlbertEncoder.from_pretrained(init, dropout=False) if isinstance(init, str)
                   else AlbertEncoder.from_source(init, dropout=False))
    # the vocabulary's record decides casing and accents (a contradicting flag is refused)
    lower_case = vocabulary.resolve_lower_case(recorded, cased, where)
    tokenizer = AlbertTokenizer(spm_model, lower_case=lower_case)
    if tokenizer.vocab_size != encoder.config.vocab_size:
        raise ValueError(f"{tokenizer.model_name}: the SentencePiece model has {tokenizer.vocab_size} pieces but "
                         f"{_path(init)}'s config has vocab_size {encoder.config.vocab_size}")
    module, signatures = encoder_signatures(encoder, tokenizer, seq_length)
    requests = None
    if warmup:
        one, batch = ["warm-up request"], ["warm-up request"] * 32
        requests = (warmup_records("serving_default", [{"text_a": one}, {"text_a": batch},
                                                       {"text_a": batch, "text_b": batch}])
                    + warmup_records("text", [{"text_a": batch}]))
    config = dict(encoder.config.to_dict(), lower_case=bool(lower_case), keep_accents=tokenizer.keep_accents,
                  spm_sha256=tokenizer.fingerprint, max_seq_length=int(seq_length), dtype=dtype)
    record = vocabulary.record_text(tokenizer.lower_case, tokenizer.keep_accents, tokenizer.model_proto)
    return write_saved_model(module, output_base, signatures, version=version, overwrite=overwrite,
                             warmup_requests=requests,
                             extra_assets={CONFIG_FILE: json.dumps(config, indent=2),
                                           vocabulary.SPM_FILE: tokenizer.model_proto,
                                           os.path.basename(vocabulary.casing_path(vocabulary.SPM_FILE)): record})


def _path(init):
    """What `init` (a model dir or an InitSource) reads: its path."""
    return init if isinstance(init, str) else init.path


def _vocabulary(init, spm_model):
    """(spm model, recorded casing, where it is recorded) of an export of `init` (a model dir or an InitSource):
    --spm-model with its own record; else the handle's vocabulary and casing (a release's, a Hugging Face
    tokenizer's), or the model dir's spm.model and its record."""
    if spm_model is None and not isinstance(init, str):
        spm_model, recorded, where = init.spm_model, init.lower_case, f"--init {init.path}"
    else:
        spm_model = spm_model or vocabulary.spm_model_path(init)
        recorded = where = None
    if spm_model is None:
        raise FileNotFoundError(f"{_path(init)}: no {vocabulary.SPM_FILE} (pass --spm-model PATH)")
    if where is None:
        recorded, where = vocabulary.read_casing(spm_model), vocabulary.casing_path(spm_model)
    return spm_model, recorded, where


def check_model_dir(model_dir):
    """--init must be a pretrained-model directory: a missing path, a file (such as a config .json) and an export
    (BASE/N or BASE, which has no checkpoint to export from) are each refused with what was expected."""
    expected = ("a pretrained-model directory was expected (albert_config.json, a checkpoint, spm.model: `pretrain`'s "
                "--model-dir or `convert`'s --output)")
    if not tf.io.gfile.exists(model_dir):
        raise FileNotFoundError(f"--init {model_dir}: no such directory; {expected}")
    if not tf.io.gfile.isdir(model_dir):
        hint = " (a config file is `pretrain --config`'s)" if model_dir.endswith(".json") else ""
        raise FileNotFoundError(f"--init {model_dir}: this is a file; {expected}{hint}")
    found = None if tf.io.gfile.exists(config_path(model_dir)) else export_version(model_dir)
    if found:
        kind = "an export (BASE/N)" if found == model_dir.rstrip("/") else f"an export base (newest: {found})"
        raise ValueError(f"--init {model_dir}: this is {kind}, not a model dir; it is ready to serve as it is. "
                         f"To export again, give --init the pretrained-model directory it was made from")

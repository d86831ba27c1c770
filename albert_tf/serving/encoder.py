"""`albert-tf export`: a SavedModel for TF Serving that takes raw text (albert_tf.serving.signatures), and
`load_encoder` to fine-tune from it.

    albert-tf export --model DIR --output BASE [--version N] [--max-seq-length 128] [--spm-model PATH]
                     [--overwrite] [--no-warmup]

Writes BASE/N/ atomically (albert_tf.serving.saved_model). BASE/N/assets.extra/ keeps albert_config.json (the
config plus lower_case and max_seq_length) and spm.model, so an export is self-contained: `load_encoder` rebuilds a
trainable encoder from it and `albert-tf finetune --init BASE[/N]` fine-tunes from it (`resolve_init`).
"""
import dataclasses
import json
import os

from albert_tf.config import CONFIG_FILE
from albert_tf.data import vocab
from albert_tf.checkpoints.pretrained import SPM_FILE
from albert_tf.serving.saved_model import (ASSETS_EXTRA, SAVED_MODEL_FILE, keras_weights, latest_version, warmup_records,
                                           write_saved_model)
from albert_tf.serving.signatures import encoder_signatures

SPM_ASSET = SPM_FILE  # the vocabulary, in assets.extra/ (exports before 0.2 have none: pass --spm-model)


def export_encoder(model_dir, output_base, version=None, seq_length=128, spm_model=None, overwrite=False,
                   warmup=True, lower_case=None):
    """`albert-tf export` as a function; returns the path of BASE/N. lower_case: None for the vocabulary's recorded
    casing (uncased when none), else it must agree with the record."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.io import check_input_file, check_output_dir  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    model_dir = os.fspath(model_dir)
    check_output_dir(output_base, "--output")
    if not tf.io.gfile.isdir(model_dir):
        raise FileNotFoundError(f"--model {model_dir}: no such directory (expected a pretrained-model directory)")
    if spm_model is not None:
        check_input_file(spm_model, "--spm-model", pretrained.SPM_FILE)
    if seq_length < 3:
        raise ValueError(f"--max-seq-length must be at least 3, got {seq_length}")
    if spm_model is None:
        spm_model = pretrained.spm_model_path(model_dir)  # the directory's layout is pretrained.py's to spell
        if spm_model is None:
            raise FileNotFoundError(f"{model_dir}: no {pretrained.SPM_FILE} (pass --spm-model PATH)")
    encoder = AlbertEncoder.from_pretrained(model_dir, dropout=False)
    if seq_length > encoder.config.max_position_embeddings:
        raise ValueError(f"--max-seq-length {seq_length} exceeds the config's max_position_embeddings "
                         f"{encoder.config.max_position_embeddings}")
    lower_case = vocab.resolve_lower_case(vocab.read_casing(spm_model), None if lower_case is None else
                                          not lower_case, vocab.casing_path(spm_model))
    tokenizer = AlbertTokenizer(spm_model, lower_case=lower_case)
    if tokenizer.vocab_size != encoder.config.vocab_size:
        raise ValueError(f"{tokenizer.model_name}: the SentencePiece model has {tokenizer.vocab_size} pieces but "
                         f"{pretrained.config_path(model_dir)} has vocab_size {encoder.config.vocab_size}")
    module, signatures = encoder_signatures(encoder, tokenizer, seq_length)
    requests = None
    if warmup:
        one, batch = ["warm-up request"], ["warm-up request"] * 32
        requests = (warmup_records("serving_default", [{"text_a": one}, {"text_a": batch},
                                                       {"text_a": batch, "text_b": batch}])
                    + warmup_records("text", [{"text_a": batch}]))
    config = dict(encoder.config.to_dict(), lower_case=bool(lower_case), max_seq_length=int(seq_length))
    return write_saved_model(module, output_base, signatures, version=version, overwrite=overwrite,
                             warmup_requests=requests,
                             extra_assets={CONFIG_FILE: json.dumps(config, indent=2), SPM_ASSET: tokenizer.model_proto})


@dataclasses.dataclass(frozen=True)
class InitSource:
    """What a pretrained-encoder path is (`resolve_init`): a pretrained-model directory (`pretrain`'s, `convert`'s)
    or an `albert-tf export` version BASE/N."""
    kind: str         # "model_dir" or "export"
    path: str         # the directory read (an export base resolved to its newest version)
    config: object    # AlbertConfig
    spm_model: str    # its vocabulary, or None when it holds none
    lower_case: bool  # its recorded casing, or None when not recorded


def resolve_init(path, flag="--init"):
    """Resolves a pretrained-model directory, an export version dir BASE/N or an export base BASE (its newest
    version) to an InitSource. FileNotFoundError naming `flag` when it is none of them."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel

    path = os.fspath(path).rstrip("/")
    if not tf.io.gfile.isdir(path):
        raise FileNotFoundError(f"{flag} {path}: no such directory (expected a pretrained-model directory or an "
                                "`albert-tf export` BASE or BASE/N)")
    exported = tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE))
    if not exported and not tf.io.gfile.exists(pretrained.config_path(path)) and latest_version(path):
        path = latest_version(path)  # BASE: its newest version
        exported = tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE))
    if not exported:
        spm_model = pretrained.spm_model_path(path) if tf.io.gfile.exists(pretrained.config_path(path)) else None
        return InitSource("model_dir", path, pretrained.read_config(path), spm_model,
                          vocab.read_casing(spm_model) if spm_model else None)
    config_file = os.path.join(path, ASSETS_EXTRA, CONFIG_FILE)
    if not tf.io.gfile.exists(config_file):
        raise FileNotFoundError(f"{flag} {path}: a SavedModel without {ASSETS_EXTRA}/{CONFIG_FILE} (not an encoder "
                                "written by `albert-tf export`; a fine-tuned task's export cannot be an --init)")
    with tf.io.gfile.GFile(config_file) as f:
        config = json.load(f)
    lower_case = config.pop("lower_case", None)
    config.pop("max_seq_length", None)
    spm_model = os.path.join(path, ASSETS_EXTRA, SPM_ASSET)
    return InitSource("export", path, AlbertConfig.from_dict(config),
                      spm_model if tf.io.gfile.exists(spm_model) else None, lower_case)


def restore_encoder(model, source):
    """Restores the encoder of `model` (an AlbertEncoder, or a pretrainer / task model holding `.encoder`) from an
    InitSource; every encoder weight must be found. Returns the checkpoint path read."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel

    if source.kind == "model_dir":
        return pretrained.restore(model, source.path, part="encoder")
    encoder = getattr(model, "encoder", model)
    variables = os.path.join(source.path, "variables", "variables")
    status = tf.train.Checkpoint(encoder_weights=keras_weights(encoder)).read(variables)
    status.expect_partial().assert_existing_objects_matched()
    return variables


def load_encoder(path, dropout=True):
    """A trainable Keras AlbertEncoder from an export (BASE/N, or BASE: its largest version) or from a
    pretrained-model directory."""
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel

    source = resolve_init(path, flag="load_encoder")
    encoder = AlbertEncoder(source.config, dropout=dropout)
    restore_encoder(encoder, source)
    return encoder


# ------------------------------------------------------------------------------------ command line
def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="DIR", help="a pretrained-model directory")
    parser.add_argument("--output", required=True, metavar="BASE", help="writes BASE/N (TF Serving's layout)")
    parser.add_argument("--version", type=int, default=None, help="N (default: the next free integer)")
    parser.add_argument("--max-seq-length", type=int, default=128, help="L, the packed length")
    parser.add_argument("--spm-model", default=None, metavar="PATH", 
                        help="the SentencePiece model (default: DIR/spm.model)")
    vocab.add_casing_arguments(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing BASE/N")
    parser.add_argument("--no-warmup", action="store_true",
                        help="write no warm-up records (they need tensorflow-serving-api)")


def run(args):
    path = export_encoder(args.model, args.output, version=args.version, seq_length=args.max_seq_length,
                          spm_model=args.spm_model, overwrite=args.overwrite, warmup=not args.no_warmup,
                          lower_case=None if args.cased is None else not args.cased)
    print(f"albert-tf export: wrote {path}")
    return 0

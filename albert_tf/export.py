"""`albert-tf export`: a SavedModel for TF Serving that takes raw text, and `load_encoder` to fine-tune from it.

    albert-tf export --model DIR --output BASE [--version N] [--max-seq-length 128] [--spm-model PATH]
                     [--overwrite] [--no-warmup]

Writes BASE/N/ (TF Serving's layout: N is the next free integer unless --version is given; an existing version is
replaced only with --overwrite), atomically: the SavedModel is written under a hidden temp name in BASE and renamed
to BASE/N when complete, so a server watching BASE never sees half a model.

Signatures (B = batch, L = --max-seq-length, H = hidden size):
  serving_default  text_a string [B], optional text_b string [B]
                       -> pooled_output [B,H], sequence_output [B,L,H], input_mask int32 [B,L]
                          ([CLS] a [SEP], or [CLS] a [SEP] b [SEP] when text_b is given)
  text             text_a string [B] -> the same ([CLS] a [SEP]; for TF Serving's REST API, which does not
                                        honour optional inputs)
  encode           input_word_ids, input_mask, input_type_ids int32 [B,L'] -> the same outputs
Text is tokenized in the graph exactly as `AlbertTokenizer.pack` does it (normalization, SentencePiece, the
digit-comma rule, truncation of the longer side); invalid UTF-8 bytes become U+FFFD first, as `create-data` reads
them. BASE/N/assets.extra/albert_config.json keeps the config, so `load_encoder` rebuilds a trainable encoder.
Each batch runs at its longest text (rounded up to 8 positions), not at L: the outputs are the full-length batch's
(padding is masked out of attention), sequence_output is zero at padding positions, and short requests cost less.
"""
import json
import os
import re

ASSETS_EXTRA = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"
CONFIG_ASSET = "albert_config.json"
OUTPUT_NAMES = ("pooled_output", "sequence_output", "input_mask")


# ------------------------------------------------------------------------------------ BASE/N, atomically
def next_version(output_base):
    """1 + the largest integer-named subdirectory of output_base (1 when none)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if not tf.io.gfile.isdir(output_base):
        return 1
    versions = [int(n.rstrip("/")) for n in tf.io.gfile.listdir(output_base) if re.fullmatch(r"\d+/?", n)]
    return max(versions, default=0) + 1


def write_saved_model(module, output_base, signatures, version=None, overwrite=False, warmup_requests=None,
                      extra_assets=None):
    """Saves `module` as output_base/version (TF Serving's layout), atomically; returns that path.

    Args:
      module: the tf.Module to save (it must track every variable and resource the signatures use).
      output_base: BASE (local or gs://).
      signatures: {name: concrete function}, as for tf.saved_model.save.
      version: an int >= 1, or None for `next_version(output_base)`.
      overwrite: replace an existing BASE/version (otherwise that is a ValueError).
      warmup_requests: None, or a list of serialized tensorflow.serving.PredictionLog records written to
        assets.extra/tf_serving_warmup_requests (see `warmup_records`).
      extra_assets: {file name: bytes or str} written to assets.extra/.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    output_base = os.fspath(output_base)
    if version is None:
        version = next_version(output_base)
    if int(version) < 1:
        raise ValueError(f"--version must be a positive integer, got {version}")
    final = os.path.join(output_base, str(int(version)))
    if tf.io.gfile.exists(final) and not overwrite:
        raise ValueError(f"{final} already exists (pass --overwrite to replace it, or another --version)")
    tf.io.gfile.makedirs(output_base)
    from albert_tf.utils import atomic_directory  # pylint: disable=import-outside-toplevel

    # overwrite: the old version goes only once the new one is complete (atomic_directory)
    with atomic_directory(final) as tmp:
        tf.saved_model.save(module, tmp, signatures=signatures)
        extra = dict(extra_assets or {})
        if warmup_requests:
            if len(warmup_requests) > 1000:
                raise ValueError(f"at most 1000 warm-up records (TF Serving's limit), got {len(warmup_requests)}")
        tf.io.gfile.makedirs(os.path.join(tmp, ASSETS_EXTRA))
        for name, data in extra.items():
            with tf.io.gfile.GFile(os.path.join(tmp, ASSETS_EXTRA, name), "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
        if warmup_requests:
            with tf.io.TFRecordWriter(os.path.join(tmp, ASSETS_EXTRA, WARMUP_FILE)) as writer:
                for record in warmup_requests:
                    writer.write(record)
    return final


def warmup_records(signature_name, requests):
    """Serialized tensorflow.serving.PredictionLog records (needs the `serving` extra: tensorflow-serving-api).

    Args:
      signature_name: the signature each request calls.
      requests: a list of {input name: numpy array or list}.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    try:
        from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ImportError("warm-up records need tensorflow-serving-api: pip install 'albert_tf[serving]' "
                          "(or export with --no-warmup)") from e
    records = []
    for inputs in requests:
        request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=signature_name))
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
        records.append(log.SerializeToString())
    return records


# ------------------------------------------------------------------------------------ the encoder's signatures
def text_to_inputs(tokenizer, text_a, text_b=None, seq_length=128):
    """In-graph: string [B] (and [B]) -> the packed int32 [B, seq_length] model inputs, as `AlbertTokenizer.pack`.

    Invalid UTF-8 becomes U+FFFD (as `create-data` reads its input); text_a and text_b of different lengths raise
    InvalidArgumentError "text_a and text_b must have the same length". Task exports reuse this.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def clean(strings):
        return tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)

    text_a = clean(text_a)
    if text_b is not None:
        text_b = clean(text_b)
        check = tf.debugging.assert_equal(tf.size(text_a), tf.size(text_b),
                                          message="text_a and text_b must have the same length")
        with tf.control_dependencies([check]):
            text_a = tf.identity(text_a)
    return tokenizer.tf_pack(text_a, text_b, seq_length=seq_length)


#: the encoder signatures run each batch at its longest text rounded up to a multiple of this (see outputs()).
SERVING_LENGTH_BUCKET = 8


def keras_weights(model):
    """The tf.Variables behind a Keras 3 model's weights, in `model.weights` order: what an exported module must
    track instead of the Keras model itself.

    Tracking a Keras 3 variable makes tf.saved_model.save put a *copy* of its tf.Variable in the TF1 graph
    (keras/src/backend/tensorflow/core.py, `Variable._export_to_saved_model_graph`: `tf.Variable(object_map[self.
    value])`); the checkpoint restores the copy while the functions read the original, which the TF1 session loader
    (TF Serving's SavedModelBundle, `saved_model_cli run`) never initializes: FailedPreconditionError "Could not
    find variable ...". `tf.saved_model.load` is not affected. Restore with `load_encoder` (same order).
    """
    return [w.value for w in model.weights]


def optional_pair_inputs(tokenizer, text_a, text_b, seq_length=128):
    """`text_to_inputs` where a text_b of size 0 means "no text_b" (`serving_default`'s default): [CLS] a [SEP];
    otherwise the pairs, text_b as long as text_a."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.cond(tf.equal(tf.size(text_b), 0),
                   lambda: text_to_inputs(tokenizer, text_a, None, seq_length),
                   lambda: text_to_inputs(tokenizer, text_a, text_b, seq_length))


def encoder_signatures(encoder, tokenizer, seq_length=128):
    """(module, signatures) for `write_saved_model`: serving_default, text and encode (see the module doc).

    serving_default's text_b is optional: its signature records a default (an empty [0] string tensor) in
    SignatureDef.defaults, which the TF1 session loader (saved_model_cli, TF Serving's gRPC Predict since 2.14) and
    the function restored by tf.saved_model.load (`loaded.serving_default(text_a)`, not `loaded.signatures[...]`)
    honour; TF Serving's REST API does not (it wants every input), hence `text`.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.base import trim_padding  # pylint: disable=import-outside-toplevel

    module = tf.Module()
    module.encoder_weights = keras_weights(encoder)
    module.tokenizer = tokenizer.in_graph

    def outputs(inputs):
        # The encoder runs on the batch cut to its longest text (rounded up to SERVING_LENGTH_BUCKET): padding is
        # masked out of attention, so the real positions and the pooled output are those of the full-length batch,
        # at the cost of the text actually sent; sequence_output is padded back to L with zeros.
        mask = inputs["input_mask"]
        trimmed = trim_padding(inputs, SERVING_LENGTH_BUCKET)
        out = encoder(trimmed, training=False)
        real = tf.cast(trimmed["input_mask"], out["sequence_output"].dtype)[:, :, None]
        sequence = tf.pad(out["sequence_output"] * real,
                          [[0, 0], [0, tf.shape(mask)[1] - tf.shape(real)[1]], [0, 0]])
        sequence.set_shape(mask.shape.concatenate(out["sequence_output"].shape[-1:]))
        return {"pooled_output": out["pooled_output"], "sequence_output": sequence, "input_mask": mask}

    text_a_spec = tf.TensorSpec([None], tf.string, name="text_a")
    no_text_b = tf.constant([], tf.string)

    @tf.function(input_signature=[text_a_spec, tf.TensorSpec([None], tf.string, name="text_b")])
    def serving_default(text_a, text_b=no_text_b):
        return outputs(optional_pair_inputs(tokenizer, text_a, text_b, seq_length))

    @tf.function(input_signature=[text_a_spec])
    def text(text_a):
        return outputs(text_to_inputs(tokenizer, text_a, None, seq_length))

    ids = {name: tf.TensorSpec([None, None], tf.int32, name=name)
           for name in ("input_word_ids", "input_mask", "input_type_ids")}

    @tf.function(input_signature=[ids])
    def encode(inputs):
        return outputs(inputs)

    module.serving_default, module.text, module.encode = serving_default, text, encode
    # serving_default goes in as the tf.function (not a concrete function): only then does tf.saved_model.save
    # record its default argument in SignatureDef.defaults.
    signatures = {"serving_default": serving_default, "text": text.get_concrete_function(),
                  "encode": encode.get_concrete_function()}
    return module, signatures


def export_encoder(model_dir, output_base, version=None, seq_length=128, spm_model=None, overwrite=False,
                   warmup=True, lower_case=None):
    """`albert-tf export` as a function; returns the path of BASE/N."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf import pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.tokenization import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    model_dir = os.fspath(model_dir)
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
    if lower_case is None:
        lower_case = encoder.config.to_dict().get("lower_case", True)
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
                             warmup_requests=requests, extra_assets={CONFIG_ASSET: json.dumps(config, indent=2)})


# ------------------------------------------------------------------------------------ back to Keras
def load_encoder(path, dropout=True):
    """A trainable Keras AlbertEncoder from an export (BASE/N, or BASE: its largest version) or from a
    pretrained-model directory."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel

    path = os.fspath(path)
    exported = tf.io.gfile.exists(os.path.join(path, "saved_model.pb"))
    if not exported and not tf.io.gfile.exists(os.path.join(path, CONFIG_ASSET)) and next_version(path) > 1:
        path = os.path.join(path, str(next_version(path) - 1))  # BASE: its newest version
    if not tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        return AlbertEncoder.from_pretrained(path, dropout=dropout)
    config_file = os.path.join(path, ASSETS_EXTRA, CONFIG_ASSET)
    if not tf.io.gfile.exists(config_file):
        raise FileNotFoundError(f"{path}: a SavedModel without {ASSETS_EXTRA}/{CONFIG_ASSET} (not written by "
                                "`albert-tf export`)")
    with tf.io.gfile.GFile(config_file) as f:
        config = json.load(f)
    config.pop("lower_case", None)
    config.pop("max_seq_length", None)
    encoder = AlbertEncoder(AlbertConfig.from_dict(config), dropout=dropout)
    status = tf.train.Checkpoint(encoder_weights=keras_weights(encoder)).read(
        os.path.join(path, "variables", "variables"))
    status.expect_partial().assert_existing_objects_matched()
    return encoder


# ------------------------------------------------------------------------------------ command line
def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="DIR", help="a pretrained-model directory")
    parser.add_argument("--output", required=True, metavar="BASE", help="writes BASE/N (TF Serving's layout)")
    parser.add_argument("--version", type=int, default=None, help="N (default: the next free integer)")
    parser.add_argument("--max-seq-length", type=int, default=128, help="L, the packed length (128)")
    parser.add_argument("--spm-model", default=None, metavar="PATH", help="default: DIR/spm.model")
    parser.add_argument("--cased", action="store_true", help="the model was trained on cased text")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing BASE/N")
    parser.add_argument("--no-warmup", action="store_true",
                        help="write no warm-up records (they need tensorflow-serving-api)")


def run(args):
    path = export_encoder(args.model, args.output, version=args.version, seq_length=args.max_seq_length,
                          spm_model=args.spm_model, overwrite=args.overwrite, warmup=not args.no_warmup,
                          lower_case=False if args.cased else None)
    print(f"albert-tf export: wrote {path}")
    return 0

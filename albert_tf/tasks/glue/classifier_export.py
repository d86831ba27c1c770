"""The classifier export: raw text in (`text_a`, and `text_b` for pair tasks), `probabilities` [B, K] and `label` [B]
(classification) or `score` [B] (regression) out.

A pair task's `text_b` is optional, as the encoder export's: omitted (the SignatureDef's default, an empty [0]
tensor), or a row's text_b that tokenizes to no ids (such as ""), is packed [CLS] a [SEP], as fine-tuning packs a
row without a second sentence (albert_tf.text.segments).
"""
import json
import sys

import tensorflow as tf

from albert_tf import messages
from albert_tf.modeling.base import trim_padding
from albert_tf.serving.saved_model import TASK_CONFIG_ASSET, keras_weights, warmup_records, write_saved_model
from albert_tf.serving.signatures import SERVING_LENGTH_BUCKET, text_to_inputs


def export_classifier(model, tokenizer, seq_length, pairs, regression, output_base, version=None, overwrite=False,
                      task=None, warmup=True):
    """OUT/export/N: a SavedModel whose serving_default takes raw text (`text_a`, and `text_b` for pair tasks) and
    returns `probabilities` [B, K] and `label` [B] (classification) or `score` [B] (regression); written with
    albert_tf.serving's atomic BASE/N writer (`version`: N, None for the next; `overwrite` an existing N) and
    in-graph text packing at `seq_length`. assets.extra/ holds task_config.json (the task, L, pairs, regression,
    the labels, the vocabulary's normalization and fingerprint) and, with `warmup` and tensorflow-serving-api
    installed, TF Serving's warm-up records (serving_default at batch 1 and 32; without the package: a note, no
    records). Returns the path."""
    module = tf.Module()
    module.model_weights = keras_weights(model)  # not the Keras model: see keras_weights
    module.tokenizer = tokenizer.in_graph

    def outputs(text_a, text_b):
        inputs = text_to_inputs(tokenizer, text_a, text_b, seq_length)
        logits = model(trim_padding(inputs, SERVING_LENGTH_BUCKET), training=False)  # as the encoder export
        if regression:
            return {"score": logits[:, 0]}
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "label": tf.argmax(logits, -1, output_type=tf.int32)}

    if pairs:
        no_text_b = tf.constant([], tf.string)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                      tf.TensorSpec([None], tf.string, name="text_b")], autograph=False)
        def serving_default(text_a, text_b=no_text_b):
            return outputs(text_a, text_b)
    else:
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a")], autograph=False)
        def serving_default(text_a):
            return outputs(text_a, None)
    module.serving_default = serving_default
    task_config = {"task": task, "max_seq_length": int(seq_length), "pairs": bool(pairs),
                   "regression": bool(regression), "lower_case": bool(tokenizer.lower_case),
                   "keep_accents": bool(tokenizer.keep_accents), "spm_sha256": tokenizer.fingerprint}
    if not regression:
        task_config["num_labels"] = int(model.num_classes)
    # the tf.function, not a concrete function: only then is text_b's default recorded in SignatureDef.defaults
    return write_saved_model(module, output_base, {"serving_default": serving_default}, version=version,
                             overwrite=overwrite, warmup_requests=_warmup(pairs) if warmup else None,
                             extra_assets={TASK_CONFIG_ASSET: json.dumps(task_config, indent=2) + "\n"})


def _warmup(pairs):
    """TF Serving's warm-up requests for serving_default (batch 1 and 32, with text_b for a pair task), or None
    with a note when tensorflow-serving-api is not installed."""
    one, batch = ["warm-up request"], ["warm-up request"] * 32
    requests = [{"text_a": one}, {"text_a": batch}] + ([{"text_a": batch, "text_b": batch}] if pairs else [])
    try:
        return warmup_records("serving_default", requests)
    except ImportError as e:
        print(messages.line("note", f"no warm-up records in the export ({e})"), file=sys.stderr, flush=True)
        return None

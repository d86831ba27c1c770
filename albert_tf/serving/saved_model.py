"""SavedModels in TF Serving's layout, written atomically: BASE/N/ with assets.extra/ (configs, warm-up requests).

Every export goes through `write_saved_model`: the encoder's (`albert-tf export`, albert_tf.serving.encoder_export)
and the fine-tuned tasks' (albert_tf.tasks.glue.classifier_export, tasks.squad.squad_export,
tasks.race.race_export). N is the next free integer unless a version is given; an existing version is replaced only
with overwrite. The SavedModel is written under a hidden temp name in BASE and moved to BASE/N when complete
(albert_tf.files.atomic_directory): locally one rename, so a server watching BASE never sees half a model; on gs://
an ordered copy with saved_model.pb last (and an old version's saved_model.pb removed first), so a server that keys
on saved_model.pb, as TF Serving does, never sees half a model either.
An export holds BASE's lock (BASE/.albert_tf.lock, albert_tf.runtime.lock) from choosing N to moving BASE/N into
place: a second export into the same BASE at the same time is refused (exit 77) instead of both writing BASE/1, and
a version that appears meanwhile all the same (another tool) is never replaced without overwrite. An export that
was killed leaves its hidden BASE/.N.tmp-* folder: the next export into BASE removes it, with a note
(albert_tf.runtime.leftovers).
"""
import json
import os
import re

import tensorflow as tf

from albert_tf.files import atomic_directory
from albert_tf.runtime import leftovers, lock

SAVED_MODEL_FILE = "saved_model.pb"
ASSETS_EXTRA = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"
TASK_CONFIG_ASSET = "task_config.json"


def versions(output_base):
    """The integer-named subdirectories of output_base (TF Serving's versions), sorted; [] when there is none."""
    if not tf.io.gfile.isdir(output_base):
        return []
    return sorted(int(n.rstrip("/")) for n in tf.io.gfile.listdir(output_base) if re.fullmatch(r"\d+/?", n))


def next_version(output_base):
    """1 + the largest version in output_base (1 when none)."""
    return max(versions(output_base), default=0) + 1


def latest_version(output_base):
    """BASE/N for the largest version N in output_base, or None when it has none."""
    found = versions(output_base)
    return os.path.join(output_base, str(found[-1])) if found else None


def export_version(path):
    """The export version directory `path` names: `path` itself when it holds saved_model.pb (BASE/N), else the
    largest version of `path` taken as a BASE when that one holds saved_model.pb; None when `path` is no export."""
    path = os.fspath(path).rstrip("/")
    for candidate in (path, latest_version(path)):
        if candidate and tf.io.gfile.exists(os.path.join(candidate, SAVED_MODEL_FILE)):
            return candidate
    return None


def load_export(path):
    """An export (`albert-tf export`'s encoder, or a fine-tuned task's) loaded with tf.saved_model.load, after
    `import tensorflow_text` has registered the TF Text ops its graph holds (without them the load fails with "Op
    type not registered 'SentencepieceOp'"). `path`: BASE/N, or BASE for its largest version.

    Returns the loaded object: `loaded.serving_default(text_a=tf.constant([...]))` → {"pooled_output" [B,H],
    "sequence_output" [B,L,H], "input_mask" [B,L]} for an encoder (`text_b` optional there; the
    `.signatures["serving_default"]` form wants both)."""
    try:
        import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError as e:
        raise ImportError("loading an export needs tensorflow-text (the same minor version as tensorflow): "
                          "pip install 'albert_tf[tf]'") from e
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{path}: no such export (expected `albert-tf export`'s BASE or BASE/N)")
    found = export_version(path)
    if found is None:
        raise FileNotFoundError(f"{path}: not an export: no {SAVED_MODEL_FILE} in it nor in an integer-named "
                                "version under it (expected `albert-tf export`'s BASE or BASE/N)")
    return tf.saved_model.load(found)


def write_saved_model(module, output_base, signatures, version=None, overwrite=False, warmup_requests=None,
                      extra_assets=None):
    """Saves `module` as output_base/version (TF Serving's layout), atomically; returns that path.

    Args:
      module: the tf.Module to save (it must track every variable and resource the signatures use).
      output_base: BASE (local or gs://).
      signatures: {name: concrete function, or tf.function with an input signature}, as for tf.saved_model.save
        (a tf.function is traced once, in the save; a concrete function traced before is traced again there).
      version: an int >= 1, or None for `next_version(output_base)`.
      overwrite: replace an existing BASE/version (otherwise that is a ValueError).
      warmup_requests: None, or a list of serialized tensorflow.serving.PredictionLog records written to
        assets.extra/tf_serving_warmup_requests (see `warmup_records`).
      extra_assets: {file name: bytes or str} written to assets.extra/.
    """
    output_base = os.fspath(output_base)
    if version is not None and int(version) < 1:
        raise ValueError(f"--version must be a positive integer, got {version}")
    with lock.DirectoryLock(output_base, "--output"):  # one export per BASE: N is chosen and filled under it
        leftovers.note(leftovers.remove(output_base, r"\d+|" + re.escape(lock.LOCK_FILE)))  # a killed export's
        return _write_version(module, output_base, signatures, version, overwrite, warmup_requests, extra_assets)


def _write_version(module, output_base, signatures, version, overwrite, warmup_requests, extra_assets):
    """write_saved_model's work under BASE's lock."""
    final = os.path.join(output_base, str(int(version or next_version(output_base))))
    if tf.io.gfile.exists(final) and not overwrite:
        raise ValueError(f"{final} already exists (pass --overwrite to replace it, or another --version)")

    # overwrite: the old version goes only once the new one is complete (atomic_directory)
    with atomic_directory(final, markers=(SAVED_MODEL_FILE,)) as tmp:
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
        if tf.io.gfile.exists(final) and not overwrite:  # written meanwhile by something that took no lock
            raise ValueError(f"{final} appeared while this export was written (another writer without the lock); "
                             "nothing was replaced: export again (the next version) or pass --version")
    return final


def warmup_records(signature_name, requests):
    """Serialized tensorflow.serving.PredictionLog records (needs the `serving` extra: tensorflow-serving-api).

    Args:
      signature_name: the signature each request calls.
      requests: a list of {input name: numpy array or list}.
    """
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


def write_task_export(module, signatures, output_base, task_config, version=None, overwrite=False):
    """Writes BASE/N with `write_saved_model`, task_config (a dict: the featurization and post-processing
    parameters) as assets.extra/task_config.json. Returns the path."""
    return write_saved_model(module, output_base, signatures, version=version, overwrite=overwrite,
                             extra_assets={TASK_CONFIG_ASSET: json.dumps(task_config, indent=2) + "\n"})

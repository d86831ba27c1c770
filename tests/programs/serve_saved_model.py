"""Serves a SavedModel's signatures in a fresh process that imports only TensorFlow and TF Text, as a model server
holds an export (no albert_tf: it must not be needed). `helpers.serve_in_fresh_process` runs it:

    python tests/programs/serve_saved_model.py CALLS_JSON INPUTS_NPZ OUT_NPZ

CALLS_JSON is {name: [PATH, loader, signature]} (PATH: the SavedModel's directory); INPUTS_NPZ holds each call's
inputs as "name/input" (strings as str); OUT_NPZ receives each call's outputs as "name/output" (strings as str).
Loaders:
  tf2            tf.saved_model.load(PATH).signatures[signature]: every input given
  tf2-function   the restored tf.function of that name: inputs with a default may be left out
  tf1            TF Serving's SavedModelBundle: a TF1 session (restore + init op), loaded once per SavedModel as a
                 server holds it, then Session.run of the SignatureDef (whose `defaults` fill inputs left out)
"""
import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  pylint: disable=unused-import  (registers the TF Text ops)


def _as_numpy(value):
    """A result as a numpy array; byte strings as str (np.load reads no object arrays)."""
    value = np.asarray(value)
    if value.dtype == object:
        return np.array([x.decode("utf-8") for x in value.ravel()]).reshape(value.shape)
    return value


def _tf1_session(path, signature_name, inputs, sessions):
    """Runs the SignatureDef in `path`'s TF1 session (sessions: {path: (session, meta graph)}, loaded on first use)."""
    if path not in sessions:
        session = tf.compat.v1.Session(graph=tf.Graph())
        with session.graph.as_default():
            sessions[path] = session, tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    session, meta_graph = sessions[path]
    signature = meta_graph.signature_def[signature_name]
    return session.run({k: t.name for k, t in signature.outputs.items()},
                       {signature.inputs[k].name: v for k, v in inputs.items()})


def main(calls_json, inputs_path, out_path):
    stored, results, models, sessions = np.load(inputs_path), {}, {}, {}
    for name, (path, loader, signature) in json.loads(calls_json).items():
        inputs = {key.split("/", 1)[1]: stored[key] for key in stored.files if key.split("/", 1)[0] == name}
        if loader == "tf1":
            outputs = _tf1_session(path, signature, inputs, sessions)
        elif loader in ("tf2", "tf2-function"):
            model = models[path] = models.get(path) or tf.saved_model.load(path)
            function = model.signatures[signature] if loader == "tf2" else getattr(model, signature)
            outputs = function(**{k: tf.constant(v) for k, v in inputs.items()})
        else:
            raise ValueError(f"call {name}: unknown loader {loader!r} (tf2, tf2-function or tf1)")
        results.update({f"{name}/{k}": _as_numpy(v) for k, v in outputs.items()})
    np.savez(out_path, **results)
    leaked = sorted(m for m in sys.modules if m.startswith("albert_tf"))
    assert not leaked, f"albert_tf imported: {leaked}"


if __name__ == "__main__":
    main(*sys.argv[1:])

"""`albert-tf export`: raw text in, vectors out, equal to the in-process Keras model; TF Serving's layout, written
atomically; the graph's ops all registered by TF Serving >= 2.20; bad requests; `load_encoder`."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import helpers
from albert_tf import export
from albert_tf.cli import main as cli_main
from albert_tf.config import AlbertConfig
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.tokenization import AlbertTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXTS = ["The river runs past the old city.", "", "Café naïve résumé 3.0, 7,5 ====== 0xffffffff",
         "a " * 300, "中文 ok 😀"]

@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory, tiny_spm_model):
    """{"uncased": DIR, "cased": DIR}: pretrained-model directories of a tiny random model with the tiny spm."""
    out = {}
    for name in ("uncased", "cased"):
        d = tmp_path_factory.mktemp(name)
        cfg = AlbertConfig.from_json_file(os.path.join(ROOT, "configs", "albert_tiny.json")).to_dict()
        cfg["vocab_size"] = AlbertTokenizer(tiny_spm_model).vocab_size
        AlbertPretrainer(AlbertConfig.from_dict(cfg)).save_pretrained(str(d / "model"), spm_model=tiny_spm_model)
        out[name] = str(d / "model")
    return out


@pytest.fixture(scope="module")
def exported(model_dirs, tmp_path_factory):
    base = tmp_path_factory.mktemp("export") / "base"
    paths = {name: export.export_encoder(d, str(base / name), seq_length=32, warmup=False,
                                         lower_case=name == "uncased") for name, d in model_dirs.items()}
    return paths


def _keras_outputs(model_dir, texts, lower_case, texts_b=None):
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel

    tok = AlbertTokenizer(os.path.join(model_dir, "spm.model"), lower_case=lower_case)
    inputs = tok.pack(texts, texts_b, seq_length=32)
    out = AlbertEncoder.from_pretrained(model_dir, dropout=False)(inputs, training=False)
    return inputs, {k: np.asarray(out[k]) for k in ("pooled_output", "sequence_output")}


SERVE = """
import sys, json, numpy as np, tensorflow as tf, tensorflow_text  # noqa: F401  (registers the TF Text ops)
path, texts = sys.argv[1], json.loads(sys.argv[2])
model = tf.saved_model.load(path)
out = model.signatures["serving_default"](text_a=tf.constant(texts))
np.savez(sys.argv[3], **{k: v.numpy() for k, v in out.items()})
assert not [m for m in sys.modules if m.startswith("albert_tf")], "albert_tf imported"
"""


@pytest.mark.parametrize("name", ["uncased", "cased"])
def test_fresh_process_serving_equals_keras_model(name, model_dirs, exported, tmp_path):
    result = subprocess.run([sys.executable, "-c", SERVE, exported[name], json.dumps(TEXTS), str(tmp_path / "o.npz")],
                            capture_output=True, text=True, check=False, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    served = np.load(tmp_path / "o.npz")
    inputs, expected = _keras_outputs(model_dirs[name], TEXTS, name == "uncased")
    np.testing.assert_array_equal(served["input_mask"], inputs["input_mask"])
    for key, value in expected.items():
        np.testing.assert_allclose(served[key], value, atol=1e-5, rtol=0, err_msg=key)


def test_text_pair_and_encode_signatures(model_dirs, exported):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = tf.saved_model.load(exported["uncased"])
    texts_b = list(reversed(TEXTS))
    inputs, expected = _keras_outputs(model_dirs["uncased"], TEXTS, True, texts_b)
    pair = model.signatures["text_pair"](text_a=tf.constant(TEXTS), text_b=tf.constant(texts_b))
    encode = model.signatures["encode"](**{k: tf.constant(v) for k, v in inputs.items()})
    for out in (pair, encode):
        np.testing.assert_allclose(out["pooled_output"].numpy(), expected["pooled_output"], atol=1e-5, rtol=0)


def test_every_op_is_registered_by_tf_serving(exported):
    ops = helpers.op_types(exported["uncased"])
    assert "SentencepieceTokenizeOp" in ops and ("MatMul" in ops or "BatchMatMulV2" in ops)
    assert not helpers.unregistered_ops(ops), f"ops a TF Serving build may lack: {helpers.unregistered_ops(ops)}"


def test_saved_model_cli_show_lists_the_signatures(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    show = subprocess.run([cli, "show", "--dir", exported["uncased"], "--all"], capture_output=True, text=True,
                          check=True).stdout
    for name in ("serving_default", "text_pair", "encode", "text_a", "pooled_output"):
        assert name in show
    # Not tested: `saved_model_cli run` (a TF1 Session) fails here with FailedPreconditionError on the
    # SentencePiece resource; see notes/export.md.


def test_bad_requests(model_dirs, exported):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = tf.saved_model.load(exported["uncased"])
    tok = AlbertTokenizer(os.path.join(model_dirs["uncased"], "spm.model"))
    serve = model.signatures["serving_default"]
    empty = serve(text_a=tf.constant([""]))["input_mask"].numpy()[0]  # [CLS] [SEP]
    assert empty.tolist() == [1, 1] + [0] * 30
    long = serve(text_a=tf.constant(["river " * 200_000]))  # 1.2 MB: truncated to 32 as in training
    assert long["sequence_output"].shape == (1, 32, 32) and long["input_mask"].numpy().sum() == 32
    bad = b"caf\xc3 \xff river"  # invalid UTF-8: U+FFFD, as Python's decode("utf-8", "replace") in create-data
    got = serve(text_a=tf.constant([bad]))["pooled_output"].numpy()
    want = serve(text_a=tf.constant([bad.decode("utf-8", "replace").encode()]))["pooled_output"].numpy()
    np.testing.assert_array_equal(got, want)
    assert tok.encode(bad) == tok.encode(bad.decode("utf-8", "replace"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="text_a and text_b must have the same length"):
        model.signatures["text_pair"](text_a=tf.constant(["a", "b"]), text_b=tf.constant(["a"]))


def test_versions_overwrite_and_atomicity(model_dirs, tmp_path, monkeypatch, capsys):
    base = tmp_path / "base"
    assert cli_main(["export", "--model", model_dirs["uncased"], "--output", str(base), "--no-warmup",
                     "--max-seq-length", "16"]) == 0
    assert cli_main(["export", "--model", model_dirs["uncased"], "--output", str(base), "--no-warmup"]) == 0
    assert sorted(os.listdir(base)) == ["1", "2"]
    assert cli_main(["export", "--model", model_dirs["uncased"], "--output", str(base), "--version", "1",
                     "--no-warmup"]) == 2
    assert "already exists (pass --overwrite" in capsys.readouterr().err

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(tf.saved_model, "save", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        export.export_encoder(model_dirs["uncased"], str(base), version=3, warmup=False)
    with pytest.raises(RuntimeError, match="disk full"):
        export.export_encoder(model_dirs["uncased"], str(base), version=1, overwrite=True, warmup=False)
    assert sorted(os.listdir(base)) == ["1", "2"]  # no BASE/3, no temp left, version 1 kept


def test_bad_arguments_name_the_problem(model_dirs, tmp_path, capsys):
    d = tmp_path / "model"
    AlbertPretrainer(os.path.join(ROOT, "configs", "albert_tiny.json")).save_pretrained(
        str(d), spm_model=os.path.join(model_dirs["uncased"], "spm.model"))  # vocab_size 1000 vs 300 pieces
    assert cli_main(["export", "--model", str(d), "--output", str(tmp_path / "b"), "--no-warmup"]) == 2
    assert "has vocab_size 1000" in capsys.readouterr().err
    os.remove(d / "spm.model")
    assert cli_main(["export", "--model", str(d), "--output", str(tmp_path / "b"), "--no-warmup"]) == 2
    assert "no spm.model (pass --spm-model PATH)" in capsys.readouterr().err
    assert cli_main(["export", "--model", model_dirs["uncased"], "--output", str(tmp_path / "b"),
                     "--max-seq-length", "1000", "--no-warmup"]) == 2
    assert "exceeds the config's max_position_embeddings 128" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "b")


def test_load_encoder_from_export_and_directory(model_dirs, exported):
    import albert_tf  # pylint: disable=import-outside-toplevel

    inputs, expected = _keras_outputs(model_dirs["uncased"], TEXTS, True)
    for path in (exported["uncased"], os.path.dirname(exported["uncased"]), model_dirs["uncased"]):
        encoder = albert_tf.load_encoder(path, dropout=False)
        assert encoder.trainable and len(encoder.trainable_weights) > 0
        got = encoder(inputs, training=False)["pooled_output"]
        np.testing.assert_allclose(np.asarray(got), expected["pooled_output"], atol=1e-6, rtol=0)


def test_warmup_records_parse_back_with_the_official_protos(model_dirs, tmp_path):
    prediction_log_pb2 = pytest.importorskip("tensorflow_serving.apis.prediction_log_pb2")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    path = export.export_encoder(model_dirs["uncased"], str(tmp_path / "base"), seq_length=16)
    records = list(tf.data.TFRecordDataset(os.path.join(path, "assets.extra", export.WARMUP_FILE)).as_numpy_iterator())
    sizes = []
    for record in records:
        log = prediction_log_pb2.PredictionLog.FromString(record)
        assert log.predict_log.request.model_spec.signature_name == "serving_default"
        sizes.append(tf.make_ndarray(log.predict_log.request.inputs["text_a"]).shape[0])
    assert sizes == [1, 32]

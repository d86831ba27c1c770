"""`albert-tf export`: raw text in, vectors out, equal to the in-process Keras model; TF Serving's layout, written
atomically; the graph's ops all registered by TF Serving >= 2.20; bad requests; `load_encoder`."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import helpers
from albert_tf.serving.encoder_export import export_encoder
from albert_tf.serving.saved_model import WARMUP_FILE
from albert_tf.serving.signatures import OUTPUT_NAMES
from albert_tf.cli import main as cli_main
from albert_tf.config import AlbertConfig
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.text import AlbertTokenizer

TEXTS = ["The river runs past the old city.", "", "Café naïve résumé 3.0, 7,5 ====== 0xffffffff",
         "a " * 300, "中文 ok 😀", "Ab" * 200 + " é " + "ﬁ" * 300]  # the last: words past MAX_WORD_CHARS


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory, tiny_spm_model):
    """{"uncased": DIR, "cased": DIR}: pretrained-model directories of a tiny random model with the tiny spm; the
    cased one's vocabulary is recorded as cased (spm.casing.json), the uncased one's has no record."""
    from albert_tf.text import vocabulary  # pylint: disable=import-outside-toplevel

    out = {}
    for name in ("uncased", "cased"):
        d = tmp_path_factory.mktemp(name)
        cfg = AlbertConfig.from_json_file(os.path.join(helpers.REPO, "configs", "albert_tiny.json")).to_dict()
        cfg["vocab_size"] = AlbertTokenizer(tiny_spm_model).vocab_size
        AlbertPretrainer(AlbertConfig.from_dict(cfg)).save_pretrained(str(d / "model"), spm_model=tiny_spm_model)
        out[name] = str(d / "model")
    vocabulary.write_casing(os.path.join(out["cased"], "spm.model"), False)
    return out


@pytest.fixture(scope="module")
def exported(model_dirs, tmp_path_factory):
    """{"uncased": BASE/1, "cased": BASE/1} at length 32: the uncased one by the --uncased flag (no record), with
    TF Serving's warm-up records; the cased one without a flag: its vocabulary's record decides."""
    base = tmp_path_factory.mktemp("export") / "base"
    return {"uncased": export_encoder(model_dirs["uncased"], str(base / "uncased"), seq_length=32, cased=False),
            "cased": export_encoder(model_dirs["cased"], str(base / "cased"), seq_length=32, warmup=False)}


def _keras_outputs(model_dir, texts, lower_case, texts_b=None):
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel

    tok = AlbertTokenizer(os.path.join(model_dir, "spm.model"), lower_case=lower_case)
    inputs = tok.pack(texts, texts_b, seq_length=32)
    out = AlbertEncoder.from_pretrained(model_dir, dropout=False)(inputs, training=False)
    return inputs, {k: np.asarray(out[k]) for k in ("pooled_output", "sequence_output")}


def serve_in_fresh_process(path, requests, tmp_path):
    """{request name: {output: array}} of serving_default from a process importing only tensorflow and
    tensorflow_text. requests: {name: (loader "tf2" | "tf1", texts_a, texts_b or None)}; TF2 without text_b calls
    the restored function (text_b's default), with it the signature (which wants both). path: the export, or
    {request name: export}."""
    calls = {}
    for name, (loader, texts_a, texts_b) in requests.items():
        inputs = {"text_a": texts_a} if texts_b is None else {"text_a": texts_a, "text_b": texts_b}
        loader = "tf2-function" if loader == "tf2" and texts_b is None else loader
        calls[name] = (loader, "serving_default", inputs)
    return helpers.serve_in_fresh_process(path, calls, str(tmp_path))


def assert_served_equals_keras(served, model_dir, lower_case, texts_a, texts_b=None, atol=1e-5):
    """pooled_output, and sequence_output at real tokens, equal the full-length Keras model's; the export's
    sequence_output is zero at padding (it runs each batch at its longest text)."""
    inputs, expected = _keras_outputs(model_dir, texts_a, lower_case, texts_b)
    np.testing.assert_array_equal(served["input_mask"], inputs["input_mask"])
    real = inputs["input_mask"] > 0
    assert served["sequence_output"].shape == expected["sequence_output"].shape
    assert not served["sequence_output"][~real].any()
    expected["sequence_output"] = expected["sequence_output"][real]
    served = dict(served, sequence_output=served["sequence_output"][real])
    for key, value in expected.items():
        np.testing.assert_allclose(served[key], value, atol=atol, rtol=0, err_msg=key)
    return max(float(np.abs(served[key] - value).max()) for key, value in expected.items())


NO_B = ["", " ", "\u0301", "\t"]  # no second segment (albert_tf.text.segments): [CLS] a [SEP]
FRESH_REQUESTS = {  # both loaders a server may use (TF2 object graph; TF1 session as TF Serving's)
    "uncased": {"tf2": ("tf2", TEXTS, None), "tf1": ("tf1", TEXTS, None), "tf2_pair": ("tf2", TEXTS, TEXTS[::-1]),
                "tf1_pair": ("tf1", TEXTS, TEXTS[::-1]), "tf1_no_b": ("tf1", TEXTS[:4], NO_B)},
    "cased": {"tf2": ("tf2", TEXTS, None), "tf1": ("tf1", TEXTS, None)}}


@pytest.fixture(scope="module")
def served_fresh(exported, tmp_path_factory):
    """{export name: {request: outputs}}: FRESH_REQUESTS answered by one fresh process (TensorFlow imported once)."""
    requests = {f"{name}.{r}": request for name, named in FRESH_REQUESTS.items() for r, request in named.items()}
    served = serve_in_fresh_process({key: exported[key.split(".")[0]] for key in requests}, requests,
                                    tmp_path_factory.mktemp("served"))
    return {name: {r: served[f"{name}.{r}"] for r in named} for name, named in FRESH_REQUESTS.items()}


@pytest.mark.parametrize("name", ["uncased", "cased"])
def test_fresh_process_serving_equals_keras_model(name, model_dirs, served_fresh):
    """Both loaders a server may use (TF2 object graph; TF1 session as TF Serving's), text_b absent and given."""
    requests, served = FRESH_REQUESTS[name], served_fresh[name]
    for request, (_, texts_a, b) in requests.items():
        diff = assert_served_equals_keras(served[request], model_dirs[name], name == "uncased", texts_a, b)
        print(f"{name} {request}: served vs in-process max|diff| {diff:.2e}")
    if name == "uncased":
        for key in ("input_mask", "pooled_output"):
            np.testing.assert_allclose(served["tf1_no_b"][key], served["tf1"][key][:4], atol=1e-6, rtol=0)


#: --dtype bfloat16 against the float32 export, tiny model (measured: 2.3e-3 and 4.5e-2, |sequence_output| <= 3.5)
BF16_ATOL = {"pooled_output": 1e-2, "sequence_output": 0.1}


@pytest.mark.slow
def test_bfloat16_export_is_near_the_float32_export(model_dirs, exported, tmp_path):
    """--dtype bfloat16: float32 outputs within BF16_ATOL of the float32 export, not equal to them (bfloat16 ran),
    the same ids; the dtype is recorded in the export's config and `load_encoder` reads past it."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    path = export_encoder(model_dirs["uncased"], str(tmp_path / "bf16"), seq_length=32, warmup=False,
                          cased=False, dtype="bfloat16")
    with open(os.path.join(path, "assets.extra", "albert_config.json"), encoding="utf-8") as f:
        assert json.load(f)["dtype"] == "bfloat16"
    requests = {"tf2": ("tf2", TEXTS, None), "tf1_pair": ("tf1", TEXTS, list(reversed(TEXTS)))}
    bf16 = serve_in_fresh_process(path, requests, tmp_path)
    f32 = serve_in_fresh_process(exported["uncased"], requests, tmp_path)
    for name in requests:
        np.testing.assert_array_equal(bf16[name]["input_mask"], f32[name]["input_mask"])
        real = f32[name]["input_mask"] > 0
        for key, atol in BF16_ATOL.items():
            got, want = bf16[name][key], f32[name][key]
            assert got.dtype == np.float32
            if key == "sequence_output":
                assert not got[~real].any()
                got, want = got[real], want[real]
            diff = float(np.abs(got - want).max())
            print(f"bfloat16 export {name} {key}: max|diff| {diff:.2e}")
            assert 0 < diff <= atol, (key, diff)
    assert albert_tf.load_encoder(path).config == albert_tf.load_encoder(exported["uncased"]).config


def test_auto_dtype_is_the_faster_on_this_machine(model_dirs, monkeypatch, tmp_path):
    """--dtype auto on a CPU: the dtype whose probe rate is higher; an explicit dtype is kept; a bad one named."""
    from albert_tf.serving.encoder_export import export_dtype  # pylint: disable=import-outside-toplevel
    from albert_tf.runtime.precision import AUTO_ENV  # pylint: disable=import-outside-toplevel

    monkeypatch.delenv(AUTO_ENV, raising=False)  # the suite pins auto to float32 (tests/conftest.py)
    monkeypatch.setenv("ALBERT_TF_CACHE", str(tmp_path / "cache"))
    config = AlbertConfig.from_json_file(os.path.join(model_dirs["uncased"], "albert_config.json"))
    shapes = []

    def probe(float32, bfloat16):
        return lambda m, k, n: shapes.append((m, k, n)) or {"float32": float32, "bfloat16": bfloat16}

    assert export_dtype("auto", config, 32, probe(20.0, 40.0))[0] == "bfloat16"
    assert shapes[0][1:] == (config.hidden_size, config.intermediate_size)
    monkeypatch.setenv("ALBERT_TF_CACHE", str(tmp_path / "other"))  # not the first probe's cached rates
    assert export_dtype("auto", config, 32, probe(40.0, 20.0))[0] == "float32"
    assert export_dtype("bfloat16", config, 32, probe(20.0, 40.0)) == ("bfloat16", "--dtype")
    assert len(shapes) == 2
    with pytest.raises(ValueError, match="--dtype 'float16': expected one of auto, float32, bfloat16"):
        export_dtype("float16", config, 32)


@pytest.mark.slow
def test_converted_release_serves_like_keras_model(tmp_path, tiny_spm_model):
    """A checkpoint in google-research/albert's TF1 names -> `albert-tf convert` -> export -> served in a fresh
    process (both loaders) equals the converted model in process."""
    import numpy_albert as ref  # pylint: disable=import-outside-toplevel

    cfg = dict(helpers.SMALL, vocab_size=AlbertTokenizer(tiny_spm_model).vocab_size)
    ckpt = helpers.write_tf1_checkpoints([(str(tmp_path / "release"), ref.random_weights(cfg, np.random.default_rng(7)),
                                           "", False)])[0]
    config = helpers.write_config(str(tmp_path / "release" / "albert_config.json"), cfg)
    converted = str(tmp_path / "converted")
    assert cli_main(["convert", "--from", "tf1", "--checkpoint", ckpt, "--config", config, "--spm-model",
                     tiny_spm_model, "--output", converted]) == 0
    path = export_encoder(converted, str(tmp_path / "base"), seq_length=32, warmup=False)
    texts_b = list(reversed(TEXTS))
    requests = {"tf1": ("tf1", TEXTS, None), "tf1_pair": ("tf1", TEXTS, texts_b), "tf2": ("tf2", TEXTS, None)}
    served = serve_in_fresh_process(path, requests, tmp_path)
    for request, (_, texts_a, b) in requests.items():
        diff = assert_served_equals_keras(served[request], converted, True, texts_a, b)
        print(f"converted {request}: served vs in-process max|diff| {diff:.2e}")


def test_text_and_encode_signatures(model_dirs, exported):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = tf.saved_model.load(exported["uncased"])
    inputs, expected = _keras_outputs(model_dirs["uncased"], TEXTS, True)
    text = model.signatures["text"](text_a=tf.constant(TEXTS))
    encode = model.signatures["encode"](**{k: tf.constant(v) for k, v in inputs.items()})
    for out in (text, encode):
        np.testing.assert_allclose(out["pooled_output"].numpy(), expected["pooled_output"], atol=1e-5, rtol=0)


def test_serving_default_records_text_b_as_optional(exported):
    """SignatureDef.defaults (what TF Serving's Predict and the TF1 loader fill in) holds text_b: an empty vector."""
    from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(exported["uncased"], "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    signatures = proto.meta_graphs[0].signature_def
    default = signatures["serving_default"].defaults
    assert set(signatures["serving_default"].inputs) == {"text_a", "text_b"} and set(default) == {"text_b"}
    assert default["text_b"].dtype == 7 and [d.size for d in default["text_b"].tensor_shape.dim] == [0]  # DT_STRING
    assert set(signatures["text"].inputs) == {"text_a"} and not signatures["text"].defaults


def test_every_op_is_registered_by_tf_serving(exported):
    ops = helpers.op_types(exported["uncased"])
    assert "SentencepieceTokenizeOp" in ops and ("MatMul" in ops or "BatchMatMulV2" in ops)
    assert not helpers.unregistered_ops(ops), f"ops a TF Serving build may lack: {helpers.unregistered_ops(ops)}"


def test_saved_model_cli_show_lists_the_signatures(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    show = subprocess.run([cli, "show", "--dir", exported["uncased"], "--all"], capture_output=True, text=True,
                          check=True).stdout
    for name in ("serving_default", "text", "encode", "text_a", "text_b", "pooled_output"):
        assert name in show


@pytest.mark.slow
def test_saved_model_cli_run_answers_a_string_request(model_dirs, exported, tmp_path):
    out = tmp_path / "out"
    for texts_b in (None, ["It is."]):
        exprs = 'text_a=["The river runs."]' + ("" if texts_b is None else f";text_b={json.dumps(texts_b)}")
        # saved_model_cli with TF Text's ops registered (tests/programs/saved_model_cli.py)
        result = helpers.run_program("saved_model_cli", "run", "--dir", exported["uncased"], "--tag_set", "serve",
                                     "--signature_def", "serving_default", "--input_exprs", exprs, "--outdir", out,
                                     "--overwrite")
        assert result.returncode == 0, result.stderr[-3000:]
        served = {k: np.load(out / f"{k}.npy") for k in OUTPUT_NAMES}
        assert_served_equals_keras(served, model_dirs["uncased"], True, ["The river runs."], texts_b)


def test_bad_requests(model_dirs, exported):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = tf.saved_model.load(exported["uncased"])
    tok = AlbertTokenizer(os.path.join(model_dirs["uncased"], "spm.model"))
    serve = model.signatures["text"]
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
        model.signatures["serving_default"](text_a=tf.constant(["a", "b"]), text_b=tf.constant(["a"]))


@pytest.mark.slow
def test_versions_overwrite_and_atomicity(model_dirs, tmp_path, monkeypatch, capsys):
    base = tmp_path / "base"
    assert cli_main(["export", "--init", model_dirs["uncased"], "--output", str(base), "--no-warmup",
                     "--max-seq-length", "16"]) == 0
    assert capsys.readouterr().out == f"albert-tf export: wrote {base / '1'}\n"  # the result, on stdout
    assert cli_main(["export", "--init", model_dirs["uncased"], "--output", str(base), "--no-warmup"]) == 0
    assert sorted(os.listdir(base)) == ["1", "2"]
    assert cli_main(["export", "--init", model_dirs["uncased"], "--output", str(base), "--version", "1",
                     "--no-warmup"]) == 2
    assert "already exists (pass --overwrite" in capsys.readouterr().err

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(tf.saved_model, "save", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        export_encoder(model_dirs["uncased"], str(base), version=3, warmup=False)
    with pytest.raises(RuntimeError, match="disk full"):
        export_encoder(model_dirs["uncased"], str(base), version=1, overwrite=True, warmup=False)
    assert sorted(os.listdir(base)) == ["1", "2"]  # no BASE/3, no temp left, version 1 kept


def test_a_second_export_into_a_base_in_use_is_refused(model_dirs, tmp_path, capsys):
    """BASE's lock: an export while another one holds BASE exits 77 with one line and writes nothing. Before, two
    concurrent exports into one BASE both chose version 1 and both printed "wrote BASE/1": one model was lost."""
    from albert_tf.runtime import lock  # pylint: disable=import-outside-toplevel

    base = tmp_path / "base"
    with lock.DirectoryLock(str(base), "--output"):  # another export, mid-way
        code = cli_main(["export", "--init", model_dirs["uncased"], "--output", str(base), "--no-warmup",
                         "--max-seq-length", "16"])
        captured = capsys.readouterr()
        assert code == 77 and captured.out == ""
        assert len(captured.err.strip().splitlines()) == 1 and "in use by another run" in captured.err
        assert os.listdir(base) == [lock.LOCK_FILE]
    # the lock is gone with the run (and BASE, which it made): the next export takes it (as the fixture's exports
    # did, leaving their version only)
    assert not base.exists()
    with lock.DirectoryLock(str(base), "--output"):
        assert os.listdir(base) == [lock.LOCK_FILE]
    assert not base.exists()


def test_the_export_carries_the_vocabularys_record(model_dirs, exported):
    """assets.extra holds spm.model with its record (fingerprint, casing, accents), and the config names the
    fingerprint: what a reader of the export (finetune --init, load_encoder) tokenizes with."""
    import json  # pylint: disable=import-outside-toplevel

    from albert_tf.text import vocabulary  # pylint: disable=import-outside-toplevel

    for name, version in exported.items():
        spm = os.path.join(version, "assets.extra", "spm.model")
        record = vocabulary.read_text_record(spm)
        tokenizer = AlbertTokenizer(spm)
        assert (record.sha256, record.lower_case, record.keep_accents) == (tokenizer.fingerprint,
                                                                           name == "uncased", False)
        with open(os.path.join(version, "assets.extra", "albert_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        assert (config["spm_sha256"], config["keep_accents"]) == (tokenizer.fingerprint, False)


def test_bad_arguments_name_the_problem(model_dirs, tmp_path, capsys):
    d = tmp_path / "model"
    AlbertPretrainer(os.path.join(helpers.REPO, "configs", "albert_tiny.json")).save_pretrained(
        str(d), spm_model=os.path.join(model_dirs["uncased"], "spm.model"))  # vocab_size 1000 vs 300 pieces
    assert cli_main(["export", "--init", str(d), "--output", str(tmp_path / "b"), "--no-warmup"]) == 2
    assert "has vocab_size 1000" in capsys.readouterr().err
    os.remove(d / "spm.model")
    assert cli_main(["export", "--init", str(d), "--output", str(tmp_path / "b"), "--no-warmup"]) == 2
    assert "no spm.model (pass --spm-model PATH)" in capsys.readouterr().err
    assert cli_main(["export", "--init", model_dirs["uncased"], "--output", str(tmp_path / "b"),
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


def test_resolve_init_reads_model_dirs_export_versions_and_bases(model_dirs, exported, tiny_spm_model, tmp_path):
    """Issue 19 items 5-6: an export is self-contained (config, casing, vocabulary) and every --init form resolves."""
    from albert_tf.text import vocabulary  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints.handles import resolve_init  # pylint: disable=import-outside-toplevel

    with open(tiny_spm_model, "rb") as f:
        spm_bytes = f.read()
    model_config = AlbertConfig.from_json_file(os.path.join(model_dirs["cased"], "albert_config.json"))
    for name, version in exported.items():
        for path in (version, os.path.dirname(version), version + "/"):
            source = resolve_init(path)
            assert (source.kind, source.path, source.lower_case) == ("export", version, name == "uncased")
            assert source.config.to_dict() == model_config.to_dict()
            with open(source.spm_model, "rb") as f:
                assert f.read() == spm_bytes
    source = resolve_init(model_dirs["uncased"])  # no record
    assert (source.kind, source.lower_case) == ("model_dir", None)
    assert source.spm_model == os.path.join(model_dirs["uncased"], "spm.model")
    with pytest.raises(FileNotFoundError, match=r"--init .*nothing: no such directory"):
        resolve_init(str(tmp_path / "nothing"))
    # A vocabulary recorded as cased: export follows it (exported["cased"], made without a flag, is cased: above),
    # and --uncased contradicting it is refused.
    assert vocabulary.read_casing(os.path.join(model_dirs["cased"], "spm.model")) is False
    assert resolve_init(model_dirs["cased"]).lower_case is False
    code = cli_main(["export", "--init", model_dirs["cased"], "--output", str(tmp_path / "b2"), "--uncased",
                     "--no-warmup"])
    assert code == 2 and not (tmp_path / "b2").exists()


def test_warmup_records_parse_back_with_the_official_protos(exported):
    prediction_log_pb2 = pytest.importorskip("tensorflow_serving.apis.prediction_log_pb2")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    path = exported["uncased"]  # exported with warm-up records, as `export` does by default
    records = list(tf.data.TFRecordDataset(os.path.join(path, "assets.extra", WARMUP_FILE)).as_numpy_iterator())
    seen = []
    for record in records:
        request = prediction_log_pb2.PredictionLog.FromString(record).predict_log.request
        seen.append((request.model_spec.signature_name, sorted(request.inputs),
                     tf.make_ndarray(request.inputs["text_a"]).shape[0]))
    assert seen == [("serving_default", ["text_a"], 1), ("serving_default", ["text_a"], 32),
                    ("serving_default", ["text_a", "text_b"], 32), ("text", ["text_a"], 32)]


def test_load_export_registers_tf_text_ops(model_dirs, exported, tmp_path):
    """In a fresh process that has not imported tensorflow_text, albert_tf.load_export(BASE) registers TF Text's ops,
    loads the newest version and serves what the Keras model computes."""
    out = tmp_path / "served.npz"
    base = os.path.dirname(exported["uncased"])
    result = helpers.run_program("load_export", base, out, stdin="\n".join(TEXTS[:4]),
                                 env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert_served_equals_keras(dict(np.load(out)), model_dirs["uncased"], True, TEXTS[:4])


def test_load_export_and_export_refuse_what_is_not_theirs(model_dirs, exported, tmp_path, capsys):
    """load_export: a model dir is not an export. export --init: a file, a missing path and an empty directory each
    get their own line, before anything is written (an export as --init is exported again: tests/test_handles.py).
    export_encoder without a resolved source (a library call) still wants a model dir."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    with pytest.raises(FileNotFoundError, match="not an export: no saved_model.pb"):
        albert_tf.load_export(model_dirs["uncased"])
    with pytest.raises(ValueError, match=r"this is an export \(BASE/N\), not a model dir;"):
        export_encoder(exported["uncased"], str(tmp_path / "lib"), warmup=False)
    config_file = tmp_path / "tiny8k.json"
    config_file.write_text("{}")
    (tmp_path / "empty").mkdir()
    out = tmp_path / "b"
    for model, expected in [(str(config_file), "a file, not a directory (expected a pretrained-model directory"),
                            (str(tmp_path / "empty"), "a directory with neither albert_config.json, a SavedModel"),
                            (str(tmp_path / "nope"), "no such directory and not a released model's name")]:
        assert cli_main(["export", "--init", model, "--output", str(out), "--no-warmup"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and expected in err, err
    assert not os.path.exists(out)

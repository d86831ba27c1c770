"""AlbertPreprocessor (raw text → model inputs in the graph) and the notebook path it opens: a classifier that fits
and predicts on strings, saved as .keras, exported with `albert_tf.export_task_model` as finetune exports."""
import numpy as np
import pytest

pytestmark = pytest.mark.tpu_stack  # in-graph tokenization

TEXTS_A = ["the cat sat on the mat", "A dog ran home, quickly.", "Héllo   there\tworld", "we like trains",
           "", "numbers 3,000, and 12,5"]
TEXTS_B = ["and then slept", "", "short", "x y z " * 30, "only b", "the end"]


@pytest.fixture(scope="module")
def tokenizer(tiny_spm_model):
    from albert_tf import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    return AlbertTokenizer(tiny_spm_model)


def _classifier(tokenizer, num_classes=2, seq_length=24, seed=0, fused=True):
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf import AlbertClassifier, AlbertConfig, AlbertEncoder, AlbertPreprocessor  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(seed)
    config = AlbertConfig.from_preset("albert_tiny").replace(vocab_size=tokenizer.vocab_size)
    return AlbertClassifier(AlbertEncoder(config, fused=fused), num_classes,
                            preprocessor=AlbertPreprocessor(tokenizer, seq_length))


def test_preprocessor_ids_equal_pack(tokenizer):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf import AlbertPreprocessor  # pylint: disable=import-outside-toplevel

    preprocessor = AlbertPreprocessor(tokenizer, seq_length=20)
    cases = [(TEXTS_A, None), ((TEXTS_A, TEXTS_B), TEXTS_B), ({"text_a": TEXTS_A, "text_b": TEXTS_B}, TEXTS_B),
             (np.array(TEXTS_A), None)]
    for given, text_b in cases:
        expected = tokenizer.pack(TEXTS_A, text_b, seq_length=20)
        got = preprocessor(given)
        for name, value in expected.items():
            np.testing.assert_array_equal(np.asarray(got[name]), value, err_msg=name)
    single = preprocessor(tf.constant(TEXTS_A[1]))
    np.testing.assert_array_equal(np.asarray(single["input_word_ids"]),
                                  tokenizer.pack(TEXTS_A[1], seq_length=20)["input_word_ids"])
    # in tf.data, batched pairs
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS_A, TEXTS_B)).batch(4).map(lambda a, b: preprocessor((a, b)))
    rows = np.concatenate([batch["input_word_ids"].numpy() for batch in dataset])
    np.testing.assert_array_equal(rows, tokenizer.pack(TEXTS_A, TEXTS_B, seq_length=20)["input_word_ids"])


def test_fit_evaluate_and_predict_take_text_as_people_pass_it(tokenizer):
    """Issue 48 D6: fit's x and validation_data, evaluate and predict take numpy arrays of str, of bytes and of
    objects, Python lists, text pairs and tf.data of strings, as keras-hub's task models do. The reference: the same
    model on the ids `AlbertTokenizer.pack` gives (Python-side), its loss by hand; trained at learning rate 0, so
    that every validation loss is the reference's. Eager (run_eagerly): what is checked is how the data gets in,
    not the compiled step (test_classifier_fits_and_predicts_on_strings), and tracing would take a minute. Before:
    validation_data=(numpy str, y) failed with "Invalid dtype: str...", a list with "tuple index out of range"."""
    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = _classifier(tokenizer, seq_length=16, fused=False)  # (the fused training path's kernels: compiled)
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True), run_eagerly=True)
    a, b = np.array(TEXTS_A[:4]), np.array(TEXTS_B[:4])
    labels = np.array([0, 1, 1, 0])
    reference = {}
    for kind, ids in (("single", tokenizer.pack(list(a), seq_length=16)),
                      ("pairs", tokenizer.pack(list(a), list(b), seq_length=16))):
        logits = model.predict(ids, verbose=0).astype(np.float64)
        log_probabilities = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        reference[kind] = (-log_probabilities[np.arange(4), labels].mean(), logits)
    forms = {"numpy str": (a, "single"), "numpy object": (a.astype(object), "single"),
             "numpy bytes": (np.char.encode(a, "utf-8"), "single"), "list": (list(a), "single"),
             "pair": ((a, b), "pairs")}
    for name, (x, kind) in forms.items():
        loss, logits = reference[kind]
        history = model.fit(x, labels, validation_data=(x, labels), batch_size=4, epochs=1, verbose=0)
        np.testing.assert_allclose(history.history["val_loss"], [loss], rtol=1e-5, err_msg=name)
        if name in ("numpy str", "list", "pair"):  # (the others reach evaluate as validation_data above)
            np.testing.assert_allclose(model.evaluate(x, labels, verbose=0), loss, rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(model.predict(x, verbose=0), logits, atol=1e-5, err_msg=name)
    # validation_data given positionally, as a list; tf.data of strings (pairs) for x and validation_data
    history = model.fit(a, labels, 4, 1, 0, None, 0.0, [list(a), labels])
    np.testing.assert_allclose(history.history["val_loss"], [reference["single"][0]], rtol=1e-5)
    dataset = tf.data.Dataset.from_tensor_slices(((a, b), labels)).batch(4)
    history = model.fit(dataset, validation_data=dataset, epochs=1, verbose=0, shuffle=False)
    np.testing.assert_allclose(history.history["val_loss"], [reference["pairs"][0]], rtol=1e-5)
    np.testing.assert_allclose(model.evaluate(dataset, verbose=0), reference["pairs"][0], rtol=1e-5)
    texts = dataset.map(lambda x, y: {"text_a": x[0], "text_b": x[1]})  # (a tuple would read as (x, y))
    np.testing.assert_allclose(model.predict(texts, verbose=0), reference["pairs"][1], atol=1e-5)


@pytest.mark.slow
def test_classifier_fits_and_predicts_on_strings(tokenizer, tmp_path):
    """fit on raw strings (numpy, and pairs in tf.data) moves the weights and lowers the loss; predict on strings
    equals predict on the ids `pack` gives; a .keras round trip keeps the preprocessor and its vocabulary."""
    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model = _classifier(tokenizer)
    texts = np.array(["the cat sat", "a dog ran", "the cat slept", "a dog barked"] * 4)
    labels = np.array([0, 1, 0, 1] * 4)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
    before = [w.numpy().copy() for w in model.encoder.weights]
    history = model.fit(texts, labels, batch_size=16, epochs=4, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert any(not np.array_equal(b, w.numpy()) for b, w in zip(before, model.encoder.weights))
    pairs = tf.data.Dataset.from_tensor_slices(((texts, texts[::-1]), labels)).batch(8)
    model.fit(pairs, epochs=1, verbose=0)

    from_strings = model.predict(list(texts[:4]), verbose=0)
    from_ids = model.predict(tokenizer.pack(list(texts[:4]), seq_length=24), verbose=0)
    np.testing.assert_allclose(from_strings, from_ids, atol=1e-6)
    np.testing.assert_allclose(model.predict((texts[:3], texts[3:6]), verbose=0),
                               model.predict(tokenizer.pack(list(texts[:3]), list(texts[3:6]), seq_length=24),
                                             verbose=0), atol=1e-6)

    model.save(str(tmp_path / "model.keras"))
    loaded = keras.models.load_model(str(tmp_path / "model.keras"))
    assert loaded.preprocessor.seq_length == 24 and loaded.preprocessor.tokenizer.vocab_size == tokenizer.vocab_size
    np.testing.assert_allclose(loaded.predict(list(texts[:4]), verbose=0), from_strings, atol=1e-6)


@pytest.mark.parametrize("num_classes, pairs", [(3, True), pytest.param(1, False, marks=pytest.mark.slow)],
                         ids=["pairs", "regression, single"])
def test_export_task_model_answers_like_the_model(tokenizer, tmp_path, num_classes, pairs):
    """The export's serving_default (finetune's classifier signature: text_a, optional text_b → probabilities and
    label, or score) answers as the in-process model on the same strings."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    model = _classifier(tokenizer, num_classes=num_classes)
    path = albert_tf.export_task_model(model, str(tmp_path / "export"), pairs=pairs)
    assert path.endswith("/1")
    served = albert_tf.load_export(path)
    signature = served.signatures["serving_default"]
    assert sorted(signature.structured_input_signature[1]) == (["text_a", "text_b"] if pairs else ["text_a"])
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if pairs:
        answer = served.serving_default(text_a=tf.constant(TEXTS_A), text_b=tf.constant(TEXTS_B))
        logits = model.predict((np.array(TEXTS_A), np.array(TEXTS_B)), verbose=0)
        expected = tf.nn.softmax(logits).numpy()
        np.testing.assert_allclose(answer["probabilities"].numpy(), expected, atol=1e-5)
        np.testing.assert_array_equal(answer["label"].numpy(), expected.argmax(-1))
        single = served.serving_default(text_a=tf.constant(TEXTS_A))  # text_b omitted: [CLS] a [SEP]
        np.testing.assert_allclose(single["probabilities"].numpy(),
                                   tf.nn.softmax(model.predict(np.array(TEXTS_A), verbose=0)).numpy(), atol=1e-5)
    else:
        answer = served.serving_default(text_a=tf.constant(TEXTS_A))
        np.testing.assert_allclose(answer["score"].numpy(), model.predict(np.array(TEXTS_A), verbose=0)[:, 0],
                                   atol=1e-5)
    # assets.extra: the task's parameters and TF Serving's warm-up requests, which parse with the official protos
    import json  # pylint: disable=import-outside-toplevel
    import os  # pylint: disable=import-outside-toplevel

    task_config = json.loads(open(os.path.join(path, "assets.extra", "task_config.json"), encoding="utf-8").read())
    assert task_config["pairs"] is pairs and task_config["regression"] is (num_classes == 1)
    assert task_config["max_seq_length"] == model.preprocessor.seq_length
    assert task_config["spm_sha256"] == model.preprocessor.tokenizer.fingerprint
    assert task_config.get("num_labels") == (None if num_classes == 1 else num_classes)
    warmup = os.path.join(path, "assets.extra", "tf_serving_warmup_requests")
    try:  # the `serving` extra ([dev] has it; the TPU-side test stacks do not: then no records, and a note)
        from tensorflow_serving.apis import prediction_log_pb2  # pylint: disable=import-outside-toplevel
    except ImportError:
        assert not os.path.exists(warmup)
        return
    logs = [prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
            for record in tf.data.TFRecordDataset(warmup)]
    assert [sorted(r.inputs) for r in logs] == [["text_a"], ["text_a"]] + ([["text_a", "text_b"]] if pairs else [])
    assert {r.model_spec.signature_name for r in logs} == {"serving_default"}


def test_export_task_model_refuses_what_it_cannot_export(tokenizer, tmp_path):
    import albert_tf  # pylint: disable=import-outside-toplevel

    config = albert_tf.AlbertConfig.from_preset("albert_tiny").replace(vocab_size=tokenizer.vocab_size)
    with pytest.raises(ValueError, match="give tokenizer= and seq_length="):
        albert_tf.export_task_model(albert_tf.AlbertClassifier(config, 2), str(tmp_path / "a"))
    with pytest.raises(ValueError, match="takes an AlbertClassifier"):
        albert_tf.export_task_model(albert_tf.AlbertSpanQA(config), str(tmp_path / "b"))

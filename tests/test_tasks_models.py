"""Task models: heads against numpy, Keras round trips (.keras, get_config), gradients into the encoder, restoring
the encoder from a pretrained-model directory, and generated tasks the span and multiple-choice models learn."""
import keras
import numpy as np
import pytest

from albert_tf import AlbertClassifier, AlbertMultipleChoice, AlbertSpanQA
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.pretrainer import AlbertPretrainer


def _inputs(rng, batch=4, length=12, pad_from=None):
    ids = rng.integers(5, 1000, (batch, length)).astype("int32")
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    if pad_from is not None:
        ids[:, pad_from:] = 0
        mask[:, pad_from:] = 0
    types = np.zeros_like(ids)
    types[:, length // 2:] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(0)
    return AlbertEncoder("albert_tiny")


def test_classifier_head_is_dense_on_pooled_output(encoder):
    model = AlbertClassifier(encoder, 3)
    x = _inputs(np.random.default_rng(0))
    pooled = np.asarray(encoder(x)["pooled_output"])
    kernel, bias = (np.asarray(w) for w in model.head.weights)
    np.testing.assert_allclose(np.asarray(model(x)), pooled @ kernel + bias, rtol=1e-5, atol=1e-6)
    assert kernel.std() == pytest.approx(0.02 * 0.88, rel=0.25)  # truncated normal 0.02 (std ≈ 0.88·0.02)
    assert not bias.any()
    assert model.encoder is encoder


def test_regression_has_one_output_and_trains_with_mse(encoder):
    model = AlbertClassifier(AlbertEncoder(encoder.config), 1)
    x = _inputs(np.random.default_rng(1), batch=8)
    assert tuple(model(x).shape) == (8, 1)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    history = model.fit(x, np.linspace(0, 5, 8).astype("float32"), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_span_logits_are_masked_and_match_numpy(encoder):
    model = AlbertSpanQA(encoder, version_2_with_negative=True)
    x = _inputs(np.random.default_rng(2), length=10, pad_from=7)
    out = model(x)
    sequence = np.asarray(encoder(x)["sequence_output"])
    kernel, bias = (np.asarray(w) for w in model.head.weights)
    expected = sequence @ kernel + bias                                    # [B, L, 2]
    np.testing.assert_allclose(np.asarray(out["start_logits"])[:, :7], expected[:, :7, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["end_logits"])[:, :7], expected[:, :7, 1], rtol=1e-5, atol=1e-5)
    assert (np.asarray(out["start_logits"])[:, 7:] < -9000).all()
    assert (np.asarray(out["end_logits"])[:, 7:] < -9000).all()
    assert model.get_config()["version_2_with_negative"] is True


def test_multiple_choice_scores_each_choice_as_its_own_sequence(encoder):
    model = AlbertMultipleChoice(encoder, 4)
    rng = np.random.default_rng(3)
    per_choice = [_inputs(rng, batch=2) for _ in range(4)]
    x = {k: np.stack([c[k] for c in per_choice], axis=1) for k in per_choice[0]}  # [2, 4, L]
    logits = np.asarray(model(x))
    assert logits.shape == (2, 4)
    kernel, bias = (np.asarray(w) for w in model.head.weights)
    for c, inputs in enumerate(per_choice):
        pooled = np.asarray(encoder(inputs)["pooled_output"])
        np.testing.assert_allclose(logits[:, c], (pooled @ kernel + bias)[:, 0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda e: AlbertClassifier(e, 3, dropout=0.2),
    lambda e: AlbertSpanQA(e, version_2_with_negative=True),
    lambda e: AlbertMultipleChoice(e, 3, dropout=0.0),
], ids=["classifier", "span", "choice"])
def test_keras_file_and_config_round_trips(make, tmp_path):
    keras.utils.set_random_seed(4)
    model = make(AlbertEncoder("albert_tiny"))
    x = _inputs(np.random.default_rng(4), batch=2)
    if isinstance(model, AlbertMultipleChoice):
        x = {k: np.stack([v] * 3, axis=1) for k, v in x.items()}
    expected = keras.tree.map_structure(np.asarray, model(x))

    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is type(model) and isinstance(loaded.encoder, AlbertEncoder)
    keras.tree.map_structure(lambda a, b: np.testing.assert_allclose(np.asarray(a), b, atol=1e-6), loaded(x),
                             expected)

    config = model.get_config()
    assert config["encoder"]["config"]["config"]["hidden_size"] == 32  # the encoder's AlbertConfig inside
    clone = type(model).from_config(config)
    clone.set_weights(model.get_weights())
    keras.tree.map_structure(lambda a, b: np.testing.assert_allclose(np.asarray(a), b, atol=1e-6), clone(x),
                             expected)


def test_one_fit_step_changes_the_encoder():
    keras.utils.set_random_seed(5)
    model = AlbertClassifier(AlbertEncoder("albert_tiny"), 2)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    watched = {v.path: np.asarray(v).copy() for v in model.encoder.trainable_variables}
    model.fit(_inputs(np.random.default_rng(5), batch=8), np.arange(8) % 2, batch_size=8, epochs=1, verbose=0)
    changed = {path for path, before in watched.items()
               if not np.array_equal(before, np.asarray(next(v for v in model.encoder.trainable_variables
                                                             if v.path == path)))}
    for name in ("embeddings/word_embeddings", "attention_group_0_inner_group_0/query/kernel",
                 "ffn_group_1_inner_group_0/output_dense/kernel", "pooler_dense/kernel"):
        assert name in changed, name


def test_encoder_restored_from_a_pretrainer_directory(tmp_path):
    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(6)
    pretrainer = AlbertPretrainer("albert_tiny")
    pretrainer.save_pretrained(str(tmp_path / "pre"))
    keras.utils.set_random_seed(7)
    model = AlbertClassifier(AlbertEncoder("albert_tiny"), 2)
    head_before = np.asarray(model.head.kernel).copy()
    pretrained.restore(model, str(tmp_path / "pre"), part="encoder")
    for mine, theirs in zip(model.encoder.weights, pretrainer.encoder.weights):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs), err_msg=mine.path)
    np.testing.assert_array_equal(np.asarray(model.head.kernel), head_before)


def _span_task(rng, n, length=16):
    """Random tokens with one answer token (ids 900..949) somewhere after [CLS]: start = end = its position."""
    x = _inputs(rng, batch=n, length=length)
    x["input_word_ids"][:, 1:] = rng.integers(5, 900, (n, length - 1))
    position = rng.integers(1, length, n)
    x["input_word_ids"][np.arange(n), position] = rng.integers(900, 950, n)
    return x, position.astype("int32")


def test_span_model_finds_generated_answers():
    rng = np.random.default_rng(8)
    keras.utils.set_random_seed(8)
    model = AlbertSpanQA(AlbertEncoder("albert_tiny"))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss={"start_logits": loss, "end_logits": loss})
    x, y = _span_task(rng, 512)
    model.fit(x, {"start_logits": y, "end_logits": y}, batch_size=32, epochs=2, verbose=0)
    dev_x, dev_y = _span_task(rng, 200)
    out = model.predict(dev_x, verbose=0)
    exact = np.mean((out["start_logits"].argmax(-1) == dev_y) & (out["end_logits"].argmax(-1) == dev_y))
    baseline = np.max(np.bincount(y)) / len(y)  # always answering the most frequent training position
    assert exact > 0.9 and baseline < 0.15, (exact, baseline)


def _choice_task(rng, n, choices=4, length=8):
    """Each choice a random sequence; the right one holds a token from 900..949, the others none."""
    x = _inputs(rng, batch=n * choices, length=length)
    x["input_word_ids"][:, 1:] = rng.integers(5, 900, (n * choices, length - 1))
    x = {k: v.reshape(n, choices, length) for k, v in x.items()}
    label = rng.integers(0, choices, n)
    x["input_word_ids"][np.arange(n), label, rng.integers(1, length, n)] = rng.integers(900, 950, n)
    return x, label


@pytest.mark.slow
def test_multiple_choice_model_learns_a_generated_task():
    rng = np.random.default_rng(9)
    keras.utils.set_random_seed(9)
    model = AlbertMultipleChoice(AlbertEncoder("albert_tiny"), 4, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    x, y = _choice_task(rng, 1024)
    model.fit(x, y, batch_size=32, epochs=4, verbose=0)
    dev_x, dev_y = _choice_task(rng, 200)
    accuracy = model.evaluate(dev_x, dev_y, verbose=0)[1]
    assert accuracy > 0.8, accuracy  # chance: 0.25

"""The model against the independent numpy reference; sharing structure; parameter counts; serialization."""
import numpy as np
import pytest

import numpy_albert as ref
from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.checkpoints.tensors import assign_from_tensors, tf1_name_map
from albert_tf.modeling.base import count_params
from helpers import SMALL, compare, make_inputs

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


@pytest.mark.parametrize("sharing,embedding_size", [
    ("all", 8), ("attention", 8), ("ffn", 8), ("none", 8), ("all", 16),  # the last: E == H, no projection
])
def test_forward_matches_numpy_reference(sharing, embedding_size):
    cfg = dict(SMALL, sharing=sharing, embedding_size=embedding_size)
    weights = ref.random_weights(cfg, np.random.default_rng(0))
    model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
    assign_from_tensors(model, weights, tf1_name_map(model), "random weights")
    batch = make_inputs(cfg)
    expected = ref.forward(weights, cfg, batch["input_word_ids"], batch["input_mask"], batch["input_type_ids"],
                           batch["masked_lm_positions"])
    got = model(batch, training=False)
    assert len(got["encoder_outputs"]) == cfg["num_hidden_layers"] * cfg["inner_group_num"]
    diff = compare(got, expected, batch["input_mask"])
    print(f"parity sharing={sharing} E={embedding_size}: max|diff|={diff:.2e}")
    assert diff < 1e-5
    # Sanity: the reference is sensitive to a wrong routing (e.g. every layer using group 0).
    wrong = dict(weights)
    for k in [k for k in weights if "group_1" in k]:
        wrong[k] = weights[k.replace("group_1", "group_0")]
    if sharing != "none":
        bad = ref.forward(wrong, cfg, batch["input_word_ids"], batch["input_mask"], batch["input_type_ids"],
                          batch["masked_lm_positions"])
        assert compare(got, bad, batch["input_mask"]) > 1e-3


@pytest.mark.parametrize("sharing,embedding_size", [("all", 8), ("none", 16)])
def test_unpadded_call_matches_numpy_reference(sharing, embedding_size):
    """The export's forward (dense layers on the batch's tokens only) against the numpy reference on the padded
    batch: mixed lengths, a mask with a hole, a masked position 0, a row without tokens; zero at padding."""
    import tensorflow as tf

    cfg = dict(SMALL, sharing=sharing, embedding_size=embedding_size)
    weights = ref.random_weights(cfg, np.random.default_rng(2))
    model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
    assign_from_tensors(model, weights, tf1_name_map(model), "random weights")
    batch = make_inputs(cfg, batch=5)
    mask = batch["input_mask"]
    mask[3, [0, 5]] = 0  # position 0 and one inside the row masked
    mask[4, :] = 0  # no token at all
    expected = ref.forward(weights, cfg, batch["input_word_ids"], mask, batch["input_type_ids"])
    got = tf.function(model.encoder.unpadded_call)({k: tf.constant(v) for k, v in batch.items()})
    real = mask[:, :, None] > 0
    assert not np.asarray(got["sequence_output"])[~real[..., 0]].any()
    np.testing.assert_allclose(got["sequence_output"], np.where(real, expected["sequence_output"], 0), atol=1e-5)
    np.testing.assert_allclose(got["pooled_output"][:4], expected["pooled_output"][:4], atol=1e-5)
    # The row without tokens attends uniformly to scores - 10000, which float32 rounds to ~1e-3 (7e-5 apart from
    # the float64 reference, for the padded Keras model too): compared with the padded model there, at 1e-4 (the
    # two graphs round those scores in another order: 4e-5 apart on TensorFlow 2.20, under 1e-5 on 2.21).
    padded = model.encoder(batch, training=False)["pooled_output"]
    np.testing.assert_allclose(got["pooled_output"][4], padded[4], atol=1e-4)


def _expected_sharing(cfg, half):
    """Independent statement of the paper/original routing: key of the parameter set each applied block uses."""
    keys = []
    for i in range(cfg["num_hidden_layers"]):
        g = i * cfg["num_hidden_groups"] // cfg["num_hidden_layers"]
        for j in range(cfg["inner_group_num"]):
            shared = cfg["sharing"] in ("all", half)
            keys.append(("g", g, j) if shared else ("l", i, j))
    return keys


@pytest.mark.parametrize("sharing,distinct_attention,distinct_ffn", [
    ("all", 4, 4), ("attention", 4, 8), ("ffn", 8, 4), ("none", 8, 8),
])
def test_sharing_by_structure(sharing, distinct_attention, distinct_ffn):
    cfg = dict(SMALL, sharing=sharing)
    enc = AlbertEncoder(AlbertConfig.from_dict(cfg))
    applied = [(enc.attention_layers[a], enc.ffn_layers[f]) for a, f in enc.block_keys]
    assert len(applied) == 8
    assert len({id(a.query.kernel) for a, _ in applied}) == distinct_attention
    assert len({id(f.intermediate.kernel) for _, f in applied}) == distinct_ffn
    for half, index, name in (("attention", 0, "query"), ("ffn", 1, "intermediate")):
        expected = _expected_sharing(cfg, half)
        for x in range(8):
            for y in range(8):
                same = getattr(applied[x][index], name).kernel is getattr(applied[y][index], name).kernel
                assert same == (expected[x] == expected[y]), (half, x, y)
    # distinct variables: embeddings 3 tables + LayerNorm 2 + projection 2, per attention 10, per ffn 6, pooler 2
    assert len({id(v) for v in enc.weights}) == 7 + 10 * distinct_attention + 6 * distinct_ffn + 2


def test_tied_decoder_and_param_counts_small():
    model = AlbertPretrainer(AlbertConfig.from_dict(SMALL))
    assert model.mlm_head.embedding.word_embeddings is model.encoder.embeddings.word_embeddings
    V, E, H, I = 50, 8, 16, 32
    emb = V * E + 32 * E + 2 * E + 2 * E + E * H + H
    block = 4 * (H * H + H) + 2 * H + H * I + I + I * H + H + 2 * H
    enc = emb + 4 * block + H * H + H  # 2 groups x 2 inner groups
    assert count_params(model.encoder) == enc
    assert count_params(model) == enc + H * E + E + 2 * E + V + H * 2 + 2


PAPER_COUNTS = {  # issue 2: encoder incl. pooler / pretrainer incl. MLM and SOP heads, decoder tied
    "albert_base": (11_683_584, 11_813_810),
    "albert_large": (17_683_968, 17_847_474),
    "albert_xlarge": (58_724_864, 59_021_490),
    "albert_xxlarge": (222_595_584, 223_158_450),
}


@pytest.mark.stack_agnostic  # parameter arithmetic; building models is covered on the TPU-side stacks by the rest
@pytest.mark.parametrize("preset", sorted(PAPER_COUNTS))
def test_paper_parameter_counts(preset, monkeypatch):
    import keras  # pylint: disable=import-outside-toplevel

    # Counts are of shapes: the weights start at zero, not as ~220 million truncated-normal draws (albert_xxlarge).
    monkeypatch.setattr(keras.initializers.TruncatedNormal, "__call__",
                        lambda self, shape, dtype=None: keras.ops.zeros(shape, dtype))
    pretrainer = AlbertPretrainer(preset)
    assert (count_params(pretrainer.encoder), count_params(pretrainer)) == PAPER_COUNTS[preset]


@pytest.mark.parametrize("preset", ["albert_base_v1", "albert_large_v1", "albert_xlarge_v1"])
def test_v1_presets_have_dropout(preset):
    cfg = AlbertConfig.from_preset(preset)
    assert cfg.hidden_dropout_prob == 0.1 and cfg.attention_probs_dropout_prob == 0.1
    v2 = AlbertConfig.from_preset(preset[:-3])
    assert v2.hidden_dropout_prob == 0.0 and v2.replace(hidden_dropout_prob=0.1,
                                                        attention_probs_dropout_prob=0.1) == cfg


def test_dropout_switch():
    cfg = AlbertConfig.from_dict(dict(SMALL, hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3))
    batch = make_inputs(SMALL)
    with_dropout = AlbertPretrainer(cfg)
    a = with_dropout(batch, training=True)["sop_logits"]
    b = with_dropout(batch, training=True)["sop_logits"]
    assert np.abs(np.asarray(a) - np.asarray(b)).max() > 1e-6
    without = AlbertPretrainer(cfg, dropout=False)
    assert without.config.hidden_dropout_prob == 0.0 and without.config.attention_probs_dropout_prob == 0.0
    without.set_weights(with_dropout.get_weights())
    np.testing.assert_allclose(without(batch, training=True)["sop_logits"],
                               with_dropout(batch, training=False)["sop_logits"], atol=1e-6)


def test_keras_serialization_round_trip(tmp_path):
    import keras

    cfg = AlbertConfig.from_dict(dict(SMALL, sharing="attention"))
    model = AlbertPretrainer(cfg)
    batch = make_inputs(SMALL)
    expected = model(batch, training=False)
    clone = AlbertPretrainer.from_config(model.get_config())
    assert clone.config == cfg
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(clone(batch, training=False)["mlm_logits"], expected["mlm_logits"])
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, AlbertPretrainer) and loaded.config == cfg
    got = loaded(batch, training=False)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(expected[key]))
    # the tie survives loading
    assert loaded.mlm_head.embedding.word_embeddings is loaded.encoder.embeddings.word_embeddings
    encoder_path = str(tmp_path / "encoder.keras")
    model.encoder.save(encoder_path)
    enc = keras.saving.load_model(encoder_path)
    np.testing.assert_array_equal(np.asarray(enc(batch)["pooled_output"]), np.asarray(expected["pooled_output"]))


def test_encoder_ignores_extra_batch_keys():
    enc = AlbertEncoder(AlbertConfig.from_dict(SMALL))
    batch = make_inputs(SMALL)
    batch["masked_lm_ids"] = np.zeros((3, 4), "int32")
    out = enc(batch)
    assert tuple(out["sequence_output"].shape) == (3, 12, 16) and tuple(out["pooled_output"].shape) == (3, 16)


def test_mixed_bfloat16_keeps_float32_variables_and_logits():
    import keras

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = AlbertPretrainer(AlbertConfig.from_dict(SMALL))
        out = model(make_inputs(SMALL), training=False)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert all(v.dtype == "float32" for v in model.weights)
    assert out["mlm_logits"].dtype == "float32" and out["sop_logits"].dtype == "float32"
    assert out["sequence_output"].dtype == "bfloat16"

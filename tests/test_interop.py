"""`albert-tf convert --to hf` / `--to keras-hub`, checked by the other side's own code: transformers' AlbertModel and
AlbertForPreTraining and keras-hub's AlbertBackbone loaded from the written directories give albert_tf's outputs on
the same ids, their tokenizers albert_tf's ids, and HF → albert_tf → HF is the identity on every tensor.

transformers, torch (CPU) and keras-hub come with the `dev` extra; without them these tests are skipped, except
under CI=1, where a missing one fails them."""
import json
import os

import numpy as np
import pytest

from tests import helpers


def _require(module):
    if os.environ.get("CI") == "1":
        return __import__(module)
    return pytest.importorskip(module)


# Real text of several scripts (Latin with accents, Cyrillic, Greek, Han, Kana, Arabic, Devanagari, Hangul).
TEXTS = [
    "The quick brown fox jumps over the lazy dog, and the dog sleeps on.",
    "Le cœur a ses raisons que la raison ne connaît point; déjà vu à Noël.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein, sagte Müller.",
    "Москва — столица России, и в ней живут миллионы людей.",
    "Η γλώσσα μου έδωσαν ελληνική, το σπίτι φτωχικό στις αμμουδιές.",
    "我们今天去公园散步，天气非常好。",
    "今日はとても良い天気ですね。東京へ行きましょう。",
    "اللغة العربية جميلة جدا، وهي لغة القرآن.",
    "भारत एक विशाल देश है और यहाँ कई भाषाएँ बोली जाती हैं।",
    "서울은 대한민국의 수도이며 많은 사람들이 살고 있다.",
    "ALBERT shares parameters across layers: 12 layers, one group.",
]
TINY = dict(embedding_size=16, hidden_size=32, num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2,
            num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
SEQ = 24


@pytest.fixture(scope="module")
def script_spm(tmp_path_factory):
    """A SentencePiece model with ALBERT's special ids trained on TEXTS as albert_tf normalizes them (uncased)."""
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    from albert_tf.text.normalize import normalize  # pylint: disable=import-outside-toplevel

    directory = tmp_path_factory.mktemp("script_spm")
    corpus = directory / "corpus.txt"
    corpus.write_text("\n".join(normalize(t) for t in TEXTS * 3) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(directory / "spm"), vocab_size=420, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols="[CLS],[SEP],[MASK]", character_coverage=1.0,
        normalization_rule_name="identity", minloglevel=2, num_threads=1, hard_vocab_limit=False)
    return str(directory / "spm.model")


def _random_model(spm_model, directory, seed=0, **changes):
    """A pretrained-model directory holding an AlbertPretrainer whose every weight is random and far from its
    initialization (LayerNorm gains around 1, everything else N(0, 0.3)), so that a misplaced tensor shows."""
    from albert_tf import AlbertConfig, AlbertPretrainer  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    config = AlbertConfig(vocab_size=AlbertTokenizer(spm_model).vocab_size, **{**TINY, **changes})
    model = AlbertPretrainer(config)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        value = rng.normal(0.0, 0.3, variable.shape) + (1.0 if "gamma" in variable.path else 0.0)
        variable.assign(value.astype(np.float32))
    model.save_pretrained(str(directory), spm_model=spm_model)
    return model


def _inputs(spm_model):
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    inputs = AlbertTokenizer(spm_model).pack(TEXTS[:4], [TEXTS[5], "", TEXTS[3], TEXTS[10]], seq_length=SEQ)
    inputs["masked_lm_positions"] = np.array([[1, 2, 5], [1, 3, 4], [2, 7, 9], [1, 2, 3]], np.int32)
    return inputs


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, script_spm):
    """(model dir, its AlbertPretrainer, inputs, albert_tf's outputs as numpy)."""
    directory = tmp_path_factory.mktemp("tiny") / "model"
    model = _random_model(script_spm, directory)
    inputs = _inputs(script_spm)
    outputs = {k: np.asarray(v) for k, v in model(inputs, training=False).items() if k != "encoder_outputs"}
    return str(directory), model, inputs, outputs


@pytest.fixture(scope="module")
def tiny_export(tiny, tmp_path_factory):
    """`albert-tf export` of `tiny`'s model dir (BASE/1, at SEQ): the encoder alone."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    return albert_tf.export(albert_tf.ExportConfig(init=tiny[0], output=str(tmp_path_factory.mktemp("export")),
                                                   max_seq_length=SEQ, no_warmup=True)).path


def _convert(init, to, output, **kwargs):
    import albert_tf  # pylint: disable=import-outside-toplevel

    return albert_tf.convert(albert_tf.ConvertConfig(init=str(init), to=to, output=str(output), **kwargs))


def _hf_outputs(directory, inputs):
    """{name: numpy} of transformers' AlbertModel and AlbertForPreTraining loaded from `directory`."""
    torch = _require("torch")
    transformers = _require("transformers")
    feed = {"input_ids": torch.tensor(inputs["input_word_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(inputs["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(inputs["input_type_ids"], dtype=torch.long)}
    with torch.no_grad():
        base = transformers.AlbertModel.from_pretrained(directory).eval()(**feed)
        pretraining = transformers.AlbertForPreTraining.from_pretrained(directory).eval()(**feed)
    positions = inputs["masked_lm_positions"].astype(np.int64)[..., None]
    return {"sequence_output": base.last_hidden_state.numpy(), "pooled_output": base.pooler_output.numpy(),
            "mlm_logits": np.take_along_axis(pretraining.prediction_logits.numpy(), positions, axis=1),
            "sop_logits": pretraining.sop_logits.numpy()}


def _max_diffs(theirs, ours):
    return {name: float(np.max(np.abs(theirs[name] - ours[name]))) for name in theirs}


# ------------------------------------------------------------------------------------------------ Hugging Face
def test_hf_outputs_match(tiny, tmp_path):
    directory, _, inputs, ours = tiny
    result = _convert(directory, "hf", tmp_path / "hf")
    assert sorted(os.listdir(result.output)) == ["config.json", "model.safetensors", "special_tokens_map.json",
                                                 "spiece.model", "tokenizer.json", "tokenizer_config.json"]
    diffs = _max_diffs(_hf_outputs(result.output, inputs), ours)
    assert max(diffs.values()) < 1e-5, diffs
    # the parameters reported are what transformers loads: the whole model's and its encoder's (`albert.`)
    pretraining = _require("transformers").AlbertForPreTraining.from_pretrained(result.output)
    assert (result.parameters, result.encoder_parameters) == (pretraining.num_parameters(),
                                                              pretraining.albert.num_parameters())
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (config["model_type"], config["hidden_act"], config["architectures"]) == (
        "albert", "gelu_new", ["AlbertForPreTraining"])


def test_hf_file_holds_exactly_what_transformers_holds(tiny, tmp_path):
    """Every tensor of transformers' own AlbertForPreTraining state (less the decoder tied to the embeddings and
    the position buffers) is written, with its shape, and nothing else: an unmapped or unused tensor fails."""
    _require("torch")
    transformers = _require("transformers")
    from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel

    directory, _, _, _ = tiny
    _convert(directory, "hf", tmp_path / "hf")
    written = load_file(str(tmp_path / "hf" / "model.safetensors"))
    reference = transformers.AlbertForPreTraining(transformers.AlbertConfig.from_pretrained(str(tmp_path / "hf")))
    expected = {name: tuple(t.shape) for name, t in reference.state_dict().items()
                if not name.startswith("predictions.decoder.") and not name.endswith("position_ids")}
    assert {name: tuple(t.shape) for name, t in written.items()} == expected


def test_hf_encoder_only_export_is_an_albert_model(tiny, tiny_export, tmp_path):
    """An `albert-tf export` holds the encoder: written as AlbertModel's file (no heads, no `albert.` prefix)."""
    _, _, inputs, ours = tiny
    _convert(tiny_export, "hf", tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["AlbertModel"]
    torch = _require("torch")
    transformers = _require("transformers")
    model = transformers.AlbertModel.from_pretrained(str(tmp_path / "hf")).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(inputs["input_word_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                    token_type_ids=torch.tensor(inputs["input_type_ids"], dtype=torch.long))
    assert np.max(np.abs(out.last_hidden_state.numpy() - ours["sequence_output"])) < 1e-5
    assert np.max(np.abs(out.pooler_output.numpy() - ours["pooled_output"])) < 1e-5


def test_hf_round_trip_is_the_identity(script_spm, tmp_path):
    """A Hugging Face AlbertForPreTraining (random, saved by transformers) → convert --from hf → --to hf: every
    tensor bit for bit, the same names, the same config values."""
    torch = _require("torch")
    transformers = _require("transformers")
    import albert_tf  # pylint: disable=import-outside-toplevel
    from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel

    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    torch.manual_seed(0)
    config = transformers.AlbertConfig(vocab_size=AlbertTokenizer(script_spm).vocab_size, embedding_size=16,
                                       hidden_size=32, num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2,
                                       num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                                       hidden_act="gelu_new")
    model = transformers.AlbertForPreTraining(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
    model.save_pretrained(str(tmp_path / "hf_in"))
    albert_tf.convert(albert_tf.ConvertConfig(source="hf", checkpoint=str(tmp_path / "hf_in"),
                                              output=str(tmp_path / "model"), spm_model=script_spm))
    _convert(tmp_path / "model", "hf", tmp_path / "hf_out")
    before = load_file(str(tmp_path / "hf_in" / "model.safetensors"))
    after = load_file(str(tmp_path / "hf_out" / "model.safetensors"))
    before = {k: v for k, v in before.items() if not k.startswith("predictions.decoder.")}
    assert sorted(before) == sorted(after)
    different = [name for name in before if not np.array_equal(before[name], after[name])]
    assert not different
    config_in = json.loads((tmp_path / "hf_in" / "config.json").read_text())
    config_out = json.loads((tmp_path / "hf_out" / "config.json").read_text())
    for key in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
                "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_act",
                "max_position_embeddings", "type_vocab_size", "layer_norm_eps"):
        assert config_in[key] == config_out[key], key


def test_hf_tokenizers_give_albert_tf_ids(tiny, tmp_path):
    """transformers' AutoTokenizer (tokenizer.json, transformers 4 and 5) and transformers 4's AlbertTokenizer
    (SentencePiece) and AlbertTokenizerFast (tokenizer.json), loaded from the written directory, give
    AlbertTokenizer's ids, [CLS] a [SEP] b [SEP] included, on text of several scripts, uppercase (Greek's final
    sigma) and the digit-comma rule's pieces. (transformers 5's AlbertTokenizer class builds a normalizer of its own:
    tests/test_hf_tokenizer.py counts where it differs.)"""
    transformers = _require("transformers")
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    directory, _, _, _ = tiny
    _convert(directory, "hf", tmp_path / "hf")
    ours = AlbertTokenizer(os.path.join(directory, "spm.model"))
    classes = [transformers.AutoTokenizer]
    if transformers.__version__.startswith("4."):
        classes += [transformers.AlbertTokenizer, transformers.AlbertTokenizerFast]
    for cls in classes:
        theirs = cls.from_pretrained(str(tmp_path / "hf"))
        for text in TEXTS + [t.upper() for t in TEXTS] + ["9,000, 12,5, a,b 3,"]:
            if cls is transformers.AlbertTokenizer and "ΓΛΏΣΣΑ" in text:
                continue  # its tokenize() lowercases character by character first: a word-final Σ gives σ, not ς
            assert theirs(text, add_special_tokens=False)["input_ids"] == ours.encode(text), (cls.__name__, text)
        pair = theirs(TEXTS[1], TEXTS[3])
        packed = ours.pack(TEXTS[1], TEXTS[3], seq_length=len(pair["input_ids"]))
        assert pair["input_ids"] == packed["input_word_ids"].tolist()
        assert pair["token_type_ids"] == packed["input_type_ids"].tolist()


def test_a_directory_transformers_saved_converts_with_its_vocabulary(tiny, tmp_path):
    """transformers' save_pretrained of what `convert --to hf` wrote holds tokenizer.json and no spiece.model (so
    does every directory transformers 5 saves): `convert --from hf` builds the vocabulary from tokenizer.json, and
    it gives the original's ids; the weights come back bit for bit."""
    _require("torch")
    transformers = _require("transformers")
    import albert_tf  # pylint: disable=import-outside-toplevel
    from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel

    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    directory, _, _, _ = tiny
    _convert(directory, "hf", tmp_path / "hf")
    transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf")).save_pretrained(str(tmp_path / "saved"))
    transformers.AlbertForPreTraining.from_pretrained(str(tmp_path / "hf")).save_pretrained(str(tmp_path / "saved"))
    assert "spiece.model" not in os.listdir(tmp_path / "saved") and "tokenizer.json" in os.listdir(tmp_path / "saved")
    result = albert_tf.convert(albert_tf.ConvertConfig(source="hf", checkpoint=str(tmp_path / "saved"),
                                                       output=str(tmp_path / "back")))
    built, original = AlbertTokenizer(os.path.join(result.output, "spm.model")), AlbertTokenizer(
        os.path.join(directory, "spm.model"))
    texts = TEXTS + [t.upper() for t in TEXTS] + ["9,000, 12,5, a,b 3,"]
    assert built.encode(texts) == original.encode(texts)
    assert (built.lower_case, built.keep_accents) == (original.lower_case, original.keep_accents)
    _convert(result.output, "hf", tmp_path / "again")
    before, after = load_file(str(tmp_path / "hf" / "model.safetensors")), load_file(
        str(tmp_path / "again" / "model.safetensors"))
    assert sorted(before) == sorted(after) and all(np.array_equal(before[k], after[k]) for k in before)


# ------------------------------------------------------------------------------------------------ keras-hub
def test_keras_hub_backbone_matches(tiny, tmp_path):
    keras_hub = _require("keras_hub")
    directory, _, inputs, ours = tiny
    result = _convert(directory, "keras-hub", tmp_path / "kh")
    backbone = keras_hub.models.AlbertBackbone.from_preset(result.output)
    # the parameters reported are the preset's (before: the pretrainer's, heads included, which it does not hold)
    assert result.parameters == result.encoder_parameters == backbone.count_params()
    theirs = backbone({"token_ids": inputs["input_word_ids"], "segment_ids": inputs["input_type_ids"],
                       "padding_mask": inputs["input_mask"]})
    diffs = _max_diffs({k: np.asarray(v) for k, v in theirs.items()}, ours)
    assert max(diffs.values()) < 1e-5, diffs


def test_keras_hub_name_map_fills_every_variable_once(tiny):
    """Every AlbertBackbone variable receives exactly one of ours and every encoder variable is used; a map
    missing one is refused."""
    keras_hub = _require("keras_hub")
    from albert_tf.checkpoints import to_keras_hub  # pylint: disable=import-outside-toplevel

    _, model, _, _ = tiny
    backbone = keras_hub.models.AlbertBackbone(**to_keras_hub.backbone_kwargs(model.config))
    rows = to_keras_hub.keras_hub_name_map(backbone, model.encoder)
    assert sorted(id(t) for t, _ in rows) == sorted(id(v) for v in backbone.weights)
    assert {id(o) for _, o in rows} == {id(v) for v in model.encoder.weights}
    to_keras_hub.assign_backbone(backbone, model.encoder)
    for target, source in rows:
        np.testing.assert_array_equal(np.reshape(np.asarray(target.numpy()), source.shape), source.numpy())


def test_keras_hub_tokenizer_gives_albert_tf_ids_on_normalized_text(tiny, tmp_path):
    """keras-hub's AlbertTokenizer runs SentencePiece on the text as given (no lowercasing, no accent stripping):
    on albert_tf-normalized text it gives AlbertTokenizer's ids."""
    keras_hub = _require("keras_hub")
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel
    from albert_tf.text.normalize import normalize  # pylint: disable=import-outside-toplevel

    directory, _, _, _ = tiny
    _convert(directory, "keras-hub", tmp_path / "kh")
    theirs = keras_hub.models.AlbertTokenizer.from_preset(str(tmp_path / "kh"))
    ours = AlbertTokenizer(os.path.join(directory, "spm.model"))
    for text in TEXTS:
        assert np.asarray(theirs(normalize(text))).tolist() == ours.encode(text), text


# ------------------------------------------------------------------------------------------------ variants
@pytest.mark.parametrize("changes", [dict(embedding_size=32), dict(num_hidden_groups=1, inner_group_num=1),
                                     dict(num_hidden_groups=4, inner_group_num=1)],
                         ids=["E=H identity projection", "one group", "a group per layer"])
def test_variants_match_on_both_sides(script_spm, tmp_path, changes):
    keras_hub = _require("keras_hub")
    model = _random_model(script_spm, tmp_path / "model", seed=1, **changes)
    inputs = _inputs(script_spm)
    ours = {k: np.asarray(v) for k, v in model(inputs, training=False).items() if k != "encoder_outputs"}
    _convert(tmp_path / "model", "hf", tmp_path / "hf")
    diffs = _max_diffs(_hf_outputs(str(tmp_path / "hf"), inputs), ours)
    assert max(diffs.values()) < 1e-5, diffs
    _convert(tmp_path / "model", "keras-hub", tmp_path / "kh")
    backbone = keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "kh"))
    theirs = backbone({"token_ids": inputs["input_word_ids"], "segment_ids": inputs["input_type_ids"],
                       "padding_mask": inputs["input_mask"]})
    diffs = _max_diffs({k: np.asarray(v) for k, v in theirs.items()}, ours)
    assert max(diffs.values()) < 1e-5, diffs


@pytest.fixture(scope="module")
def refused_models(script_spm, tmp_path_factory):
    """changes -> a model dir of TINY with those config changes (`_random_model`), made once for the cases that
    convert it to both targets."""
    made = {}

    def model_dir(changes):
        key = json.dumps(changes, sort_keys=True)
        if key not in made:
            made[key] = tmp_path_factory.mktemp("refused") / "model"
            _random_model(script_spm, made[key], **changes)
        return made[key]

    return model_dir


@pytest.mark.parametrize("changes, target, message", [
    (dict(sharing="attention"), "hf", "cannot hold sharing='attention'"),
    (dict(sharing="ffn"), "keras-hub", "cannot hold sharing='ffn'"),
    (dict(sharing="none", num_hidden_groups=1), "hf", "cannot hold sharing='none'"),
    (dict(num_hidden_layers=2, num_hidden_groups=2, inner_group_num=2), "hf", "cannot run inner_group_num=2"),
    (dict(hidden_act="relu"), "keras-hub", "cannot hold hidden_act='relu'"),
    (dict(sharing="ffn"), "hf", "cannot hold sharing='ffn'"),
    (dict(sharing="attention"), "keras-hub", "cannot hold sharing='attention'"),
    (dict(sharing="none", num_hidden_groups=1), "keras-hub", "cannot hold sharing='none'"),
    (dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.0), "keras-hub", "has one dropout rate"),
])
def test_what_a_target_cannot_hold_is_refused_in_one_line(refused_models, tmp_path, changes, target, message):
    with pytest.raises(ValueError, match=message) as caught:
        _convert(refused_models(changes), target, tmp_path / "out")
    assert "\n" not in str(caught.value)
    assert not os.path.exists(tmp_path / "out")


def test_convert_to_on_the_command_line(tiny, tmp_path, cli):
    directory, _, _, _ = tiny
    code, out, err = cli("convert", "--init", directory, "--to", "hf", "--output", tmp_path / "hf")
    assert code == 0 and "wrote" in out and (tmp_path / "hf" / "model.safetensors").exists()
    notes = [line for line in helpers.error_lines(err) if ": note: " in line]
    assert len(notes) == 1 and "transformers' tokenizers cannot follow every rule of albert_tf's" in notes[0], err
    code, _, err = cli("convert", "--init", directory, "--output", tmp_path / "x")
    assert code == 2 and helpers.error_lines(err) == [
        "albert-tf convert: error: --init goes with --to hf|keras-hub (importing takes --release or "
        "--from/--checkpoint)"]
    code, _, err = cli("convert", "--to", "keras-hub", "--init", directory, "--from", "hf", "--output", tmp_path / "y")
    assert code == 2 and "drop --from" in err


@pytest.mark.slow
def test_albert_base_shaped_random_model_matches_on_both_sides(tmp_path):
    """albert_base's shapes (30,000 pieces, E 128, H 768, 12 layers, one group) with random weights (LayerNorm gains
    around 1, the rest N(0, 0.02) as the initializer): transformers and keras-hub within 1e-5 of albert_tf."""
    keras_hub = _require("keras_hub")
    from albert_tf import AlbertConfig, AlbertPretrainer  # pylint: disable=import-outside-toplevel

    model = AlbertPretrainer(AlbertConfig.from_preset("albert_base"))
    rng = np.random.default_rng(0)
    for variable in model.weights:
        value = rng.normal(0.0, 0.02, variable.shape) + (1.0 if "gamma" in variable.path else 0.0)
        variable.assign(value.astype(np.float32))
    model.save_pretrained(str(tmp_path / "model"))
    inputs = {"input_word_ids": rng.integers(5, 30000, [2, 128]).astype(np.int32),
              "input_mask": np.ones([2, 128], np.int32), "input_type_ids": np.zeros([2, 128], np.int32),
              "masked_lm_positions": rng.integers(1, 100, [2, 20]).astype(np.int32)}
    inputs["input_mask"][1, 90:] = 0
    inputs["input_type_ids"][:, 60:] = 1
    ours = {k: np.asarray(v) for k, v in model(inputs, training=False).items() if k != "encoder_outputs"}
    _convert(tmp_path / "model", "hf", tmp_path / "hf")
    hf_diffs = _max_diffs(_hf_outputs(str(tmp_path / "hf"), inputs), ours)
    _convert(tmp_path / "model", "keras-hub", tmp_path / "kh")
    backbone = keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "kh"))
    theirs = backbone({"token_ids": inputs["input_word_ids"], "segment_ids": inputs["input_type_ids"],
                       "padding_mask": inputs["input_mask"]})
    keras_hub_diffs = _max_diffs({k: np.asarray(v) for k, v in theirs.items()}, ours)
    print(f"albert_base-shaped: transformers {hf_diffs}, keras-hub {keras_hub_diffs}")
    assert max(hf_diffs.values()) < 1e-5 and max(keras_hub_diffs.values()) < 1e-5, (hf_diffs, keras_hub_diffs)


# ------------------------------------------------------------------------------------------------ one call
def test_load_pretrained_takes_any_handle_in_one_call(tiny, tiny_export, tmp_path, monkeypatch):
    """albert_tf.load_pretrained: a Hugging Face directory is read as it is (nothing written into it, nor into the
    cache) and gives albert_tf's own outputs; an export gives its encoder; a hub id (hf:OWNER/NAME) is read from
    what huggingface_hub fetched (here a stand-in: no network in tests)."""
    import albert_tf  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints import releases  # pylint: disable=import-outside-toplevel

    directory, _, inputs, ours = tiny
    monkeypatch.setenv("ALBERT_TF_CACHE", str(tmp_path / "cache"))
    hf_dir = _convert(directory, "hf", tmp_path / "hf").output
    before = sorted(os.listdir(hf_dir))
    model = albert_tf.load_pretrained(hf_dir)
    assert isinstance(model, albert_tf.AlbertPretrainer) and sorted(os.listdir(hf_dir)) == before
    assert not os.path.exists(tmp_path / "cache")
    got = model(inputs, training=False)
    for name in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        np.testing.assert_allclose(np.asarray(got[name]), ours[name], atol=1e-5, err_msg=name)

    encoder = albert_tf.load_pretrained(tiny_export)
    assert isinstance(encoder, albert_tf.AlbertEncoder)
    np.testing.assert_allclose(np.asarray(encoder(inputs, training=False)["pooled_output"]), ours["pooled_output"],
                               atol=1e-5)

    asked = []
    monkeypatch.setattr(releases, "fetch_hf", lambda name: asked.append(name) or hf_dir)
    model = albert_tf.AlbertPretrainer.from_pretrained("hf:someone/albert-tiny")
    assert asked == ["hf:someone/albert-tiny"]
    np.testing.assert_allclose(np.asarray(model(inputs, training=False)["mlm_logits"]), ours["mlm_logits"], atol=1e-5)
    with pytest.raises(FileNotFoundError, match="a released model's name"):
        albert_tf.load_pretrained(str(tmp_path / "nothing"))

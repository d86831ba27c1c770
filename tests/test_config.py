"""AlbertConfig: the original albert_config.json format, validation errors naming the field."""
import json

import pytest

from albert_tf import AlbertConfig, configs_dir
from albert_tf.config import load_config

RELEASED_BASE_V2 = {  # the layout of google-research/albert's albert_base v2 albert_config.json
    "attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0, "embedding_size": 128,
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 512,
    "num_attention_heads": 12, "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0,
    "gap_size": 0, "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1, "type_vocab_size": 2,
    "vocab_size": 30000, "layers_to_keep": [],
}


def test_released_file_with_unused_keys_loads(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(RELEASED_BASE_V2))
    cfg = AlbertConfig.from_json_file(str(path))
    assert cfg == AlbertConfig.from_preset("albert_base")
    assert cfg.hidden_size == 768 and cfg.sharing == "all"


def test_json_round_trip_and_original_format(tmp_path):
    cfg = AlbertConfig.from_preset("albert_xxlarge")
    path = tmp_path / "albert_config.json"
    cfg.to_json_file(str(path))
    written = json.loads(path.read_text())
    assert "sharing" not in written  # "all" is the original: the file stays loadable by the original code
    assert set(written) == set(RELEASED_BASE_V2) - {"net_structure_type", "gap_size", "num_memory_blocks",
                                                    "down_scale_factor", "layers_to_keep"}
    assert AlbertConfig.from_json_file(str(path)) == cfg
    other = cfg.replace(sharing="ffn")
    other.to_json_file(str(path))
    assert json.loads(path.read_text())["sharing"] == "ffn" and AlbertConfig.from_json_file(str(path)) == other
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_presets_match_the_paper():
    # ALBERT paper Table 1: (layers, hidden, embedding)
    expected = {"albert_base": (12, 768, 128), "albert_large": (24, 1024, 128),
                "albert_xlarge": (24, 2048, 128), "albert_xxlarge": (12, 4096, 128)}
    for name, (layers, hidden, emb) in expected.items():
        cfg = AlbertConfig.from_preset(name)
        assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.embedding_size) == (layers, hidden, emb)
        assert cfg.intermediate_size == 4 * hidden and cfg.hidden_dropout_prob == 0.0
    assert load_config(f"{configs_dir()}/albert_tiny.json") == AlbertConfig.from_preset("albert_tiny")


@pytest.mark.parametrize("changes,field,words", [
    ({"hidden_size": 100}, "hidden_size", "not divisible by num_attention_heads=12"),
    ({"num_hidden_layers": 12, "num_hidden_groups": 5}, "num_hidden_layers", "not divisible by num_hidden_groups=5"),
    ({"intermediate_size": 0}, "intermediate_size", "positive integer"),
    ({"vocab_size": -3}, "vocab_size", "positive integer"),
    ({"embedding_size": 12.5}, "embedding_size", "positive integer"),
    ({"hidden_dropout_prob": 1.0}, "hidden_dropout_prob", "[0, 1)"),
    ({"attention_probs_dropout_prob": -0.1}, "attention_probs_dropout_prob", "[0, 1)"),
    ({"hidden_act": "sigmoidish"}, "hidden_act", "expected one of"),
    ({"sharing": "everything"}, "sharing", "expected one of all, attention, ffn, none"),
])
def test_validation_errors_name_field_and_file(tmp_path, changes, field, words):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**RELEASED_BASE_V2, **changes}))
    with pytest.raises(ValueError) as e:
        AlbertConfig.from_json_file(str(path))
    assert f"field '{field}'" in str(e.value) and words in str(e.value) and str(path) in str(e.value)


def test_unknown_key_is_named(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**RELEASED_BASE_V2, "hiden_size": 768}))
    with pytest.raises(ValueError, match=r"unknown AlbertConfig key\(s\) 'hiden_size'"):
        AlbertConfig.from_json_file(str(path))


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such config file"):
        AlbertConfig.from_json_file(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        AlbertConfig.from_json_file(str(bad))
    with pytest.raises(ValueError, match="unknown preset 'albert_huge'"):
        AlbertConfig.from_preset("albert_huge")


def test_direct_construction_validates():
    with pytest.raises(ValueError, match="field 'hidden_size'"):
        AlbertConfig(hidden_size=10, num_attention_heads=3)
    assert AlbertConfig(hidden_dropout_prob=0.1).without_dropout().hidden_dropout_prob == 0.0
    assert [AlbertConfig(num_hidden_layers=12, num_hidden_groups=3).group_of_layer(i) for i in range(12)] == \
        [0] * 4 + [1] * 4 + [2] * 4

"""albert_tf.checkpoints.pretrained: the pretrained-model directory's layout, restore errors, atomic saves, vocabulary checks."""
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.checkpoints import pretrained
from albert_tf.text import vocabulary
from helpers import SMALL, make_inputs

CFG = AlbertConfig.from_dict(dict(SMALL, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = AlbertPretrainer(CFG)
    directory = str(tmp_path_factory.mktemp("saved") / "model")
    model.save_pretrained(directory)
    return model, directory


def test_layout(saved):
    _, directory = saved
    files = sorted(os.listdir(directory))
    assert pretrained.CONFIG_FILE in files and "checkpoint" in files
    assert pretrained.read_config(directory) == CFG
    assert pretrained.latest_checkpoint(directory).endswith("ckpt-0")
    assert vocabulary.spm_model_path(directory) is None
    names = [n for n, _ in tf.train.list_variables(pretrained.latest_checkpoint(directory))]
    assert any(n.startswith("model/encoder/") for n in names) and any(n.startswith("model/mlm_head/") for n in names)
    assert not any(".tmp-" in n for n in os.listdir(os.path.dirname(directory)))  # no temp directory left


def test_round_trip_and_encoder_part(saved):
    model, directory = saved
    inputs = make_inputs(SMALL)
    want = model(inputs)
    again = AlbertPretrainer.from_pretrained(directory)
    np.testing.assert_array_equal(again(inputs)["mlm_logits"], want["mlm_logits"])
    encoder = AlbertEncoder.from_pretrained(directory)  # the encoder part of a pretrainer's checkpoint
    np.testing.assert_array_equal(encoder(inputs)["pooled_output"], want["pooled_output"])
    # An encoder saved on its own restores as the encoder part too.
    alone = os.path.join(os.path.dirname(directory), "encoder_alone")
    encoder.save_pretrained(alone)
    np.testing.assert_array_equal(AlbertEncoder.from_pretrained(alone)(inputs)["pooled_output"],
                                  want["pooled_output"])


def test_restore_lists_every_misshaped_missing_and_extra_tensor(saved):
    _, directory = saved
    other = AlbertPretrainer(CFG.replace(intermediate_size=48))  # every FFN kernel and bias has another shape
    with pytest.raises(ValueError) as info:
        pretrained.restore(other, directory)
    message = str(info.value)
    assert message.startswith(pretrained.latest_checkpoint(directory))
    # 2 groups x 2 inner blocks, each with 3 tensors of width I: intermediate kernel and bias, output kernel
    assert message.count("has shape") == 4 * 3
    assert "expects (16, 48)" in message
    # An encoder restored as a whole model from a pretrainer's checkpoint: nothing lands where it expects.
    with pytest.raises(ValueError, match="has no tensor in the checkpoint"):
        pretrained.restore(AlbertEncoder(CFG), directory)
    # A model with fewer layers: the checkpoint holds weights that have no home.
    fewer = AlbertPretrainer(CFG.replace(num_hidden_groups=1, num_hidden_layers=2))
    with pytest.raises(ValueError, match="matches no model weight"):
        pretrained.restore(fewer, directory)


def test_missing_directory_and_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such pretrained-model directory"):
        pretrained.read_config(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="no albert_config.json"):
        pretrained.read_config(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no TF checkpoint"):
        pretrained.latest_checkpoint(str(tmp_path))


def test_save_is_atomic_and_refuses_a_non_empty_directory(tmp_path, monkeypatch):
    model = AlbertEncoder(CFG)
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("x")
    with pytest.raises(ValueError, match="exists and is not empty"):
        pretrained.save(model, str(target))

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(tf.train.CheckpointManager, "save", fail)
    with pytest.raises(RuntimeError):
        pretrained.save(model, str(tmp_path / "new"))
    assert sorted(os.listdir(tmp_path)) == ["out"]  # neither the directory nor its temporary twin


def test_check_vocabulary_and_config(tmp_path, tiny_spm_model):
    vocabulary.check_vocabulary(CFG.replace(vocab_size=300), tiny_spm_model)
    with pytest.raises(ValueError, match="has 300 pieces but the config's vocab_size is 50"):
        vocabulary.check_vocabulary(CFG, tiny_spm_model)
    pretrained.write_files(str(tmp_path), CFG, tiny_spm_model)
    assert open(tmp_path / "spm.model", "rb").read() == open(tiny_spm_model, "rb").read()
    pretrained.check_config(str(tmp_path), CFG)
    with pytest.raises(ValueError, match="differs in hidden_size"):
        pretrained.check_config(str(tmp_path), CFG.replace(hidden_size=32))

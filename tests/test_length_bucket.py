"""finetune's --length-bucket: batches padded only to their longest example (rounded up), with the model's outputs
those of the full-length batch, and the flag's resolution (0 on TPU)."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling.base import trim_padding
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf import AlbertClassifier, AlbertMultipleChoice
from albert_tf.text import AlbertTokenizer
from albert_tf.tasks.pipelines import pack_dataset
from albert_tf.tasks import budget as budgets
from albert_tf.settings.finetune_config import FinetuneConfig
from albert_tf.training import finetuning  # noqa: F401
from helpers import SMALL


def _batch(lengths, seq_length, vocab_size, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, (len(lengths), seq_length)).astype("int32")
    mask = (np.arange(seq_length)[None, :] < np.array(lengths)[:, None]).astype("int32")
    types = ((np.arange(seq_length)[None, :] >= np.array(lengths)[:, None] // 2) & (mask > 0)).astype("int32")
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types}


@pytest.mark.parametrize("lengths, bucket, expected", [([5, 9, 3], 8, 16), ([5, 8, 3], 8, 8), ([30, 2], 8, 32),
                                                       ([1, 1], 16, 16), ([17], 16, 32)])
def test_trim_padding_keeps_the_longest_example_rounded_up(lengths, bucket, expected):
    batch = _batch(lengths, 32, 50)
    batch["start_positions"] = np.array(lengths[:1] * len(lengths), "int32")  # not a [.., L] input: untouched
    trimmed = trim_padding({k: tf.constant(v) for k, v in batch.items()}, bucket)
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(trimmed[name].numpy(), batch[name][:, :expected])
    np.testing.assert_array_equal(trimmed["start_positions"].numpy(), batch["start_positions"])


def test_trimmed_batches_give_the_full_length_outputs():
    config = AlbertConfig(**SMALL)
    classifier = AlbertClassifier(AlbertEncoder(config), 3)
    batch = _batch([5, 11, 3, 7], 32, SMALL["vocab_size"], seed=1)
    full = classifier(batch, training=False).numpy()
    trimmed = trim_padding({k: tf.constant(v) for k, v in batch.items()}, 16)
    assert trimmed["input_mask"].shape == (4, 16)
    np.testing.assert_allclose(classifier(trimmed, training=False).numpy(), full, atol=1e-5)
    seq_full = classifier.encoder(batch, training=False)["sequence_output"].numpy()
    seq_trim = classifier.encoder(trimmed, training=False)["sequence_output"].numpy()
    real = batch["input_mask"][:, :16] > 0
    np.testing.assert_allclose(seq_trim[real], seq_full[:, :16][real], atol=1e-5)
    # multiple choice: [B, C, L], trimmed on the last axis to the longest choice of the batch
    chooser = AlbertMultipleChoice(classifier.encoder, 2)
    choices = {k: v.reshape(2, 2, 32) for k, v in batch.items()}
    trimmed = trim_padding({k: tf.constant(v) for k, v in choices.items()}, 16)
    assert trimmed["input_word_ids"].shape == (2, 2, 16)
    np.testing.assert_allclose(chooser(trimmed, training=False).numpy(), chooser(choices, training=False).numpy(),
                               atol=1e-5)


def test_pack_dataset_pads_to_the_bucket_and_keeps_the_ids(tiny_spm_model):
    tokenizer = AlbertTokenizer(tiny_spm_model)
    texts = np.array(["the river runs", "a long sentence " * 8, "hi", "x"], dtype=object).astype(str)
    labels = np.array([0, 1, 0, 1], np.int32)
    order = np.array([2, 3, 0, 1], np.int64)  # batch 1: two short texts; batch 2: one long
    batches = list(pack_dataset(tokenizer, 64, texts, None, labels, order, 2, length_bucket=16))
    full = tokenizer.pack(list(texts[order]), None, seq_length=64)
    lengths = full["input_mask"].sum(-1)
    for i, (features, batch_labels) in enumerate(batches):
        want = min(64, -(-int(lengths[2 * i:2 * i + 2].max()) // 16) * 16)
        assert features["input_word_ids"].shape == (2, want)
        np.testing.assert_array_equal(features["input_word_ids"].numpy(), full["input_word_ids"][2 * i:2 * i + 2,
                                                                                              :want])
        np.testing.assert_array_equal(batch_labels.numpy(), labels[order[2 * i:2 * i + 2]])
    assert batches[0][0]["input_word_ids"].shape[1] < batches[1][0]["input_word_ids"].shape[1]
    fixed = list(pack_dataset(tokenizer, 64, texts, None, labels, order, 2))
    assert all(f["input_word_ids"].shape == (2, 64) for f, _ in fixed)


def test_length_bucket_flag_resolution():
    assert budgets.resolve_length_bucket(None, on_tpu=False) == 16
    assert budgets.resolve_length_bucket(None, on_tpu=True) == 0
    assert budgets.resolve_length_bucket(0, on_tpu=True) == 0
    assert budgets.resolve_length_bucket(32, on_tpu=False) == 32
    # what cannot be resolved is refused when the config is made
    required = dict(task="sst2", data_dir="d", init="i", output="o")
    with pytest.raises(ValueError, match="--length-bucket 16: a TPU's compiled step needs static shapes"):
        FinetuneConfig(**required, tpu="local", length_bucket=16)
    with pytest.raises(ValueError, match="--length-bucket must be 0 or positive, got -1"):
        FinetuneConfig(**required, length_bucket=-1)

"""pretraining_dataset: batch layout, values, sharding, determinism, order, errors that name the file."""
import base64
import collections
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.create_pretraining_data import create_pretraining_data
from albert_tf.data import dataset as dataset_module
from albert_tf.data.dataset import pretraining_dataset
from albert_tf.data.instances import InstanceOptions
from albert_tf.text import CLS_ID, MASK_ID, SEP_ID

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


SEQ, PRED, VOCAB = 32, 5, 500


# Two records from each of two files written by google-research/albert's create_pretraining_data.py itself (run under
# TF 2.21's compat.v1 on tests/helpers.write_corpus(num_docs=4, min_sents=3, max_sents=5, seed=3) with the tiny
# SentencePiece model, --max_seq_length=32 --max_predictions_per_seq=5 --random_seed=7, and --masked_lm_prob=0.15 /
# 0): TFRecord framing included, base64.
ORIGINAL_MASKED_RECORDS = (
    "bAEAAAAAAADzCkAPCukCCiAKE21hc2tlZF9sbV9wb3NpdGlvbnMSCRoHCgUNDhITFQozCgtzZWdtZW50X2lkcxIkGiIKIAAAAAAAAAABAQEBAQ"
    "EBAQEBAQEBAQEBAQEBAQEBAQEBCh0KFG5leHRfc2VudGVuY2VfbGFiZWxzEgUaAwoBAAo2Cg50b2tlbl9ib3VuZGFyeRIkGiIKIAEBAQEBAQEA"
    "AAAAAQEBAQEBAQEBAQEBAQEBAQEAAQEBCjgKCWlucHV0X2lkcxIrGikKJwIzSBdVBQOkAqsC/QHhAQxfBARXL3UEBBcETIYBFQwgsgFOoQEGAw"
    "ocCg1tYXNrZWRfbG1faWRzEgsaCQoHmQEFhQFMCwoyCgppbnB1dF9tYXNrEiQaIgogAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEK"
    "LQoRbWFza2VkX2xtX3dlaWdodHMSGBIWChQAAIA/AACAPwAAgD8AAIA/AACAPz07/Z9xAQAAAAAAAJpndysK7gIKIAoTbWFza2VkX2xtX3Bvc2"
    "l0aW9ucxIJGgcKBQcICRobCjMKC3NlZ21lbnRfaWRzEiQaIgogAAAAAAAAAAAAAAAAAAEBAQEBAQEBAQEBAQEBAQEBAQEKHQoUbmV4dF9zZW50"
    "ZW5jZV9sYWJlbHMSBRoDCgEBCjYKDnRva2VuX2JvdW5kYXJ5EiQaIgogAQEBAQEBAQEBAAEBAQAAAAABAQEBAQEBAQEBAQEBAQEKPgoJaW5wdX"
    "RfaWRzEjEaLwotAqoBgAF5JoYBbQSyAU4zBQOrAqgCoQLhAYIBBYIBXTwdW1ihAQSRAZMBQVwDChsKDW1hc2tlZF9sbV9pZHMSChoICgZWsgFO"
    "DxYKMgoKaW5wdXRfbWFzaxIkGiIKIAEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBCi0KEW1hc2tlZF9sbV93ZWlnaHRzEhgSFgoUAA"
    "CAPwAAgD8AAIA/AACAPwAAgD9urrq1"
)
ORIGINAL_UNMASKED_RECORDS = (
    "bQEAAAAAAAA7nXY5CuoCCjIKCmlucHV0X21hc2sSJBoiCiABAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQodChRuZXh0X3NlbnRlbm"
    "NlX2xhYmVscxIFGgMKAQAKIAoTbWFza2VkX2xtX3Bvc2l0aW9ucxIJGgcKBQAAAAAACi0KEW1hc2tlZF9sbV93ZWlnaHRzEhgSFgoUAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAKGgoNbWFza2VkX2xtX2lkcxIJGgcKBQAAAAAACjYKDnRva2VuX2JvdW5kYXJ5EiQaIgogAQEBAQEBAQEBAQABAQEBAA"
    "EBAQEBAQEBAQEBAQEBAQEKOwoJaW5wdXRfaWRzEi4aLAoqAlsvHZoBTWwFmgHDAbcBpQFcR5YBqgIDggFdPB1bWKEBDxaTAUFcbTwDCjMKC3Nl"
    "Z21lbnRfaWRzEiQaIgogAAAAAAAAAAAAAAAAAAAAAAABAQEBAQEBAQEBAQEBAQEKU+o0bwEAAAAAAABqgfEECuwCCjIKCmlucHV0X21hc2sSJB"
    "oiCiABAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQodChRuZXh0X3NlbnRlbmNlX2xhYmVscxIFGgMKAQAKIAoTbWFza2VkX2xtX3Bv"
    "c2l0aW9ucxIJGgcKBQAAAAAACi0KEW1hc2tlZF9sbV93ZWlnaHRzEhgSFgoUAAAAAAAAAAAAAAAAAAAAAAAAAAAKGgoNbWFza2VkX2xtX2lkcx"
    "IJGgcKBQAAAAAACjYKDnRva2VuX2JvdW5kYXJ5EiQaIgogAQEBAQEBAQEBAQEBAQEBAQEBAQEAAQEBAQEBAAAAAAEKPQoJaW5wdXRfaWRzEjAa"
    "LgosAnp0gAFEN3SXAYgBTS0MFhoGAwZQugHDAbcBYjZAMp4BlgGkAqsC/QHhAQMKMwoLc2VnbWVudF9pZHMSJBoiCiAAAAAAAAAAAAAAAAAAAA"
    "AAAQEBAQEBAQEBAQEBAQEBAfdj+LE="
)


def original_record(rng, *, record_id, seq=SEQ, pred=PRED, masked=True):
    """One record laid out as google-research/albert's create_pretraining_data.py writes it (same feature order).

    `record_id` is recoverable from the record: the SOP label is record_id % 2 and segment A has 2 + record_id % 20
    tokens... so tests identify records by (input_type_ids, label). Returns (features dict of lists, Example bytes).
    """
    length = int(rng.integers(seq // 2, seq + 1))
    split = 2 + record_id % (length - 4)  # index of the first [SEP]
    ids = rng.integers(5, VOCAB, size=length).tolist()
    ids[0], ids[split], ids[length - 1] = CLS_ID, SEP_ID, SEP_ID
    segment = [0] * (split + 1) + [1] * (length - split - 1)
    boundary = (rng.random(length) < 0.7).astype(int).tolist()
    boundary[0] = boundary[1] = boundary[split] = boundary[split + 1] = boundary[length - 1] = 1
    positions, labels = [], []
    if masked:
        positions = sorted(rng.choice(np.arange(1, length - 1), size=min(pred, 3), replace=False).tolist())
        labels = [ids[p] for p in positions]
        for p in positions:
            ids[p] = MASK_ID
    pad, extra = seq - length, pred - len(positions)
    values = collections.OrderedDict([
        ("input_ids", ids + [0] * pad),
        ("input_mask", [1] * length + [0] * pad),
        ("segment_ids", segment + [0] * pad),
        ("token_boundary", boundary + [0] * pad),
        ("masked_lm_positions", positions + [0] * extra),
        ("masked_lm_ids", labels + [0] * extra),
        ("masked_lm_weights", [1.0] * len(positions) + [0.0] * extra),
        ("next_sentence_labels", [record_id % 2]),
    ])
    feats = collections.OrderedDict()
    for name, v in values.items():
        if name == "masked_lm_weights":
            feats[name] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        else:
            feats[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    return values, tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def write_files(directory, num_files, per_file, *, seed=0, **kwargs):
    """Writes num_files TFRecord files; returns (paths, list of per-file lists of feature dicts)."""
    rng = np.random.default_rng(seed)
    paths, contents = [], []
    for f in range(num_files):
        path = os.path.join(directory, f"part-{f:03d}.tfrecord")
        rows = []
        with tf.io.TFRecordWriter(path) as writer:
            for r in range(per_file):
                values, data = original_record(rng, record_id=f * per_file + r, **kwargs)
                writer.write(data)
                rows.append(values)
        paths.append(path)
        contents.append(rows)
    return paths, contents


def collect(dataset, num_batches=None):
    batches = list(dataset.take(num_batches) if num_batches else dataset)
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}


def real_rows(batch):
    """The rows of eval batches that are records (padding has sentence_order_weights 0)."""
    keep = batch["sentence_order_weights"] > 0
    return {k: v[keep] for k, v in batch.items()}


def fingerprint(batch, row):
    """Identifies a record (ids outside masked positions are untouched, type ids never change)."""
    return tuple(batch["input_type_ids"][row].tolist()) + (int(batch["sentence_order_labels"][row]),
                                                            int(batch["input_mask"][row].sum()))


def test_batch_names_dtypes_static_shapes(tmp_path):
    for dynamic in (False, True):
        directory = tmp_path / str(dynamic)
        directory.mkdir()
        write_files(str(directory), 2, 10, masked=not dynamic)
        ds = pretraining_dataset(str(directory / "*.tfrecord"), seq_length=SEQ, max_predictions=PRED, batch_size=4,
                                 is_training=True, seed=1, dynamic_masking=dynamic, vocab_size=VOCAB)
        spec = ds.element_spec
        expected = {
            "input_word_ids": ([4, SEQ], tf.int32), "input_mask": ([4, SEQ], tf.int32),
            "input_type_ids": ([4, SEQ], tf.int32), "masked_lm_positions": ([4, PRED], tf.int32),
            "masked_lm_ids": ([4, PRED], tf.int32), "masked_lm_weights": ([4, PRED], tf.float32),
            "sentence_order_labels": ([4], tf.int32),
        }
        assert set(spec) == set(expected)
        for name, (shape, dtype) in expected.items():
            assert spec[name].shape.as_list() == shape and spec[name].dtype == dtype, name
        batch = next(iter(ds))
        assert batch["input_word_ids"].shape == (4, SEQ)


def test_eval_reads_every_record_once_in_order_with_exact_values(tmp_path):
    paths, contents = write_files(str(tmp_path), 3, 7)
    ds = pretraining_dataset([paths[2], str(tmp_path / "part-00[01].tfrecord")], seq_length=SEQ,
                             max_predictions=PRED, batch_size=4, is_training=False)
    batches = list(ds)
    assert [b["input_word_ids"].shape[0] for b in batches] == [4] * 6  # 21 records + 3 padding examples
    assert ds.element_spec["input_word_ids"].shape.as_list() == [4, SEQ]  # static, as a TPU needs
    full = collect(ds)
    np.testing.assert_array_equal(full["sentence_order_weights"], [1.0] * 21 + [0.0] * 3)
    for name in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_weights", "sentence_order_labels"):
        assert not full[name][21:].any(), name  # padding: all zero, weights included
    got = {k: v[:21] for k, v in full.items()}
    rows = [r for file_rows in contents for r in file_rows]  # files in sorted order, records in file order
    np.testing.assert_array_equal(got["input_word_ids"], [r["input_ids"] for r in rows])
    np.testing.assert_array_equal(got["input_mask"], [r["input_mask"] for r in rows])
    np.testing.assert_array_equal(got["input_type_ids"], [r["segment_ids"] for r in rows])
    np.testing.assert_array_equal(got["masked_lm_positions"], [r["masked_lm_positions"] for r in rows])
    np.testing.assert_array_equal(got["masked_lm_ids"], [r["masked_lm_ids"] for r in rows])
    np.testing.assert_array_equal(got["masked_lm_weights"], [r["masked_lm_weights"] for r in rows])
    np.testing.assert_array_equal(got["sentence_order_labels"], [r["next_sentence_labels"][0] for r in rows])
    # A batch larger than the parse group: same records, same order.
    whole = list(pretraining_dataset(str(tmp_path / "*.tfrecord"), seq_length=SEQ, max_predictions=PRED,
                                     batch_size=300, is_training=False))
    assert len(whole) == 1
    np.testing.assert_array_equal(whole[0]["input_word_ids"].numpy()[:21], got["input_word_ids"])
    assert whole[0]["sentence_order_weights"].numpy().sum() == 21


def test_training_shuffles_and_repeats(tmp_path, monkeypatch):
    paths, contents = write_files(str(tmp_path), 3, 8)
    in_order = np.array([r["input_ids"] for rows in contents for r in rows])
    ds = pretraining_dataset(paths, seq_length=SEQ, max_predictions=PRED, batch_size=8, is_training=True, seed=3)
    got = collect(ds, 30)  # 240 records = 10 epochs of 24, from one shuffle window of 10,000 records
    assert {tuple(r) for r in got["input_word_ids"].tolist()} == {tuple(r) for r in in_order.tolist()}
    assert not np.array_equal(got["input_word_ids"][:24], in_order)
    # A window of two epochs holds each record exactly twice, in a new order each window.
    monkeypatch.setattr(dataset_module, "_RECORD_SHUFFLE_WINDOW", 48)
    got = collect(pretraining_dataset(paths, seq_length=SEQ, max_predictions=PRED, batch_size=8, is_training=True,
                                      seed=3), 12)["input_word_ids"]
    windows = [collections.Counter(tuple(r) for r in got[i:i + 48].tolist()) for i in (0, 48)]
    assert all(set(w.values()) == {2} and len(w) == 24 for w in windows)
    assert not np.array_equal(got[:48], got[48:])


def test_input_context_shards_files_disjointly(tmp_path):
    paths, contents = write_files(str(tmp_path), 4, 6)
    owner = {}
    for f, rows in enumerate(contents):
        for r in rows:
            owner[tuple(r["input_ids"])] = f
    seen = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                             num_replicas_in_sync=4)
        ds = pretraining_dataset(str(tmp_path / "*.tfrecord"), seq_length=SEQ, max_predictions=PRED,
                                 batch_size=8, is_training=True, input_context=context, seed=0)
        assert ds.element_spec["input_word_ids"].shape.as_list() == [2, SEQ]  # global 8 over 4 replicas
        got = collect(ds, 12)
        seen.append({owner[tuple(r)] for r in got["input_word_ids"].tolist()})
    assert seen[0] == {0, 2} and seen[1] == {1, 3}


def test_too_few_files_for_pipelines(tmp_path):
    write_files(str(tmp_path), 1, 2)
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0, num_replicas_in_sync=2)
    with pytest.raises(ValueError, match="1 file.*2 input pipelines"):
        pretraining_dataset(str(tmp_path / "*"), seq_length=SEQ, max_predictions=PRED, batch_size=2,
                            is_training=True, input_context=context)


@pytest.mark.parametrize("dynamic", [False, True])
def test_deterministic_given_seed(tmp_path, dynamic):
    write_files(str(tmp_path), 3, 10, masked=not dynamic)
    pattern = str(tmp_path / "*.tfrecord")

    def make(seed):
        return collect(pretraining_dataset(pattern, seq_length=SEQ, max_predictions=PRED, batch_size=4,
                                           is_training=True, seed=seed, dynamic_masking=dynamic, vocab_size=VOCAB),
                       10)

    first, again, other = make(7), make(7), make(8)
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    assert not np.array_equal(first["input_word_ids"], other["input_word_ids"])


def test_dynamic_masking_fresh_each_epoch(tmp_path):
    paths, contents = write_files(str(tmp_path), 1, 12, masked=False)
    ds = pretraining_dataset(paths, seq_length=SEQ, max_predictions=PRED, batch_size=4, is_training=True, seed=0,
                             dynamic_masking=True, vocab_size=VOCAB)
    got = collect(ds, 24)  # 8 epochs of 12 records (the shuffle buffer spans epochs: counts vary a little)
    by_record = collections.defaultdict(list)
    originals = {}
    for rows in contents:
        for r in rows:
            originals[tuple(r["segment_ids"]) + (r["next_sentence_labels"][0], sum(r["input_mask"]))] = r
    for row in range(len(got["input_word_ids"])):
        record = originals[fingerprint(got, row)]
        weights = got["masked_lm_weights"][row]
        positions = got["masked_lm_positions"][row][weights > 0]
        restored = got["input_word_ids"][row].copy()
        restored[positions] = got["masked_lm_ids"][row][weights > 0]
        np.testing.assert_array_equal(restored, record["input_ids"])  # labels are the original ids
        assert 1 <= weights.sum() <= min(PRED, max(1, round(sum(record["input_mask"]) * 0.15)))
        by_record[fingerprint(got, row)].append(tuple(positions.tolist()))
    assert len(by_record) == 12 and all(len(v) >= 3 for v in by_record.values())
    assert sum(len(set(v)) > 1 for v in by_record.values()) >= 10  # new masks across epochs


def test_pattern_matching_nothing_is_named(tmp_path):
    write_files(str(tmp_path), 1, 2)
    missing = str(tmp_path / "nope-*.tfrecord")
    with pytest.raises(FileNotFoundError, match="nope-"):
        pretraining_dataset([str(tmp_path / "*.tfrecord"), missing], seq_length=SEQ, max_predictions=PRED,
                            batch_size=2, is_training=False)


@pytest.mark.parametrize("seq,pred,feature,found,expected", [
    (SEQ + 8, PRED, "input_ids", SEQ, SEQ + 8),
    (SEQ, PRED + 2, "masked_lm_positions", PRED, PRED + 2),
])
def test_length_mismatch_in_first_record_names_file_feature_lengths(tmp_path, seq, pred, feature, found, expected):
    paths, _ = write_files(str(tmp_path), 2, 3)
    with pytest.raises(ValueError) as err:
        pretraining_dataset(str(tmp_path / "*"), seq_length=seq, max_predictions=pred, batch_size=2,
                            is_training=True)
    message = str(err.value)
    assert paths[0] in message and repr(feature) in message
    assert f"length {found}, expected {expected}" in message


def test_length_mismatch_in_a_later_record_names_file(tmp_path):
    good, _ = write_files(str(tmp_path), 1, 4)
    bad = str(tmp_path / "part-bad.tfrecord")
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(bad) as writer:
        writer.write(original_record(rng, record_id=0)[1])
        writer.write(original_record(rng, record_id=1, seq=SEQ - 4)[1])
    ds = pretraining_dataset([good[0], bad], seq_length=SEQ, max_predictions=PRED, batch_size=2, is_training=False)
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        list(ds)
    message = str(err.value)
    assert bad in message and re.search(r"Key: (input_ids|input_mask|segment_ids)", message)
    assert f"Values size: {SEQ - 4} but output shape: [{SEQ}]" in message


def test_dynamic_masking_rejects_masked_records(tmp_path):
    write_files(str(tmp_path), 1, 2, masked=True)
    with pytest.raises(ValueError, match="already masked.*--no-mask"):
        pretraining_dataset(str(tmp_path / "*"), seq_length=SEQ, max_predictions=PRED, batch_size=2,
                            is_training=True, dynamic_masking=True, vocab_size=VOCAB)


@pytest.mark.parametrize("damage", ["truncate_tail", "corrupt_middle"])
def test_damaged_file_names_file(tmp_path, damage):
    paths, _ = write_files(str(tmp_path), 2, 6)
    data = bytearray(open(paths[1], "rb").read())
    if damage == "truncate_tail":
        data = data[:-10]
    else:
        data[len(data) // 2] ^= 0xFF
    with open(paths[1], "wb") as f:
        f.write(bytes(data))
    ds = pretraining_dataset(paths, seq_length=SEQ, max_predictions=PRED, batch_size=2, is_training=True, seed=0)
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        for _ in ds.take(30):
            pass
    assert paths[1] in str(err.value) and "truncated or corrupt" in str(err.value)
    # Eval counts the records up front (no index beside these files): the damage is found there.
    with pytest.raises(ValueError, match=f"{re.escape(paths[1])}: truncated or corrupt TFRecord file"):
        pretraining_dataset(paths, seq_length=SEQ, max_predictions=PRED, batch_size=2, is_training=False)


def test_file_truncated_in_first_record_fails_up_front(tmp_path):
    paths, _ = write_files(str(tmp_path), 1, 2)
    data = open(paths[0], "rb").read()
    with open(paths[0], "wb") as f:
        f.write(data[:30])
    with pytest.raises(ValueError, match=f"{paths[0]}: truncated or corrupt"):
        pretraining_dataset(paths, seq_length=SEQ, max_predictions=PRED, batch_size=2, is_training=True)


def test_reads_records_written_by_the_original_tool(tmp_path):
    for blob, dynamic in ((ORIGINAL_MASKED_RECORDS, False), (ORIGINAL_UNMASKED_RECORDS, True)):
        path = str(tmp_path / f"original-{dynamic}.tfrecord")
        with open(path, "wb") as f:
            f.write(base64.b64decode("".join(blob)))
        examples = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
        assert len(examples) == 2

        def feature(name, examples=examples):
            values = [e.features.feature[name] for e in examples]
            return np.array([list(v.float_list.value) or list(v.int64_list.value) for v in values])

        got = collect(pretraining_dataset(path, seq_length=32, max_predictions=5, batch_size=2, is_training=False,
                                          dynamic_masking=dynamic, vocab_size=300, seed=0))
        np.testing.assert_array_equal(got["input_mask"], feature("input_mask"))
        np.testing.assert_array_equal(got["input_type_ids"], feature("segment_ids"))
        np.testing.assert_array_equal(got["sentence_order_labels"], feature("next_sentence_labels")[:, 0])
        ids = feature("input_ids")
        assert np.all(feature("token_boundary")[np.isin(ids, [CLS_ID, SEP_ID])] == 1)  # the original marks specials
        if not dynamic:
            np.testing.assert_array_equal(got["input_word_ids"], ids)
            np.testing.assert_array_equal(got["masked_lm_positions"], feature("masked_lm_positions"))
            np.testing.assert_array_equal(got["masked_lm_ids"], feature("masked_lm_ids"))
            np.testing.assert_array_equal(got["masked_lm_weights"], feature("masked_lm_weights"))
        else:
            assert not feature("masked_lm_weights").any()
            weights = got["masked_lm_weights"]
            assert np.all(weights.sum(axis=1) >= 1)
            for row in range(2):
                positions = got["masked_lm_positions"][row][weights[row] > 0]
                assert not np.isin(ids[row, positions], [CLS_ID, SEP_ID]).any()  # boundary 1, still never masked
                np.testing.assert_array_equal(got["masked_lm_ids"][row][weights[row] > 0], ids[row, positions])


def test_text_file_is_not_taken_for_records(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("The quick brown fox jumps over the lazy dog.\n" * 3)
    with pytest.raises(ValueError, match="corpus.txt: truncated or corrupt TFRecord file, or not a TFRecord file"):
        pretraining_dataset(str(path), seq_length=SEQ, max_predictions=PRED, batch_size=2, is_training=True)


def test_empty_shards_are_fine(tmp_path):
    paths, contents = write_files(str(tmp_path), 2, 3)
    empty = str(tmp_path / "part-002.tfrecord")
    with tf.io.TFRecordWriter(empty):
        pass
    got = real_rows(collect(pretraining_dataset(paths + [empty], seq_length=SEQ, max_predictions=PRED,
                                                batch_size=4, is_training=False)))
    np.testing.assert_array_equal(got["input_word_ids"], [r["input_ids"] for rows in contents for r in rows])


def test_reads_create_data_output_static_and_dynamic(tmp_path, tiny_spm_model, corpus_file):
    """End to end: albert-tf create-data (masked, and --no-mask for dynamic masking) → pretraining_dataset."""
    for mask in (True, False):
        prefix = str(tmp_path / f"mask-{mask}" / "data")
        create_pretraining_data(corpus_file, tiny_spm_model, prefix, num_shards=2, progress=False,
                                options=InstanceOptions(max_seq_length=64, max_predictions=8, mask=mask, seed=1))
        got = real_rows(collect(pretraining_dataset(prefix + "-*.tfrecord", seq_length=64, max_predictions=8,
                                                    batch_size=16, is_training=False, dynamic_masking=not mask,
                                                    vocab_size=300, seed=0)))
        ids, weights, positions = got["input_word_ids"], got["masked_lm_weights"], got["masked_lm_positions"]
        assert len(ids) > 20
        assert np.all(ids[:, 0] == CLS_ID) and np.all(got["input_mask"][:, 0] == 1)
        lengths = got["input_mask"].sum(axis=1)
        budget = np.minimum(8, np.maximum(1, np.round(lengths * 0.15)))
        assert np.all(weights.sum(axis=1) <= budget) and weights.sum() / budget.sum() > 0.9
        rows, slots = np.nonzero(weights)
        masked_ids = ids[rows, positions[rows, slots]]
        assert 0.6 < np.mean(masked_ids == MASK_ID) < 0.95
        assert not np.isin(got["masked_lm_ids"][rows, slots], [CLS_ID, SEP_ID, 0]).any()

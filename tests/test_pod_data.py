"""Input at pod scale: resuming at any batch without reading what comes before (equal to the uninterrupted
pipeline), eval shared among 1-64 input pipelines (every record exactly once, metrics equal to a one-host numpy
reference), and the record-count index the pipeline reads its counts from."""
import os

import numpy as np
import pytest
import tensorflow as tf

import helpers as ph
from albert_tf.data import dataset, record_index
from albert_tf.data.dataset import pretraining_dataset
from albert_tf.training import pretrain_step, pretraining  # noqa: F401
from albert_tf.data import pretraining_input  # noqa: F401

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


SEQ, PRED, VOCAB = 32, 5, 1000
TRAIN_COUNTS = [9, 0, 13, 4, 21, 6, 11, 17, 3]  # one empty file; lengths cross the (shrunk) chunk size
EVAL_COUNTS = [3, 14, 7, 9, 1, 12, 5, 8, 11, 2, 6, 10, 4, 13, 7, 9]  # 16 files, 121 records


def _write(directory, counts, unmasked):
    os.makedirs(directory, exist_ok=True)
    return [ph.write_records(os.path.join(directory, f"part-{i:03d}.tfrecord"), n, SEQ, PRED, VOCAB, seed=50 + i,
                             unmasked=unmasked) for i, n in enumerate(counts)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pod_data")
    return {(kind, unmasked): _write(str(root / f"{kind}-{unmasked}"), counts, unmasked)
            for kind, counts in (("train", TRAIN_COUNTS), ("eval", EVAL_COUNTS)) for unmasked in (False, True)}


def _context(pipelines, pipeline_id, replicas_per_pipeline=2):
    return tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pipeline_id,
                                      num_replicas_in_sync=pipelines * replicas_per_pipeline)


def _numpy(ds, n=None):
    return [{k: v.numpy() for k, v in b.items()} for b in (ds.take(n) if n else ds)]


# ---------------------------------------------------------------------------------------------- resume
FAST_CASES = [(False, [(1, 6, 1, 0), (3, 12, 2, 1)]), (True, [(3, 12, 2, 2)])]
SLOW_CASES = [(False, [(3, 12, 2, 0), (3, 12, 2, 2)]), (True, [(1, 6, 1, 0), (3, 12, 2, 0), (3, 12, 2, 1)])]


@pytest.mark.parametrize("dynamic,cases", FAST_CASES + [pytest.param(*c, marks=pytest.mark.slow) for c in SLOW_CASES])
def test_positioned_pipeline_equals_the_uninterrupted_one(data, monkeypatch, dynamic, cases):
    """Shrunk windows, chunks and parse groups, so that a few hundred records cross many of each, epochs and
    file groups too. Cases (pipelines, global batch, replicas, pipeline): 1 pipeline (batch 6 >= group) and
    pipelines of 3 of 2 replicas each (batch 2 < group: positions inside a group)."""
    for name, value in (("_RECORD_SHUFFLE_WINDOW", 37), ("_CHUNK", 4), ("_PARSE_GROUP", 5), ("_MASK_GROUP", 8)):
        monkeypatch.setattr(dataset, name, value)
    files = data["train", dynamic]
    for pipelines, global_batch, replicas, pipeline_id in cases:
        def make(start, pipelines=pipelines, global_batch=global_batch, replicas=replicas, pipeline_id=pipeline_id):
            return pretraining_dataset(files, seq_length=SEQ, max_predictions=PRED, batch_size=global_batch,
                                       is_training=True, input_context=_context(pipelines, pipeline_id, replicas),
                                       seed=11, dynamic_masking=dynamic, vocab_size=VOCAB, start_batch=start)

        uninterrupted = _numpy(make(0), 87)
        for start in (1, 17, 40, 81):
            for i, batch in enumerate(_numpy(make(start), 6)):
                for key, value in batch.items():
                    np.testing.assert_array_equal(value, uninterrupted[start + i][key],
                                                  err_msg=f"{pipelines}x{pipeline_id} {start}+{i} {key}")


def test_positioning_reads_only_a_bounded_number_of_records(data, monkeypatch):
    """Resuming a million records into the stream reads about one shuffle window, not what comes before."""
    monkeypatch.setattr(dataset, "_RECORD_SHUFFLE_WINDOW", 500)
    read = tf.Variable(0, dtype=tf.int64)
    real = dataset._file_records  # pylint: disable=protected-access

    def counting(filename, size, start, take):
        def note(names, records):
            with tf.control_dependencies([read.assign_add(tf.size(records, out_type=tf.int64))]):
                return tf.identity(names), tf.identity(records)

        return real(filename, size, start, take).map(note)

    monkeypatch.setattr(dataset, "_file_records", counting)
    files = data["train", False]
    for start in (0, 250_000):  # 250k batches of 4: ~12k epochs of 84 records
        read.assign(0)
        batch = next(iter(pretraining_dataset(files, seq_length=SEQ, max_predictions=PRED, batch_size=4,
                                              is_training=True, seed=1, start_batch=start)))
        assert batch["input_word_ids"].shape == (4, SEQ)
        assert 500 <= int(read.numpy()) <= 4 * 500, (start, int(read.numpy()))  # a window (+ read-ahead)


# ---------------------------------------------------------------------------------------------- eval
def _fake_model(batch, training=False):  # pylint: disable=unused-argument
    """Deterministic logits from the inputs (no weights): mlm [b, P, VOCAB], sop [b, 2]."""
    ids = tf.gather(batch["input_word_ids"], batch["masked_lm_positions"], batch_dims=1)
    mlm = tf.one_hot((ids + batch["masked_lm_ids"] % 3) % VOCAB, VOCAB) * 2.0 + tf.cast(ids % 7, tf.float32)[..., None]
    mask = tf.cast(tf.reduce_sum(batch["input_mask"], 1), tf.float32)
    sop = tf.stack([mask % 5.0, tf.cast(tf.reduce_sum(batch["input_type_ids"], 1), tf.float32) % 3.0], 1)
    return {"mlm_logits": mlm, "sop_logits": sop}


def _reference_metrics(records):
    """The metrics of one pass over `records` (numpy arrays of the parsed features), in numpy."""
    ids = np.take_along_axis(records["input_ids"], records["masked_lm_positions"], 1)
    mlm = np.eye(VOCAB)[(ids + records["masked_lm_ids"] % 3) % VOCAB] * 2.0 + (ids % 7)[..., None]
    mask = records["input_mask"].sum(1).astype(np.float64)
    sop = np.stack([mask % 5.0, records["segment_ids"].sum(1) % 3.0], 1)

    def nll_and_correct(logits, labels):
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -np.take_along_axis(logp, labels[..., None], -1)[..., 0], logits.argmax(-1) == labels

    w = records["masked_lm_weights"]
    mlm_nll, mlm_ok = nll_and_correct(mlm, records["masked_lm_ids"])
    sop_nll, sop_ok = nll_and_correct(sop, records["next_sentence_labels"][:, 0])
    return {"masked_lm_loss": (w * mlm_nll).sum() / w.sum(), "masked_lm_accuracy": (w * mlm_ok).sum() / w.sum(),
            "sentence_order_loss": sop_nll.mean(), "sentence_order_accuracy": sop_ok.mean()}


def _all_records(files):
    raw = [r.numpy() for f in files for r in tf.data.TFRecordDataset(f)]
    parsed = tf.io.parse_example(tf.constant(raw), dataset.features.feature_spec(SEQ, PRED))
    return {k: v.numpy() for k, v in parsed.items()}


def _identity(row_ids, row_types, row_labels):
    return row_ids.tobytes() + row_types.tobytes() + row_labels.tobytes()


@pytest.mark.parametrize("pipelines, per_host", [
    (1, 2), (4, 2), (2, 4), (2, 8),  # 2 hosts of 4 devices (v4, v5p), of 8 (v2, v3, v5e): the table's devices per host
    pytest.param(32, 2, marks=pytest.mark.slow), pytest.param(64, 2, marks=pytest.mark.slow)])  # ~1 s per pipeline
def test_eval_counts_every_record_once_on_any_number_of_pipelines(data, pipelines, per_host):
    files = data["eval", False]
    counts = record_index.count_records(files)
    records = _all_records(files)
    expected = [_identity(*(x.astype(np.int32) for x in r))
                for r in zip(records["input_ids"], records["segment_ids"], records["masked_lm_ids"])]
    assert len(set(expected)) == len(expected) == sum(EVAL_COUNTS)
    global_batch = 2 * per_host * pipelines  # per_host replicas per pipeline, per-replica batch 2
    steps = dataset.eval_steps(sum(EVAL_COUNTS), global_batch)
    eval_step = pretrain_step.make_eval_step(_fake_model, global_batch)
    seen, sums = [], None
    for pipeline_id in range(pipelines):
        batches = _numpy(pretraining_dataset(files, seq_length=SEQ, max_predictions=PRED, batch_size=global_batch,
                                             is_training=False, seed=0, record_counts=counts,
                                             input_context=_context(pipelines, pipeline_id, per_host)))
        assert len(batches) == steps * per_host  # every pipeline: the same number of steps (per_host replicas each)
        for batch in batches:
            assert batch["input_word_ids"].shape == (2, SEQ)
            real = batch["sentence_order_weights"] > 0
            assert not batch["input_mask"][~real].any() and not batch["masked_lm_weights"][~real].any()
            seen += [_identity(*r) for r in zip(batch["input_word_ids"][real], batch["input_type_ids"][real],
                                                batch["masked_lm_ids"][real])]
            step_sums = {k: float(v) for k, v in eval_step(batch).items()}
            sums = step_sums if sums is None else {k: sums[k] + step_sums[k] for k in sums}
    assert sorted(seen) == sorted(expected)  # each record exactly once: none dropped, none twice
    got = pretrain_step.metrics_from_sums(sums)
    for name, value in _reference_metrics(records).items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, err_msg=name)


def test_eval_max_batches_takes_the_first_records_whatever_the_pipelines(data):
    files = data["eval", False]
    counts = record_index.count_records(files)
    first = {}
    for pipelines in (1, 4, 16):
        rows = []
        for pipeline_id in range(pipelines):
            for b in _numpy(pretraining_dataset(files, seq_length=SEQ, max_predictions=PRED,
                                                batch_size=4 * pipelines, is_training=False, record_counts=counts,
                                                input_context=_context(pipelines, pipeline_id), max_batches=2)):
                rows += [r.tobytes() for r in b["input_word_ids"][b["sentence_order_weights"] > 0]]
        first[pipelines] = sorted(rows)
    assert len(first[1]) == 8 and len(first[4]) == 32 and len(first[16]) == 121  # 2 global batches (or all)
    assert set(first[1]) < set(first[4]) < set(first[16])


@pytest.mark.slow  # 37 pipelines with dynamic masking: over a minute on a shared CPU
def test_eval_dynamic_masks_do_not_depend_on_the_pipelines(data, monkeypatch):
    monkeypatch.setattr(dataset, "_MASK_GROUP", 8)  # groups smaller than a pipeline's share, as on a pod
    files = data["eval", True]
    counts = record_index.count_records(files)
    masks = {}
    for pipelines in (1, 4, 32):
        by_record = {}
        for pipeline_id in range(pipelines):
            for b in _numpy(pretraining_dataset(files, seq_length=SEQ, max_predictions=PRED,
                                                batch_size=4 * pipelines, is_training=False, seed=5,
                                                input_context=_context(pipelines, pipeline_id), dynamic_masking=True,
                                                vocab_size=VOCAB, record_counts=counts)):
                for row in np.flatnonzero(b["sentence_order_weights"]):
                    key = (b["input_type_ids"][row].tobytes(), b["input_mask"][row].tobytes(),
                           b["masked_lm_ids"][row].tobytes())
                    by_record[key] = (b["input_word_ids"][row].tolist(), b["masked_lm_positions"][row].tolist())
        masks[pipelines] = by_record
    assert len(masks[1]) == sum(EVAL_COUNTS)
    assert masks[1] == masks[4] == masks[32]


# ---------------------------------------------------------------------------------------------- counts
def test_counts_come_from_the_index_when_its_sizes_match(tmp_path, monkeypatch):
    files = _write(str(tmp_path), [5, 0, 7], unmasked=False)
    sizes = [os.path.getsize(f) for f in files]
    record_index.write_index(record_index.index_path(str(tmp_path / "part")),
                             {os.path.basename(f): (n, s) for f, n, s in zip(files, [5, 0, 7], sizes)})
    assert record_index.count_records(files) == dict(zip(files, [5, 0, 7]))  # the index agrees with the files

    def no_counting(paths):
        assert not paths, paths
        return {}

    monkeypatch.setattr(record_index, "count_records", no_counting)
    assert record_index.record_counts(files, sizes) == dict(zip(files, [5, 0, 7]))
    # A glob that also matches the index (`dir/*` with gs:// semantics, `dir/.*`) reads records only.
    got = _numpy(pretraining_dataset([str(tmp_path / "*"), str(tmp_path / ".*")], seq_length=SEQ,
                                     max_predictions=PRED, batch_size=4, is_training=False))
    assert sum(b["sentence_order_weights"].sum() for b in got) == 12
    # A file changed since the index was written is counted instead.
    ph.write_records(files[2], 3, SEQ, PRED, VOCAB, seed=9)
    with pytest.raises(AssertionError, match="part-002"):
        record_index.record_counts(files, [os.path.getsize(f) for f in files])


def test_counts_are_cached_once_in_the_model_dir(tmp_path, monkeypatch):
    files = _write(str(tmp_path / "data"), [4, 6], unmasked=False)
    sizes = [os.path.getsize(f) for f in files]
    cache = str(tmp_path / "model" / record_index.CACHE_NAME)
    os.makedirs(tmp_path / "model")
    assert record_index.record_counts(files, sizes, cache=cache, write_cache=True) == dict(zip(files, [4, 6]))
    assert record_index.read_index(cache) == {f: (n, s) for f, n, s in zip(files, [4, 6], sizes)}
    monkeypatch.setattr(record_index, "count_records", lambda paths: pytest.fail(f"counted again: {paths}"))
    assert record_index.record_counts(files, sizes, cache=cache) == dict(zip(files, [4, 6]))


def test_a_damaged_index_is_named(tmp_path):
    files = _write(str(tmp_path), [2], unmasked=False)
    (tmp_path / ".part.record_counts.json").write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match=r"\.part\.record_counts\.json: not a record-count index"):
        record_index.record_counts(files, [os.path.getsize(files[0])])

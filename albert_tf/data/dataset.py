"""The tf.data input pipeline for pretraining: TFRecords (ours or the original tool's) → batch dicts.

    files (glob, sharded per input pipeline) → file shuffle → repeat (training) → parallel interleave of per-file
    readers → record shuffle (training) → batch (groups of >= 64 records, 256 with dynamic masking) →
    parse_example on the whole group → [dynamic masking] → re-batch to batch_size → prefetch

Batches are dicts (B = batch size, S = seq_length, P = max_predictions):
    input_word_ids, input_mask, input_type_ids  int32 [B, S]
    masked_lm_positions, masked_lm_ids          int32 [B, P]
    masked_lm_weights                           float32 [B, P]
    sentence_order_labels                       int32 [B]     (0 original order, 1 swapped)

Bad data fails with the file's name: a pattern that matches nothing, a record whose feature lengths disagree with
seq_length / max_predictions (the first record of every file is checked up front; later records are parsed with the
file name attached, so TensorFlow's error names the file too), and a truncated or corrupt TFRecord file (each file's
reader counts the bytes it consumed and compares them with the file's size when it ends).
"""
import concurrent.futures
import random
import struct

import tensorflow as tf

from albert_tf.io import match_files
from albert_tf.data import features
from albert_tf.data.dynamic_masking import mask_records

_RECORD_SHUFFLE_BUFFER = 10_000  # records; ~50 MB at seq 512
_CYCLE_LENGTH = 8  # files read at once when training
_CHUNK = 64  # records a per-file reader hands on at a time (the byte check runs once per chunk)
# Records are parsed (and dynamically masked) in groups of at least this many, then re-batched: much of the cost of
# both is per call, and per-replica batches can be small (e.g. 8 on a large pod slice).
_PARSE_GROUP = 64
_MASK_GROUP = 256
_TFRECORD_FRAMING_BYTES = 16  # uint64 length + crc32 of the length + crc32 of the data


def _first_record(path, size):
    """The first serialized record of a TFRecord file of `size` bytes, read directly (works on gs://); None if empty."""
    with tf.io.gfile.GFile(path, "rb") as f:
        header = f.read(12)
        if not header:
            return None
        (length,) = struct.unpack("<Q", header[:8]) if len(header) == 12 else (None,)
        if length is None or 12 + length + 4 > size:
            raise ValueError(f"{path}: truncated or corrupt TFRecord file, or not a TFRecord file ({size} bytes, "
                             f"first record header claims {length} bytes)")
        data = f.read(length)
        if len(data) != length or len(f.read(4)) != 4:
            raise ValueError(f"{path}: truncated or corrupt TFRecord file (first record claims {length} bytes)")
    return data


def check_framing(path, size=None):
    """Walks the record headers of a whole TFRecord file (lengths only, data skipped): ValueError naming the file
    when a record runs past its end (a truncated file). Returns the number of records. One read per record: meant
    for local files before a run starts (the input pipeline itself checks every file as it reads it)."""
    size = tf.io.gfile.stat(path).length if size is None else size
    count = offset = 0
    with tf.io.gfile.GFile(path, "rb") as f:
        while offset < size:
            f.seek(offset)
            header = f.read(8)
            (length,) = struct.unpack("<Q", header) if len(header) == 8 else (None,)
            if length is None or offset + _TFRECORD_FRAMING_BYTES + length > size:
                raise ValueError(f"{path}: truncated or corrupt TFRecord file (record {count + 1} at byte {offset} "
                                 f"runs past the end of the file's {size} bytes)")
            offset += _TFRECORD_FRAMING_BYTES + length
            count += 1
    return count


def check_token_ids(path, vocab_size):
    """ValueError naming the file when its first record holds a token id outside [0, vocab_size) (records made
    with another vocabulary than the model's)."""
    data = _first_record(path, tf.io.gfile.stat(path).length)
    if data is None:
        return
    example = tf.train.Example.FromString(data)
    for name in ("input_ids", "masked_lm_ids"):
        values = example.features.feature[name].int64_list.value if name in example.features.feature else []
        bad = [v for v in values if not 0 <= v < vocab_size]
        if bad:
            raise ValueError(f"{path}: feature {name!r} holds token id {max(bad)}, outside the config's vocab_size "
                             f"{vocab_size}; were these records made with another vocabulary (--spm-model)?")


def _required_features(dynamic_masking):
    if dynamic_masking:
        return ("input_ids", "input_mask", "segment_ids", "token_boundary", features.LABEL_FEATURE)
    return ("input_ids", "input_mask", "segment_ids") + features.INT_PRED_FEATURES + features.FLOAT_PRED_FEATURES + (
        features.LABEL_FEATURE,)


def check_first_record(path, *, seq_length, max_predictions, dynamic_masking, size=None):
    """Checks the first record of `path` has the features and lengths the pipeline will parse.

    Raises ValueError naming the file, the feature, and the expected and found lengths.
    """
    data = _first_record(path, tf.io.gfile.stat(path).length if size is None else size)
    if data is None:
        return
    example = tf.train.Example()
    try:
        example.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError
        raise ValueError(f"{path}: the first record is not a tf.train.Example ({e})") from e
    found = example.features.feature
    pred_names = features.INT_PRED_FEATURES + features.FLOAT_PRED_FEATURES
    for name in _required_features(dynamic_masking):
        if name not in found:
            raise ValueError(f"{path}: records lack the feature {name!r} (found: {', '.join(sorted(found))})")
        feature = found[name]
        length = len(feature.float_list.value) if name == "masked_lm_weights" else len(feature.int64_list.value)
        if name in features.INT_SEQ_FEATURES:
            expected, what = seq_length, "seq_length"
        elif name in pred_names:
            expected, what = max_predictions, "max_predictions"
        else:
            expected, what = 1, "one label"
        if length != expected:
            raise ValueError(f"{path}: feature {name!r} has length {length}, expected {expected} ({what}); "
                             f"were these records written with another --max-seq-length / --max-predictions?")
    if dynamic_masking and "masked_lm_weights" in found and any(found["masked_lm_weights"].float_list.value):
        raise ValueError(f"{path}: records are already masked (masked_lm_weights not all 0); dynamic masking needs "
                         f"unmasked records (create-data --no-mask)")


def _check_files(files, **kwargs):
    """Checks the first record of every file (in parallel: on gs:// each check is a round trip); returns sizes."""

    def check(path):
        size = tf.io.gfile.stat(path).length
        check_first_record(path, size=size, **kwargs)
        return size

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        return list(pool.map(check, files))  # re-raises the first failure in file order


def _file_records(filename, size):
    """Records of one file, in chunks of up to _CHUNK, each as (filenames [n], records [n]).

    Reading errors are turned into an end of file; the bytes consumed are then compared with the file's size, so a
    truncated or corrupt file fails with an error naming it.
    """
    chunks = tf.data.TFRecordDataset(filename).ignore_errors().batch(_CHUNK)
    chunks = chunks.concatenate(tf.data.Dataset.from_tensors(tf.zeros([0], tf.string)))  # end-of-file marker

    def check(consumed, records):
        lengths = tf.cast(tf.strings.length(records, unit="BYTE"), tf.int64) + _TFRECORD_FRAMING_BYTES
        consumed += tf.reduce_sum(lengths)
        intact = (tf.size(records) > 0) | tf.equal(consumed, size)
        assertion = tf.debugging.Assert(intact, [tf.strings.join([
            filename, ": truncated or corrupt TFRecord file (read ", tf.strings.as_string(consumed), " of ",
            tf.strings.as_string(size), " bytes before the first bad record)"])])
        with tf.control_dependencies([assertion]):
            names = tf.fill(tf.shape(records), filename)
        return consumed, (names, records)

    return chunks.scan(tf.constant(0, tf.int64), check)


def _parse_spec(seq_length, max_predictions, dynamic_masking):
    spec = features.feature_spec(seq_length, max_predictions)
    return {name: spec[name] for name in _required_features(dynamic_masking)}


def pretraining_dataset(file_pattern, *, seq_length, max_predictions, batch_size, is_training, input_context=None,
                        dynamic_masking=False, seed=None, masked_lm_prob=0.15, ngram=3, vocab_size=None):
    """A tf.data.Dataset of pretraining batches from TFRecords in the original create_pretraining_data.py format.

    Args:
      file_pattern: a glob or a list of globs (local or gs://).
      seq_length, max_predictions: the records' max_seq_length and max_predictions_per_seq (checked per file).
      batch_size: the GLOBAL batch size. With `input_context` each input pipeline yields
        `input_context.get_per_replica_batch_size(batch_size)` examples per batch; without, `batch_size`.
      is_training: shuffle files and records, repeat forever, drop the last partial batch (static shapes). Otherwise
        every record exactly once, files in sorted order, records in file order, last batch kept.
      input_context: a tf.distribute.InputContext; files are split among input pipelines (pipeline i reads files
        i, i + n, i + 2n, ... of the sorted list).
      dynamic_masking: mask in-graph from unmasked records (create-data --no-mask), fresh masks every batch and
        epoch (see albert_tf.data.dynamic_masking); needs `vocab_size`.
      seed: makes the pipeline deterministic (shuffles and masks). None: a fresh random seed each call.
      masked_lm_prob, ngram, vocab_size: dynamic masking settings.
    Returns:
      tf.data.Dataset of dicts (see the module docstring), batch dimension static when training.
    """
    if seq_length < 2 or max_predictions < 1 or max_predictions > seq_length:
        raise ValueError(f"need 2 <= seq_length and 1 <= max_predictions <= seq_length, "
                         f"got seq_length={seq_length}, max_predictions={max_predictions}")
    if dynamic_masking and vocab_size is None:
        raise ValueError("dynamic_masking=True needs vocab_size (random replacements are drawn from the vocabulary)")
    files = match_files(file_pattern, flag="file_pattern")
    pipeline_id, num_pipelines = 0, 1
    if input_context is not None:
        pipeline_id, num_pipelines = input_context.input_pipeline_id, input_context.num_input_pipelines
        batch_size = input_context.get_per_replica_batch_size(batch_size)
        if len(files) < num_pipelines:
            raise ValueError(f"{len(files)} file(s) match {file_pattern!r} but there are {num_pipelines} input "
                             f"pipelines: write at least one shard per pipeline (create-data --num-shards)")
        files = files[pipeline_id::num_pipelines]
    sizes = _check_files(files, seq_length=seq_length, max_predictions=max_predictions,
                         dynamic_masking=dynamic_masking)
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)

    dataset = tf.data.Dataset.from_tensor_slices((tf.constant(files), tf.constant(sizes, tf.int64)))
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
        dataset = dataset.interleave(_file_records, cycle_length=min(_CYCLE_LENGTH, len(files)), block_length=1,
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        dataset = dataset.unbatch().shuffle(_RECORD_SHUFFLE_BUFFER, seed=seed + 1, reshuffle_each_iteration=True)
    else:
        dataset = dataset.flat_map(_file_records).unbatch()
    group = max(batch_size, _MASK_GROUP if dynamic_masking else _PARSE_GROUP)
    dataset = dataset.batch(group, drop_remainder=is_training)

    spec = _parse_spec(seq_length, max_predictions, dynamic_masking)
    base_seed = tf.constant([seed, pipeline_id], tf.int64)

    def to_batch(index, names_and_records):
        names, records = names_and_records
        parsed = tf.io.parse_example(records, spec, example_names=names)
        batch = {
            "input_word_ids": tf.cast(parsed["input_ids"], tf.int32),
            "input_mask": tf.cast(parsed["input_mask"], tf.int32),
            "input_type_ids": tf.cast(parsed["segment_ids"], tf.int32),
            "sentence_order_labels": tf.cast(parsed[features.LABEL_FEATURE][:, 0], tf.int32),
        }
        if dynamic_masking:
            batch_seed = tf.random.experimental.stateless_fold_in(base_seed, index)
            batch.update(mask_records(batch["input_word_ids"], batch["input_mask"], parsed["token_boundary"],
                                    seed=batch_seed, max_predictions=max_predictions, vocab_size=vocab_size,
                                    masked_lm_prob=masked_lm_prob, ngram=ngram))
        else:
            batch["masked_lm_positions"] = tf.cast(parsed["masked_lm_positions"], tf.int32)
            batch["masked_lm_ids"] = tf.cast(parsed["masked_lm_ids"], tf.int32)
            batch["masked_lm_weights"] = parsed["masked_lm_weights"]
        return batch

    dataset = dataset.enumerate().map(to_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if group != batch_size:
        dataset = dataset.unbatch().batch(batch_size, drop_remainder=is_training)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = True
    return dataset.with_options(options)

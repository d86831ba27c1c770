"""The tf.data input pipeline for pretraining: TFRecords (ours or the original tool's) → batch dicts.

Training (each input pipeline reads its own files: pipeline i of n takes files i, i + n, ... of the sorted list):

    epoch e: the files in a seeded order, cut into groups of 8 → the records of a group, 64-record chunks taken
    round-robin from its files → windows of 10,000 records, each in a seeded order → groups of >= 64 records
    (256 with dynamic masking) → parse_example on the whole group → [dynamic masking] → batch_size → prefetch

Every order above is a function of (seed, pipeline, epoch / window / group index) and, given each file's record
count, of nothing before it: `start_batch=N` positions the pipeline at its N-th batch by skipping whole epochs and
groups by their counts, then records within at most one group of files and one window (O(1) in N; resuming at step
100k costs what resuming at step 1 does). The counts come from the record-count index create-data writes
(`albert_tf.data.record_index`), or are taken once. Without `start_batch` no count is needed.

Evaluation (`is_training=False`): the records of all files, sorted files in file order, cut into one contiguous
range per input pipeline sized so that every pipeline yields the same number of full batches (collectives match);
the last batches are padded with all-zero examples that carry `sentence_order_weights` 0 (and masked_lm_weights
0), so every record counts exactly once in the metrics whatever the number of files and pipelines. Dynamic masks
of eval records depend on the record's place in the eval set only (not on the number of pipelines).

Batches are dicts (B = batch size, S = seq_length, P = max_predictions):
    input_word_ids, input_mask, input_type_ids  int32 [B, S]
    masked_lm_positions, masked_lm_ids          int32 [B, P]
    masked_lm_weights                           float32 [B, P]
    sentence_order_labels                       int32 [B]     (0 original order, 1 swapped)
    sentence_order_weights                      float32 [B]   eval only: 1 a record, 0 padding

Bad data fails with the file's name: a pattern that matches nothing, a record whose feature lengths disagree with
seq_length / max_predictions (the first record of every file is checked up front; later records are parsed with the
file name attached, so TensorFlow's error names the file too), and a truncated or corrupt TFRecord file (each file's
reader counts the bytes, or from a record count the records, it consumed and compares them when it ends).
"""
import concurrent.futures
import random
import struct

import numpy as np
import tensorflow as tf

from albert_tf.files import match_files
from albert_tf.data import features, record_index
from albert_tf.data.dynamic_masking import mask_records
from albert_tf.settings.defaults import MASKED_LM_PROB, NGRAM

_RECORD_SHUFFLE_WINDOW = 10_000  # records shuffled together; ~50 MB at seq 512
_CYCLE_LENGTH = 8  # files read at once when training (a group)
_CHUNK = 64  # records a per-file reader hands on at a time (the integrity check runs once per chunk)
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


def data_files(file_pattern, flag="file_pattern"):
    """The record files `file_pattern` matches (sorted), record-count indexes left out."""
    files = [f for f in match_files(file_pattern, flag=flag) if not record_index.is_index(f)]
    if not files:
        raise FileNotFoundError(f"{flag} {file_pattern!r} matches only record-count indexes, no record file")
    return files


def file_sizes(files):
    """The files' sizes in bytes (stat in parallel: on gs:// each is a round trip)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(files))) as pool:
        return [s.length for s in pool.map(tf.io.gfile.stat, files)]


def _check_files(files, **kwargs):
    """Checks the first record of every file (in parallel: on gs:// each check is a round trip); returns sizes."""

    def check(path):
        size = tf.io.gfile.stat(path).length
        check_first_record(path, size=size, **kwargs)
        return size

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        return list(pool.map(check, files))  # re-raises the first failure in file order


def _file_records(filename, size, start, take):
    """Records `start`, `start` + 1, ... of one file (`take` of them; -1: to the end), in chunks of up to _CHUNK,
    each as (filenames [n], records [n]), then one empty chunk (the end-of-file marker).

    Reading errors are turned into an end of file, then checked: read to the end from the start, the bytes consumed
    must equal the file's size (and never pass it: a file that grew fails as soon as its reader passes the size it
    had, before the records past it are used); otherwise the records read must number `take`. So a truncated,
    corrupt or changed file fails with an error naming it.
    """
    chunks = tf.data.TFRecordDataset(filename).skip(start).take(take).ignore_errors().batch(_CHUNK)
    chunks = chunks.concatenate(tf.data.Dataset.from_tensors(tf.zeros([0], tf.string)))  # end-of-file marker
    whole = take < 0

    def check(state, records):
        consumed, count = state
        consumed += tf.reduce_sum(tf.cast(tf.strings.length(records, unit="BYTE"), tf.int64) + _TFRECORD_FRAMING_BYTES)
        count += tf.size(records, out_type=tf.int64)
        at_end = tf.where(whole, tf.equal(consumed, size), tf.equal(count, take))
        intact = tf.where(tf.size(records) > 0, tf.logical_not(whole) | (consumed <= size), at_end)
        after = tf.where(consumed > size, " bytes: the file grew after the run started",
                         " bytes before the first bad record")
        detail = tf.where(whole, tf.strings.join(["read ", tf.strings.as_string(consumed), " of ",
                                                  tf.strings.as_string(size), after]),
                          tf.strings.join(["read ", tf.strings.as_string(count), " of the ", tf.strings.as_string(take),
                                           " records expected from record ", tf.strings.as_string(start)]))
        assertion = tf.debugging.Assert(intact, [tf.strings.join([
            filename, ": truncated or corrupt TFRecord file (", detail, ")"])])
        with tf.control_dependencies([assertion]):
            names = tf.fill(tf.shape(records), filename)
        return (consumed, count), (names, records)

    return chunks.scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)), check)


# ---------------------------------------------------------------------------------------------- training order
def _epoch_groups(epoch, num_files, cycle, seed):
    """The files of `epoch` in its seeded order, cut into groups of `cycle`: int64 [K, cycle] indices into the
    pipeline's file list, the last group padded with -1. Stateless (the same values in tf.data and eagerly)."""
    keys = tf.random.stateless_uniform([num_files], seed=tf.random.experimental.stateless_fold_in(
        seed, epoch, alg="philox"), alg="philox")
    order = tf.cast(tf.argsort(keys, stable=True), tf.int64)
    groups = -(-num_files // cycle)
    return tf.reshape(tf.concat([order, -tf.ones([groups * cycle - num_files], tf.int64)], 0), [groups, cycle])


def _round_robin_state(lengths, offset):
    """Where `offset` falls in the round-robin of one group: files (in group order) of `lengths` records hand on
    _CHUNK records at a time, one file after the other, skipping files that have ended.

    Returns (starts, first, skip): the files read on from record starts[j], file `first` first and then the others
    in cyclic order, give the group's records from `offset - skip` on (skip < _CHUNK: starts are chunk-aligned).
    """
    chunks = -(-lengths // _CHUNK)
    rounds = np.arange(int(chunks.max()) + 1)
    before = np.minimum(lengths[None, :], rounds[:, None] * _CHUNK).sum(axis=1)  # records before each round
    t = int(np.searchsorted(before, offset, side="right")) - 1
    done = int(before[t])
    for j in np.flatnonzero(chunks > t):
        size = min(_CHUNK, int(lengths[j]) - t * _CHUNK)
        if done + size > offset:
            starts = np.where(np.arange(len(lengths)) < j, (t + 1) * _CHUNK, t * _CHUNK)
            return starts, int(j), offset - done
        done += size
    raise AssertionError("offset past the group's records")


def _locate(counts, position, cycle, groups_of_epoch):
    """The state of the training record stream at record `position` (0-based, counting from the first epoch).

    Args:
      counts: int [F], records in each of the pipeline's files. position: int. cycle: files per group.
      groups_of_epoch: epoch → int [K, cycle] group indices (`_epoch_groups`, evaluated eagerly).
    Returns:
      (epoch, group, entries, skip): the stream from `position - skip` is the round-robin of `entries` (file index,
      first record; in cyclic order), then groups group + 1, ... of `epoch`, then the later epochs.
    """
    counts = np.asarray(counts, np.int64)
    epoch, offset = divmod(position, int(counts.sum()))
    groups = groups_of_epoch(epoch)
    totals = np.cumsum([counts[g[g >= 0]].sum() for g in groups])
    group = int(np.searchsorted(totals, offset, side="right"))
    members = groups[group][groups[group] >= 0]
    starts, first, skip = _round_robin_state(counts[members], offset - (totals[group - 1] if group else 0))
    order = list(range(first, len(members))) + list(range(first))
    entries = [(int(members[j]), int(starts[j])) for j in order if starts[j] < counts[members[j]]]
    return int(epoch), group, entries, skip


def _training_records(files, sizes, counts, position, seed):
    """The pipeline's record stream from record `position` on: (filename, record) string pairs, endless.

    counts: records per file (needed only when `position` > 0). seed: int64 [2] for the file orders.
    """
    num_files, cycle = len(files), min(_CYCLE_LENGTH, len(files))
    names, byte_sizes = tf.constant(files), tf.constant(sizes, tf.int64)
    records_per_file = tf.constant(counts if counts is not None else [0] * num_files, tf.int64)

    def epoch_groups(epoch):
        groups = _epoch_groups(epoch, num_files, cycle, seed)
        return tf.data.Dataset.from_tensor_slices((groups, tf.zeros_like(groups)))

    def read_group(indices, starts):
        keep = indices >= 0
        indices, starts = tf.boolean_mask(indices, keep), tf.boolean_mask(starts, keep)
        takes = tf.where(starts > 0, tf.gather(records_per_file, indices) - starts, -1)
        group = tf.data.Dataset.from_tensor_slices(
            (tf.gather(names, indices), tf.gather(byte_sizes, indices), starts, takes))
        return group.interleave(_file_records, cycle_length=cycle, block_length=1,
                                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    skip = 0
    if position == 0:
        groups = tf.data.Dataset.counter().flat_map(epoch_groups)
    else:
        with tf.device("/CPU:0"):  # the same op as in the pipeline, evaluated here
            epoch, group, entries, skip = _locate(
                counts, position, cycle, lambda e: _epoch_groups(tf.constant(e, tf.int64), num_files, cycle,
                                                                 seed).numpy())
        padded = entries + [(-1, 0)] * (cycle - len(entries))
        first = tf.data.Dataset.from_tensors((tf.constant([i for i, _ in padded], tf.int64),
                                              tf.constant([s for _, s in padded], tf.int64)))
        groups = first.concatenate(tf.data.Dataset.counter(epoch).flat_map(epoch_groups).skip(group + 1))
    return groups.flat_map(read_group).unbatch().skip(skip)


def _shuffle_windows(records, window, first_window, seed):
    """Shuffles a record stream within consecutive windows of `window` records, window w in an order seeded by
    (seed, w): a seekable shuffle (tf.data's shuffle buffer depends on everything before it)."""

    def permute(index, chunk):
        keys = tf.random.stateless_uniform([window], seed=tf.random.experimental.stateless_fold_in(
            seed, index, alg="philox"), alg="philox")
        order = tf.argsort(keys, stable=True)
        return tuple(tf.gather(t, order) for t in chunk)

    return records.batch(window, drop_remainder=True).enumerate(first_window).map(permute).unbatch()


# ---------------------------------------------------------------------------------------------- evaluation
def _zero_example(seq_length, max_predictions):
    """A serialized Example whose features are all zero: the padding of the last eval batches."""
    spec = features.feature_spec(seq_length, max_predictions)
    feature = {}
    for name, item in spec.items():
        if item.dtype == tf.float32:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[0.0] * item.shape[0]))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[0] * item.shape[0]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def eval_steps(total_records, global_batch_size, max_batches=None):
    """Global eval batches over `total_records` (at most `max_batches`): ceil(records / batch), the same for every
    input pipeline. ValueError when there is no record."""
    if total_records <= 0:
        raise ValueError("no eval record: the eval files are empty")
    steps = -(-total_records // global_batch_size)
    return steps if max_batches is None else min(steps, max_batches)


def _eval_range(files, sizes, counts, lo, hi):
    """Records [lo, hi) of the files taken one after the other: a dataset of (filename, record) pairs."""
    entries, first = [], 0
    for name, size, count in zip(files, sizes, counts):
        begin, end = max(lo, first), min(hi, first + count)
        if begin < end:
            whole = begin == first and end == first + count  # read to the end: the byte check applies
            entries.append((name, size, begin - first, -1 if whole else end - begin))
        first += count
    columns = list(zip(*entries)) if entries else [[], [], [], []]
    dataset = tf.data.Dataset.from_tensor_slices((tf.constant(columns[0], tf.string),) + tuple(
        tf.constant(c, tf.int64) for c in columns[1:]))
    return dataset.flat_map(_file_records).unbatch()


# ---------------------------------------------------------------------------------------------- parsing
def _parse_spec(seq_length, max_predictions, dynamic_masking):
    spec = features.feature_spec(seq_length, max_predictions)
    return {name: spec[name] for name in _required_features(dynamic_masking)}


def _make_to_batch(seq_length, max_predictions, dynamic_masking, base_seed, masking):
    """(group index, (names [n], records [n])) → a batch dict of n examples (see the module docstring)."""
    spec = _parse_spec(seq_length, max_predictions, dynamic_masking)

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
                                      seed=batch_seed, max_predictions=max_predictions, **masking))
        else:
            batch["masked_lm_positions"] = tf.cast(parsed["masked_lm_positions"], tf.int32)
            batch["masked_lm_ids"] = tf.cast(parsed["masked_lm_ids"], tf.int32)
            batch["masked_lm_weights"] = parsed["masked_lm_weights"]
        return batch

    return to_batch


def _with_weight(real):
    """(row index, example) → the example with `sentence_order_weights` 1 for rows < `real`, else 0 (padding)."""

    def add(index, example):
        weight = tf.cast(index < real, tf.float32)
        return dict(example, masked_lm_weights=example["masked_lm_weights"] * weight, sentence_order_weights=weight)

    return add


def _training_batches(files, sizes, counts, *, batch_size, group, start_batch, seed, pipeline_id, to_batch):
    """Training batches of one pipeline from its `start_batch`-th on (see the module docstring)."""
    window = _RECORD_SHUFFLE_WINDOW
    first_record = start_batch * batch_size
    first_group = first_record // group
    window_index, in_window = divmod(first_group * group, window)
    records = _training_records(files, sizes, counts, window_index * window,
                                tf.constant([seed, pipeline_id], tf.int64))
    records = _shuffle_windows(records, window, window_index, tf.constant([seed + 1, pipeline_id], tf.int64))
    dataset = records.skip(in_window).batch(group, drop_remainder=True).enumerate(first_group)
    dataset = dataset.map(to_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if group != batch_size:
        dataset = dataset.unbatch().skip(first_record - first_group * group).batch(batch_size, drop_remainder=True)
    return dataset


def _eval_batches(files, sizes, counts, *, seq_length, max_predictions, batch_size, group, max_batches,
                  input_context, to_batch):
    """This pipeline's eval batches: an equal share of whole global batches, padded (see the module docstring)."""
    pipeline_id, num_pipelines, global_batch = 0, 1, batch_size
    if input_context is not None:
        pipeline_id, num_pipelines = input_context.input_pipeline_id, input_context.num_input_pipelines
        global_batch = batch_size * input_context.num_replicas_in_sync
    total = min(sum(counts), global_batch * max_batches) if max_batches else sum(counts)
    steps = eval_steps(total, global_batch, max_batches)
    share = steps * global_batch // num_pipelines  # records per pipeline, padding included
    lo = min(pipeline_id * share, total)
    hi = min(lo + share, total)
    lead = lo % group  # rows before lo in its group: masks depend on the record's place in the eval set only
    zero = tf.data.Dataset.from_tensors((tf.constant("padding"), tf.constant(_zero_example(seq_length,
                                                                                          max_predictions))))
    records = zero.repeat(lead).concatenate(_eval_range(files, sizes, counts, lo, hi)).concatenate(
        zero.repeat(share - (hi - lo)))
    dataset = records.batch(group).enumerate(lo // group)
    dataset = dataset.map(to_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch().skip(lead)
    return dataset.enumerate().map(_with_weight(hi - lo)).batch(batch_size, drop_remainder=True)


def pretraining_dataset(file_pattern, *, seq_length, max_predictions, batch_size, is_training, input_context=None,
                        dynamic_masking=False, seed=None, masked_lm_prob=MASKED_LM_PROB, ngram=NGRAM, vocab_size=None,
                        start_batch=0, max_batches=None, record_counts=None):
    """A tf.data.Dataset of pretraining batches from TFRecords in the original create_pretraining_data.py format.

    Args:
      file_pattern: a glob or a list of globs (local or gs://); record-count indexes it matches are left out.
      seq_length, max_predictions: the records' max_seq_length and max_predictions_per_seq (checked per file).
      batch_size: the GLOBAL batch size. With `input_context` each input pipeline yields
        `input_context.get_per_replica_batch_size(batch_size)` examples per batch; without, `batch_size`.
      is_training: seeded shuffles, repeat forever (see the module docstring); otherwise every record exactly once
        in sorted-file order, shared among the input pipelines by record, padded to full batches (static shapes).
      input_context: a tf.distribute.InputContext. Training: pipeline i of n reads files i, i + n, ... (needs at
        least n files). Eval: any number of files.
      dynamic_masking: mask in-graph from unmasked records (create-data --no-mask), fresh masks every batch and
        epoch (see albert_tf.data.dynamic_masking); needs `vocab_size`.
      seed: makes the pipeline deterministic (orders and masks). None: a fresh random seed each call.
      masked_lm_prob, ngram, vocab_size: dynamic masking settings.
      start_batch: training: start at this pipeline's `start_batch`-th batch (resume), exactly as if the batches
        before it had been read, without reading them.
      max_batches: eval: at most this many global batches (the first records of the eval set).
      record_counts: {path: records} of the matched files; when needed (eval, or start_batch > 0) and not given,
        read from the index beside the files or counted.
    Returns:
      tf.data.Dataset of dicts (see the module docstring), batch dimension static.
    """
    if seq_length < 2 or max_predictions < 1 or max_predictions > seq_length:
        raise ValueError(f"need 2 <= seq_length and 1 <= max_predictions <= seq_length, "
                         f"got seq_length={seq_length}, max_predictions={max_predictions}")
    if dynamic_masking and vocab_size is None:
        raise ValueError("dynamic_masking=True needs vocab_size (random replacements are drawn from the vocabulary)")
    files = data_files(file_pattern)
    pipeline_id, num_pipelines = 0, 1
    if input_context is not None:
        pipeline_id, num_pipelines = input_context.input_pipeline_id, input_context.num_input_pipelines
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    if is_training and num_pipelines > 1:
        if len(files) < num_pipelines:
            raise ValueError(f"{len(files)} file(s) match {file_pattern!r} but there are {num_pipelines} input "
                             f"pipelines: write at least one shard per pipeline (create-data --num-shards)")
        files = files[pipeline_id::num_pipelines]
    sizes = _check_files(files, seq_length=seq_length, max_predictions=max_predictions,
                         dynamic_masking=dynamic_masking)
    if is_training and not any(sizes):
        raise ValueError(f"{file_pattern!r}: the files of input pipeline {pipeline_id} are all empty")
    counts = None
    if not is_training or start_batch:
        if record_counts is None or any(f not in record_counts for f in files):
            record_counts = record_index.record_counts(files, sizes)
        counts = [record_counts[f] for f in files]
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    group = _MASK_GROUP if dynamic_masking else _PARSE_GROUP  # eval: fixed, so masks do not depend on batch
    masking = dict(vocab_size=vocab_size, masked_lm_prob=masked_lm_prob, ngram=ngram)
    if is_training:
        to_batch = _make_to_batch(seq_length, max_predictions, dynamic_masking,
                                  tf.constant([seed, pipeline_id], tf.int64), masking)
        dataset = _training_batches(files, sizes, counts, batch_size=batch_size, group=max(batch_size, group),
                                    start_batch=start_batch, seed=seed, pipeline_id=pipeline_id, to_batch=to_batch)
    else:
        to_batch = _make_to_batch(seq_length, max_predictions, dynamic_masking, tf.constant([seed, -1], tf.int64),
                                  masking)
        dataset = _eval_batches(files, sizes, counts, seq_length=seq_length, max_predictions=max_predictions,
                                batch_size=batch_size, group=group, max_batches=max_batches,
                                input_context=input_context, to_batch=to_batch)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = True
    return dataset.with_options(options)

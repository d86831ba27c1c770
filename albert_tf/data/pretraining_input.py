"""Pretraining's input, as a run reads it: the records' checks before anything is built (lengths, token ids,
truncated files, shards of one run), their counts, the per-pipeline `dataset_fn` for
`strategy.distribute_datasets_from_function`, the eval length, and a data error raised mid-run as one line.

`config` is the run's PretrainConfig (albert_tf/settings/pretrain_config.py): max_seq_length, max_predictions,
dynamic_masking, masked_lm_prob, seed, max_eval_steps, model_dir, eval_data.
"""
import concurrent.futures
import os
import re

import tensorflow as tf

from albert_tf.data import dataset, record_index
from albert_tf.files import is_url
from albert_tf.settings.pretrain_config import PretrainConfig
from albert_tf.text import record


def record_counts(config: PretrainConfig, file_pattern, write_cache):
    """{path: records} of the files `file_pattern` matches: from create-data's index, else from the count cache in
    the model dir (written back when `write_cache`: the chief of a resumed run), else counted."""
    files = dataset.data_files(file_pattern)
    return record_index.record_counts(files, dataset.file_sizes(files),
                                      cache=os.path.join(config.model_dir, record_index.CACHE_NAME),
                                      write_cache=write_cache)


def pipeline_line(files, counts, pipeline_id, num_pipelines):
    """The start-up line of one training input pipeline: the files it reads (files i, i + n, ... of the sorted
    list, as pretraining_dataset takes them) and the records they hold (`counts`: {file: records}, those known)."""
    mine = files[pipeline_id::num_pipelines]
    records = (f"{sum(counts[f] for f in mine):,} records" if all(f in counts for f in mine) else
               "records not counted (no record-count index beside the files)")
    return (f"input pipeline {pipeline_id + 1}/{num_pipelines}: {len(mine)} train file(s) (files "
            f"{pipeline_id}::{num_pipelines} of the {len(files)} sorted), {records}")


def make_dataset_fn(config: PretrainConfig, model_config, file_pattern, global_batch_size, is_training,
                    skip_global_batches=0, counts=None, known_counts=None):
    """A dataset_fn for strategy.distribute_datasets_from_function: per-replica batches, static shapes
    (`model_config`: the AlbertConfig, whose vocabulary dynamic masking draws from).

    Replicas of one input pipeline take consecutive per-replica batches, so a global batch is the same examples
    whatever the number of replicas. Resuming positions each pipeline at the global batch `skip_global_batches`
    without reading what comes before (the data order is a function of (seed, step); `counts`: the files' record
    counts, `record_counts()`). Eval (`is_training=False`): every pipeline yields the same number of padded
    batches, at most --max-eval-steps global batches in all (`eval_steps()`). Training prints each pipeline's
    `pipeline_line` (`known_counts`: (sorted files, {file: records known})).
    """
    def dataset_fn(input_context):
        # batch_size is the global batch: with input_context the pipeline yields per-replica batches.
        replicas_per_pipeline = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        if is_training and known_counts:  # the share of the files this pipeline reads, and its records
            print(pipeline_line(*known_counts, input_context.input_pipeline_id, input_context.num_input_pipelines),
                  flush=True)
        return dataset.pretraining_dataset(
            file_pattern, seq_length=config.max_seq_length, max_predictions=config.max_predictions,
            batch_size=global_batch_size, is_training=is_training, input_context=input_context,
            dynamic_masking=config.dynamic_masking, seed=config.seed, masked_lm_prob=config.masked_lm_prob,
            vocab_size=model_config.vocab_size if config.dynamic_masking else None,
            start_batch=skip_global_batches * replicas_per_pipeline, record_counts=counts,
            max_batches=None if is_training else config.max_eval_steps)

    return dataset_fn


def eval_steps(config: PretrainConfig, counts, global_batch_size):
    """Global eval batches per evaluation: every eval record once, at most --max-eval-steps batches."""
    try:
        return dataset.eval_steps(sum(counts.values()), global_batch_size, config.max_eval_steps)
    except ValueError as e:
        raise ValueError(f"--eval-data {config.eval_data}: {e}") from None


def check_records(file_pattern, flag, config: PretrainConfig, vocab_size, walk=8):
    """Refuses, before anything is built: a pattern matching nothing; records whose lengths disagree with the flags
    or whose token ids run past the vocabulary (each file's first record); files cut short: a file that create-data's
    record-count index lists must have the size it records, and the record headers of up to `walk` other local
    files (spread over the list) are walked; create-data shards of one prefix from different runs
    (record_index.check_one_run). The files are checked in parallel (on gs:// each read is a round trip), so
    start-up hardly grows with the number of shards; the input pipeline checks every file again as it reads it.
    Returns {file: its size in bytes} (the sizes at start, which a data error mid-run is compared with)."""
    files = dataset.data_files(file_pattern, flag)
    record_index.check_one_run(files, flag)
    sizes = dataset.file_sizes(files)
    entries = record_index.index_entries(files)
    unlisted = [f for f in files if f not in entries and not is_url(f)]
    sample = set(unlisted if len(unlisted) <= walk else
                 [unlisted[i * (len(unlisted) - 1) // (walk - 1)] for i in range(walk)])

    def check(path, size):
        dataset.check_first_record(path, seq_length=config.max_seq_length, max_predictions=config.max_predictions,
                                   dynamic_masking=config.dynamic_masking, size=size)
        dataset.check_token_ids(path, vocab_size)
        if path in entries and entries[path][1] != size:
            raise ValueError(f"{path}: truncated or corrupt TFRecord file, or replaced: {size} bytes, but "
                             f"{entries[path][2]} lists {entries[path][1]} (delete that index if the file is right)")
        if path in sample:
            dataset.check_framing(path, size)

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(files))) as pool:
        futures = [pool.submit(check, path, size) for path, size in zip(files, sizes)]
        for future in futures:  # the first failure in file order
            try:
                future.result()
            except ValueError as e:
                raise ValueError(f"{flag}: {e}") from None
    return dict(zip(files, sizes))


def check_record_vocabulary(files, flag, spm_model, allow_unchecked=False):
    """Refuses records made with another vocabulary: a record-count index beside `files` whose "vocabulary"
    fingerprint (record_index.vocabulary_of) is not the SHA-256 of `spm_model` is a ValueError naming both files.
    Files that carry no fingerprint (no index beside them: copied without it, or made by the original tool; or an
    index an older release wrote) cannot be checked: refused in one line naming the first and what it lacks, unless
    `allow_unchecked` (--allow-unchecked-records), which returns a note (one line) for them instead. Returns None
    when every file was checked. Nothing is checked without a vocabulary (`spm_model` None)."""
    if not spm_model:
        return None
    wanted = record.file_fingerprint(spm_model)
    entries = record_index.index_entries(files)
    vocabularies, unmarked = {}, []
    for path in files:
        index = entries[path][2] if path in entries else None
        if index is not None and index not in vocabularies:
            vocabularies[index] = record_index.vocabulary_of(index)
        found = vocabularies.get(index)
        if found is None:
            unmarked.append(path)
        elif found["sha256"] != wanted:
            raise ValueError(f"{flag}: {index} records that its shards were tokenized with the SentencePiece "
                             f"model {found['sha256'][:12]}…, not {spm_model} ({wanted[:12]}…): make the records "
                             "again with this vocabulary (create-data --spm-model) or pretrain with theirs")
    if not unmarked:
        return None
    if allow_unchecked:
        return (f"{flag}: {len(unmarked)} of {len(files)} file(s) carry no vocabulary fingerprint (e.g. "
                f"{unmarked[0]}): not checked against {spm_model} (--allow-unchecked-records)")
    first = unmarked[0]
    index = entries[first][2] if first in entries else None
    expected = record_index.shard_index(first) or "DIR/.NAME.record_counts.json for create-data's --output DIR/NAME"
    lacks = (f"its record-count index {index} records no vocabulary (an older release wrote it)" if index else
             f"no record-count index beside it ({expected}: create-data writes it, hidden, beside its shards; "
             "`cp DIR/*.tfrecord` leaves it behind)")
    more = f" and {len(unmarked) - 1} more file(s) carry" if len(unmarked) > 1 else " carries"
    raise ValueError(f"{flag}: {first}{more} no vocabulary fingerprint, so cannot be checked against "
                     f"{spm_model}: {lacks}; copy the index along, or pass --allow-unchecked-records to read them "
                     "unchecked (records of the original tool)")


_ASSERTION = re.compile(r"assertion failed: \[(.*)\]")


def data_error(e):
    """A data error raised inside the compiled loop (the input pipeline's check of a truncated, corrupt or changed
    file, TensorFlow's own record check, a file gone) as one line naming the file, or None if `e` is something
    else."""
    if isinstance(e, tf.errors.NotFoundError):
        return str(e).strip().splitlines()[0] if str(e).strip() else None
    for line in str(e).splitlines():
        if "truncated or corrupt" in line or "corrupted record" in line.lower():
            match = _ASSERTION.search(line)
            return (match.group(1) if match else line).strip()
    return None


def changed_files(sizes):
    """[(flag, path, size at start, size now or None: gone)] of the data files whose size is not what it was
    (`sizes`: {flag: {path: size at start}}, from check_inputs)."""
    changed = []
    for flag, by_path in sizes.items():
        for path, size in by_path.items():
            now = tf.io.gfile.stat(path).length if tf.io.gfile.exists(path) else None
            if now != size:
                changed.append((flag, path, size, now))
    return changed

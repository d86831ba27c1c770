"""create-data as an Apache Beam pipeline, for corpora that outgrow one machine (extra `[beam]`): the library of
`albert-tf create-data --beam` (albert_tf/jobs/create_data.py).

    albert-tf create-data --beam --input 'gs://bucket/corpus/*.txt' --spm-model gs://bucket/spm.model \\
        --output gs://bucket/data/train --num-shards 1024 [the create-data flags] \\
        -- --runner DataflowRunner --project P --region R --temp_location gs://bucket/tmp ...

The words after `--` are Beam's PipelineOptions (runner, project, workers, ...); `--workers` does not apply (the
runner decides the parallelism).

The pipeline is the local tool's, stage for stage, with the same code (albert_tf.data.instances):
  files → blocks of documents (read per file, streaming) → reshuffle → records (BlockProcessor, the tokenizer
  loaded once per worker) → shard = crc32(record) mod N → group by shard → PREFIX-SSSSS-of-NNNNN.tfrecord, each
  written by tf.io.TFRecordWriter under a temporary name and renamed when complete (no crc32c package needed)
  → the record-count index DIR/.NAME.record_counts.json (albert_tf.data.record_index).
Each file is read by one worker (streaming, block by block) while the blocks are built on all workers, so give
a large corpus as many files. Each block is seeded from (seed, file, block) and its documents from (seed, file,
document, round), so the pipeline writes exactly the records the local `create-data` writes for the same input,
seed and block size — only their order and their assignment to shards differ. Counters (instances, documents, ...) are reported at the end,
and the same bad-input errors are raised, skipped text past --max-skipped-share included (checked once the
pipeline ends: its shards are then deleted, never left behind). The output prefix is
owned as the local tool owns it: one run at a time (its lock), an earlier run's other shards refused unless
--overwrite, temporary files of interrupted runs removed.
"""
import os
import zlib

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from albert_tf import run_config
from albert_tf.runtime import lock
from albert_tf.files import check_output_prefix, match_files
from albert_tf.data import create_pretraining_data as local
from albert_tf.data import instances as _instances
from albert_tf.data import record_index
from albert_tf.data.corpus import check_text_files
from albert_tf.settings.create_data_config import CreateDataConfig

_NAMESPACE = "albert_tf.create_data"
_REPLACED_NAMESPACE = "albert_tf.replaced_bytes"
_FILES_NAMESPACE = "albert_tf.by_file"  # counters "INDEX instances" and "INDEX skipped_bytes" per input file


def _beam_glob(pattern):
    return [m.path for r in FileSystems.match([pattern]) for m in r.metadata_list]


def _read_blocks(indexed_path, block_documents, piece_bytes):
    file_index, path = indexed_path
    with FileSystems.open(path) as f:
        for block in _instances.iter_blocks(iter(f.readline, b""), file_index, block_documents,
                                            piece_bytes=piece_bytes):
            if block.replaced_bytes:
                Metrics.counter(_REPLACED_NAMESPACE, path).inc(block.replaced_bytes)
            yield block


class _BuildRecords(beam.DoFn):
    """Block → serialized Examples (albert_tf.data.instances.BlockProcessor), counting BlockStats."""

    def __init__(self, model_proto, lower_case, options, keep_accents=False):
        super().__init__()
        self.model_proto, self.lower_case, self.options = model_proto, lower_case, options
        self.keep_accents = keep_accents
        self.processor = None

    def setup(self):
        from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

        tokenizer = AlbertTokenizer(self.model_proto, lower_case=self.lower_case, keep_accents=self.keep_accents)
        self.processor = _instances.BlockProcessor(tokenizer, self.options)

    def process(self, block):
        records, stats = self.processor.process(block)
        for name, value in vars(stats).items():
            if name != "replaced_bytes":
                Metrics.counter(_NAMESPACE, name).inc(value)
        for name in ("instances", "skipped_bytes"):
            Metrics.counter(_FILES_NAMESPACE, f"{block.file_index} {name}").inc(getattr(stats, name))
        yield from records


def _write_shard(shard_records, paths):
    """(shard index, records) → the shard file, written under a temporary name then renamed. Returns (path,
    records, bytes)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.files import temp_path_for  # pylint: disable=import-outside-toplevel

    shard, records = shard_records
    path = paths[shard]
    tmp = temp_path_for(path)
    count = 0
    try:
        with tf.io.TFRecordWriter(tmp) as writer:
            for record in records:
                writer.write(record)
                count += 1
        tf.io.gfile.rename(tmp, path, overwrite=True)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
    return path, count, tf.io.gfile.stat(path).length


def _write_index(written, output_prefix, paths, vocabulary=None):
    """[(path, records, bytes)] of the written shards → the record-count index (a shard that received no record
    is listed empty: the driver writes it afterwards, 0 bytes), with the vocabulary's fingerprint."""
    entries = {os.path.basename(p): (0, 0) for p in paths}
    entries.update({os.path.basename(p): (count, size) for p, count, size in written})
    record_index.write_index(record_index.index_path(output_prefix), entries, vocabulary=vocabulary)


def build_pipeline(pipeline, files, model_proto, output_prefix, *, num_shards, options, lower_case,
                   block_documents=_instances.BLOCK_DOCUMENTS, keep_accents=False, vocabulary=None):
    """Adds the create-data stages to `pipeline` (a beam.Pipeline), the record-count index last (with
    `vocabulary`, record_index.vocabulary_entry). Returns the PCollection of (written path, records, bytes)."""
    paths = local.shard_paths(output_prefix, num_shards)
    written = (
        pipeline
        | "Files" >> beam.Create(list(enumerate(files)))
        | "ReadBlocks" >> beam.FlatMap(_read_blocks, block_documents, _instances.piece_bytes(options))
        | "Distribute" >> beam.Reshuffle()
        | "BuildRecords" >> beam.ParDo(_BuildRecords(model_proto, lower_case, options, keep_accents))
        | "AssignShard" >> beam.Map(lambda record: (zlib.crc32(record) % num_shards, record))
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.Map(_write_shard, paths))
    _ = (written | "CollectCounts" >> beam.combiners.ToList()
         | "WriteIndex" >> beam.Map(_write_index, output_prefix, paths, vocabulary))
    return written


def _counters(result):
    def value(counter):
        try:
            return counter.committed or 0
        except Exception:  # pylint: disable=broad-except  # runners without committed metrics
            return counter.attempted or 0

    query = result.metrics().query(MetricsFilter())
    totals, replaced, by_file = {}, {}, {}
    for counter in query["counters"]:
        key = counter.key.metric
        found = {_NAMESPACE: totals, _REPLACED_NAMESPACE: replaced, _FILES_NAMESPACE: by_file}.get(key.namespace)
        if found is not None:
            found[key.name] = found.get(key.name, 0) + value(counter)
    return totals, replaced, by_file


def run_pipeline(input_pattern, spm_model, output_prefix, *, num_shards=1, options=None, lower_case=None,
                 pipeline_options=None, block_documents=_instances.BLOCK_DOCUMENTS, progress=True, overwrite=False,
                 keep_accents=None, max_skipped_share=run_config.default_for(CreateDataConfig, "max_skipped_share")):
    """Runs create-data on Beam and waits for it. Returns a create_pretraining_data.Summary.

    Args:
      input_pattern, spm_model, output_prefix, num_shards, options, lower_case, block_documents, overwrite,
        keep_accents, max_skipped_share: as `albert_tf.data.create_pretraining_data.create_pretraining_data` (lower_case None: as
        the vocabulary's record says, else True).
      pipeline_options: apache_beam PipelineOptions (runner and its settings); DirectRunner when None.
    Raises:
      FileNotFoundError / ValueError: the local tool's bad-input errors (no partial output is left).
    """
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    options = (options or local.InstanceOptions()).validate()
    if num_shards < 1:
        raise ValueError(f"--num-shards must be at least 1, got {num_shards}")
    local.check_skipped_share(max_skipped_share)
    check_output_prefix(output_prefix, "--output", "train")
    files = match_files(input_pattern, "--input", glob=_beam_glob)
    check_text_files(files, opener=FileSystems.open)
    tokenizer = AlbertTokenizer(spm_model, lower_case=lower_case, keep_accents=keep_accents)  # fails early
    outputs = local.shard_paths(output_prefix, num_shards)
    stale = local.earlier_shards(output_prefix, outputs, overwrite)
    with lock.prefix_lock(output_prefix, "--output"):  # one run per prefix (the local tool's lock)
        local.remove_leftover_temps(output_prefix)
        return _run(files, tokenizer, output_prefix, outputs, stale, num_shards=num_shards, options=options,
                    pipeline_options=pipeline_options, block_documents=block_documents,
                    progress=progress, max_skipped_share=max_skipped_share)


def _run(files, tokenizer, output_prefix, outputs, stale, *, num_shards, options, pipeline_options,
         block_documents, progress, max_skipped_share):
    """The pipeline's run (run_pipeline's work, under the prefix's lock); returns the Summary."""
    import time  # pylint: disable=import-outside-toplevel

    index = record_index.index_path(output_prefix)
    if FileSystems.exists(index):  # a previous run's counts must never describe the new shards
        FileSystems.delete([index])
    start = time.time()
    pipeline = beam.Pipeline(options=pipeline_options or PipelineOptions([]))
    build_pipeline(pipeline, files, tokenizer.model_proto, output_prefix, num_shards=num_shards, options=options,
                   lower_case=tokenizer.lower_case, block_documents=block_documents,
                   keep_accents=tokenizer.keep_accents, vocabulary=record_index.vocabulary_entry(tokenizer))
    result = pipeline.run()
    result.wait_until_finish()
    totals, replaced, by_file = _counters(result)
    stats = _instances.BlockStats(**{k: v for k, v in totals.items() if k in vars(_instances.BlockStats())})
    stats.replaced_bytes = sum(replaced.values())
    tally = local.FileTally(files, [m.size_in_bytes for r in FileSystems.match(files) for m in r.metadata_list])
    for file_index, path in enumerate(files):
        tally.add(path, by_file.get(f"{file_index} instances", 0), 0, by_file.get(f"{file_index} skipped_bytes", 0))
    tally.skipped_documents = stats.skipped_documents
    error = None
    if stats.documents == 0:
        error = f"empty corpus: no text in {', '.join(files)}"
    elif stats.instances == 0:
        error = (f"no instance could be made: all {stats.documents} documents in {', '.join(files)} have fewer "
                 "than 2 sentences (one sentence per line, a blank line between documents)")
    else:
        try:
            tally.check(max_skipped_share)
        except ValueError as e:
            error = str(e)
    if error:
        FileSystems.delete([p for p in outputs + [index] if FileSystems.exists(p)])
        raise ValueError(error)
    for path in outputs:  # a shard that received no record is still written, empty
        if not FileSystems.exists(path):
            _write_shard((0, []), [path])
    if stale:  # an earlier run's shards that these do not replace (run_pipeline's overwrite)
        FileSystems.delete(stale)
    summary = local.Summary(outputs, stats, replaced, time.time() - start, tally.input_bytes, tally.skipped_files())
    if progress:
        summary.print()
    return summary

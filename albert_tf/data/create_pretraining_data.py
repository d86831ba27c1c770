"""`albert-tf create-data`: raw text → pretraining TFRecords (SOP pairs, n-gram whole-word masking).

    albert-tf create-data --input 'corpus/*.txt' --spm-model spm.model --output data/train \\
        [--num-shards N] [--max-seq-length 512] [--max-predictions 20] [--masked-lm-prob 0.15] [--ngram 3]
        [--dupe-factor 1] [--short-seq-prob 0.1] [--seed 12345] [--workers N] [--no-mask]

Input: the original format, one sentence per line and a blank line between documents (comma-separated globs,
local or gs://). Output: PREFIX-00000-of-0000N.tfrecord ... holding the features of albert_tf.data.features, so
records made here and by google-research/albert's create_pretraining_data.py are interchangeable. `--no-mask` writes
unmasked records (zero prediction slots) for the input pipeline's dynamic masking.

How it differs from the original (see albert_tf.data.instances for the instance semantics):
  * it streams: files are read line by line, grouped into blocks of up to 256 documents (or 1 MiB), and each
    block is turned into records and written before the next is read, so memory is bounded by a few blocks per
    worker whatever the corpus size (the original holds every document and every instance in memory);
  * the output is a function of the input and --seed only: the same bytes whatever --workers, because blocks
    are cut by the input alone, every draw is seeded from (seed, file, document, dupe round) or (seed, file,
    block), and records are written in block order, dealt round-robin to the shards;
  * all shards are written under temporary names and renamed only when everything succeeded; then the record-count
    index DIR/.NAME.record_counts.json (albert_tf.data.record_index) lists each shard's records and bytes, so that
    pretraining resumes at any step without reading the records before it.

Python API: `create_pretraining_data(input_pattern, spm_model, output_prefix, ...)` returns a `Summary`.
"""
import collections
import contextlib
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time

from albert_tf.text.vocabulary import SPM_FILE
from albert_tf.files import check_input_file, check_output_dir, match_files
from albert_tf.data import instances as _instances
from albert_tf.data import record_index
from albert_tf.data.instances import InstanceOptions

__all__ = ["InstanceOptions", "Summary", "create_pretraining_data", "add_arguments", "run", "match_files",
           "shard_paths"]


@dataclasses.dataclass
class Summary:
    """What a run wrote. `stats` holds the counts (see instances.BlockStats)."""
    output_files: list
    stats: _instances.BlockStats
    replaced_by_file: dict
    seconds: float

    def lines(self):
        s = self.stats
        masked = s.masked / max(1, s.maskable)
        swapped = s.swapped / max(1, s.instances)
        out = [
            f"wrote {s.instances} instances ({s.tokens} tokens) to {len(self.output_files)} shard(s): "
            f"{self.output_files[0]}{' ...' if len(self.output_files) > 1 else ''}",
            f"documents {s.documents}, skipped (fewer than 2 sentences) {s.skipped_documents}",
            f"masked fraction {masked:.4f} of non-special tokens; SOP labels: 1 (swapped or random B) {swapped:.4f}, "
            f"0 {1 - swapped:.4f}; one-sentence chunks paired with another document {s.random_next}",
            f"{s.instances / max(self.seconds, 1e-9):.0f} instances/s over {self.seconds:.1f} s",
        ]
        for path, count in self.replaced_by_file.items():
            out.append(f"warning: {path}: replaced {count} bytes of invalid UTF-8 with U+FFFD")
        return out


def shard_paths(output_prefix, num_shards):
    """The output file names: PREFIX-00000-of-0000N.tfrecord (the same template as the Beam pipeline)."""
    return [f"{output_prefix}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]


def _read_lines(path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if "://" not in path:
        with open(path, "rb") as f:
            yield from f
        return
    with tf.io.gfile.GFile(path, "rb") as f:
        while True:
            line = f.readline()
            if not line:
                return
            yield line


class _ByteCounter:
    """Wraps a line iterator, counting bytes read (for the progress bar)."""

    def __init__(self):
        self.total = 0

    def wrap(self, lines):
        for line in lines:
            self.total += len(line)
            yield line


def _blocks(files, counter, block_documents):
    for file_index, path in enumerate(files):
        for block in _instances.iter_blocks(counter.wrap(_read_lines(path)), file_index, block_documents):
            yield path, block


# ---------------------------------------------------------------------------------------------- worker side
_PROCESSOR = None


def _init_worker(model_proto, lower_case, options):
    global _PROCESSOR  # pylint: disable=global-statement
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    _PROCESSOR = _instances.BlockProcessor(AlbertTokenizer(model_proto, lower_case=lower_case), options)


def _process(block):
    return _PROCESSOR.process(block)


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored inside the block (on the main thread; elsewhere Python cannot change handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _start_pool(workers, model_proto, lower_case, options):
    """The worker processes, started with SIGINT ignored (a disposition a spawned process inherits and keeps):
    Ctrl-C in a terminal reaches the whole process group, and only this process acts on it (it stops the workers
    and removes its temp files); a worker would otherwise print a KeyboardInterrupt traceback of its own."""
    context = multiprocessing.get_context("spawn")
    with _sigint_ignored():
        return context.Pool(workers, initializer=_init_worker, initargs=(model_proto, lower_case, options))


class _Progress:
    def __init__(self, total_bytes, enabled):
        self.total = max(1, total_bytes)
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.start = self.last = time.time()

    def update(self, done_bytes, stats, final=False):
        now = time.time()
        if not self.enabled or (not final and now - self.last < (0.5 if self.tty else 10.0)):
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        frac = min(1.0, done_bytes / self.total)
        bar = "#" * int(frac * 20)
        line = (f"[{bar:<20}] {100 * frac:5.1f}%  {stats.documents} docs ({stats.documents / elapsed:.0f}/s)  "
                f"{stats.instances} instances ({stats.instances / elapsed:.0f}/s)")
        end = "\n" if final or not self.tty else ""
        print(("\r" if self.tty else "") + line, end=end, file=sys.stderr, flush=True)


def create_pretraining_data(input_pattern, spm_model, output_prefix, *, num_shards=1, options=None, workers=1,
                            lower_case=True, progress=True,
                            block_documents=_instances.BLOCK_DOCUMENTS):
    """Writes pretraining TFRecords; see the module docstring.

    Args:
      input_pattern: comma-separated file globs (local or gs://).
      spm_model: the SentencePiece model path (from `albert-tf vocab`).
      output_prefix: shards are written to PREFIX-%05d-of-%05d.tfrecord (parent folders are created).
      num_shards: number of output files; instances are dealt round-robin.
      options: InstanceOptions (max_seq_length, max_predictions, masked_lm_prob, ngram, dupe_factor,
        short_seq_prob, seed, mask).
      workers: processes building instances (1: in this process). The output does not depend on it.
      lower_case: the tokenizer's lowercasing (False for a cased vocabulary).
      progress: print a progress bar and the summary to stderr.
      block_documents: documents per block (the unit of work, of in-block shuffling and of the fallback's
        random document); part of what determines the output, like the seed.
    Returns:
      Summary.
    Raises:
      FileNotFoundError: a glob matches nothing, or the model is missing.
      ValueError: bad options, an empty corpus, or no document long enough to make an instance.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    options = (options or InstanceOptions()).validate()
    if num_shards < 1:
        raise ValueError(f"--num-shards must be at least 1, got {num_shards}")
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    check_output_dir(output_prefix, "--output", prefix=True)
    if not isinstance(spm_model, (bytes, bytearray)):
        check_input_file(spm_model, "--spm-model", SPM_FILE)
    files = match_files(input_pattern)
    tokenizer = AlbertTokenizer(spm_model, lower_case=lower_case)
    total_bytes = sum(tf.io.gfile.stat(f).length for f in files)
    stats = _instances.BlockStats()
    replaced = collections.OrderedDict()
    counter = _ByteCounter()
    bar = _Progress(total_bytes, progress)
    start = time.time()
    shards = _Shards(output_prefix, num_shards)
    pool = None
    try:
        def consume(path, block_result):
            records, block_stats = block_result
            stats.add(block_stats)
            if block_stats.replaced_bytes:
                replaced[path] = replaced.get(path, 0) + block_stats.replaced_bytes
            shards.write(records)
            bar.update(counter.total, stats)

        blocks = _blocks(files, counter, block_documents)
        if workers == 1:
            processor = _instances.BlockProcessor(tokenizer, options)
            for path, block in blocks:
                consume(path, processor.process(block))
        else:
            pool = _start_pool(workers, tokenizer.model_proto, lower_case, options)
            _process_in_pool(pool, workers, blocks, consume)
        shards.close()
        _check_made_instances(stats, files)
        shards.publish()
    finally:
        with _sigint_ignored():  # a second Ctrl-C does not cut the clean-up short
            if pool is not None:
                pool.terminate()
                pool.join()
            shards.discard()
    summary = Summary(shards.outputs, stats, dict(replaced), time.time() - start)
    bar.update(counter.total, stats, final=True)
    if progress:
        for line in summary.lines():
            print(line, file=sys.stderr)
    return summary


def _process_in_pool(pool, workers, blocks, consume):
    """Each (path, block) through the pool's `_process`, results consumed in block order; at most 2 blocks per
    worker in flight (bounded memory)."""
    pending = collections.deque()
    for path, block in blocks:
        pending.append((path, pool.apply_async(_process, (block,))))
        while len(pending) > 2 * workers:
            p, result = pending.popleft()
            consume(p, result.get())
    while pending:
        p, result = pending.popleft()
        consume(p, result.get())


def _check_made_instances(stats, files):
    if stats.documents == 0:
        raise ValueError(f"empty corpus: no text in {', '.join(files)}")
    if stats.instances == 0:
        raise ValueError(
            f"no instance could be made: all {stats.documents} documents in {', '.join(files)} have fewer "
            "than 2 sentences (one sentence per line, a blank line between documents)")


class _Shards:
    """The output shards, written under temporary names and dealt records round-robin; `publish` renames them
    all into place and writes the record-count index beside them (all the shards or none), `discard` removes
    whatever temporary file is left (call it in a finally)."""

    def __init__(self, output_prefix, num_shards):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        from albert_tf.files import temp_path_for  # pylint: disable=import-outside-toplevel

        self.output_prefix = output_prefix
        self.outputs = shard_paths(output_prefix, num_shards)
        parent = os.path.dirname(output_prefix)
        if parent:
            tf.io.gfile.makedirs(parent)
        self.temps = [temp_path_for(p) for p in self.outputs]
        self.counts = [0] * num_shards
        self.next = 0
        self.writers = []
        try:
            for tmp in self.temps:
                self.writers.append(tf.io.TFRecordWriter(tmp))
        except BaseException:
            self.discard()
            raise

    def write(self, records):
        for record in records:
            self.writers[self.next].write(record)
            self.counts[self.next] += 1
            self.next = (self.next + 1) % len(self.outputs)

    def close(self):
        for w in self.writers:
            w.close()
        self.writers = []

    def publish(self):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        index = record_index.index_path(self.output_prefix)
        with _sigint_ignored():  # all the shards or none: Ctrl-C waits for the last rename (milliseconds)
            if tf.io.gfile.exists(index):  # a previous run's counts must never describe these shards
                tf.io.gfile.remove(index)
            for tmp, final in zip(self.temps, self.outputs):
                tf.io.gfile.rename(tmp, final, overwrite=True)
            record_index.write_index(index, {os.path.basename(path): (count, tf.io.gfile.stat(path).length)
                                             for path, count in zip(self.outputs, self.counts)})

    def discard(self):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        self.close()
        for tmp in self.temps:
            if tf.io.gfile.exists(tmp):
                tf.io.gfile.remove(tmp)


# ---------------------------------------------------------------------------------------------- CLI
def add_arguments(parser):
    parser.add_argument("--input", required=True, help="comma-separated globs of text files (one sentence per "
                        "line, a blank line between documents)")
    parser.add_argument("--spm-model", required=True, help="SentencePiece model from `albert-tf vocab`")
    parser.add_argument("--output", required=True, help="output prefix: PREFIX-00000-of-0000N.tfrecord ...")
    parser.add_argument("--num-shards", type=int, default=1, help="output files")
    parser.add_argument("--max-seq-length", type=int, default=512, help="tokens per sequence")
    parser.add_argument("--max-predictions", type=int, default=20, help="masked LM predictions per sequence")
    parser.add_argument("--masked-lm-prob", type=float, default=0.15,
                        help="fraction of the tokens masked")
    parser.add_argument("--ngram", type=int, default=3, help="longest masked n-gram (in whole words)")
    parser.add_argument("--dupe-factor", type=int, default=1, help="passes over the corpus, each with new "
                        "chunking and masks")
    parser.add_argument("--short-seq-prob", type=float, default=0.1,
                        help="probability of a shorter target length for a sequence")
    parser.add_argument("--seed", type=int, default=12345, help="seeds chunking, pairing and masking")
    parser.add_argument("--workers", type=int, default=1, help="processes (the output does not depend on it)")
    parser.add_argument("--no-mask", action="store_true", help="write unmasked records (for dynamic masking)")
    parser.add_argument("--cased", action="store_true", help="keep case (for a vocabulary made with `vocab --cased`)")


def options_from_args(args):
    return InstanceOptions(max_seq_length=args.max_seq_length, max_predictions=args.max_predictions,
                           masked_lm_prob=args.masked_lm_prob, ngram=args.ngram, dupe_factor=args.dupe_factor,
                           short_seq_prob=args.short_seq_prob, seed=args.seed, mask=not args.no_mask)


def run(args):
    """The CLI job. Ctrl-C: the workers stop, the temp files are removed, one line, exit 130 (nothing is written:
    the shards are renamed into place only once all of them are complete)."""
    try:
        create_pretraining_data(args.input, args.spm_model, args.output, num_shards=args.num_shards,
                                options=options_from_args(args), workers=args.workers, lower_case=not args.cased)
    except KeyboardInterrupt:
        print("albert-tf create-data: interrupted: no shard written, the temporary files removed", file=sys.stderr,
              flush=True)
        return 130
    return 0

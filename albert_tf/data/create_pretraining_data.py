"""Raw text → pretraining TFRecords (SOP pairs, n-gram whole-word masking): the work of `albert-tf create-data`
(the job, its settings and its Python call: albert_tf/jobs/create_data.py).

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
import re
import signal
import sys
import threading
import time

from albert_tf import messages, run_config
from albert_tf.runtime import exit_codes, leftovers, lock
from albert_tf.text import AlbertTokenizer
from albert_tf.text.vocabulary import SPM_FILE
from albert_tf.files import check_input_file, check_output_prefix, exists, listdir, match_files, temp_path_for
from albert_tf.data import instances as _instances
from albert_tf.data import record_index
from albert_tf.data.corpus import check_text_files
from albert_tf.data.instances import InstanceOptions
from albert_tf.settings.create_data_config import CreateDataConfig

__all__ = ["InstanceOptions", "Summary", "create_pretraining_data", "match_files", "shard_paths"]


# The SOP labels' share of 1 is 0.5 but for the one-sentence chunks, which take B from another document, always
# label 1: when they take it past this distance from 0.5 (or the labels drawn are that far and further than chance
# explains, 3 standard deviations) the summary warns.
SOP_IMBALANCE = 0.1


@dataclasses.dataclass
class Summary:  # pylint: disable=too-many-instance-attributes
    """What a run wrote. `stats` holds the counts (see instances.BlockStats); `input_bytes` the input files' size;
    `skipped_files` [(path, bytes)] the input files that made no instance (every document shorter than 2
    sentences, or no text)."""
    output_files: list
    stats: _instances.BlockStats
    replaced_by_file: dict
    seconds: float
    input_bytes: int = 0
    skipped_files: list = dataclasses.field(default_factory=list)

    def lines(self):
        s = self.stats
        masked = s.masked / max(1, s.maskable)
        swapped = s.swapped / max(1, s.instances)
        out = [
            f"wrote {s.instances} instances ({s.tokens} tokens) to {len(self.output_files)} shard(s): "
            f"{self.output_files[0]}{' ...' if len(self.output_files) > 1 else ''}",
            f"documents {s.documents}, skipped (fewer than 2 sentences) {s.skipped_documents}: "
            f"{s.skipped_bytes:,} of the input's {self.input_bytes:,} bytes "
            f"({100 * s.skipped_bytes / max(1, self.input_bytes):.1f}%)",
            f"masked fraction {masked:.4f} of non-special tokens; SOP labels: 1 (swapped or random B) {swapped:.4f}, "
            f"0 {1 - swapped:.4f}; one-sentence chunks paired with another document {s.random_next}",
            f"{s.instances / max(self.seconds, 1e-9):.0f} instances/s over {self.seconds:.1f} s",
        ]
        if s.split_lines:
            out.insert(2, f"{s.split_lines} line(s) longer than {_instances.LONG_LINE} bytes cut into sentences (as "
                          "vocab cuts them), each a sentence of its own")
        if self.skipped_files:
            out.insert(2, f"skipped {len(self.skipped_files)} file(s) that made no instance (every document shorter "
                          f"than 2 sentences, or no text): {_sized(self.skipped_files, len(self.skipped_files))}")
        return out

    def warnings(self):
        """Invalid UTF-8 replaced, per file; SOP labels out of balance (`sop_balance_warning`)."""
        found = [f"{path}: replaced {count} bytes of invalid UTF-8 with U+FFFD"
                 for path, count in self.replaced_by_file.items()]
        found += [sop_balance_warning(self.stats)] if sop_balance_warning(self.stats) else []
        return [messages.line("warning", text, "create-data") for text in found]

    def print(self):
        """The summary on stdout (the result), its warnings on stderr."""
        for line in self.warnings():
            print(line, file=sys.stderr)
        for line in self.lines():
            print(line)


def sop_balance_warning(stats):
    """A warning when the records' SOP labels are out of balance, else None: the one-sentence chunks, whose B
    comes from another document (from the same one when the corpus holds one document) and which are always
    labelled 1, move the share of 1 more than SOP_IMBALANCE from 0.5, or the share drawn is that far and further
    than chance explains. The warning names the cause."""
    if not stats.instances:
        return None
    share = stats.swapped / stats.instances
    expected = 0.5 + 0.5 * stats.random_next / stats.instances
    if (expected - 0.5 <= SOP_IMBALANCE
            and abs(share - 0.5) <= max(SOP_IMBALANCE, 3 * 0.5 / stats.instances ** 0.5)):
        return None
    where = ("the same document (the corpus is one document: a blank line ends a document)"
             if stats.documents == 1 else "another document")
    return (f"SOP labels out of balance: {100 * share:.0f}% of the {stats.instances} instances are labelled 1 "
            f"(swapped or random B), not about 50%: {stats.random_next} one-sentence chunks (a line as long as an "
            f"instance) took their B from {where} and are always labelled 1; more documents and one sentence per "
            "line balance it")


def _sized(files, shown=4):
    """'a.txt (12,345 bytes), b.txt (0 bytes)' for [(path, bytes)], at most `shown` of them, then 'and N more'."""
    more = f" and {len(files) - shown} more" if len(files) > shown else ""
    return ", ".join(f"{path} ({size:,} bytes)" for path, size in files[:shown]) + more


class FileTally:
    """Per input file: the instances it made and the documents it had skipped (fewer than 2 sentences), with their
    bytes. `check` stops a run whose skipped documents hold more than a share of the input."""

    def __init__(self, files, sizes):
        self.files, self.sizes = list(files), dict(zip(files, sizes))
        self.input_bytes = sum(sizes)
        self.instances, self.skipped_bytes, self.skipped_documents = {}, {}, 0

    def add(self, path, instances, skipped_documents, skipped_bytes):
        """Counts one block of `path`."""
        self.instances[path] = self.instances.get(path, 0) + instances
        self.skipped_bytes[path] = self.skipped_bytes.get(path, 0) + skipped_bytes
        self.skipped_documents += skipped_documents

    def skipped_files(self):
        """[(path, bytes)] of the files that made no instance, in input order."""
        return [(path, self.sizes[path]) for path in self.files if not self.instances.get(path)]

    def check(self, max_share, flag="--max-skipped-share"):
        """ValueError (one line naming the files most of it is in) once the skipped documents hold more than
        `max_share` of the input's bytes. The count only grows as blocks are added, so a run can stop as soon as
        it passes."""
        skipped = sum(self.skipped_bytes.values())
        if skipped <= max_share * self.input_bytes:
            return
        worst = sorted(((p, n) for p, n in self.skipped_bytes.items() if n), key=lambda item: -item[1])
        raise ValueError(
            f"skipped text: {self.skipped_documents} document(s) with fewer than 2 sentences hold {skipped:,} of the "
            f"input's {self.input_bytes:,} bytes ({100 * skipped / max(1, self.input_bytes):.1f}%), more than "
            f"{flag} {max_share:g}; most in "
            + ", ".join(f"{path} ({n:,} of its {self.sizes[path]:,} bytes)" for path, n in worst[:4])
            + (f" and {len(worst) - 4} more file(s)" if len(worst) > 4 else "")
            + ": put one sentence per line and a blank line between documents, or raise the flag (1: never stop); "
              "no shard written")


def shard_paths(output_prefix, num_shards):
    """The output file names: PREFIX-00000-of-0000N.tfrecord (the same template as the Beam pipeline)."""
    return [f"{output_prefix}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]


# ---------------------------------------------------------------------------------------------- the output prefix
def earlier_shards(output_prefix, outputs, overwrite):
    """The shards of an earlier run of `output_prefix` (PREFIX-SSSSS-of-NNNNN.tfrecord) that this run's `outputs`
    would not replace, which a glob over the prefix would mix in. Refused (ValueError naming them) unless
    `overwrite`; even then, files that the prefix's record-count index does not list are not known to be
    create-data's, and are refused. Returns the paths to remove once the new shards are in place."""
    directory, name = os.path.split(output_prefix)
    shard = re.compile(re.escape(name) + r"-\d{5}-of-\d{5}\.tfrecord")
    ours = {os.path.basename(p) for p in outputs}
    stale = sorted(n for n in listdir(directory or ".") if shard.fullmatch(n) and n not in ours)
    if not stale:
        return []
    index = record_index.index_path(output_prefix)
    try:
        listed = set(record_index.read_index(index)) if exists(index) else set()
    except ValueError:
        listed = set()
    unknown = [os.path.join(directory, n) for n in stale if n not in listed]
    stale = [os.path.join(directory, n) for n in stale]
    if unknown:
        raise ValueError(f"--output {output_prefix}: {leftovers.some(unknown)} named like its shards, not listed in "
                         f"its record-count index {index}, so not known to be create-data's: move or delete them "
                         "yourself, or choose another --output")
    if not overwrite:
        raise ValueError(f"--output {output_prefix}: an earlier run's shards that this run (--num-shards "
                         f"{len(outputs)}) would not replace, and that a glob over the prefix would mix in: "
                         f"{leftovers.some(stale)}; pass --overwrite to remove them once this run succeeds, or choose "
                         "another --output")
    return stale


def remove_leftover_temps(output_prefix):
    """Removes the temporary files that interrupted runs of `output_prefix` left: .NAME-SSSSS-of-NNNNN.tfrecord.tmp-*,
    the index's and the lock's (albert_tf.files.temp_path_for's names, only those). Call it holding the prefix's
    lock (no live run writes them). Returns [(path, bytes)] (albert_tf.runtime.leftovers.remove)."""
    directory, name = os.path.split(output_prefix)
    names = (re.escape(name) + r"-\d{5}-of-\d{5}\.tfrecord", re.escape(os.path.basename(
        record_index.index_path(output_prefix))), re.escape(f".{name}{lock.LOCK_FILE}"))
    return leftovers.remove(directory or ".", "|".join(names))


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


def _blocks(files, counter, block_documents, piece_bytes):
    for file_index, path in enumerate(files):
        for block in _instances.iter_blocks(counter.wrap(_read_lines(path)), file_index, block_documents,
                                            piece_bytes=piece_bytes):
            yield path, block


# ---------------------------------------------------------------------------------------------- worker side
_PROCESSOR = None


def _init_worker(model_proto, normalization, options):
    global _PROCESSOR  # pylint: disable=global-statement

    lower_case, keep_accents = normalization
    _PROCESSOR = _instances.BlockProcessor(
        AlbertTokenizer(model_proto, lower_case=lower_case, keep_accents=keep_accents), options)


def _serve(connection, model_proto, normalization, options):
    """A worker process: blocks in through `connection`, (True, (records, stats)) out, or (False, the exception);
    ends, quietly, when the pipe closes or breaks (the main process ended, or was killed). normalization:
    (lower_case, keep_accents)."""
    _init_worker(model_proto, normalization, options)
    with contextlib.suppress(EOFError, OSError):  # BrokenPipeError, ConnectionResetError: the main process is gone
        while True:
            block = connection.recv()
            try:
                answer = (True, _PROCESSOR.process(block))
            except Exception as e:  # pylint: disable=broad-except  # raised again in the main process
                answer = (False, e)
            connection.send(answer)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _signals_ignored(signals=(signal.SIGINT,)):
    """`signals` ignored inside the block (on the main thread; elsewhere Python cannot change handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as an interrupt (`sigterm_interrupts`): the same clean-up as Ctrl-C."""


@contextlib.contextmanager
def sigterm_interrupts():
    """Inside the block SIGTERM raises Terminated on the main thread, as Ctrl-C raises KeyboardInterrupt: the
    workers stop and the temporary files go (the default action would end the process on the spot)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):  # pylint: disable=unused-argument
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Workers:
    """Worker processes building records, each fed through a pipe of its own, so no lock is shared between
    processes and a worker that dies leaves nothing held (multiprocessing.Pool's shared task queue hangs its
    terminate() when a worker died while waiting on it). Started with SIGINT and SIGTERM ignored (a disposition a
    spawned process inherits and keeps): a terminal's Ctrl-C or a service manager's SIGTERM reaches the whole
    process group, and only the main process acts on it (it kills the workers and removes its temp files). A worker
    whose main process is gone reads the end of its pipe and ends."""

    def __init__(self, count, model_proto, normalization, options):
        context = multiprocessing.get_context("spawn")
        self.processes, self.connections = [], []
        with _signals_ignored(STOP_SIGNALS):
            try:
                for _ in range(count):
                    ours, theirs = context.Pipe()
                    process = context.Process(target=_serve, args=(theirs, model_proto, normalization, options),
                                              daemon=True)
                    process.start()
                    theirs.close()
                    self.processes.append(process)
                    self.connections.append(ours)
            except BaseException:
                self.close()
                raise

    def _lost(self, worker):
        """The RuntimeLost (exit 76) for a worker whose pipe broke: it was killed or died."""
        process = self.processes[worker]
        process.join(1)
        code = process.exitcode
        how = (f"was killed ({signal.Signals(-code).name}{': out of memory?' if -code == signal.SIGKILL else ''})"
               if code is not None and code < 0 else f"ended unexpectedly (exit code {code})")
        return exit_codes.RuntimeLost(f"worker process {process.pid} {how}; no shard written, the temporary files "
                                      "removed: run the same command again (with fewer --workers if memory is short)")

    def _send(self, worker, block):
        try:
            self.connections[worker].send(block)
        except OSError:  # BrokenPipeError, ConnectionResetError: the worker is gone
            raise self._lost(worker) from None

    def _receive(self, worker):
        try:
            ok, value = self.connections[worker].recv()
        except (EOFError, OSError):
            raise self._lost(worker) from None
        if not ok:
            raise value
        return value

    def run(self, blocks, consume):
        """consume(path, (records, stats)) for each (path, block), in block order. Block i is worker (i mod N)'s;
        a worker is sent its next block only once its result is read (it waits for it then, so neither side can
        block the other's writes), so at most one block per worker is in flight (bounded memory)."""
        blocks = iter(blocks)
        pending = collections.deque()  # (path, worker), in block order
        for worker in range(len(self.processes)):
            item = next(blocks, None)
            if item is None:
                break
            self._send(worker, item[1])
            pending.append((item[0], worker))
        while pending:
            path, worker = pending.popleft()
            item = next(blocks, None)  # read on while the workers work
            result = self._receive(worker)
            if item is not None:
                self._send(worker, item[1])
                pending.append((item[0], worker))
            consume(path, result)

    def close(self):
        """Ends every worker (killed: they hold nothing) and closes the pipes."""
        for process in self.processes:
            if process.is_alive():
                process.kill()
        for process in self.processes:
            process.join()
        for connection in self.connections:
            connection.close()


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
                            lower_case=None, progress=True, overwrite=False,
                            block_documents=_instances.BLOCK_DOCUMENTS, keep_accents=None,
                            max_skipped_share=run_config.default_for(CreateDataConfig, "max_skipped_share")):
    """Writes pretraining TFRecords; see the module docstring.

    Args:
      input_pattern: comma-separated file globs (local or gs://), UTF-8 text.
      spm_model: the SentencePiece model path (from `albert-tf vocab`).
      output_prefix: shards are written to PREFIX-%05d-of-%05d.tfrecord (parent folders are created).
      num_shards: number of output files; instances are dealt round-robin.
      options: InstanceOptions (max_seq_length, max_predictions, masked_lm_prob, ngram, dupe_factor,
        short_seq_prob, seed, mask).
      workers: processes building instances (1: in this process). The output does not depend on it.
      lower_case: the tokenizer's lowercasing (False for a cased vocabulary; None: as recorded, else True); a bool
        must agree with the vocabulary's record (albert_tf.text.record), when it has one.
      keep_accents: None: as the vocabulary's record says (else False); a bool must agree with the record.
      progress: print a progress bar (stderr), notes (stderr) and the summary (stdout).
      overwrite: remove an earlier run's shards of this prefix that the new ones do not replace (`earlier_shards`;
        without it they are refused), once the new ones are in place.
      block_documents: documents per block (the unit of work, of in-block shuffling and of the fallback's
        random document); part of what determines the output, like the seed.
      max_skipped_share: the run stops (ValueError, nothing written) as soon as the documents it skips (fewer than
        2 sentences) hold more than this share of the input's bytes (FileTally.check); 1: never.
    Returns:
      Summary.
    Raises:
      FileNotFoundError: a glob matches nothing, or the model is missing.
      ValueError: bad options, an output prefix that is a directory or holds an earlier run's shards, a binary or
        UTF-16 file, another live run on the prefix, an empty corpus, no document long enough to make an instance,
        or skipped documents past `max_skipped_share`.
    """
    options = (options or InstanceOptions()).validate()
    if num_shards < 1:
        raise ValueError(f"--num-shards must be at least 1, got {num_shards}")
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    check_skipped_share(max_skipped_share)
    check_output_prefix(output_prefix, "--output", "train")
    if not isinstance(spm_model, (bytes, bytearray)):
        check_input_file(spm_model, "--spm-model", SPM_FILE)
    files = match_files(input_pattern)
    check_text_files(files)
    tokenizer = AlbertTokenizer(spm_model, lower_case=lower_case, keep_accents=keep_accents)
    stale = earlier_shards(output_prefix, shard_paths(output_prefix, num_shards), overwrite)
    with lock.prefix_lock(output_prefix, "--output"):  # one run per prefix: its temp files are ours to remove
        removed = remove_leftover_temps(output_prefix)
        if removed and progress:
            messages.say("note", leftovers.note_text(removed), "create-data")
        summary = _write(files, tokenizer, output_prefix, num_shards, options, workers, progress,
                         (block_documents, max_skipped_share), stale)
    if progress:
        summary.print()
    return summary


def _write(files, tokenizer, output_prefix, num_shards, options, workers, progress, reading, stale):
    """The shards from the files (create_pretraining_data's work, under the prefix's lock); returns the Summary.
    reading: (block_documents, max_skipped_share)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    block_documents, max_skipped_share = reading
    sizes = [tf.io.gfile.stat(f).length for f in files]
    total_bytes = sum(sizes)
    tally = FileTally(files, sizes)
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
            tally.add(path, block_stats.instances, block_stats.skipped_documents, block_stats.skipped_bytes)
            if stats.instances:  # a corpus of which nothing makes an instance is told so at the end
                tally.check(max_skipped_share)
            if block_stats.replaced_bytes:
                replaced[path] = replaced.get(path, 0) + block_stats.replaced_bytes
            shards.write(records)
            bar.update(counter.total, stats)

        blocks = _blocks(files, counter, block_documents, _instances.piece_bytes(options))
        if workers == 1:
            processor = _instances.BlockProcessor(tokenizer, options)
            for path, block in blocks:
                consume(path, processor.process(block))
        else:
            pool = _Workers(workers, tokenizer.model_proto, (tokenizer.lower_case, tokenizer.keep_accents), options)
            pool.run(blocks, consume)
        shards.close()
        _check_made_instances(stats, files)
        tally.check(max_skipped_share)
        shards.publish(stale, record_index.vocabulary_entry(tokenizer))
    finally:
        with _signals_ignored(STOP_SIGNALS):  # a second Ctrl-C or SIGTERM does not cut the clean-up short
            if pool is not None:
                pool.close()
            shards.discard()
    bar.update(counter.total, stats, final=True)
    return Summary(shards.outputs, stats, dict(replaced), time.time() - start, total_bytes, tally.skipped_files())


def check_skipped_share(max_skipped_share):
    """Refuses a --max-skipped-share outside [0, 1]."""
    if not 0 <= max_skipped_share <= 1:
        raise ValueError(f"--max-skipped-share must be in [0, 1] (a share of the input's bytes), got "
                         f"{max_skipped_share}")


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

    def publish(self, stale=(), vocabulary=None):
        """Renames the shards into place and writes their index (with `vocabulary`, the fingerprint and
        normalization of the vocabulary they were made with: record_index.vocabulary_entry); first removes `stale`
        (an earlier run's shards that these do not replace, `earlier_shards`) and the earlier index."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        index = record_index.index_path(self.output_prefix)
        # The index is written (under a temporary name) before anything is put in place: a disk that fills up
        # here leaves the earlier output as it was, not new shards without their index.
        index_tmp = temp_path_for(index)
        try:
            record_index.write_index(index_tmp, {os.path.basename(final): (count, tf.io.gfile.stat(tmp).length)
                                                 for tmp, final, count in zip(self.temps, self.outputs,
                                                                              self.counts)},
                                     vocabulary=vocabulary)
        except BaseException:
            with contextlib.suppress(Exception):
                tf.io.gfile.remove(index_tmp)
            raise
        with _signals_ignored(STOP_SIGNALS):  # all the shards or none: a stop waits for the last rename
            for path in stale:
                tf.io.gfile.remove(path)
            if tf.io.gfile.exists(index):  # a previous run's counts must never describe these shards
                tf.io.gfile.remove(index)
            for tmp, final in zip(self.temps, self.outputs):
                tf.io.gfile.rename(tmp, final, overwrite=True)
            tf.io.gfile.rename(index_tmp, index, overwrite=True)

    def discard(self):
        """Removes every temporary shard; a writer that cannot flush (the disk is full) does not stop it."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        for writer in self.writers:
            with contextlib.suppress(Exception):
                writer.close()
        self.writers = []
        for tmp in self.temps:
            with contextlib.suppress(Exception):
                if tf.io.gfile.exists(tmp):
                    tf.io.gfile.remove(tmp)

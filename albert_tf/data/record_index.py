"""How many records each TFRecord file holds, without reading it: the record-count index.

create-data (local and Beam) writes, beside its shards DIR/NAME-00000-of-0000N.tfrecord, one small JSON file
DIR/.NAME.record_counts.json (hidden, so that globs such as `DIR/NAME*` or `DIR/*` in other tools do not take it
for records; `albert_tf.data` leaves any *.record_counts.json out of the files a pattern matches):

    {"format": "albert_tf.record_counts", "version": 1,
     "files": {"train-00000-of-00016.tfrecord": {"records": 51234, "bytes": 251902211}, ...},
     "vocabulary": {"sha256": "<hex SHA-256 of the spm.model>", "lower_case": true, "keep_accents": false}}

"vocabulary" ties the records to the SentencePiece model they were tokenized with (its fingerprint, as its record
X.casing.json holds it: albert_tf.text.record) and says how text was normalized; `pretrain` refuses records whose
fingerprint is not its vocabulary's (`vocabulary_of`). An index without it (an older release's) is still read; a
count cache has none.

Keys are base names (the index stays valid when the directory is copied, e.g. to gs://); `bytes` is the file's
size, so an entry whose file has since changed is ignored. The input pipeline uses the counts to resume at any step
without reading what comes before (`albert_tf.data.dataset`) and to split eval records evenly among hosts. For data
without an index (made by google-research/albert's tool) the counts are taken once by reading the files, and
`pretrain` caches them in MODEL_DIR/record_counts.json (same format, keys are the full paths).

No TensorFlow at import (create-data's worker side stays light); local paths use the standard library.
"""
import concurrent.futures
import glob as _glob
import json
import os
import re

from albert_tf.files import atomic_write_text, is_url

SUFFIX = ".record_counts.json"
from albert_tf.layout import RECORD_COUNTS_FILE as CACHE_NAME
FORMAT = "albert_tf.record_counts"
VERSION = 1


def index_path(output_prefix):
    """The index create-data writes for the shards DIR/NAME-*-of-*.tfrecord: DIR/.NAME.record_counts.json."""
    directory, name = os.path.split(os.fspath(output_prefix))
    return os.path.join(directory, f".{name}{SUFFIX}")


def is_index(path):
    """True for an index or count-cache file (never taken for records, e.g. when a glob like `data/*` matches it)."""
    name = os.path.basename(os.fspath(path))
    return name.endswith(SUFFIX) or name == CACHE_NAME


def _gfile():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


def _read_text(path):
    if not is_url(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    with _gfile().GFile(path, "r") as f:
        return f.read()


def write_index(path, entries, vocabulary=None):
    """Writes `entries` ({name: (records, bytes)}) to `path` atomically (local or gs://), with `vocabulary` (a
    `vocabulary_entry`) when given."""
    files = {name: {"records": int(records), "bytes": int(size)} for name, (records, size) in sorted(entries.items())}
    data = {"format": FORMAT, "version": VERSION, "files": files}
    if vocabulary:
        data["vocabulary"] = dict(vocabulary)
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")


def vocabulary_entry(tokenizer):
    """The index's "vocabulary" of records made by `tokenizer` (an AlbertTokenizer): its model's fingerprint and
    its normalization."""
    return {"sha256": tokenizer.fingerprint, "lower_case": bool(tokenizer.lower_case),
            "keep_accents": bool(tokenizer.keep_accents)}


def vocabulary_of(path):
    """The "vocabulary" an index records ({"sha256", "lower_case", "keep_accents"}), or None for an index made
    without one (an older release's)."""
    try:
        found = json.loads(_read_text(path)).get("vocabulary")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, dict) and isinstance(found.get("sha256"), str) else None


def read_index(path):
    """{name: (records, bytes)} from an index file; ValueError naming the file when it is not one."""
    try:
        data = json.loads(_read_text(path))
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ValueError(f"format {data.get('format')!r} version {data.get('version')!r}")
        return {name: (int(e["records"]), int(e["bytes"])) for name, e in data["files"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: not a record-count index ({FORMAT} version {VERSION}): {e}") from None


def _glob_any(pattern):
    return _glob.glob(pattern) if not is_url(pattern) else _gfile().glob(pattern)


def index_entries(files):
    """{path: (records, bytes, index path)} for the `files` an index beside them lists. One directory listing per
    distinct directory."""
    known = {}
    for directory in sorted({os.path.dirname(f) for f in files}):
        indexes = {i for pattern in (".*", "*") for i in _glob_any(os.path.join(directory, pattern + SUFFIX))}
        for index in sorted(indexes):
            for name, (records, size) in read_index(index).items():
                known[os.path.join(directory, name)] = (records, size, index)
    return {f: known[f] for f in files if f in known}


_SHARD = re.compile(r"(?P<stem>.+)-\d{5}-of-(?P<total>\d{5})\.tfrecord")


def shard_index(path):
    """The index create-data writes for the shard `path` (DIR/.NAME.record_counts.json for DIR/NAME-SSSSS-of-NNNNN
    .tfrecord), or None for a file not named like its shards."""
    match = _SHARD.fullmatch(os.path.basename(path))
    return index_path(os.path.join(os.path.dirname(path), match["stem"])) if match else None


def _some(paths, shown=3):
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def check_one_run(files, flag):
    """Refuses (ValueError naming them) create-data shards of one prefix DIR/NAME-SSSSS-of-NNNNN.tfrecord among
    `files` that come from different runs: two totals NNNNN, or files that the prefix's record-count index (present
    beside them) does not list, as an earlier run's shards left beside a later run's. Other files (other prefixes,
    other names) are not judged: several data sets may be read together."""
    prefixes = {}
    for path in files:
        match = _SHARD.fullmatch(os.path.basename(path))
        if match:
            prefix = os.path.join(os.path.dirname(path), match["stem"])
            prefixes.setdefault(prefix, {}).setdefault(match["total"], []).append(path)
    for prefix, by_total in sorted(prefixes.items()):
        if len(by_total) > 1:
            runs = "; ".join(f"{len(paths)} of {int(total)} shards ({_some(paths)})"
                             for total, paths in sorted(by_total.items()))
            raise ValueError(f"{flag} matches the shards of {len(by_total)} create-data runs of {prefix}: {runs}; "
                             "delete the stale ones (create-data --overwrite removes them) or narrow the pattern")
        index = index_path(prefix)
        if not _exists(index):
            continue
        listed = read_index(index)
        unlisted = sorted(p for paths in by_total.values() for p in paths if os.path.basename(p) not in listed)
        if unlisted:
            raise ValueError(f"{flag} matches {len(unlisted)} file(s) that {index}, the record-count index of the "
                             f"last create-data run of {prefix}, does not list: {_some(unlisted)}; they are an "
                             "earlier run's: delete them or narrow the pattern")


def _exists(path):
    return os.path.exists(path) if not is_url(path) else _gfile().exists(path)


def indexed_counts(files, sizes):
    """{path: records} for the `files` (sizes in bytes, same order) that an index lists with the same size."""
    entries = index_entries(files)
    return {f: entries[f][0] for f, size in zip(files, sizes) if f in entries and entries[f][1] == size}


def _count_one(path):
    """Records in one file; ValueError naming it when it is truncated or corrupt (the bytes read fall short)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    size = tf.io.gfile.stat(path).length
    batches = tf.data.TFRecordDataset(path, buffer_size=1 << 20).ignore_errors().batch(4096)
    count, consumed = batches.reduce(
        (tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
        lambda state, b: (state[0] + tf.size(b, out_type=tf.int64),
                          state[1] + tf.reduce_sum(tf.cast(tf.strings.length(b, unit="BYTE"), tf.int64) + 16)))
    if int(consumed) != size:
        raise ValueError(f"{path}: truncated or corrupt TFRecord file (read {int(consumed)} of {size} bytes before "
                         f"the first bad record)")
    return int(count)


def count_records(files):
    """{path: records}, counted by reading every file (in parallel: TensorFlow's reader releases the GIL)."""
    if not files:
        return {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        return dict(zip(files, pool.map(_count_one, files)))


def known_counts(files, sizes, cache=None):
    """{path: records} for the `files` (sizes in bytes, same order) whose counts are known without reading them:
    from the index beside them, else from `cache` (a count-cache path, entries checked by size)."""
    return _known_and_cached(files, sizes, cache)[0]


def _known_and_cached(files, sizes, cache):
    counts = indexed_counts(files, sizes)
    cached = read_index(cache) if cache and _exists(cache) else {}
    by_size = dict(zip(files, sizes))
    counts.update({f: cached[f][0] for f in files if f not in counts and f in cached and cached[f][1] == by_size[f]})
    return counts, cached


def record_counts(files, sizes, cache=None, write_cache=False):
    """{path: records} for every file: `known_counts`, else counted; with `write_cache`, counts taken here are
    added to `cache`."""
    counts, cached = _known_and_cached(files, sizes, cache)
    missing = [f for f in files if f not in counts]
    counted = count_records(missing) if missing else {}
    counts.update(counted)
    if counted and cache and write_cache:
        by_size = dict(zip(files, sizes))
        cached.update({f: (n, by_size[f]) for f, n in counted.items()})
        write_index(cache, cached)
    return counts

"""Google's released ALBERT weights by name: downloaded, checked and cached for `albert-tf convert --release`
(albert_tf.checkpoints.convert.convert_release). Also a Hugging Face hub id (`hf:OWNER/NAME`) through
huggingface_hub, when it is installed.

Facts (source: google-research/albert README.md, sections "Version 2 of ALBERT models is released" and "Pre-trained
Models"):
  - eight English releases, v1 and v2 of base, large, xlarge and xxlarge, each one gzip'd tarball at
    https://storage.googleapis.com/albert_models/albert_{size}_{v1|v2}.tar.gz (the README also links TF-Hub
    modules for them, and Chinese releases albert_{size}_zh whose vocabulary is not SentencePiece: neither is read
    here);
  - "You can find the spm_model_file in the tar files ... The name of the model file is 30k-clean.model"; the
    fine-tuning commands pass --do_lower_case: the models are uncased;
  - v2 trains with no dropout, base for 10M steps and the others for 3M.
Parameters (the paper, Lan et al. 2020, Table 1): base 12M, large 18M, xlarge 60M, xxlarge 235M.
The layout of a tarball, as scripts that use them show it: one directory albert_{size}/ holding albert_config.json,
the TF1 checkpoint model.ckpt-best (.index, .data-*, .meta) in the original variable names, 30k-clean.model and
30k-clean.vocab. Google publishes neither the tarballs' sizes nor their checksums.

What is checked, for want of a published checksum:
  - the download's length against what the server announced (Content-Length, or the total of a Content-Range);
  - its MD5 against the whole object's MD5 that Cloud Storage sends in `x-goog-hash` (kept from a full response);
  - the gzip stream, read to its end (its CRC-32 and length trailer);
  - the tar's members: plain files and directories under one top directory, no absolute or `..` path;
  - the release's files: albert_config.json, one SentencePiece `.model`, one TF checkpoint whose `.index` and every
    `.data-NNNNN-of-MMMMM` shard are there;
  - then the conversion reads every tensor (TensorFlow checks each one's CRC-32C) and wants every model weight.
A download that fails a check is removed, so it is never cached.

The cache (a local directory: --cache-dir, else $ALBERT_TF_CACHE, else ~/.cache/albert_tf):
    releases/NAME.tar.gz.part (+ .part.json)   a download under way: the next call resumes it (HTTP Range)
    releases/NAME.tar.gz                       a whole, checked tarball (or one put there by hand), unpacked next
                                               and then removed
    releases/NAME/                             the unpacked release, with release.json listing its files and sizes
    releases/.NAME.tmp-<12 hex>/               a tarball being unpacked (what a killed unpacking left, the next
                                               fetch of NAME removes, with a note)
    releases/.NAME.lock                        one process at a time fetches NAME
A release found unpacked is used without any network access. $ALBERT_TF_RELEASES_URL replaces the base URL (tests
serve a tarball from loopback). Hugging Face downloads stay in Hugging Face's own cache (HF_HOME).
"""
import base64
import dataclasses
import gzip
import hashlib
import http.client
import json
import os
import re
import shutil
import sys
import tarfile
import time
import urllib.error
import urllib.request
import zlib

from albert_tf import __version__, files
from albert_tf.runtime import faults, leftovers
from albert_tf.settings.convert_config import (  # noqa: F401  (their one home)
    CACHE_ENV, HF_PREFIX, NAMES, SIZES, canonical_name)

BASE_URL = "https://storage.googleapis.com/albert_models"
URL_ENV = "ALBERT_TF_RELEASES_URL"
PARAMETERS = {"base": "12M", "large": "18M", "xlarge": "60M", "xxlarge": "235M"}  # the paper, Table 1
MARKER = "release.json"
# tokenizer.json: the vocabulary of a repository that transformers 5 saved (no spiece.model), built from it by convert
HF_FILES = ["config.json", "model.safetensors", "spiece.model", "tokenizer.json", "tokenizer_config.json"]
TIMEOUT_S = 60
CHUNK = 1 << 20


# What a handle (--init) may be, for the line that refuses one (albert_tf.checkpoints.handles)
EXPECTED = ("a pretrained-model directory, an `albert-tf export` BASE or BASE/N, a Hugging Face ALBERT directory "
            f"or a released model's name: {', '.join(NAMES)}, hf:OWNER/NAME")


def check_handle(handle, flag="--init"):
    """The first look at a handle (albert_tf.checkpoints.handles), which needs no TensorFlow for a local path: an
    existing directory, or else a released model's name. Returns (its path without a trailing /, the release's
    canonical name or None). FileNotFoundError in one line naming `flag` and what was expected otherwise."""
    path = os.fspath(handle).rstrip("/")
    if not files.exists(path):
        try:
            return path, canonical_name(path)
        except ValueError:
            raise FileNotFoundError(f"{flag} {path}: no such directory and not a released model's name (expected "
                                    f"{EXPECTED})") from None
    if not files.isdir(path):
        raise FileNotFoundError(f"{flag} {path}: a file, not a directory (expected {EXPECTED})")
    return path, None


class ReleaseUnavailable(FileNotFoundError):
    """Neither in the cache nor reachable: the message says what to download and where to put it."""


@dataclasses.dataclass(frozen=True)
class ReleaseFiles:
    """An unpacked release: its directory and the three paths `convert --from tf1` reads."""
    directory: str
    config: str       # albert_config.json
    checkpoint: str   # the TF1 checkpoint prefix (DIR/model.ckpt-best)
    spm_model: str    # the SentencePiece model (30k-clean.model)


def cache_dir(flag=None):
    """The cache directory: `flag` (--cache-dir), else $ALBERT_TF_CACHE, else ~/.cache/albert_tf."""
    return os.path.abspath(os.path.expanduser(flag or os.environ.get(CACHE_ENV) or "~/.cache/albert_tf"))


def release_url(name):
    """The tarball's URL: BASE_URL (or $ALBERT_TF_RELEASES_URL) / NAME.tar.gz."""
    return f"{os.environ.get(URL_ENV, BASE_URL).rstrip('/')}/{name}.tar.gz"


# ---------------------------------------------------------------------------------------------------- the cache
def fetch_release(name, cache=None, log=None):
    """The unpacked release `name` (one of NAMES) from the cache, else from its tarball in the cache, else
    downloaded (resumed, checked) into the cache. Returns ReleaseFiles. One process at a time fetches a release
    (a lock file beside it); another one waits, then finds it cached.

    Raises ReleaseUnavailable when it is not cached and cannot be downloaded, ValueError when the download or the
    tarball fails a check (a download that fails is removed)."""
    import fcntl  # pylint: disable=import-outside-toplevel

    log = log or _stderr
    name = canonical_name(name)
    root = os.path.join(cache_dir(cache), "releases")
    unpacked, archive = os.path.join(root, name), os.path.join(root, f"{name}.tar.gz")
    files = cached_release(unpacked)
    if files:
        log(f"{name}: using the cached release in {unpacked}")
        return files
    os.makedirs(root, exist_ok=True)
    # the lock file is never removed: a process waiting on a removed one would hold a lock nobody else sees
    with open(os.path.join(root, f".{name}.lock"), "w", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            log(f"{name}: another process is fetching it into {root}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        files = cached_release(unpacked)
        if files:
            return files
        leftovers.note(leftovers.remove(root, re.escape(name)))  # a killed unpacking's .NAME.tmp-*
        downloaded = not os.path.exists(archive)
        if downloaded:
            download(release_url(name), archive, log)
        try:
            return unpack(archive, unpacked)
        except ValueError as e:
            if downloaded:
                os.remove(archive)
                raise ValueError(f"{e}; the download was removed: run again to download it anew") from None
            raise ValueError(f"{e}; replace or remove {archive}") from None


def cached_release(unpacked):
    """ReleaseFiles of an unpacked release whose files are all there at their recorded sizes, else None."""
    try:
        with open(os.path.join(unpacked, MARKER), encoding="utf-8") as f:
            record = json.load(f)
        complete = all(os.path.getsize(os.path.join(unpacked, rel)) == size for rel, size in record["files"].items())
    except (OSError, ValueError, KeyError, AttributeError):
        return None
    if not complete:
        return None
    return ReleaseFiles(unpacked, *(os.path.join(unpacked, record[k]) for k in ("config", "checkpoint", "spm_model")))


def unpack(archive, unpacked):
    """Checks `archive` (gzip trailer, tar members, the release's files) and unpacks its top directory as
    `unpacked`, with release.json written last. Returns ReleaseFiles; ValueError naming the archive and what is
    wrong."""
    _check_gzip(archive)
    tmp = files.temp_path_for(unpacked)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            top = _check_members(archive, members)
            extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(tmp, members=members, **extra)  # nosec: every member checked above
        found = _release_layout(archive, os.path.join(tmp, top))
        sizes = {}
        for directory, _, names in os.walk(os.path.join(tmp, top)):
            for n in names:
                path = os.path.join(directory, n)
                sizes[os.path.relpath(path, os.path.join(tmp, top))] = os.path.getsize(path)
        record = dict(found, archive=os.path.basename(archive), files=sizes)
        with open(os.path.join(tmp, top, MARKER), "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2)
        shutil.rmtree(unpacked, ignore_errors=True)  # an incomplete earlier one (no complete marker)
        os.rename(os.path.join(tmp, top), unpacked)
    except (tarfile.TarError, EOFError, OSError) as e:
        if faults.classify(e) is not None:  # a full disk, a cache this user may not write: said as such
            raise
        raise ValueError(f"{archive}: not a readable tar.gz ({e})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    os.remove(archive)  # its content is unpacked and checked
    return cached_release(unpacked)


def _check_gzip(archive):
    """Reads the whole gzip stream: a truncated or altered file fails its CRC-32 / length trailer."""
    try:
        with gzip.open(archive, "rb") as f:
            while f.read(CHUNK):
                pass
    except (OSError, EOFError, zlib.error) as e:
        raise ValueError(f"{archive}: the gzip stream is damaged ({e})") from None


def _check_members(archive, members):
    """The one top directory of the members; ValueError for a link, device, absolute path or `..`."""
    tops = set()
    for m in members:
        parts = [p for p in m.name.replace("\\", "/").split("/") if p not in ("", ".")]
        if not parts and m.isdir():
            continue  # "./" itself
        if m.name.startswith("/") or ".." in parts or not parts or not (m.isfile() or m.isdir()):
            raise ValueError(f"{archive}: member {m.name!r} is not a plain file or directory inside the archive")
        tops.add(parts[0] if len(parts) > 1 or m.isdir() else "")
    if len(tops) != 1 or "" in tops:
        raise ValueError(f"{archive}: expected one top directory (as albert_base/), found {sorted(tops)}")
    return tops.pop()


def _release_layout(archive, top):
    """{'config', 'checkpoint', 'spm_model'}: paths relative to `top`; ValueError naming what is missing."""
    names = sorted(os.listdir(top))
    expected = ("a release holds albert_config.json, a SentencePiece .model and a TF checkpoint (.index and "
                "every .data-NNNNN-of-MMMMM shard)")
    prefixes = [n[:-len(".index")] for n in names if n.endswith(".index")]
    if len(prefixes) > 1:
        prefixes = [p for p in prefixes if p.endswith("-best")] or prefixes
    spm_models = [n for n in names if n.endswith(".model")]
    problems = []
    if "albert_config.json" not in names:
        problems.append("no albert_config.json")
    if len(spm_models) != 1:
        problems.append(f"{len(spm_models)} SentencePiece .model files")
    if len(prefixes) != 1:
        problems.append(f"{len(prefixes)} checkpoints (.index files)" if prefixes else "no checkpoint .index")
    else:
        problems += _missing_shards(prefixes[0], names)
    if problems:
        raise ValueError(f"{archive}: {'; '.join(problems)} ({expected})")
    return {"config": "albert_config.json", "checkpoint": prefixes[0], "spm_model": spm_models[0]}


def _missing_shards(prefix, names):
    shards = [re.fullmatch(re.escape(prefix) + r"\.data-(\d{5})-of-(\d{5})", n) for n in names]
    shards = [m for m in shards if m]
    if not shards:
        return [f"no {prefix}.data-* shard"]
    count = int(shards[0].group(2))
    have = {int(m.group(1)) for m in shards if int(m.group(2)) == count}
    return [f"missing {prefix}.data-{i:05d}-of-{count:05d}" for i in range(count) if i not in have]


# ---------------------------------------------------------------------------------------------------- download
def download(url, archive, log=None, attempts=4):
    """Downloads `url` to `archive` through `archive`.part, resuming a part left by an earlier call or a dropped
    connection (HTTP Range, If-Range on the ETag), with progress on stderr. The result is checked against the
    announced length and, when the server sent one, the object's MD5 before it is renamed to `archive`; a mismatch
    removes the part (ValueError). `attempts`: connection drops in a row without progress before giving up. The
    caller holds the release's lock (`fetch_release`)."""
    log = log or _stderr
    os.makedirs(os.path.dirname(archive), exist_ok=True)
    part, state_file = f"{archive}.part", f"{archive}.part.json"
    _download_locked(url, part, state_file, log, attempts)
    _verify(url, part, state_file)
    os.replace(part, archive)
    os.remove(state_file)


def _download_locked(url, part, state_file, log, attempts):
    """Requests until the part is whole, resuming after each dropped connection that brought bytes; raises
    ReleaseUnavailable when the server cannot be reached (at once when no byte came in this call)."""
    failures, moved = 0, False
    while True:
        before = os.path.getsize(part) if os.path.exists(part) else 0
        try:
            if _attempt(url, part, state_file, log):
                return
        except urllib.error.HTTPError as e:
            kept = os.path.getsize(part) if os.path.exists(part) else 0
            raise ValueError(f"{url}: HTTP {e.code} {e.reason}" + (f" (the {kept:,} bytes downloaded so far are kept: "
                                                                  "run again to resume)" if kept else "")) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError, EOFError) as e:
            got = os.path.getsize(part) if os.path.exists(part) else 0
            moved = moved or got > before
            failures = 0 if got > before else failures + 1
            if not moved:
                raise _unavailable(url, part[:-len(".part")], e, got) from None
            if failures >= attempts:
                raise ReleaseUnavailable(f"{url}: the download stopped at {got:,} bytes ({_reason(e)}); run the "
                                         "same command again to resume it") from None
            log(f"{os.path.basename(part)[:-len('.part')]}: connection lost at {got:,} bytes ({_reason(e)}); "
                    "resuming")
            time.sleep(min(failures, 5))


def _attempt(url, part, state_file, log):
    """One request: appends to `part` from its current size (206) or rewrites it (200). True when the part is
    whole. Raises on a dropped connection (the part keeps what arrived)."""
    state = _read_state(state_file)
    offset = os.path.getsize(part) if os.path.exists(part) and state.get("url") == url else 0

    headers = {"User-Agent": f"albert-tf/{__version__}", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if state.get("etag"):
            headers["If-Range"] = state["etag"]
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset and offset == state.get("total"):
            return True  # the part was already whole
        if e.code == 416:
            os.remove(part)
            return False
        raise
    with response:
        if response.status == 206:
            start, total = _content_range(url, response.headers.get("Content-Range", ""))
            if start != offset:
                raise ValueError(f"{url}: asked for bytes from {offset}, the server sent from {start}")
            mode = "ab"
        else:  # the whole object: a fresh download, a server without ranges, or a changed object (If-Range)
            offset, mode = 0, "wb"
            total = int(response.headers["Content-Length"]) if response.headers.get("Content-Length") else None
            state = {"url": url, "etag": response.headers.get("ETag"), "total": total,
                     "md5": _goog_md5(response.headers)}
            _write_state(state_file, state)
        progress = _Progress(os.path.basename(part)[:-len(".part")], total, offset, log)
        received = 0
        with open(part, mode) as f:
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                f.write(chunk)
                received += len(chunk)
                progress.update(len(chunk))
        progress.done()
    if total is not None and offset + received < total:  # http.client's read(n) ends quietly on a closed socket
        raise ConnectionError(f"the connection closed at {offset + received:,} of {total:,} bytes")
    return True


def _verify(url, part, state_file):
    """The part against the announced length and MD5; removes it (and its state) and raises ValueError on a
    mismatch."""
    state = _read_state(state_file)
    size = os.path.getsize(part)
    problem = None
    if state.get("total") is not None and size != state["total"]:
        problem = f"{size:,} bytes, the server announced {state['total']:,}"
    elif state.get("md5"):
        digest = hashlib.md5()  # nosec: an integrity check against the server's own MD5, not security
        with open(part, "rb") as f:
            for block in iter(lambda: f.read(CHUNK), b""):
                digest.update(block)
        if digest.hexdigest() != state["md5"]:
            problem = f"MD5 {digest.hexdigest()}, the server's x-goog-hash says {state['md5']}"
    if problem:
        os.remove(part)
        os.remove(state_file)
        raise ValueError(f"{url}: the download is corrupt ({problem}); it was removed: run again to download it "
                         "anew")


def _goog_md5(headers):
    """The hex MD5 in Cloud Storage's `x-goog-hash: crc32c=...,md5=<base64>` headers, or None."""
    for value in headers.get_all("x-goog-hash") or []:
        for item in value.split(","):
            key, _, encoded = item.strip().partition("=")
            if key == "md5":
                return base64.b64decode(encoded).hex()
    return None


def _content_range(url, value):
    """(start, total) of `bytes START-END/TOTAL`; total None for `*`."""
    m = re.fullmatch(r"bytes (\d+)-\d+/(\d+|\*)", value.strip())
    if not m:
        raise ValueError(f"{url}: a partial response without a usable Content-Range ({value!r})")
    return int(m.group(1)), None if m.group(2) == "*" else int(m.group(2))


def _read_state(state_file):
    try:
        with open(state_file, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _write_state(state_file, state):
    with open(f"{state_file}.tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(f"{state_file}.tmp", state_file)


def _reason(error):
    return str(getattr(error, "reason", None) or error) or type(error).__name__


def _unavailable(url, archive, error, kept):
    partial = f"; the {kept:,} bytes downloaded so far are kept and resumed" if kept else ""
    return ReleaseUnavailable(
        f"{os.path.basename(archive)[:-len('.tar.gz')]} is not in the cache and {url} cannot be reached "
        f"({_reason(error)}): download that file and put it at {archive} (or point --cache-dir / ${CACHE_ENV} at a "
        f"cache that holds the release), then run again{partial}")


def _stderr(message):
    print(message, file=sys.stderr, flush=True)


def _size_text(count):
    """Bytes as 1.2 GB, 45.0 MB, 53.2 kB or 17 B."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{count:.0f} B"


class _Progress:
    """Download progress on stderr: one line rewritten in place on a terminal, else a line every 10%."""

    def __init__(self, label, total, done, log):
        self.label, self.total, self.done_bytes, self.log = label, total, done, log
        self.tty = sys.stderr.isatty()
        self.start, self.start_bytes, self.last = time.monotonic(), done, 0.0
        self.tenth = 10 * done // total if total else 0
        resumed = f", resuming at {_size_text(done)}" if done else ""
        self.log(f"{label}: downloading ({_size_text(total) if total else 'size unknown'}{resumed})")

    def text(self):
        rate = (self.done_bytes - self.start_bytes) / max(time.monotonic() - self.start, 1e-6)
        share = f" ({100 * self.done_bytes / self.total:.0f}%)" if self.total else ""
        return f"{self.label}: {_size_text(self.done_bytes)}{share} at {_size_text(rate)}/s"

    def update(self, count):
        self.done_bytes += count
        now = time.monotonic()
        if self.tty and now - self.last >= 0.5:
            self.last = now
            print("\r" + self.text(), end="", file=sys.stderr, flush=True)
        elif not self.tty and self.total and 10 * self.done_bytes // self.total > self.tenth:
            self.tenth = 10 * self.done_bytes // self.total
            self.log(self.text())

    def done(self):
        if self.tty:
            print("\r" + self.text(), file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------- Hugging Face
def fetch_hf(name, log=None):
    """The local snapshot directory of hub id `name` ('hf:OWNER/NAME'), downloaded by huggingface_hub into its
    cache (or found there offline): config.json, model.safetensors, spiece.model, tokenizer.json,
    tokenizer_config.json (HF_FILES)."""
    log = log or _stderr
    repo_id = canonical_name(name)[len(HF_PREFIX):]
    try:
        from huggingface_hub import snapshot_download  # pylint: disable=import-outside-toplevel
        from huggingface_hub.utils import (  # pylint: disable=import-outside-toplevel
            LocalEntryNotFoundError, RepositoryNotFoundError)
    except ImportError:
        raise ValueError(f"--release {name}: reading the Hugging Face hub needs huggingface_hub (pip install "
                         "huggingface_hub); or download the repository and pass --from hf --checkpoint DIR") from None
    log(f"{name}: fetching {', '.join(HF_FILES)} through huggingface_hub")
    try:
        return snapshot_download(repo_id, allow_patterns=HF_FILES)
    except RepositoryNotFoundError:
        raise ValueError(f"--release {name}: no such repository on the Hugging Face hub") from None
    except LocalEntryNotFoundError as e:
        raise ReleaseUnavailable(f"{name} is not in the Hugging Face cache and the hub cannot be reached "
                                 f"({str(e).splitlines()[0]}): run once with network access, or point HF_HOME at a "
                                 "cache that holds it") from None

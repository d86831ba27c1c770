"""`albert-tf convert --release` / `albert_tf.convert_release`: a tarball laid out as Google's releases (a TF1
checkpoint in the original names, albert_config.json, 30k-clean.model under albert_base/) served from loopback by
http.server: a dropped connection resumes with HTTP Range, a corrupt download is refused and not cached, a second
call makes no request, and with no cache and no server the error says what to download and where to put it. No test
touches the internet ($ALBERT_TF_RELEASES_URL points at the loopback server)."""
import base64
import hashlib
import http.server
import importlib.util
import io
import os
import shutil
import socket
import tarfile
import threading

import numpy as np
import pytest
import tensorflow as tf

import numpy_albert as ref
from albert_tf import AlbertPretrainer, convert_release
from albert_tf.checkpoints import releases
from albert_tf.cli import main as cli_main
from helpers import (SMALL, compare, make_inputs, run_python, write_config, write_hf_checkpoint,
                     write_tf1_checkpoints)

NAME = "albert_base_v2"
CFG = dict(SMALL, vocab_size=300)  # the tiny SentencePiece model's size


@pytest.fixture(scope="module")
def release(tmp_path_factory, tiny_spm_model):
    """(tarball bytes, the weights in it): albert_base/{albert_config.json, model.ckpt-best.*, 30k-clean.model}."""
    root = tmp_path_factory.mktemp("release")
    top = root / "albert_base"
    weights = ref.random_weights(CFG, np.random.default_rng(3))
    write_tf1_checkpoints([(str(top), weights, "", True)])
    os.remove(top / "weights.npz")  # the writer's input, not part of a release
    write_config(str(top / "albert_config.json"), CFG)
    shutil.copy(tiny_spm_model, top / "30k-clean.model")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(top, arcname="albert_base")
    return buffer.getvalue(), weights


class Server:
    """Serves `data` at /NAME.tar.gz on 127.0.0.1 with Range, If-Range, ETag and Cloud Storage's x-goog-hash (the MD5
    of `md5_of`, default `data`). `cuts`: how many responses are cut after `cut_after` body bytes (the connection
    closed mid-body). Records each request's Range header in `.ranges`."""

    def __init__(self, data, cuts=0, cut_after=0, md5_of=None, etag='"v1"', status=None):
        self.data, self.cuts, self.cut_after, self.etag, self.status = data, cuts, cut_after, etag, status
        self.md5 = None if md5_of is False else base64.b64encode(hashlib.md5(md5_of or data).digest()).decode()
        self.ranges = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                server.ranges.append(self.headers.get("Range"))
                if self.path != f"/{NAME}.tar.gz" or server.status:
                    self.send_error(server.status or 404)
                    return
                start = 0
                if self.headers.get("Range") and self.headers.get("If-Range", server.etag) == server.etag:
                    start = int(self.headers["Range"].split("=")[1].rstrip("-"))
                body = server.data[start:]
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(server.data) - 1}/{len(server.data)}")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", server.etag)
                if server.md5:
                    self.send_header("x-goog-hash", f"crc32c=AAAAAA==,md5={server.md5}")
                self.end_headers()
                if server.cuts:
                    server.cuts -= 1
                    self.wfile.write(body[:server.cut_after])
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve(monkeypatch):
    servers = []

    def start(data, **kwargs):
        servers.append(Server(data, **kwargs))
        monkeypatch.setenv(releases.URL_ENV, servers[-1].url)
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there once the socket is closed


def _check_weights(output, weights, cfg=CFG):
    """The converted model's outputs against the numpy reference forward pass on the same weights."""
    model = AlbertPretrainer.from_pretrained(output)
    batch = make_inputs(cfg)
    expected = ref.forward(weights, cfg, batch["input_word_ids"], batch["input_mask"], batch["input_type_ids"],
                           batch["masked_lm_positions"])
    assert compare(model(batch, training=False), expected, batch["input_mask"]) < 1e-5


def _same_as_tarball(files, data):
    """Every file of the tarball is in the unpacked release with the same bytes."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                with open(os.path.join(files.directory, os.path.relpath(member.name, "albert_base")), "rb") as f:
                    assert f.read() == tar.extractfile(member).read(), member.name
    return True


def _cache_listing(cache):
    root = os.path.join(cache, "releases")
    return sorted(n for n in os.listdir(root) if not n.startswith(".")) if os.path.isdir(root) else []


def test_interrupted_download_resumes_then_the_cache_answers_offline(tmp_path, release, serve, capsys):
    data, weights = release
    cut = len(data) // 3
    server = serve(data, cuts=1, cut_after=cut)
    cache = str(tmp_path / "cache")
    out = convert_release(NAME, str(tmp_path / "out"), cache_dir=cache)
    assert server.ranges == [None, f"bytes={cut}-"]  # the second request asked only for the rest
    err = capsys.readouterr().err
    assert f"connection lost at {cut:,} bytes" in err and "downloading" in err
    _check_weights(out, weights)
    assert os.path.exists(os.path.join(out, "spm.model"))
    assert _cache_listing(cache) == [NAME]  # unpacked; the tarball and its part are gone
    server.close()  # a second call needs no network
    again = convert_release("albert-base-v2", str(tmp_path / "again"), cache_dir=cache)
    assert server.ranges == [None, f"bytes={cut}-"]
    assert "using the cached release" in capsys.readouterr().err
    first, second = tf.train.load_checkpoint(out + "/ckpt-0"), tf.train.load_checkpoint(again + "/ckpt-0")
    for name in first.get_variable_to_shape_map():
        np.testing.assert_array_equal(first.get_tensor(name), second.get_tensor(name))


def test_a_part_left_by_an_earlier_run_is_resumed(tmp_path, release, serve, monkeypatch, capsys):
    """The first run ends on an HTTP error after a dropped connection; the part stays and the next run resumes."""
    data, _ = release
    server = serve(data, cuts=1, cut_after=1000)
    cache = str(tmp_path / "cache")
    archive = os.path.join(cache, "releases", f"{NAME}.tar.gz")
    attempt = releases._attempt  # pylint: disable=protected-access

    def then_unavailable(*args):  # the server fails every request after the first
        try:
            return attempt(*args)
        finally:
            server.status = 503
    monkeypatch.setattr(releases, "_attempt", then_unavailable)
    with pytest.raises(ValueError, match="HTTP 503.*run again to resume"):
        releases.download(releases.release_url(NAME), archive)
    monkeypatch.setattr(releases, "_attempt", attempt)
    assert os.path.getsize(archive + ".part") == 1000
    server.status = None
    files = releases.fetch_release(NAME, cache=cache)
    assert server.ranges[-1] == "bytes=1000-"
    assert "resuming at 1.0 kB" in capsys.readouterr().err
    assert _same_as_tarball(files, data)


def test_a_changed_object_restarts_the_download(tmp_path, release, serve):
    """If-Range: a part of an older object (another ETag) is not appended to; the server sends the whole new one."""
    data, _ = release
    server = serve(data, cuts=1, cut_after=500, etag='"old"')
    cache = str(tmp_path / "cache")
    archive = os.path.join(cache, "releases", f"{NAME}.tar.gz")
    with pytest.raises(releases.ReleaseUnavailable, match="stopped at 500 bytes"):
        releases.download(releases.release_url(NAME), archive, attempts=0)
    assert os.path.getsize(archive + ".part") == 500
    server.etag, server.ranges = '"new"', []  # the object was replaced
    files = releases.fetch_release(NAME, cache=cache)
    assert server.ranges == ["bytes=500-"]  # asked for the rest; If-Range brought the whole new object
    assert _same_as_tarball(files, data)


@pytest.mark.parametrize("corruption", ["md5", "gzip", "truncated"])
def test_a_corrupt_download_is_refused_and_not_cached(tmp_path, release, serve, capsys, corruption):
    data, _ = release
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    if corruption == "md5":  # Cloud Storage's MD5 of the real object, altered bytes
        serve(bytes(damaged), md5_of=data)
    elif corruption == "gzip":  # no MD5 header: the gzip trailer (CRC-32) catches it
        serve(bytes(damaged), md5_of=False)
    else:  # a truncated object the server believes whole
        serve(data[:len(data) // 2], md5_of=False)
    cache, out = str(tmp_path / "cache"), str(tmp_path / "out")
    assert cli_main(["convert", "--release", NAME, "--cache-dir", cache, "--output", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("albert-tf convert: error:") and "run again to download it anew" in err, err
    assert _cache_listing(cache) == [] and not os.path.exists(out)


def test_offline_without_cache_says_what_to_download_and_where(tmp_path, release, monkeypatch, capsys):
    data, weights = release
    monkeypatch.setenv(releases.URL_ENV, _closed_port_url())
    cache = str(tmp_path / "cache")
    monkeypatch.setenv(releases.CACHE_ENV, cache)  # the environment's cache, no flag
    assert cli_main(["convert", "--release", NAME]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    archive = os.path.join(cache, "releases", f"{NAME}.tar.gz")
    assert lines[-1].startswith("albert-tf convert: error:")
    assert releases.release_url(NAME) in lines[-1] and f"put it at {archive}" in lines[-1], lines
    os.makedirs(os.path.dirname(archive), exist_ok=True)
    with open(archive, "wb") as f:  # done by hand, as the message says
        f.write(data)
    assert cli_main(["convert", "--release", NAME]) == 0
    default = os.path.join(cache, "models", NAME)
    assert f"wrote {default}" in capsys.readouterr().out
    _check_weights(default, weights)
    assert cli_main(["convert", "--release", NAME]) == 0  # the default output is reused
    assert "already converted" in capsys.readouterr().out


def test_archive_structure_is_checked(tmp_path, release):
    """A member outside the top directory, and a checkpoint shard missing, are refused by name."""
    data, _ = release
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]

    def rebuild(path, keep=lambda name: True, extra=None):
        with tarfile.open(path, "w:gz") as tar:
            for member, content in members:
                if keep(member.name):
                    tar.addfile(member, io.BytesIO(content) if content is not None else None)
            if extra:
                info = tarfile.TarInfo(extra)
                tar.addfile(info, io.BytesIO(b""))
        return path

    escape = rebuild(str(tmp_path / "a.tar.gz"), extra="../evil")
    with pytest.raises(ValueError, match="not a plain file or directory inside the archive"):
        releases.unpack(escape, str(tmp_path / "a"))
    no_shard = rebuild(str(tmp_path / "b.tar.gz"), keep=lambda n: ".data-" not in n)
    with pytest.raises(ValueError, match=r"no model.ckpt-best.data-\* shard"):
        releases.unpack(no_shard, str(tmp_path / "b"))
    assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "b")


def test_names_and_flags_are_checked(tmp_path, capsys):
    assert releases.canonical_name("ALBERT-xxlarge-v1") == "albert_xxlarge_v1"
    assert len(releases.NAMES) == 8 and releases.release_url("albert_large_v1").endswith("/albert_large_v1.tar.gz")
    for argv, expected in [
            (["--release", "albert_huge_v3"], "not a released model; expected one of albert_base_v1"),
            (["--release", NAME, "--from", "tf1"], "drop --from"),
            (["--from", "tf1", "--output", str(tmp_path / "o")], "--checkpoint required (or --release NAME"),
            (["--from", "tf1", "--checkpoint", "x", "--output", "o", "--cache-dir", "c"], "goes with --release")]:
        assert cli_main(["convert", *argv]) == 2
        assert expected in capsys.readouterr().err


def test_hf_hub_id_needs_huggingface_hub_or_reads_its_cache(tmp_path):
    """Without huggingface_hub: one line naming it. With it: a repository in the Hugging Face cache converts
    offline (HF_HUB_OFFLINE=1, the cache laid out as huggingface_hub lays it out)."""
    weights = ref.random_weights(SMALL, np.random.default_rng(9))
    hub = tmp_path / "hub"
    snapshot = hub / "models--albert--tiny" / "snapshots" / ("0" * 40)
    write_hf_checkpoint(str(snapshot), SMALL, ref.hf_names(weights, SMALL))
    (hub / "models--albert--tiny" / "refs").mkdir()
    (hub / "models--albert--tiny" / "refs" / "main").write_text("0" * 40)
    out = tmp_path / "out"
    proc = run_python(f"import sys; from albert_tf.cli import main; sys.exit(main(['convert', '--release', "
                      f"'hf:albert/tiny', '--output', {str(out)!r}]))", HF_HUB_CACHE=str(hub), HF_HUB_OFFLINE="1")
    if importlib.util.find_spec("huggingface_hub") is None:
        assert proc.returncode == 2 and "needs huggingface_hub" in proc.stderr, proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    _check_weights(str(out), weights, SMALL)

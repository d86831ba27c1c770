"""albert_tf.files.atomic_directory where a directory rename is not atomic (URLs such as gs://): marker files
(saved_model.pb, checkpoint, albert_config.json) land last, a reader never finds a marker beside a partial directory,
a failed copy leaves no marker and no temp; the encoder export, a task export and pretrained.save go through it.

Trees on TF's ram:// filesystem (whose own directory rename drops the files), and local trees copied as a URL's would
be (`local_as_url`) where ram:// cannot list them (it lists `assets` and `assets.extra` as one prefix)."""
import os
import uuid

import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, files
from albert_tf.checkpoints import pretrained
from albert_tf.serving.encoder_export import export_encoder
from albert_tf.serving.saved_model import TASK_CONFIG_ASSET, write_task_export
from albert_tf.text import AlbertTokenizer
from helpers import REPO, SMALL

GFILE = tf.io.gfile
REAL_COPY = files._copy_file  # pylint: disable=protected-access
TREE = {  # a SavedModel and a checkpoint in one directory: every marker, nested names that are not markers
    "saved_model.pb": b"graph",
    "fingerprint.pb": b"fp",
    "variables/variables.index": b"index",
    "variables/variables.data-00000-of-00001": b"weights",
    "assets.extra/albert_config.json": b"{}",
    "checkpoint": b'model_checkpoint_path: "ckpt-1"',
    "ckpt-1.index": b"ckpt index",
    "ckpt-1.data-00000-of-00001": b"ckpt data",
    "albert_config.json": b'{"hidden_size": 8}',
}
MARKERS_LAST = ["albert_config.json", "saved_model.pb", "checkpoint"]


def _url():
    return f"ram://test_io_{uuid.uuid4().hex}"


def _files(root):
    """{relative path: bytes} of every file under root ({} when root does not exist)."""
    out = {}
    if not GFILE.exists(root):
        return out
    for directory, _, names in GFILE.walk(root):
        for name in names:
            with GFILE.GFile(os.path.join(directory, name), "rb") as f:
                out[os.path.join(directory[len(root):].strip("/"), name)] = f.read()
    return out


def _has_marker(root):
    return any(GFILE.exists(os.path.join(root, m)) for m in MARKERS_LAST)


class CopyWatcher:
    """Stands in for files._copy_file: copies, records the order in which files land in `target`, checks before and
    after every copy that a marker in `target` means every non-marker file of the source tree is there with equal
    bytes, and raises after `crash_after` files."""

    def __init__(self, target, crash_after=None):
        self.target = target
        self.crash_after = crash_after
        self.order = []
        self.violations = []

    def __call__(self, gfile, src, dst):
        relative = dst[len(self.target):].strip("/")
        source_root = src[:len(src) - len(relative)].rstrip("/")
        self._check(source_root)
        REAL_COPY(gfile, src, dst)
        self.order.append(relative)
        self._check(source_root)
        if len(self.order) == self.crash_after:
            raise RuntimeError(f"crashed after {self.crash_after} files")

    def _check(self, source_root):
        """A marker in target: every other file there, equal to the source's (and the markers there equal too)."""
        if not _has_marker(self.target):
            return
        have, want = _files(self.target), _files(source_root)
        if {k: v for k, v in want.items() if k not in MARKERS_LAST or k in have} != have:
            self.violations.append(sorted(have))


@pytest.fixture(name="local_as_url")
def fixture_local_as_url(monkeypatch):
    """Local paths take the URL route (copy, markers last) instead of a rename."""
    monkeypatch.setattr(files, "renames_directories_atomically", lambda path: False)


def _write_tree(directory, tree):
    for relative, data in tree.items():
        GFILE.makedirs(os.path.dirname(os.path.join(directory, relative)))
        with GFILE.GFile(os.path.join(directory, relative), "wb") as f:
            f.write(data)


def test_url_tree_lands_with_markers_last_and_never_partial(monkeypatch):
    parent = _url()
    target = f"{parent}/1"
    watcher = CopyWatcher(target)
    monkeypatch.setattr(files, "_copy_file", watcher)
    with files.atomic_directory(target, markers=MARKERS_LAST) as tmp:
        _write_tree(tmp, TREE)
    assert watcher.order == sorted(set(TREE) - set(MARKERS_LAST)) + MARKERS_LAST
    assert watcher.violations == []
    assert _files(target) == TREE
    assert GFILE.listdir(parent) == ["1"]  # the temp is gone


@pytest.mark.parametrize("replace", [False, True], ids=["new", "replacing"])
def test_a_failure_after_any_file_leaves_no_marker_and_no_temp(monkeypatch, replace):
    for k in range(1, len(TREE) + 1):
        parent = _url()
        target = f"{parent}/1"
        if replace:
            _write_tree(target, {name: data + b" old" for name, data in TREE.items()} | {"old_only": b"x"})
        watcher = CopyWatcher(target, crash_after=k)
        monkeypatch.setattr(files, "_copy_file", watcher)
        with pytest.raises(RuntimeError, match=f"crashed after {k} files"):
            with files.atomic_directory(target, markers=MARKERS_LAST) as tmp:
                _write_tree(tmp, TREE)
        assert len(watcher.order) == k and watcher.violations == []
        assert not _has_marker(target) and not GFILE.listdir(parent), k  # partial copy and temp removed


def test_replacing_on_a_url_removes_the_old_markers_before_copying(monkeypatch):
    target = f"{_url()}/model"
    _write_tree(target, {name: data + b" old" for name, data in TREE.items()} | {"old_only": b"x"})
    watcher = CopyWatcher(target)
    monkeypatch.setattr(files, "_copy_file", watcher)
    with files.atomic_directory(target, markers=MARKERS_LAST) as tmp:
        _write_tree(tmp, TREE)
    assert watcher.violations == []  # checked before the first copy too: no old marker beside new files
    assert _files(target) == TREE


def test_local_paths_are_renamed_not_copied(monkeypatch, tmp_path):
    def copy(*args):
        raise AssertionError(f"copied {args}")

    monkeypatch.setattr(files, "_copy_file", copy)
    with files.atomic_directory(str(tmp_path / "d"), markers=MARKERS_LAST) as tmp:
        _write_tree(tmp, TREE)
    assert _files(str(tmp_path / "d")) == TREE and os.listdir(tmp_path) == ["d"]
    assert files.renames_directories_atomically("file:///x") and not files.renames_directories_atomically("gs://b/x")


@pytest.mark.usefixtures("local_as_url")
def test_encoder_export_to_a_url_writes_saved_model_pb_last(monkeypatch, tmp_path, tiny_spm_model):
    cfg = AlbertConfig.from_json_file(os.path.join(REPO, "configs", "albert_tiny.json")).to_dict()
    cfg["vocab_size"] = AlbertTokenizer(tiny_spm_model).vocab_size
    model_dir = str(tmp_path / "model")
    pretrained.save(AlbertEncoder(AlbertConfig.from_dict(cfg)), model_dir, spm_model=tiny_spm_model)
    base = str(tmp_path / "export")
    watcher = CopyWatcher(f"{base}/1")
    monkeypatch.setattr(files, "_copy_file", watcher)
    path = export_encoder(model_dir, base, seq_length=16, warmup=False)
    assert path == f"{base}/1" and watcher.violations == [] and os.listdir(base) == ["1"]
    assert watcher.order[-1] == "saved_model.pb" and "variables/variables.index" in watcher.order
    assert "assets.extra/albert_config.json" in watcher.order
    served = tf.saved_model.load(path).signatures["text"](text_a=tf.constant(["a b"]))
    assert served["pooled_output"].shape == (1, cfg["hidden_size"])


@pytest.mark.usefixtures("local_as_url")
def test_task_export_to_a_url_writes_saved_model_pb_last(monkeypatch, tmp_path):
    module = tf.Module()
    module.scale = tf.Variable(2.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def serving_default(x):
        return {"y": x * module.scale}

    module.serving_default = serving_default
    base = str(tmp_path / "export")
    watcher = CopyWatcher(f"{base}/3")
    monkeypatch.setattr(files, "_copy_file", watcher)
    path = write_task_export(module, {"serving_default": serving_default.get_concrete_function()}, base,
                             {"task": "sst2"}, version=3)
    assert watcher.violations == [] and watcher.order[-1] == "saved_model.pb" and os.listdir(base) == ["3"]
    assert f"assets.extra/{TASK_CONFIG_ASSET}" in watcher.order
    assert tf.saved_model.load(path).signatures["serving_default"](x=tf.constant([1.5]))["y"].numpy() == [3.0]


def test_pretrained_save_to_a_url_writes_the_checkpoint_state_last(monkeypatch):
    cfg = AlbertConfig.from_dict(SMALL)
    model = AlbertEncoder(cfg)
    directory = f"{_url()}/model"
    watcher = CopyWatcher(directory)
    monkeypatch.setattr(files, "_copy_file", watcher)
    assert pretrained.save(model, directory, step=7) == directory
    assert watcher.violations == []
    assert watcher.order[-2:] == ["albert_config.json", "checkpoint"]
    assert set(watcher.order[:-2]) == {"ckpt-7.index", "ckpt-7.data-00000-of-00001"}
    assert pretrained.read_config(directory) == cfg
    assert pretrained.latest_checkpoint(directory) == f"{directory}/ckpt-7"

"""One resolution for every handle (albert_tf.checkpoints.handles): the models' `from_pretrained`, the task models'
and every command's --init read a pretrained-model directory, an export (BASE and BASE/N), a released model's name
and a Hugging Face directory, each checked against the numpy reference forward pass on the weights written.

No test downloads: the release is a tarball laid out as Google's, put into the cache by hand (releases/NAME.tar.gz,
which the cache unpacks), with $ALBERT_TF_RELEASES_URL pointing at a closed loopback port, so any download fails."""
import contextlib
import io
import os
import shutil
import socket
import tarfile

import numpy as np
import pytest

import numpy_albert as ref
from helpers import (PRETRAIN_TINY, SMALL, compare, make_inputs, pretrain_config, write_config, write_hf_checkpoint,
                     write_tf1_checkpoints)

CFG = dict(SMALL, vocab_size=300)  # the tiny SentencePiece model's size
WARM = PRETRAIN_TINY.to_dict()
RELEASE, WARM_RELEASE = "albert_base_v2", "albert_large_v2"


def _tarball(directory):
    """A release tarball (albert_base/ inside, as Google's) of `directory`, put into the cache by hand."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(directory, arcname="albert_base")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_spm_model):
    """{"weights", "cache", handle kind: handle}: one set of random weights as a release (in the cache), a Hugging
    Face directory, a model dir converted from it and an export of the Hugging Face directory (`export --init
    HF_DIR`, at length 24: test_export_init_takes_any_handle checks it); plus `warm`: PRETRAIN_TINY's weights as a
    second release and a Hugging Face directory, for pretrain's warm start."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    root = tmp_path_factory.mktemp("handles")
    weights = ref.random_weights(CFG, np.random.default_rng(11))
    warm = ref.random_weights(WARM, np.random.default_rng(12))
    write_tf1_checkpoints([(str(root / "release"), weights, "", False), (str(root / "warm_release"), warm, "", False)])
    cache = root / "cache"
    os.makedirs(cache / "releases")
    for name, directory, cfg in ((RELEASE, root / "release", CFG), (WARM_RELEASE, root / "warm_release", WARM)):
        os.remove(directory / "weights.npz")
        write_config(str(directory / "albert_config.json"), cfg)
        shutil.copy(tiny_spm_model, directory / "30k-clean.model")
        (cache / "releases" / f"{name}.tar.gz").write_bytes(_tarball(directory))
    write_hf_checkpoint(str(root / "hf"), CFG, ref.hf_names(weights, CFG))
    shutil.copy(tiny_spm_model, root / "hf" / "spiece.model")
    write_hf_checkpoint(str(root / "warm_hf"), WARM, ref.hf_names(warm, WARM))
    encoder_only = {k[len("albert."):]: v for k, v in ref.hf_names(weights, CFG).items() if k.startswith("albert.")}
    write_hf_checkpoint(str(root / "hf_model"), CFG, encoder_only)  # an AlbertModel: no heads
    model_dir = albert_tf.convert(albert_tf.ConvertConfig(source="hf", checkpoint=str(root / "hf"),
                                                          output=str(root / "model"))).output
    with _offline(cache):
        version = albert_tf.export(albert_tf.ExportConfig(init=str(root / "hf"), output=str(root / "export"),
                                                          max_seq_length=24, no_warmup=True)).path
    return {"weights": weights, "warm": warm, "cache": str(cache), "model_dir": model_dir,
            "export_base": str(root / "export"), "export_version": version, "release": RELEASE,
            "hf": str(root / "hf"), "hf_model": str(root / "hf_model"), "warm_hf": str(root / "warm_hf")}


@contextlib.contextmanager
def _offline(cache):
    """`cache` as the cache, and a releases URL where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ALBERT_TF_CACHE", str(cache))
        patch.setenv("ALBERT_TF_RELEASES_URL", f"http://127.0.0.1:{port}")
        yield


@pytest.fixture
def offline(world):
    """The world's cache as the cache, and a releases URL where nothing listens."""
    with _offline(world["cache"]):
        yield world


def _reference(weights, cfg=CFG):
    batch = make_inputs(cfg)
    return batch, ref.forward(weights, cfg, batch["input_word_ids"], batch["input_mask"], batch["input_type_ids"],
                              batch["masked_lm_positions"])


def _encoder_diff(outputs, expected, mask):
    m = mask[..., None].astype(bool)
    return max(np.abs(np.where(m, np.asarray(outputs["sequence_output"]) - expected["sequence_output"], 0)).max(),
               np.abs(np.asarray(outputs["pooled_output"]) - expected["pooled_output"]).max())


KINDS = ["model_dir", "export_base", "export_version", "release", "hf"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_model_reads_every_handle(offline, kind):
    """AlbertEncoder, AlbertPretrainer and a task model from one handle give the reference's outputs; a pretrainer
    from an export (the encoder only) is refused in one line."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    handle = offline[kind]
    batch, expected = _reference(offline["weights"])
    encoder = albert_tf.AlbertEncoder.from_pretrained(handle, dropout=False)
    assert _encoder_diff(encoder(batch, training=False), expected, batch["input_mask"]) < 1e-5
    classifier = albert_tf.AlbertClassifier.from_pretrained(handle, num_classes=3)
    assert _encoder_diff(classifier.encoder(batch, training=False), expected, batch["input_mask"]) < 1e-5
    if kind.startswith("export"):
        with pytest.raises(ValueError, match="an export holds the encoder only") as caught:
            albert_tf.AlbertPretrainer.from_pretrained(handle)
        assert "\n" not in str(caught.value)
        assert isinstance(albert_tf.load_pretrained(handle), albert_tf.AlbertEncoder)
        return
    pretrainer = albert_tf.AlbertPretrainer.from_pretrained(handle)
    assert compare(pretrainer(batch, training=False), expected, batch["input_mask"]) < 1e-5
    assert isinstance(albert_tf.load_pretrained(handle), albert_tf.AlbertPretrainer)


def test_release_is_read_from_the_cache_without_a_download(offline):
    """The tarball put into the cache is unpacked there once and read from its TF1 checkpoint; nothing is converted
    into the cache's models/ and no request is made (the URL's port is closed: a download would fail)."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    albert_tf.AlbertEncoder.from_pretrained("albert-base-v2")  # the other spelling
    unpacked = os.path.join(offline["cache"], "releases", RELEASE)
    assert os.path.exists(os.path.join(unpacked, "release.json"))
    assert not os.path.exists(os.path.join(offline["cache"], "models"))


def test_task_model_from_a_name_fits_on_strings(offline):
    """AlbertClassifier.from_pretrained(name, seq_length=...) attaches the release's vocabulary: it predicts on raw
    strings, as the same model on AlbertTokenizer's packed ids."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    model = albert_tf.AlbertClassifier.from_pretrained(RELEASE, num_classes=2, seq_length=16)
    texts = ["the river runs to the sea", "a program of numbers"]
    packed = albert_tf.AlbertTokenizer(os.path.join(offline["cache"], "releases", RELEASE, "30k-clean.model")).pack(
        texts, seq_length=16)
    np.testing.assert_allclose(model.predict(texts, verbose=0), model.predict(packed, verbose=0), atol=1e-5)


def test_encoder_only_hf_directory_gives_an_encoder(offline):
    import albert_tf  # pylint: disable=import-outside-toplevel

    batch, expected = _reference(offline["weights"])
    encoder = albert_tf.load_pretrained(offline["hf_model"])
    assert isinstance(encoder, albert_tf.AlbertEncoder)
    assert _encoder_diff(encoder(batch, training=False), expected, batch["input_mask"]) < 1e-5
    with pytest.raises(ValueError, match="encoder-only checkpoint") as caught:
        albert_tf.AlbertPretrainer.from_pretrained(offline["hf_model"])
    assert "\n" not in str(caught.value)


def test_a_bad_handle_is_one_line_naming_it_and_what_was_expected(offline, tmp_path):
    import albert_tf  # pylint: disable=import-outside-toplevel

    (tmp_path / "empty").mkdir()
    (tmp_path / "file.json").write_text("{}")
    for handle, said in [(str(tmp_path / "nothing"), "no such directory and not a released model's name"),
                         ("albert_huge_v9", "no such directory and not a released model's name"),
                         (str(tmp_path / "file.json"), "a file, not a directory"),
                         (str(tmp_path / "empty"), "a directory with neither albert_config.json")]:
        for call in (albert_tf.AlbertEncoder.from_pretrained, albert_tf.AlbertClassifier.from_pretrained):
            with pytest.raises(FileNotFoundError) as caught:
                call(handle)
            message = str(caught.value)
            assert "\n" not in message and said in message and f"from_pretrained {handle}: " in message, message
            assert "expected a pretrained-model directory, an `albert-tf export` BASE or BASE/N" in message


# ------------------------------------------------------------------------------------------------ --init
@pytest.mark.parametrize("kind", ["release", "hf", "export_version"])
def test_export_init_takes_any_handle(offline, tmp_path, kind):
    """export --init: a release name and a Hugging Face directory are exported (the Hugging Face directory's export
    is the world's); an export is exported again (here at another length); the export's encoder gives the
    reference's outputs."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    if kind == "hf":
        path = offline["export_version"]  # albert_tf.export(ExportConfig(init=HF_DIR, max_seq_length=24)): world
    else:
        path = albert_tf.export(albert_tf.ExportConfig(init=offline[kind], output=str(tmp_path / "out"),
                                                       max_seq_length=24 if kind == "release" else 16,
                                                       no_warmup=True)).path
    batch, expected = _reference(offline["weights"])
    assert _encoder_diff(albert_tf.load_encoder(path)(batch, training=False), expected, batch["input_mask"]) < 1e-5
    with open(os.path.join(path, "assets.extra", "spm.model"), "rb") as a, \
            open(os.path.join(offline["hf"], "spiece.model"), "rb") as b:
        assert a.read() == b.read()


def test_convert_to_hf_from_a_release_name(offline, tmp_path):
    """convert --to hf --init NAME writes the release's tensors under Hugging Face's names, bit for bit."""
    import albert_tf  # pylint: disable=import-outside-toplevel
    from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel

    albert_tf.convert(albert_tf.ConvertConfig(init=RELEASE, to="hf", output=str(tmp_path / "hf")))
    written = load_file(str(tmp_path / "hf" / "model.safetensors"))
    expected = {name: value for name, value in ref.hf_names(offline["weights"], CFG).items()
                if not name.startswith("predictions.decoder.")}  # tied to the word embeddings and the bias
    assert sorted(written) == sorted(expected)
    assert not [name for name in expected if not np.array_equal(written[name], expected[name])]


@pytest.mark.parametrize("kind", ["release", "hf"])
def test_finetune_init_reads_a_release_and_a_hf_directory(offline, kind):
    """finetune's --init (read_init): the release's or the Hugging Face directory's config, vocabulary and casing
    (uncased: the release's; the directory's tokenizer_config.json has none, so uncased too)."""
    from albert_tf.training.finetuning import read_init  # pylint: disable=import-outside-toplevel

    source, spm_model, lower_case = read_init(offline[kind], None)
    assert (source.kind, source.config.to_dict()["hidden_size"], lower_case) == (kind, CFG["hidden_size"], True)
    assert os.path.basename(spm_model) in ("30k-clean.model", "spiece.model")


@pytest.mark.slow
def test_finetune_runs_from_a_release_name(offline, tmp_path, capsys):
    """albert_tf.finetune(FinetuneConfig(init=NAME)): the encoder is read from the cached release's checkpoint."""
    import albert_tf  # pylint: disable=import-outside-toplevel
    import finetune_helpers as fh  # pylint: disable=import-outside-toplevel

    data = fh.write_sst2(str(tmp_path / "sst2"), 32, 8)
    result = albert_tf.finetune(albert_tf.FinetuneConfig(task="sst2", data_dir=data, init=RELEASE,
                                                         output=str(tmp_path / "out"), epochs=1, batch_size=8,
                                                         max_seq_length=16, seed=1))
    assert (result.status, result.exit_code) == ("done", 0)
    release = os.path.join(offline["cache"], "releases", RELEASE)
    assert f"initialized the encoder from {release}" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["warm_release", "warm_hf"])
def test_pretrain_warm_starts_from_a_release_and_a_hf_directory(offline, pretrain_data, tmp_path, kind):
    """pretrain --init NAME / HF_DIR: the run starts from its encoder and heads (at a learning rate too small to
    move them, the saved model is the reference's)."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    handle = WARM_RELEASE if kind == "warm_release" else offline["warm_hf"]
    result = albert_tf.pretrain(pretrain_config(pretrain_data, tmp_path / "run", steps=2, init=handle,
                                                learning_rate=1e-12, no_dropout=True))
    assert result.status == "done"
    batch, expected = _reference(offline["warm"], WARM)
    model = albert_tf.AlbertPretrainer.from_pretrained(result.model_dir)
    assert compare(model(batch, training=False), expected, batch["input_mask"]) < 1e-4


def test_pretrain_refuses_an_export_and_another_config_in_one_line(offline, pretrain_data, tmp_path):
    import albert_tf  # pylint: disable=import-outside-toplevel

    for handle, said in [(offline["export_version"], "an export holds the encoder only, not the MLM and "
                                                     "sentence-order heads that pretraining continues to train"),
                         (RELEASE, "holds a model of another config (differs in")]:
        with pytest.raises(ValueError) as caught:
            albert_tf.pretrain(pretrain_config(pretrain_data, tmp_path / "run", init=handle))
        assert "\n" not in str(caught.value) and said in str(caught.value), str(caught.value)
        assert str(caught.value).startswith(f"--init {handle}: ")
    assert not os.path.exists(tmp_path / "run") or not os.listdir(tmp_path / "run")

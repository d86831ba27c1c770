"""A model's vocabulary is checked before anything is written: a truncated SentencePiece file is refused (by the
tokenizer, create-data, pretrain and export), and a model dir's spm.model is not replaced by another vocabulary."""
import os

import pytest

import helpers as ph
from albert_tf.text import AlbertTokenizer
from albert_tf.text.sentencepiece import top_level_fields

SPM_LOADS_A_PREFIX = "SentencePiece itself loads it"


def sentencepiece_loads(data):
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    try:
        spm.SentencePieceProcessor().LoadFromSerializedProto(data)
    except Exception:  # pylint: disable=broad-except
        return False
    return True


@pytest.fixture(scope="module")
def truncated_spm(tiny_spm_model, tmp_path_factory):
    """A copy of the tiny model cut at a piece boundary near its middle: a prefix SentencePiece itself loads as a
    smaller model with [CLS] [SEP] [MASK] in place (the `head -c 1000 spm.model` case)."""
    with open(tiny_spm_model, "rb") as f:
        data = f.read()
    cut = max(n for n in range(len(data) // 2) if sentencepiece_loads(data[:n]))
    path = tmp_path_factory.mktemp("truncated") / "spm.model"
    path.write_bytes(data[:cut])
    return str(path)


def test_the_fields_walk_matches_the_proto(tiny_spm_model):
    with open(tiny_spm_model, "rb") as f:
        fields = top_level_fields(f.read())
    # sentencepiece_model.proto: pieces (1) x vocab size, then trainer_spec (2), normalizer_spec (3)
    assert fields[:300] == [1] * 300 and 2 in fields and 3 in fields


def test_every_truncation_is_refused(tiny_spm_model):
    with open(tiny_spm_model, "rb") as f:
        data = f.read()
    AlbertTokenizer(data)  # the whole file passes
    loadable = 0
    for n in range(1, len(data)):
        loadable += sentencepiece_loads(data[:n])
        with pytest.raises(ValueError, match="SentencePiece model"):
            AlbertTokenizer(data[:n])
    assert loadable > 100  # SentencePiece alone accepts hundreds of them


def test_grown_model_still_passes(tiny_spm_model, tmp_path):
    # pieces appended after the specs (the tests' resize_spm) are a whole model
    assert AlbertTokenizer(ph.resize_spm(tiny_spm_model, 400, str(tmp_path / "grown.model"))).vocab_size == 400


def test_create_data_refuses_a_truncated_spm_and_writes_nothing(truncated_spm, tmp_path):
    corpus = ph.write_corpus(str(tmp_path / "corpus.txt"))
    out = tmp_path / "out"
    proc = ph.run_cli("create-data", ["--input", corpus, "--spm-model", truncated_spm, "--output", out / "train",
                                      "--max-seq-length", 32, "--max-predictions", 5], check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ph.error_lines(proc.stderr) == [
        f"albert-tf create-data: error: SentencePiece model {truncated_spm} is truncated or not a trained model: it "
        f"has no trainer_spec and no normalizer_spec ({os.path.getsize(truncated_spm):,} bytes; a file cut short "
        "loses them)"]
    assert not out.exists()


@pytest.mark.slow  # two TensorFlow processes (about a minute on this shared machine)
def test_pretrain_and_export_refuse_a_truncated_spm(truncated_spm, pretrain_data, tmp_path):
    model_dir = tmp_path / "model"
    proc = ph.run_cli("pretrain", ph.pretrain_args(pretrain_data, model_dir, spm_model=truncated_spm), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = ph.error_lines(proc.stderr)
    assert len(lines) == 1 and f"SentencePiece model {truncated_spm} is truncated" in lines[0]
    assert not model_dir.exists()
    ph.run_cli("pretrain", ph.pretrain_args(pretrain_data, model_dir, steps=2))  # a model dir without spm.model
    proc = ph.run_cli("export", ["--init", model_dir, "--spm-model", truncated_spm, "--output", tmp_path / "exp",
                                 "--max-seq-length", 32],
                      check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = ph.error_lines(proc.stderr)
    assert len(lines) == 1 and f"SentencePiece model {truncated_spm} is truncated" in lines[0]
    assert not (tmp_path / "exp").exists()


@pytest.mark.slow  # two TensorFlow processes (about a minute on this shared machine)
def test_resuming_with_another_vocabulary_is_refused(tiny_spm_model, pretrain_data, tmp_path):
    first = ph.resize_spm(tiny_spm_model, 1000, str(tmp_path / "first.model"))
    other = ph.add_spm_pieces(tiny_spm_model, [(f"\u2581other{i}", -1000.0 - i) for i in range(700)],
                              str(tmp_path / "other.model"))
    assert AlbertTokenizer(other).vocab_size == AlbertTokenizer(first).vocab_size == 1000
    model_dir = tmp_path / "model"
    ph.run_cli("pretrain", ph.pretrain_args(pretrain_data, model_dir, steps=2) + ["--spm-model", first,
                                                                                 "--allow-unchecked-records"])
    before = {p: os.path.getmtime(model_dir / p) for p in os.listdir(model_dir)}
    proc = ph.run_cli("pretrain", ph.pretrain_args(pretrain_data, model_dir, steps=4, spm_model=other), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ph.error_lines(proc.stderr) == [
        f"albert-tf pretrain: error: --spm-model {other}: the model dir's {model_dir / 'spm.model'} is a different "
        "vocabulary (SHA-256 differs); use a new --model-dir, the same --spm-model, or leave --spm-model out to keep "
        "the model dir's"]
    assert (model_dir / "spm.model").read_bytes() == open(first, "rb").read()
    assert {p: os.path.getmtime(model_dir / p) for p in os.listdir(model_dir)} == before  # nothing written

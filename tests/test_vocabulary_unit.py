"""A vocabulary is one unit: PREFIX.model, PREFIX.vocab and their record PREFIX.casing.json (casing, accents, the
model's fingerprint) are written together, the .model last; `vocab` over an existing prefix needs --overwrite and
holds the prefix's lock; records (create-data's index), model directories and exports carry the fingerprint, and
pretrain refuses records made with another vocabulary."""
import hashlib
import json
import os
import shutil

import pytest

import helpers
from albert_tf.data import record_index
from albert_tf.data.create_pretraining_data import create_pretraining_data
from albert_tf.data.instances import InstanceOptions
from albert_tf.data.vocab import train_vocab
from albert_tf.runtime import lock
from albert_tf.text import AlbertTokenizer, vocabulary


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("unit_corpus") / "corpus.txt")
    helpers.write_corpus(path, num_docs=40, seed=3)
    return path


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _vocab_args(corpus, prefix, *more):
    return ("vocab", "--input", corpus, "--output-prefix", prefix, "--vocab-size", "120", *more)


def test_the_record_holds_the_models_fingerprint_and_normalization(corpus, tmp_path):
    """Before: the record held only {"lower_case": ...}, nothing tied it to its model."""
    result = train_vocab(corpus, str(tmp_path / "spm"), vocab_size=120, keep_accents=True)
    with open(result.casing, encoding="utf-8") as f:
        assert json.load(f) == {"lower_case": True, "keep_accents": True, "sha256": _sha256(result.model)}
    assert result.stats["sha256"] == _sha256(result.model)
    assert AlbertTokenizer(result.model).fingerprint == _sha256(result.model)


def test_vocab_over_an_existing_prefix_needs_overwrite(cli, corpus, tmp_path):
    """Before: a second `vocab` silently replaced the vocabulary records had been made with."""
    prefix = str(tmp_path / "spm")
    assert cli(*_vocab_args(corpus, prefix))[0] == 0
    before = {name: (tmp_path / name).read_bytes() for name in ("spm.model", "spm.vocab", "spm.casing.json")}
    code, out, err = cli(*_vocab_args(corpus, prefix, "--seed", "7", "--max-sentences", "50"))
    assert code == 2 and out == ""
    assert helpers.error_lines(err) == [err.strip()] and "--overwrite" in err and f"{prefix}.model" in err
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    code, out, _ = cli(*_vocab_args(corpus, prefix, "--seed", "7", "--max-sentences", "50", "--overwrite"))
    assert code == 0 and (tmp_path / "spm.model").read_bytes() != before["spm.model"]
    assert vocabulary.read_text_record(prefix + ".model").sha256 == _sha256(prefix + ".model")


def test_a_vocab_that_fails_half_way_leaves_the_old_set(corpus, tmp_path):
    """A write that fails as on a full disk (every file limited to 100 kB: the .vocab and the record fit, the
    .model does not). Before (where `vocab` replaced a prefix without --overwrite, so the same run without the
    flag): the new .vocab was left beside the old .model."""
    prefix = str(tmp_path / "spm")
    train_vocab(corpus, prefix, vocab_size=120)
    names = ("spm.model", "spm.vocab", "spm.casing.json")
    before = {name: (tmp_path / name).read_bytes() for name in names}
    assert max(len(before["spm.vocab"]), len(before["spm.casing.json"])) < 100_000 < len(before["spm.model"])
    proc = helpers.run_program("file_size_limited_cli", "100000",
                               *_vocab_args(corpus, prefix, "--seed", "7", "--max-sentences", "50", "--overwrite"))
    assert proc.returncode != 0, proc.stdout
    assert {name: (tmp_path / name).read_bytes() for name in names} == before
    assert sorted(os.listdir(tmp_path)) == sorted(names)  # no temporary file left, no lock


def test_vocab_takes_the_prefix_lock(cli, corpus, tmp_path):
    """Before: `vocab` took no lock; two runs on one prefix wrote over each other."""
    prefix = str(tmp_path / "spm")
    with lock.prefix_lock(prefix, "--output-prefix"):
        code, out, err = cli(*_vocab_args(corpus, prefix))
    assert code == 77 and out == ""
    assert len(err.strip().splitlines()) == 1 and "in use by another run" in err and prefix in err
    assert not os.path.exists(prefix + ".model")


def test_a_record_of_another_model_is_refused(corpus, tmp_path):
    """Files mixed by hand (or by an older release's half-written vocab): the record's fingerprint names another
    model, and the tokenizer refuses to guess."""
    first = train_vocab(corpus, str(tmp_path / "a"), vocab_size=120)
    second = train_vocab(corpus, str(tmp_path / "b"), vocab_size=120, seed=9, max_sentences=50)
    os.replace(second.casing, first.casing)
    with pytest.raises(ValueError, match=r"a\.casing\.json belongs to another SentencePiece model"):
        AlbertTokenizer(first.model)


def test_records_and_model_dirs_carry_the_fingerprint(corpus, tmp_path, capsys):
    """create-data's record-count index names the vocabulary it tokenized with; pretrain's model dir gets the
    record with the fingerprint (the TFRecord features are unchanged)."""
    spm = train_vocab(corpus, str(tmp_path / "spm"), vocab_size=120, lower_case=False).model
    create_pretraining_data(corpus, spm, str(tmp_path / "data" / "train"), progress=False)
    found = record_index.vocabulary_of(record_index.index_path(str(tmp_path / "data" / "train")))
    assert found == {"sha256": _sha256(spm), "lower_case": False, "keep_accents": False}
    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    pretrained.write_files(str(tmp_path / "model"), AlbertConfig.from_preset("albert_tiny"), spm)
    copied = vocabulary.read_text_record(str(tmp_path / "model" / "spm.model"))
    assert (copied.sha256, copied.lower_case, copied.keep_accents) == (_sha256(spm), False, False)
    assert capsys.readouterr().err == ""


def test_pretrain_refuses_records_of_another_vocabulary(corpus, tmp_path):
    """Before: records made with one spm.model trained without complaint under another of the same size."""
    import albert_tf  # pylint: disable=import-outside-toplevel

    first = train_vocab(corpus, str(tmp_path / "a"), vocab_size=120).model
    other = train_vocab(corpus, str(tmp_path / "b"), vocab_size=120, seed=9, max_sentences=50).model
    options = dict(max_seq_length=helpers.PRETRAIN_SEQ, max_predictions=helpers.PRETRAIN_PRED)
    create_pretraining_data(corpus, first, str(tmp_path / "data" / "train"), progress=False,
                            options=InstanceOptions(**options))
    helpers.PRETRAIN_TINY.replace(vocab_size=120).to_json_file(str(tmp_path / "albert_config.json"))
    config = helpers.pretrain_config(str(tmp_path), tmp_path / "model", steps=1,
                                     train_data=str(tmp_path / "data" / "train-*"), spm_model=other)
    with pytest.raises(ValueError) as refused:
        albert_tf.pretrain(config)
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and ".train.record_counts.json" in message and other in message
    assert not os.path.exists(tmp_path / "model" / "albert_config.json")


def test_records_without_a_fingerprint_are_refused_unless_allowed(pretrain_data, tiny_spm_model):
    """Records of the original tool (no index) cannot be checked against the vocabulary: refused in one line naming
    the file and what it lacks; --allow-unchecked-records reads them, with one note. No vocabulary: nothing to
    check."""
    from albert_tf.data import pretraining_input  # pylint: disable=import-outside-toplevel

    files = [os.path.join(pretrain_data, "train.tfrecord")]
    with pytest.raises(ValueError) as refused:
        pretraining_input.check_record_vocabulary(files, "--train-data", tiny_spm_model)
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and message.startswith(f"--train-data: {files[0]} carries no vocabulary")
    assert "no record-count index beside it" in message and "--allow-unchecked-records" in message
    note = pretraining_input.check_record_vocabulary(files, "--train-data", tiny_spm_model, allow_unchecked=True)
    assert len(note.splitlines()) == 1 and "no vocabulary fingerprint" in note and tiny_spm_model in note
    assert pretraining_input.check_record_vocabulary(files, "--train-data", None) is None


def test_shards_copied_without_their_index_are_refused(corpus, tmp_path, cli):
    """The issue's case: `cp data/*.tfrecord elsewhere/` leaves the hidden index behind, and records of another
    vocabulary trained with only a note. Now pretrain exits 2 with one line naming the shard and the index it
    lacks, before the model dir gets a file; with the index copied along the records are checked, and the other
    vocabulary's refused."""
    first = train_vocab(corpus, str(tmp_path / "a"), vocab_size=120).model
    other = train_vocab(corpus, str(tmp_path / "b"), vocab_size=120, seed=9, max_sentences=50).model
    options = InstanceOptions(max_seq_length=helpers.PRETRAIN_SEQ, max_predictions=helpers.PRETRAIN_PRED)
    create_pretraining_data(corpus, first, str(tmp_path / "data" / "train"), progress=False, options=options)
    os.makedirs(tmp_path / "copy")
    shard = "train-00000-of-00001.tfrecord"
    os.link(tmp_path / "data" / shard, tmp_path / "copy" / shard)  # cp data/*.tfrecord copy/: no hidden index
    helpers.PRETRAIN_TINY.replace(vocab_size=120).to_json_file(str(tmp_path / "albert_config.json"))
    args = helpers.pretrain_args(str(tmp_path), tmp_path / "model", steps=1, train_data=tmp_path / "copy" / shard,
                                 spm_model=other)
    code, _, err = cli("pretrain", *args)
    assert code == 2 and err.count("\n") == 1, err
    assert err == (f"albert-tf pretrain: error: --train-data: {tmp_path / 'copy' / shard} carries no vocabulary "
                   f"fingerprint, so cannot be checked against {other}: no record-count index beside it "
                   f"({tmp_path / 'copy' / '.train.record_counts.json'}: create-data writes it, hidden, beside its "
                   "shards; `cp DIR/*.tfrecord` leaves it behind); copy the index along, or pass "
                   "--allow-unchecked-records to read them unchecked (records of the original tool)\n")
    assert not os.path.exists(tmp_path / "model" / "albert_config.json")
    shutil.copy(tmp_path / "data" / ".train.record_counts.json", tmp_path / "copy")  # the index along: checked
    code, _, err = cli("pretrain", *args)
    assert code == 2 and ".train.record_counts.json records that its shards were tokenized with" in err

"""`albert-tf convert`: checkpoints written in the original TF1 names / Hugging Face names reproduce the numpy
reference after import; bad checkpoints are refused with errors naming each tensor."""
import json
import os

import numpy as np
import pytest

import numpy_albert as ref
from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.cli import main as cli_main
from helpers import (EQUALITY_TEXTS, SMALL, compare, error_lines, make_inputs, run_cli, write_config,
                     write_hf_checkpoint, write_tf1_checkpoints)


def _broken(weights):
    broken = dict(weights)
    del broken["bert/encoder/transformer/group_1/inner_group_0/attention_1/self/key/kernel"]
    broken["bert/pooler/dense/kernel"] = np.zeros((16, 8), np.float32)
    broken["bert/encoder/mystery/kernel"] = np.ones(3, np.float32)
    return broken


@pytest.fixture(scope="module")
def tf1(tmp_path_factory):
    """Checkpoints in the original names, written once for this module: {case: (weights, cfg, checkpoint path)}."""
    root = tmp_path_factory.mktemp("tf1")
    cases = {
        "plain": (dict(SMALL), "", True),
        "module": (dict(SMALL), "module/", True),
        "e_eq_h": (dict(SMALL, embedding_size=16), "", True),
        "no_slots": (dict(SMALL), "", False),
        "broken": (dict(SMALL), "", True),
    }
    weights = {name: ref.random_weights(cfg, np.random.default_rng(i)) for i, (name, (cfg, _, _)) in
               enumerate(cases.items())}
    jobs = [(str(root / name), _broken(weights[name]) if name == "broken" else weights[name], prefix, slots)
            for name, (_, prefix, slots) in cases.items()]
    paths = write_tf1_checkpoints(jobs)
    return {name: (weights[name], cases[name][0], path) for name, path in zip(cases, paths)}


def reference(weights, cfg, batch):
    return ref.forward(weights, cfg, batch["input_word_ids"], batch["input_mask"], batch["input_type_ids"],
                       batch["masked_lm_positions"])


@pytest.mark.parametrize("case", ["plain", "module", "e_eq_h"])  # module: TF-Hub's `module/` prefix; E == H
def test_convert_tf1_checkpoint_reproduces_reference(tmp_path, tf1, case):
    weights, cfg, ckpt = tf1[case]
    config = write_config(str(tmp_path / "albert_config.json"), cfg)
    out = str(tmp_path / "converted")
    assert cli_main(["convert", "--from", "tf1", "--checkpoint", ckpt, "--config", config, "--output", out]) == 0
    assert sorted(f for f in os.listdir(out) if not f.startswith("ckpt-0")) == ["albert_config.json", "checkpoint"]
    model = AlbertPretrainer.from_pretrained(out)
    batch = make_inputs(cfg)
    diff = compare(model(batch, training=False), reference(weights, cfg, batch), batch["input_mask"])
    print(f"tf1 convert {case}: max|diff|={diff:.2e}")
    assert diff < 1e-5
    encoder = AlbertEncoder.from_pretrained(out)
    np.testing.assert_allclose(encoder(batch)["pooled_output"], reference(weights, cfg, batch)["pooled_output"],
                               atol=1e-5)


def test_convert_copies_spm_model(tmp_path, tf1, tiny_spm_model, capsys):
    _, cfg, ckpt = tf1["no_slots"]
    write_config(os.path.join(os.path.dirname(ckpt), "albert_config.json"), cfg)  # found beside the checkpoint
    out = str(tmp_path / "out")
    assert cli_main(["convert", "--from", "tf1", "--checkpoint", ckpt, "--spm-model", tiny_spm_model,
                     "--output", out]) == 0
    stdout = capsys.readouterr().out  # the result alone (what was read and restored is reported on stderr)
    assert len(stdout.splitlines()) == 1 and stdout.startswith(f"wrote {out}: ") and "parameters" in stdout
    with open(os.path.join(out, "spm.model"), "rb") as a, open(tiny_spm_model, "rb") as b:
        assert a.read() == b.read()


def test_convert_refuses_missing_extra_and_misshapen_tensors(tmp_path, tf1, capsys):
    _, cfg, ckpt = tf1["broken"]
    config = write_config(str(tmp_path / "albert_config.json"), cfg)
    out = str(tmp_path / "out")
    assert cli_main(["convert", "--from", "tf1", "--checkpoint", ckpt, "--config", config, "--output", out]) == 2
    err = capsys.readouterr().err
    assert "bert/encoder/transformer/group_1/inner_group_0/attention_1/self/key/kernel' has no tensor" in err
    assert "'bert/pooler/dense/kernel' has shape (16, 8), the model expects (16, 16)" in err
    assert "'bert/encoder/mystery/kernel' (3,) matches no model weight" in err
    assert "model.ckpt-best" in err  # names the file
    assert not os.path.exists(out) and not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_convert_refuses_config_that_disagrees(tmp_path, tf1, capsys):
    ckpt = tf1["no_slots"][2]
    config = write_config(str(tmp_path / "albert_config.json"), dict(SMALL, intermediate_size=48))
    assert cli_main(["convert", "--from", "tf1", "--checkpoint", ckpt, "--config", config,
                     "--output", str(tmp_path / "o")]) == 2
    assert "ffn_1/intermediate/dense/kernel' has shape (16, 32), the model expects (16, 48)" in capsys.readouterr().err


def test_convert_hf_pretraining_checkpoint(tmp_path, capsys):
    weights = ref.random_weights(SMALL, np.random.default_rng(7))
    hf_dir = str(tmp_path / "hf")
    write_hf_checkpoint(hf_dir, SMALL, ref.hf_names(weights, SMALL))
    out = str(tmp_path / "out")
    killed = tmp_path / ".out.tmp-0123456789ab"  # what a conversion killed mid-write leaves: removed by the next
    killed.mkdir()
    (killed / "ckpt-0.index").write_bytes(b"x" * 10)
    (tmp_path / ".other.tmp-0123456789ab").write_bytes(b"x")  # another output's: kept
    assert cli_main(["convert", "--from", "hf", "--checkpoint", hf_dir, "--output", out]) == 0
    err = capsys.readouterr().err
    assert (f"albert-tf convert: note: removed the temporary files of an interrupted earlier run: 1 file(s): "
            f"{killed}/ (10 bytes)\n") in err
    assert sorted(os.listdir(tmp_path)) == [".other.tmp-0123456789ab", "hf", "out"]
    assert "holds no spiece.model and no tokenizer.json: the model directory gets no vocabulary" in err
    model = AlbertPretrainer.from_pretrained(out)
    batch = make_inputs(SMALL)
    diff = compare(model(batch, training=False), reference(weights, SMALL, batch), batch["input_mask"])
    print(f"hf convert: max|diff|={diff:.2e}")
    assert diff < 1e-5


def _hf_dir_without_spiece(directory, spm_model, tokenizer=None):
    """A Hugging Face ALBERT directory as transformers 5's save_pretrained writes it: weights, config.json,
    tokenizer_config.json and tokenizer.json (`tokenizer`, default: what `convert --to hf` writes for `spm_model`),
    no spiece.model."""
    from albert_tf.checkpoints import hf_tokenizer  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    cfg = dict(SMALL, vocab_size=AlbertTokenizer(spm_model).vocab_size)
    write_hf_checkpoint(directory, cfg, ref.hf_names(ref.random_weights(cfg, np.random.default_rng(9)), cfg))
    files = hf_tokenizer.tokenizer_files(spm_model, True, False, 32)
    with open(os.path.join(directory, "tokenizer_config.json"), "wb") as f:
        f.write(files["tokenizer_config.json"])
    with open(os.path.join(directory, "tokenizer.json"), "wb") as f:
        f.write(files["tokenizer.json"] if tokenizer is None else json.dumps(tokenizer).encode())
    return directory


def test_convert_hf_without_spiece_model_builds_the_vocabulary_from_tokenizer_json(tmp_path, tiny_spm_model,
                                                                                   corpus_file, capsys):
    """transformers 5 saves tokenizer.json only: its Unigram pieces, scores (the digit-comma pieces' 100 given back)
    and special pieces become the model directory's spm.model, which gives the original vocabulary's ids. Before,
    the model directory had no vocabulary and nothing said so."""
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    hf_dir = _hf_dir_without_spiece(str(tmp_path / "hf"), tiny_spm_model)
    out = str(tmp_path / "out")
    assert cli_main(["convert", "--from", "hf", "--checkpoint", hf_dir, "--output", out]) == 0
    assert "its vocabulary built from tokenizer.json" in capsys.readouterr().err
    built, original = AlbertTokenizer(os.path.join(out, "spm.model")), AlbertTokenizer(tiny_spm_model)
    with open(corpus_file, encoding="utf-8") as f:
        texts = f.read().splitlines() + EQUALITY_TEXTS + ["9,000, 12,5, a,b 3,"]
    assert built.encode(texts) == original.encode(texts)
    assert [built.id_to_piece(i) for i in range(built.vocab_size)] == [
        original.id_to_piece(i) for i in range(original.vocab_size)]
    assert built.lower_case and not built.keep_accents


def test_init_from_a_directory_without_spiece_model_reads_the_vocabulary_of_its_tokenizer_json(
        tmp_path, tiny_spm_model, corpus_file, monkeypatch):
    """`--init` / from_pretrained of a transformers 5 directory (tokenizer.json, no spiece.model) gets the vocabulary
    `convert --from hf` would build, cached once per tokenizer.json (before: no vocabulary, and finetune refused it);
    a changed tokenizer.json gets a new entry."""
    from albert_tf.checkpoints.handles import resolve_init  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    monkeypatch.setenv("ALBERT_TF_CACHE", str(tmp_path / "cache"))
    hf_dir = _hf_dir_without_spiece(str(tmp_path / "hf"), tiny_spm_model)
    source = resolve_init(hf_dir)
    assert source.kind == "hf" and source.spm_model.startswith(str(tmp_path / "cache")) and source.lower_case
    with open(corpus_file, encoding="utf-8") as f:
        texts = f.read().splitlines() + EQUALITY_TEXTS + ["9,000, 12,5, a,b 3,"]
    assert AlbertTokenizer(source.spm_model).encode(texts) == AlbertTokenizer(tiny_spm_model).encode(texts)
    assert resolve_init(hf_dir).spm_model == source.spm_model  # read from the cache the second time
    os.utime(os.path.join(hf_dir, "tokenizer.json"), ns=(1, 1))
    assert resolve_init(hf_dir).spm_model != source.spm_model
    assert sorted(os.listdir(tmp_path / "cache" / "vocabularies")) == sorted(
        os.path.basename(os.path.dirname(p)) for p in (source.spm_model, resolve_init(hf_dir).spm_model))


@pytest.mark.parametrize("model, message", [
    ({"type": "WordPiece", "vocab": {"[UNK]": 0}}, "model type 'WordPiece', expected 'Unigram'"),
    ({"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", -1.0]]}, "expected ALBERT's"),
])
def test_convert_hf_refuses_a_tokenizer_json_no_sentencepiece_model_holds(tmp_path, tiny_spm_model, cli, model,
                                                                          message):
    hf_dir = _hf_dir_without_spiece(str(tmp_path / "hf"), tiny_spm_model, tokenizer={"model": model})
    code, _, err = cli("convert", "--from", "hf", "--checkpoint", hf_dir, "--output", tmp_path / "out")
    assert code == 2 and len(error_lines(err)) == 1, err
    assert message in err and "give the SentencePiece model with --spm-model" in err
    assert not os.path.exists(tmp_path / "out")


def test_convert_full_disk_line_names_the_output(tmp_path, tiny_spm_model, cli, monkeypatch):
    """TensorFlow's checkpoint writer on a full disk puts its op's name before the file's: the line names the file in
    the output directory that the temporary stands for (before: "could not be written: no space left on device", no
    path)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def full(self, *args, **kwargs):
        raise tf.errors.ResourceExhaustedError(
            None, None, "{{function_node __wrapped__SaveV2_dtypes_34_device_/job:localhost/replica:0/task:0/device:"
                        f"CPU:0}}}} {tmp_path}/.out.tmp-0123456789ab/ckpt-0_temp/part-00000-of-00001.data-00000-of-"
                        "00001.tempstate11249904752931702859; No space left on device [Op:SaveV2]")

    monkeypatch.setattr(tf.train.CheckpointManager, "save", full)
    hf_dir = _hf_dir_without_spiece(str(tmp_path / "hf"), tiny_spm_model)
    code, _, err = cli("convert", "--from", "hf", "--checkpoint", hf_dir, "--output", tmp_path / "out")
    assert code == 74 and error_lines(err) == [
        f"albert-tf convert: error: {tmp_path / 'out' / 'ckpt-0'}: could not be written: no space left on device; "
        "free space "
        "(or choose another output), then run again"], err


def test_convert_hf_encoder_only_checkpoint(tmp_path, capsys):
    weights = ref.random_weights(SMALL, np.random.default_rng(8))
    tensors = {k[len("albert."):]: v for k, v in ref.hf_names(weights, SMALL).items() if k.startswith("albert.")}
    hf_dir = str(tmp_path / "hf")
    write_hf_checkpoint(hf_dir, SMALL, tensors)  # AlbertModel: no prefix, no heads
    out = str(tmp_path / "out")
    assert cli_main(["convert", "--from", "hf", "--checkpoint", hf_dir, "--output", out]) == 0
    assert "encoder-only checkpoint" in capsys.readouterr().err
    encoder = AlbertEncoder.from_pretrained(out)
    batch = make_inputs(SMALL)
    np.testing.assert_allclose(encoder(batch)["pooled_output"], reference(weights, SMALL, batch)["pooled_output"],
                               atol=1e-5)


def test_convert_refuses_nonempty_output_and_missing_checkpoint(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    assert cli_main(["convert", "--from", "tf1", "--checkpoint", str(tmp_path / "nope" / "model.ckpt"),
                     "--config", write_config(str(tmp_path / "c.json"), SMALL), "--output", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "precious"
    assert cli_main(["convert", "--from", "tf1", "--checkpoint", str(tmp_path / "nope" / "model.ckpt"),
                     "--config", str(tmp_path / "c.json"), "--output", str(tmp_path / "new")]) == 2
    assert "not a readable TF checkpoint" in capsys.readouterr().err


def test_from_pretrained_refuses_directory_without_checkpoint(tmp_path):
    write_config(str(tmp_path / "albert_config.json"), SMALL)
    with pytest.raises(FileNotFoundError, match="no TF checkpoint"):
        AlbertPretrainer.from_pretrained(str(tmp_path))


def test_console_script_entry_point_runs_convert_help():
    out = run_cli("convert", ["--help"]).stdout
    assert "--from" in out and "--checkpoint" in out


def test_convert_error_paths_are_one_line(tmp_path, capsys):
    """A directory without config.json, and a TF2 checkpoint (pretrain's output) given as a TF1 one."""
    from albert_tf import AlbertPretrainer

    empty = tmp_path / "hf_empty"
    empty.mkdir()
    assert cli_main(["convert", "--from", "hf", "--checkpoint", str(empty), "--output", str(tmp_path / "o1")]) == 2
    err = capsys.readouterr().err
    assert "config.json: no such file" in err and len(err.strip().splitlines()) == 1
    tf2 = AlbertPretrainer(SMALL).save_pretrained(str(tmp_path / "tf2"))
    assert cli_main(["convert", "--from", "tf1", "--checkpoint", os.path.join(tf2, "ckpt-0"),
                     "--output", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "a TF2 object-based checkpoint" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()

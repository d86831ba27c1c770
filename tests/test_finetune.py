"""`albert-tf finetune`: the paper's defaults and the budget, the optimizer's decay exclusions, the collapse check,
bad input, `albert_tf.finetune` from Python (its result, its run record), and (slow) a generated GLUE task end to
end from a briefly pretrained model, kill-and-resume, and generated SQuAD and RACE tasks end to end (their figures
and the raw-text export each run writes)."""
import dataclasses
import argparse
import json
import os
import signal

import keras
import numpy as np
import pytest

import finetune_helpers as fh
import helpers
import albert_tf
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf import AlbertClassifier
from albert_tf.tasks import TASKS
from albert_tf import layout, run_config
from albert_tf.tasks import budget as budgets
from albert_tf.training import collapse, finetuning
from albert_tf.settings.finetune_config import FinetuneConfig
from albert_tf.training.optimizers import WEIGHT_DECAY, AdamWDenseNorm, AdamWeightDecay, OPTIMIZERS


def _args(**overrides):
    return FinetuneConfig(**{**dict(task="cola", data_dir="d", init="i", output="o"), **overrides})


def test_paper_defaults_and_budget():
    cola = budgets.PAPER_DEFAULTS["cola"]  # Table 16 / run_glue.sh: CoLA 320 warm-up, 1e-5, 5336 steps, batch 16
    assert (cola.learning_rate, cola.batch_size, cola.train_steps, cola.warmup_steps) == (1e-5, 16, 5336, 320)
    assert set(budgets.PAPER_DEFAULTS) == set(TASKS)
    budget = budgets.make_budget(_args(), num_train_examples=8551, seq_length=512)
    assert budget.steps_per_epoch == 8551 // 16 == 534
    assert budget.epochs == 10                                      # ceil(5336 / 534)
    assert budget.warmup_steps == round(320 / 5336 * 10 * 534)
    budget = budgets.make_budget(_args(epochs=2, batch_size=10, warmup_proportion=0.1, max_seq_length=64), 105, 64)
    assert (budget.epochs, budget.steps_per_epoch, budget.warmup_steps, budget.max_seq_length) == (2, 10, 2, 64)
    with pytest.raises(ValueError, match="fewer than one batch"):
        budgets.make_budget(_args(), 3, 512)
    # the sequence length: the flag, else the paper's (CoLA 512, SQuAD v1.1 384) capped by the encoder's positions
    assert budgets.max_seq_length(_args(max_seq_length=64), 128) == 64
    assert (budgets.max_seq_length(_args(), 128), budgets.max_seq_length(_args(task="squad1"), 512)) == (128, 384)
    with pytest.raises(ValueError, match="--max-seq-length 256 exceeds the config's max_position_embeddings 128"):
        budgets.max_seq_length(_args(max_seq_length=256), 128)


def test_optimizer_flag_defaults_to_the_bias_corrected_one_and_is_part_of_the_run(tmp_path):
    parser = argparse.ArgumentParser()
    run_config.add_fields_as_arguments(parser, FinetuneConfig)
    required = ["--task", "mrpc", "--data-dir", "d", "--init", "i", "--output", str(tmp_path)]
    with pytest.raises(SystemExit):
        parser.parse_args(required + ["--optimizer", "sgd"])
    keras_cfg = _args(task="mrpc", output=str(tmp_path))
    budget = budgets.make_budget(keras_cfg, 100, 128)
    assert keras_cfg.optimizer == "adamw-keras" and budget.optimizer == "adamw-keras"
    cfg = _args(task="mrpc", output=str(tmp_path), optimizer="adamw-original")
    assert budgets.make_budget(cfg, 100, 128).optimizer == "adamw-original"
    # A run recorded before --optimizer existed trained with Keras AdamW: it resumes with that, and only that.
    finetuning.record_run(keras_cfg, budget)
    path = tmp_path / layout.FINETUNE_RECORD_FILE
    recorded = json.loads(path.read_text())
    del recorded["budget"]["optimizer"]
    path.write_text(json.dumps(recorded))
    finetuning.record_run(keras_cfg, budget)
    with pytest.raises(ValueError, match=r"budget.optimizer 'adamw-original' \(recorded 'adamw-keras'\)"):
        finetuning.record_run(cfg, budgets.make_budget(cfg, 100, 128))


def test_epoch_order_is_a_function_of_seed_and_epoch():
    a = finetuning.epoch_order(1, 3, 50, 4, 8)
    np.testing.assert_array_equal(a, finetuning.epoch_order(1, 3, 50, 4, 8))
    assert len(a) == 32 and len(set(a.tolist())) == 32
    assert not np.array_equal(a, finetuning.epoch_order(1, 4, 50, 4, 8))
    assert not np.array_equal(a, finetuning.epoch_order(2, 3, 50, 4, 8))


@pytest.mark.parametrize("name, kind", [("adamw-original", AdamWeightDecay), ("adamw-keras", AdamWDenseNorm)])
def test_optimizers_decay_kernels_but_not_layer_norm_or_bias(name, kind):
    assert budgets.OPTIMIZERS == OPTIMIZERS  # the flag's choices (kept apart: optimizers imports TensorFlow)
    keras.utils.set_random_seed(0)
    model = AlbertClassifier(AlbertEncoder("albert_tiny"), 2)
    budget = budgets.Budget(learning_rate=0.1, batch_size=1, max_seq_length=8, epochs=1, steps_per_epoch=10,
                             warmup_steps=0, albert_dropout=0.0, classifier_dropout=0.0, optimizer=name)
    optimizer = finetuning.create_optimizer(budget, model)
    assert type(optimizer) is kind and optimizer.global_clipnorm == 1.0  # the dense-norm clip
    before = {v.path: np.asarray(v).copy() for v in model.trainable_variables}
    optimizer.apply([keras.ops.zeros_like(v) for v in model.trainable_variables], model.trainable_variables)
    for v in model.trainable_variables:
        old = before[v.path]
        if "layer_norm" in v.path or v.path.endswith("bias"):
            np.testing.assert_array_equal(np.asarray(v), old, err_msg=v.path)
        else:  # zero gradient: only the decoupled decay, w ← w − lr·0.01·w (lr at step 0 of the decay: 0.1)
            np.testing.assert_allclose(np.asarray(v), old * (1 - 0.1 * WEIGHT_DECAY), rtol=1e-5,
                                       err_msg=v.path)


def test_collapse_check_flags_a_bias_dominated_encoder_and_reset_restores_it():
    keras.utils.set_random_seed(1)
    encoder = AlbertEncoder("albert_tiny")
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 1000, (8, 12)).astype("int32")
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}
    spread, reference = collapse.check_collapse(encoder, inputs, seed=1)
    assert spread > collapse.COLLAPSE_RATIO * reference      # a random encoder is not collapsed
    # What brief LAMB pretraining does (docs/fine-tuning.md, "Collapsed init"): biases of ~0.1 per element beside 0.02-scale kernels.
    for v in encoder.trainable_variables:
        if v.path.endswith(("bias", "beta")):
            v.assign(np.asarray(rng.normal(0, 0.3, v.shape), "float32"))
    collapsed, _ = collapse.check_collapse(encoder, inputs, seed=1)
    assert collapsed < collapse.COLLAPSE_RATIO * reference, (collapsed, reference)
    assert collapse.reset_biases(encoder) > 0
    restored, _ = collapse.check_collapse(encoder, inputs, seed=1)
    assert restored > collapse.COLLAPSE_RATIO * reference


def _collapsed_tiny_encoder(rng):
    keras.utils.set_random_seed(1)
    encoder = AlbertEncoder("albert_tiny")
    for v in encoder.trainable_variables:
        if v.path.endswith(("bias", "beta")):
            v.assign(np.asarray(rng.normal(0, 0.3, v.shape), "float32"))
    return encoder


class _SampleTask:  # what handle_collapse asks of a task: its budget and sample_inputs
    def __init__(self, inputs, budget):
        self.inputs, self.budget = inputs, budget

    def sample_inputs(self, tokenizer, count):  # pylint: disable=unused-argument
        return self.inputs


def test_collapsed_init_is_only_measured_by_default_and_reset_only_when_asked(capsys):
    """Issue 19 item 7: the default measures and warns; weights change only with --collapsed-init reset-biases."""
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 1000, (8, 12)).astype("int32")
    task = _SampleTask({"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)},
                       budgets.Budget(1e-3, 8, 12, 1, 1, 0, 0.0, 0.0))
    for config, changed in ((_args(task="sst2"), False), (_args(task="sst2", collapsed_init="reset-biases"), True)):
        encoder = _collapsed_tiny_encoder(np.random.default_rng(2))
        before = {v.path: np.array(v) for v in encoder.weights}
        assert collapse.handle_collapse(encoder, task, None, config) is True
        out = capsys.readouterr()
        assert "input spread" in out.out and len(out.err.strip().splitlines()) == 1, out
        biases = [p for p in before if p.endswith(("bias", "beta"))]
        after = {v.path: np.array(v) for v in encoder.weights}
        assert all(np.array_equal(after[p], before[p]) for p in before if p not in biases)
        if changed:
            assert all(not after[p].any() for p in biases) and "reset-biases" in out.err
        else:
            assert all(np.array_equal(after[p], before[p]) for p in biases)
            assert "--collapsed-init reset-biases" in out.err and "kept" in out.err


def _refusal(**values):
    """The one-line message albert_tf.finetune(FinetuneConfig(task="sst2", **values)) refuses the run with (bad
    input: ValueError or FileNotFoundError, which the CLI prints as its error line and exits 2 with)."""
    with pytest.raises((ValueError, FileNotFoundError)) as info:
        albert_tf.finetune(FinetuneConfig(task="sst2", **{k: str(v) for k, v in values.items()}))
    return str(info.value)


def test_empty_data_dir_is_refused(tmp_path, random_init):
    (tmp_path / "data").mkdir()
    err = _refusal(data_dir=tmp_path / "data", init=random_init, output=tmp_path / "out")
    assert "--data-dir" in err and "empty" in err and str(tmp_path / "data") in err
    assert not (tmp_path / "out").exists()


def test_init_whose_vocabulary_disagrees_is_refused(tmp_path, tiny_spm_model):
    init = fh.save_random_init(str(tmp_path / "init"), tiny_spm_model, vocab_size=500)
    data = fh.write_sst2(str(tmp_path / "sst2"), 32, 8)
    err = _refusal(data_dir=data, init=init, output=tmp_path / "out")
    assert "--init" in err and "vocab_size" in err and "500" in err and "300" in err
    assert not (tmp_path / "out").exists()


def test_init_that_is_not_a_model_directory_is_refused(tmp_path):
    data = fh.write_sst2(str(tmp_path / "sst2"), 32, 8)
    err = _refusal(data_dir=data, init=tmp_path / "nothing", output=tmp_path / "out")
    assert "--init" in err and "no such directory" in err


def test_malformed_tsv_row_names_the_file_and_line(tmp_path, random_init):
    data = fh.write_sst2(str(tmp_path / "sst2"), 32, 8)
    with open(os.path.join(data, "train.tsv"), "a", encoding="utf-8") as f:
        f.write("a sentence\tpositive\n")
    err = _refusal(data_dir=data, init=random_init, output=tmp_path / "out")
    assert "train.tsv line 34" in err and "'positive'" in err


# ---------------------------------------------------------------------------------------------- from Python
@pytest.mark.slow  # two fine-tuning runs with their exports (about 2 minutes idle, 5 on this shared machine)
def test_finetune_from_python_equals_the_cli_and_returns_its_result(tmp_path, random_init, cli):
    """albert_tf.finetune(config) runs as `albert-tf finetune` with the same flags (the same eval_results.json),
    returns the best epoch's metrics and the export, records the config with its budget, and is refused when the
    output holds a run of another budget (naming the field); run again as it was, it says the run is complete."""
    data = fh.write_sst2(str(tmp_path / "sst2"), 48, 16)
    values = dict(task="sst2", data_dir=data, init=random_init, epochs=2, batch_size=8, max_seq_length=16,
                  learning_rate=2e-3, warmup_proportion=0.1, seed=3)
    result = albert_tf.finetune(albert_tf.FinetuneConfig(output=tmp_path / "py", **values))
    report = json.loads((tmp_path / "py" / "eval_results.json").read_text())
    assert (result.status, result.exit_code, result.epochs, result.epoch) == ("done", 0, 2, report["epoch"])
    assert result.metrics == {"dev": report["dev"]} and result.export == str(tmp_path / "py" / "export" / "1")
    argv = [w for k, v in values.items() for w in (f"--{k.replace('_', '-')}", v)]
    assert cli("finetune", *argv, "--output", tmp_path / "cli")[0] == 0
    assert json.loads((tmp_path / "cli" / "eval_results.json").read_text()) == report
    assert_same_variables(tmp_path / "py" / "checkpoints", tmp_path / "cli" / "checkpoints")  # same bits
    record = json.loads((tmp_path / "py" / "finetune_config.json").read_text())
    assert record["batch_size"] == 8 and record["budget"]["steps_per_epoch"] == 6 and record["budget"]["epochs"] == 2
    with pytest.raises(ValueError, match=r"finetune_config.json: the output directory holds a run with other "
                                         r"settings: budget.batch_size 4 \(recorded 8\)"):
        albert_tf.finetune(albert_tf.FinetuneConfig(output=tmp_path / "py", **{**values, "batch_size": 4}))
    again = albert_tf.finetune(albert_tf.FinetuneConfig(output=tmp_path / "py", **values))
    assert (again.status, again.metrics, again.export) == ("complete", result.metrics, result.export)


def test_finetune_from_python_raises_what_the_cli_prints_and_writes_nothing(tmp_path, random_init, cli):
    """Bad input from Python is the exception whose message the CLI prints after `error:`; nothing is written."""
    config = albert_tf.FinetuneConfig(task="sst2", data_dir=tmp_path / "missing", init=random_init,
                                      output=tmp_path / "out")
    with pytest.raises(FileNotFoundError) as info:
        albert_tf.finetune(config)
    code, _, err = cli("finetune", "--task", "sst2", "--data-dir", tmp_path / "missing", "--init", random_init,
                       "--output", tmp_path / "out")
    assert code == 2 and err == f"albert-tf finetune: error: {info.value}\n"
    assert str(info.value) == f"--data-dir {tmp_path / 'missing'}: no such directory"
    assert not (tmp_path / "out").exists()


def test_a_record_of_an_earlier_release_is_compared_by_its_budget(tmp_path):
    """Records written before the config was recorded hold the budget at the top level beside task, init and seed."""
    budget = budgets.Budget(1e-3, 8, 12, 2, 5, 1, 0.0, 0.1, length_bucket=16)
    config = _args(task="sst2", output=str(tmp_path))
    legacy = {"task": "sst2", "init": "i", "seed": 12345, **dataclasses.asdict(budget)}
    (tmp_path / "finetune_config.json").write_text(json.dumps(legacy))
    finetuning.record_run(config, budget)  # the same run: accepted, the record left as it is
    assert json.loads((tmp_path / "finetune_config.json").read_text()) == legacy
    with pytest.raises(ValueError, match=r"epochs 3 \(recorded 2\)"):
        finetuning.record_run(config, budgets.Budget(1e-3, 8, 12, 3, 5, 1, 0.0, 0.1, length_bucket=16))


def test_bad_settings_from_python_are_refused_with_one_line():
    with pytest.raises(ValueError, match="FinetuneConfig: batch_size: expected an integer, got '8'"):
        _args(batch_size="8")
    with pytest.raises(ValueError, match="FinetuneConfig: task: expected one of cola, sst2"):
        _args(task="sst-2")


# ---------------------------------------------------------------------------------------------- end to end (slow)


def _finetune_values(data, init, output, epochs=3):
    """The end-to-end runs' settings ({field: value}). Keras AdamW: these settings (and the plateau figures in
    docs/fine-tuning-quality.md) were measured with it; the original's optimizer takes 3-6x larger early steps at
    one learning rate and overshoots at 2e-3."""
    return dict(task="sst2", data_dir=str(data), init=str(init), output=str(output), epochs=epochs, batch_size=16,
                max_seq_length=24, learning_rate=2e-3, warmup_proportion=0.1, seed=3, optimizer="adamw-keras")


def _finetune_args(data, init, output, epochs=3):
    """_finetune_values as `albert-tf finetune` flags."""
    return [w for k, v in _finetune_values(data, init, output, epochs).items()
            for w in (f"--{k.replace('_', '-')}", v)]


def _finetune(data, init, output, epochs=3, **changes):
    """albert_tf.finetune of _finetune_values (`changes` over them), in this process. Returns its FinetuneResult."""
    return albert_tf.finetune(albert_tf.FinetuneConfig(**{**_finetune_values(data, init, output, epochs),
                                                          **changes}))


@pytest.fixture(scope="module")
def briefly_pretrained(tmp_path_factory, tiny_spm_model):
    """A tiny model pretrained 100 steps on the generated corpus with `albert-tf pretrain` (the issue's case)."""
    from albert_tf import AlbertConfig, configs_dir  # pylint: disable=import-outside-toplevel

    d = tmp_path_factory.mktemp("pretrained")
    corpus = helpers.write_corpus(str(d / "corpus.txt"), num_docs=60)
    albert_tf.create_data(albert_tf.CreateDataConfig(
        input=corpus, spm_model=tiny_spm_model, output=str(d / "data" / "train"), max_seq_length=32, max_predictions=5,
        dupe_factor=2, seed=0))
    AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(
        vocab_size=300).to_json_file(str(d / "albert_config.json"))
    albert_tf.pretrain(albert_tf.PretrainConfig(
        config=str(d / "albert_config.json"), train_data=str(d / "data" / "train*"), model_dir=str(d / "model"),
        spm_model=tiny_spm_model, max_seq_length=32, max_predictions=5, batch_size=32, learning_rate=0.002,
        num_train_steps=100, num_warmup_steps=10, steps_per_loop=50, save_checkpoints_steps=100))
    return str(d / "model")



@pytest.mark.slow
def test_briefly_pretrained_model_fine_tunes_as_well_as_a_random_init(tmp_path, briefly_pretrained, random_init,
                                                                    capsys):
    """The issue's case: `pretrain` 100 steps, then `finetune` on a learnable task must do at least as well as
    the same run from a random initialization (the reference), and reach high dev accuracy."""
    # 640 sentences x 8 passes (320 steps): a tiny model's [CLS] classifier sits at chance for the first ~60-100
    # steps whatever its init; 320 x 6 (120 steps) ended on that plateau's edge (see docs/fine-tuning-quality.md).
    data = fh.write_sst2(str(tmp_path / "sst2"), num_train=640, num_dev=96)
    accuracy, stdout = {}, {}
    capsys.readouterr()
    for name, init in (("pretrained", briefly_pretrained), ("random", random_init)):
        _finetune(data, init, tmp_path / name, epochs=8, collapsed_init="reset-biases")
        accuracy[name] = _complete_outputs(tmp_path / name)["dev"]["accuracy"]
        out = capsys.readouterr()
        stdout[name] = out.out + out.err
    assert accuracy["pretrained"] >= 0.9, (accuracy, stdout["pretrained"])
    # "At least as well": within one of the 96 dev sentences of the random initialization's accuracy.
    assert accuracy["pretrained"] >= accuracy["random"] - 1 / 96 - 1e-9, accuracy
    # The 100-step model is detected as collapsed (the case) and its biases reset (as asked); the random
    # one is not.
    assert "maps every input to nearly the same output" in stdout["pretrained"]
    assert "maps every input" not in stdout["random"] and "input spread" in stdout["random"]


@pytest.mark.slow
def test_finetune_from_an_export_equals_finetune_from_its_model_dir(tmp_path, random_init):
    """Issue 19 item 5: `finetune --init BASE` (an `albert-tf export` of the model dir, no --spm-model: the export
    carries its vocabulary) gives the same dev result as `--init DIR`, and the same weights after its epoch (a dev
    accuracy still at chance would not tell two inits apart; the weights do)."""
    albert_tf.export(albert_tf.ExportConfig(init=random_init, output=str(tmp_path / "base"), max_seq_length=24,
                                            no_warmup=True))
    data = fh.write_sst2(str(tmp_path / "sst2"), 64, 32)
    results = {}
    for name, init in (("dir", random_init), ("export", tmp_path / "base")):
        _finetune(data, init, tmp_path / name, epochs=1)
        with open(tmp_path / name / "eval_results.json", encoding="utf-8") as f:
            results[name] = json.load(f)
    assert results["export"] == results["dir"], results
    assert_same_variables(tmp_path / "dir" / "checkpoints", tmp_path / "export" / "checkpoints")


@pytest.mark.slow
def test_sigkill_after_an_epoch_then_resume_equals_uninterrupted(tmp_path, random_init, cli):
    """A fresh process killed from the outside once epoch 1's checkpoint is recorded, then resumed (the same
    command, in this process as the uninterrupted run): the same results, the same bits."""
    data = fh.write_sst2(str(tmp_path / "sst2"), 96, 32)
    _finetune(data, random_init, tmp_path / "whole")
    killed = helpers.run_cli_killed_when("finetune", _finetune_args(data, random_init, tmp_path / "killed"),
                                         tmp_path / "killed" / "checkpoints" / "checkpoint")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (tmp_path / "killed" / "eval_results.json").exists()
    # what a kill in the middle of a save leaves (TensorFlow's temporaries): the resumed run removes it
    leftover = tmp_path / "killed" / "checkpoints" / "ckpt-2_temp"
    leftover.mkdir()
    (leftover / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_bytes(b"x" * 100)
    code, out, err = cli("finetune", *_finetune_args(data, random_init, tmp_path / "killed"))
    assert code == 0 and "resumed from" in out and "after epoch 1" in out, out + err
    assert (f"albert-tf finetune: note: removed the temporary files of an interrupted earlier run: 1 file(s): "
            f"{leftover}/ (100 bytes)") in err and not leftover.exists()
    results = [json.loads((tmp_path / name / "eval_results.json").read_text()) for name in ("whole", "killed")]
    assert results[0] == results[1]
    assert_same_variables(tmp_path / "whole" / "checkpoints", tmp_path / "killed" / "checkpoints")


def assert_same_variables(dir_a, dir_b):
    """The latest checkpoints in the two directories hold the same model and optimizer variables, bit for bit."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    names = [n for n, _ in tf.train.list_variables(str(dir_a)) if n.startswith(("model/", "optimizer/"))]
    assert any(n.startswith("model/") for n in names) and any(n.startswith("optimizer/") for n in names), names
    assert names == [n for n, _ in tf.train.list_variables(str(dir_b)) if n.startswith(("model/", "optimizer/"))]
    for name in names:
        np.testing.assert_array_equal(tf.train.load_variable(str(dir_a), name), tf.train.load_variable(str(dir_b), name),
                                      err_msg=name)


# ---------------------------------------------------------------------------------------------- SQuAD and RACE
QA_SEQ = 64  # the QA runs' --max-seq-length: their exports' doc stride and query / option lengths follow from it


def _qa_args(task, data, init, output, epochs, learning_rate=3e-3):
    return ["--task", task, "--data-dir", data, "--init", init, "--output", output, "--epochs", epochs,
            "--batch-size", 32, "--max-seq-length", QA_SEQ, "--learning-rate", learning_rate,
            "--warmup-proportion", 0.1, "--seed", 4]


def _assert_the_export_scores_its_results(task, data, output, spm_model):
    """OUTPUT/export/1 (the raw-text SQuAD or RACE SavedModel the run wrote), loaded here, answers the dev set as
    eval_results.json scored it: it holds the best epoch's model. SQuAD: its answers are the Python
    post-processing of its own logits, which scores the recorded f1 (v2: at the dev threshold it stored, the dev
    set's best_f1_thresh); RACE: its labels score the recorded accuracy."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import  (its ops)

    from albert_tf.serving.saved_model import TASK_CONFIG_ASSET  # pylint: disable=import-outside-toplevel
    from albert_tf.tasks import race, squad  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    results = json.loads((output / "eval_results.json").read_text())["dev"]
    path = str(output / "export" / "1")
    with open(os.path.join(path, "assets.extra", TASK_CONFIG_ASSET), encoding="utf-8") as f:
        config = json.load(f)
    signatures = tf.saved_model.load(path).signatures
    if task == "race":
        examples = race.read_examples(data, "dev")
        got = signatures["serving_default"](article=tf.constant([e.article for e in examples]),
                                            question=tf.constant([e.question for e in examples]),
                                            options=tf.constant([list(e.options) for e in examples]))
        assert race.compute_metrics(got["label"].numpy(), examples)["accuracy"] == pytest.approx(
            results["accuracy"])
        assert config["max_qa_length"] == QA_SEQ // 2
        return
    version = "v2.0" if task == "squad2" else "v1.1"
    examples = squad.read_examples(os.path.join(data, f"dev-{version}.json"), version_2_with_negative=task == "squad2")
    question, context = tf.constant([e.question for e in examples]), tf.constant([e.context for e in examples])
    answers = [a.decode("utf-8") for a in signatures["serving_default"](question=question, context=context)[
        "answer"].numpy()]
    assert (config["doc_stride"], config["max_query_length"]) == (QA_SEQ // 2, QA_SEQ // 2 - 4)
    windows = signatures["windows"](question=question, context=context)
    features = squad.featurize(examples, AlbertTokenizer(spm_model), max_seq_length=QA_SEQ, doc_stride=QA_SEQ // 2,
                               max_query_length=QA_SEQ // 2 - 4)
    threshold = config["null_score_diff_threshold"]
    want = squad.postprocess(examples, features, windows["start_logits"].numpy(), windows["end_logits"].numpy(),
                             version_2_with_negative=task == "squad2", null_score_diff_threshold=threshold)
    assert answers == [want.answers[e.qas_id] for e in examples]
    if task == "squad1":
        assert squad.evaluate(examples, want.answers)["f1"] == pytest.approx(results["f1"])
    else:
        assert threshold == results["best_f1_thresh"]
        scores = squad.evaluate(examples, want.best_span_answers, na_probs=want.null_score_diff, na_prob_thresh=0.0,
                                version_2_with_negative=True)
        assert scores["best_f1"] == pytest.approx(results["best_f1"])


def _complete_outputs(output):
    """The files every finished run leaves (whatever the task)."""
    for path in ("eval_results.json", "finetune_config.json", "best/checkpoint", "best/albert_config.json",
                 "checkpoints/checkpoint"):
        assert os.path.exists(os.path.join(output, path)), path
    assert os.listdir(layout.FinetuneDir(str(output)).events(layout.EVAL_SPLIT))
    with open(os.path.join(output, "eval_results.json"), encoding="utf-8") as f:
        return json.load(f)


def _answers(path):
    with open(path, encoding="utf-8") as f:
        return [qa["answers"] for article in json.load(f)["data"] for p in article["paragraphs"] for qa in p["qas"]]


@pytest.mark.slow
def test_squad1_through_the_cli_finds_the_generated_answers(tmp_path, random_init, cli):
    """Exact > 80 where the most frequent answer scores < 20, and the run's export scores what it reports."""
    data = fh.write_squad_answer_words(str(tmp_path / "squad"), "1.1", num_train=512, num_dev=96)
    code, out, err = cli("finetune", *_qa_args("squad1", data, random_init, tmp_path / "out", epochs=3))
    assert code == 0, out + err
    results = _complete_outputs(tmp_path / "out")
    dev = results["dev"]
    assert set(dev) == {"exact", "f1", "total"} and dev["total"] == 96
    # Trivial baseline: always the most frequent training answer (exact = f1 here: one-word answers).
    train = [a[0]["text"] for a in _answers(os.path.join(data, "train-v1.1.json"))]
    most_frequent = max(set(train), key=train.count)
    baseline = 100 * np.mean([a[0]["text"] == most_frequent for a in _answers(os.path.join(data, "dev-v1.1.json"))])
    assert baseline < 20
    assert dev["exact"] > 80 and dev["f1"] >= dev["exact"], (dev, baseline)
    assert round(dev["exact"] * 96 / 100, 6) == round(dev["exact"] * 96 / 100)   # a count of the 96 questions
    _assert_the_export_scores_its_results("squad1", data, tmp_path / "out", f"{random_init}/spm.model")


@pytest.mark.slow
def test_squad2_through_the_cli_reports_has_and_no_answer_splits(tmp_path, random_init, cli):
    """The v2 figures, consistent with one another, and the run's export scores them at its stored threshold."""
    data = fh.write_squad_answer_words(str(tmp_path / "squad"), "2.0", num_train=96, num_dev=48)
    code, out, err = cli("finetune", *_qa_args("squad2", data, random_init, tmp_path / "out", epochs=1))
    assert code == 0, out + err
    dev = _complete_outputs(tmp_path / "out")["dev"]
    assert set(dev) == {"exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
                        "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"}
    assert (dev["total"], dev["HasAns_total"], dev["NoAns_total"]) == (48, 32, 16)  # every third unanswerable
    for prefix, n in (("", 48), ("HasAns_", 32), ("NoAns_", 16)):
        assert 0 <= dev[prefix + "exact"] <= dev[prefix + "f1"] <= 100
        assert round(dev[prefix + "exact"] * n / 100, 6) == round(dev[prefix + "exact"] * n / 100)
    # The overall figure is the two splits' weighted mean; NoAns is all-or-nothing per question (exact = f1).
    assert dev["exact"] == pytest.approx((32 * dev["HasAns_exact"] + 16 * dev["NoAns_exact"]) / 48)
    assert dev["NoAns_exact"] == dev["NoAns_f1"]
    # The thresholds are chosen on dev among the thresholds that include the one used: never worse.
    assert dev["best_f1"] >= dev["f1"] - 1e-9 and dev["best_exact"] >= dev["exact"] - 1e-9
    assert dev["best_f1"] >= 100 * 16 / 48 - 1e-9  # "no answer" everywhere is among the choices
    _assert_the_export_scores_its_results("squad2", data, tmp_path / "out", f"{random_init}/spm.model")


@pytest.mark.slow
def test_race_through_the_cli_reports_accuracy_per_level(tmp_path, random_init, cli):
    """Accuracy per level and overall, and the run's export scores the same."""
    data = fh.write_race_answer_words(str(tmp_path / "RACE"), num_files=32, num_dev_files=12)
    code, out, err = cli("finetune", *_qa_args("race", data, random_init, tmp_path / "out", epochs=1))
    assert code == 0, out + err
    dev = _complete_outputs(tmp_path / "out")["dev"]
    assert set(dev) == {"accuracy", "accuracy_middle", "accuracy_high"}
    # 12 dev files alternate middle / high, 2 questions each: 12 questions per level.
    for name in ("accuracy_middle", "accuracy_high"):
        assert 0 <= dev[name] <= 1 and round(dev[name] * 12, 6) == round(dev[name] * 12)
    assert dev["accuracy"] == pytest.approx((dev["accuracy_middle"] + dev["accuracy_high"]) / 2)
    _assert_the_export_scores_its_results("race", data, tmp_path / "out", f"{random_init}/spm.model")


def test_a_small_task_gets_a_warning_naming_epochs(tmp_path, tiny_spm_model, capsys):
    """SST-2's 20935 steps at batch 32 over 960 examples (30 steps a pass): ceil(20935 / 30) = 698 passes, a
    warm-up of round(1256 / 20935 * 698 * 30) = 1256 steps, and one line naming --epochs."""
    plan = budgets.make_budget(_args(task="sst2"), num_train_examples=960, seq_length=512)
    assert (plan.epochs, plan.warmup_steps) == (698, 1256)
    warning = budgets.many_epochs_warning(_args(task="sst2"), plan, 960)
    assert warning.startswith("albert-tf finetune: warning: the paper's 20935 steps for sst2 at batch 32 make 698 "
                              "passes over these 960 training examples") and "--epochs N" in warning and "\n" not in warning
    assert budgets.many_epochs_warning(_args(task="sst2", epochs=698), plan, 960) is None  # asked for
    cola = budgets.make_budget(_args(), num_train_examples=8551, seq_length=512)  # 10 passes
    assert budgets.many_epochs_warning(_args(), cola, 8551) is None
    assert budgets.MANY_EPOCHS == 20
    edge = budgets.make_budget(_args(), num_train_examples=16 * 267, seq_length=512)  # 5336/267: 20
    assert edge.epochs == 20 and budgets.many_epochs_warning(_args(), edge, 16 * 267) is None
    over = budgets.make_budget(_args(), num_train_examples=16 * 266, seq_length=512)  # 21 passes
    assert over.epochs == 21 and budgets.many_epochs_warning(_args(), over, 16 * 266) is not None
    # the run's own check, on a generated SST-2 of 960 examples: the one line on stderr, before anything is written
    config = _args(task="sst2", data_dir=fh.write_sst2(str(tmp_path / "sst2"), num_train=960),
                   init=fh.save_random_init(str(tmp_path / "init"), tiny_spm_model), output=str(tmp_path / "out"))
    assert finetuning.prepare(config, finetuning.read_inputs(config)).budget.epochs == 698
    assert capsys.readouterr().err.strip() == warning
    assert not os.path.exists(tmp_path / "out")


def test_a_runtime_failure_during_fine_tuning_exits_76_with_one_line(tmp_path, random_init, cli, monkeypatch):
    """The TPU / runtime or a peer going away mid-run (a TensorFlow runtime error out of model.fit) ends finetune
    as it ends pretrain: exit 76, one line naming the error and the last checkpoint, the output lock released."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def lost(*_args, **_kwargs):
        raise tf.errors.UnavailableError(None, None, "Socket closed\n\t [[{{node CollectiveReduceV2}}]]")

    monkeypatch.setattr(finetuning, "fine_tune", lost)
    data = fh.write_sst2(str(tmp_path / "sst2"), 32, 8)
    code, _, err = cli("finetune", "--task", "sst2", "--data-dir", data, "--init", random_init, "--output",
                       tmp_path / "out", "--epochs", 1)
    assert code == 76, err
    assert err.count("\n") == 1 and "went away before the first epoch ended (UnavailableError: Socket closed)" in err
    assert "the last checkpoint is none: relaunch the same command" in err
    assert not (tmp_path / "out" / ".albert_tf.lock").exists()

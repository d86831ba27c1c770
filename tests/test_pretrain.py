"""The pretraining loop: 1 vs 4 replicas, kill-and-resume through the CLI, SIGTERM, non-finite loss, refusals,
--init-checkpoint, and the XLA-compiled step on CPU."""
import json
import os
import signal

import numpy as np
import pytest
import tensorflow as tf

import helpers as ph
from albert_tf import cli, host_xla
from albert_tf.config import AlbertConfig

SEQ, PRED = 32, 5
TINY = AlbertConfig(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                    intermediate_size=64, max_position_embeddings=64)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("pretrain_data")
    ph.write_records(str(d / "train.tfrecord"), 256, SEQ, PRED, seed=0)
    ph.write_records(str(d / "eval.tfrecord"), 64, SEQ, PRED, seed=1)
    TINY.to_json_file(str(d / "albert_config.json"))
    return d


def base_args(data_dir, model_dir, steps=6, **extra):
    args = ["--config", data_dir / "albert_config.json", "--train-data", data_dir / "train.tfrecord",
            "--model-dir", model_dir, "--max-seq-length", SEQ, "--max-predictions", PRED,
            "--train-batch-size", 16, "--num-train-steps", steps, "--num-warmup-steps", 2, "--steps-per-loop", 2,
            "--save-checkpoints-steps", 2, "--learning-rate", 0.01]
    for key, value in extra.items():
        args += [f"--{key.replace('_', '-')}"] + ([] if value is True else [value])
    return [str(a) for a in args]


def train_metrics(model_dir):
    with open(os.path.join(model_dir, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return {r["step"]: r for r in rows if r["split"] == "train"}


def checkpoint_values(model_dir, step):
    reader = tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{step}"))
    names = [n for n in reader.get_variable_to_shape_map() if "VARIABLE_VALUE" in n and "save_counter" not in n]
    return {n: reader.get_tensor(n) for n in names}


def assert_same_checkpoint(dir_a, dir_b, step, rtol=1e-5, atol=1e-6):
    a, b = checkpoint_values(dir_a, step), checkpoint_values(dir_b, step)
    assert sorted(a) == sorted(b)
    assert any("model" in n for n in a) and any("optimizer" in n for n in a)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=rtol, atol=atol, err_msg=name)


@pytest.fixture(scope="module")
def uninterrupted(data_dir, tmp_path_factory):
    """6 steps on one device (the default strategy), checkpoints at 2, 4 and 6."""
    model_dir = tmp_path_factory.mktemp("uninterrupted") / "model"
    ph.run_cli(base_args(data_dir, model_dir))
    return model_dir


@pytest.mark.slow  # three fresh TensorFlow processes: about a minute idle, several on this shared machine
def test_one_replica_equals_four_cpu_replicas(data_dir, uninterrupted, tmp_path):
    model_dir = tmp_path / "four"
    proc = ph.run_cli(base_args(data_dir, model_dir, cpu_replicas=4))
    assert "on 4 replica(s) (MirroredStrategy)" in proc.stdout
    one, four = train_metrics(uninterrupted), train_metrics(model_dir)
    assert sorted(one) == sorted(four) == [2, 4, 6]
    for step in one:
        for key in ("loss", "masked_lm_loss", "sentence_order_loss", "masked_lm_accuracy", "grad_norm"):
            np.testing.assert_allclose(four[step][key], one[step][key], rtol=1e-5, err_msg=f"{key} at {step}")
    assert one[6]["loss"] != one[2]["loss"]  # it trained
    assert_same_checkpoint(uninterrupted, model_dir, 6)


@pytest.mark.slow  # three fresh TensorFlow processes
def test_sigkill_after_a_checkpoint_then_resume_equals_uninterrupted(data_dir, uninterrupted, tmp_path):
    model_dir = tmp_path / "killed"
    args = base_args(data_dir, model_dir)
    killed = ph.run_cli(args + ["--debug-kill-after-step", "2"], check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-2")
    resumed = ph.run_cli(args)
    assert "resumed from" in resumed.stdout and "at step 2" in resumed.stdout
    # Same learning rate after the restart as in the uninterrupted run.
    np.testing.assert_allclose(train_metrics(model_dir)[4]["learning_rate"],
                               train_metrics(uninterrupted)[4]["learning_rate"], rtol=1e-7)
    np.testing.assert_allclose(train_metrics(model_dir)[6]["loss"], train_metrics(uninterrupted)[6]["loss"],
                               rtol=1e-5)
    assert_same_checkpoint(uninterrupted, model_dir, 6)


# ------------------------------------------------------------------------------------------ in-process runs
def run_in_process(args):
    return cli.main(["pretrain"] + args)


def test_sigterm_saves_and_exits_zero(data_dir, tmp_path, monkeypatch):
    from albert_tf.training import loop

    sent = []

    def preempt_on_first_log(name, value):
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)  # the handler only records it; the loop saves and exits

    monkeypatch.setattr(loop, "write_scalar_summary", preempt_on_first_log)
    model_dir = tmp_path / "preempted"
    assert run_in_process(base_args(data_dir, model_dir, steps=100, save_checkpoints_steps=50)) == 0
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-2")  # saved at the end of the first loop
    assert not tf.io.gfile.glob(str(model_dir / "ckpt-4*"))
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_non_finite_loss_stops_without_a_checkpoint(data_dir, tmp_path, capsys):
    bad = tmp_path / "nan.tfrecord"
    with tf.io.TFRecordWriter(str(bad)) as writer:
        for raw in tf.data.TFRecordDataset(str(data_dir / "train.tfrecord")).take(32):
            example = tf.train.Example.FromString(raw.numpy())
            example.features.feature["masked_lm_weights"].float_list.value[0] = float("nan")
            writer.write(example.SerializeToString())
    model_dir = tmp_path / "nan_model"
    args = base_args(data_dir, model_dir)
    args[args.index("--train-data") + 1] = str(bad)
    assert run_in_process(args) == 3
    err = capsys.readouterr().err
    assert "non-finite loss in steps 1..2" in err and "stopped without saving" in err
    assert tf.train.latest_checkpoint(str(model_dir)) is None


def test_model_dir_with_a_different_config_is_refused(data_dir, tmp_path, capsys):
    model_dir = tmp_path / "other"
    model_dir.mkdir()
    TINY.replace(hidden_size=64).to_json_file(str(model_dir / "albert_config.json"))
    assert run_in_process(base_args(data_dir, model_dir)) == 2
    err = capsys.readouterr().err
    assert "holds a different config" in err and "hidden_size" in err and "albert_config.json" in err


def test_records_with_wrong_lengths_are_refused(data_dir, tmp_path, capsys):
    args = base_args(data_dir, tmp_path / "m")
    args[args.index("--max-seq-length") + 1] = "64"
    assert run_in_process(args) == 2
    err = capsys.readouterr().err
    assert "train.tfrecord" in err and "'input_ids' has length 32, expected 64" in err
    args = base_args(data_dir, tmp_path / "m")
    args[args.index("--max-predictions") + 1] = "7"
    assert run_in_process(args) == 2
    assert "'masked_lm_positions' has length 5, expected 7" in capsys.readouterr().err


def test_bad_streams_are_refused(data_dir, tmp_path, capsys):
    assert run_in_process(base_args(data_dir, tmp_path / "m", streams=0)) == 2
    assert "--streams must be positive, got 0" in capsys.readouterr().err
    assert run_in_process(base_args(data_dir, tmp_path / "m", streams=3)) == 2  # batch 16
    assert "--streams 3 does not divide the per-replica batch 16" in capsys.readouterr().err


def test_tpu_with_local_paths_is_refused(data_dir, tmp_path, capsys):
    assert run_in_process(base_args(data_dir, tmp_path / "m", tpu="my-tpu")) == 2
    err = capsys.readouterr().err
    assert "--train-data" in err and "gs://" in err


def test_init_checkpoint_loads_the_weights(data_dir, tmp_path):
    init_dir = tmp_path / "init"
    assert run_in_process(base_args(data_dir, init_dir, steps=2)) == 0
    model_dir = tmp_path / "from_init"
    # Learning rate 0: after one step the weights are still exactly the initial ones.
    args = base_args(data_dir, model_dir, steps=1, init_checkpoint=init_dir)
    args[args.index("--learning-rate") + 1] = "0"
    assert run_in_process(args) == 0
    init, got = checkpoint_values(init_dir, 2), checkpoint_values(model_dir, 1)
    model_names = [n for n in init if n.startswith("model/")]
    assert model_names
    for name in model_names:
        np.testing.assert_array_equal(got[name], init[name], err_msg=name)


def test_eval_and_summaries_are_written(data_dir, tmp_path, tiny_spm_model):
    model_dir = tmp_path / "with_eval"
    spm_model = ph.resize_spm(tiny_spm_model, TINY.vocab_size, str(tmp_path / "spm1000.model"))
    assert run_in_process(base_args(data_dir, model_dir, steps=4, eval_data=data_dir / "eval.tfrecord",
                                    max_eval_steps=2, spm_model=spm_model)) == 0
    rows = [json.loads(line) for line in open(model_dir / "metrics.jsonl", encoding="utf-8")]
    evals = [r for r in rows if r["split"] == "eval"]
    assert [r["step"] for r in evals] == [2, 4]  # at each checkpoint
    assert 0 <= evals[0]["sentence_order_accuracy"] <= 1 and evals[0]["masked_lm_loss"] > 0
    for key in ("masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy", "sentence_order_loss",
                "learning_rate", "examples_per_sec", "tokens_per_sec"):
        assert key in rows[0]
    assert (model_dir / "spm.model").exists() and (model_dir / "albert_config.json").exists()
    tags = set()
    for path in tf.io.gfile.glob(str(model_dir / "train" / "events*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(v.tag for v in event.summary.value)
    assert {"masked_lm_accuracy", "sentence_order_loss", "learning_rate", "tokens_per_sec"} <= tags


def test_dynamic_masking_masks_in_the_pipeline(data_dir, tmp_path):
    unmasked = tmp_path / "unmasked.tfrecord"
    ph.write_records(str(unmasked), 64, SEQ, PRED, seed=5, unmasked=True)
    model_dir = tmp_path / "dynamic"
    args = base_args(data_dir, model_dir, steps=2, dynamic_masking=True)
    args[args.index("--train-data") + 1] = str(unmasked)
    assert run_in_process(args) == 0
    (row,) = train_metrics(model_dir).values()
    assert row["masked_lm_loss"] > 1.0  # positions were masked and predicted (no weights → loss 0)
    # Masked records are refused with dynamic masking: they would be masked twice.
    args[args.index("--train-data") + 1] = str(data_dir / "train.tfrecord")
    assert run_in_process(args) == 2


# ------------------------------------------------------------------------------------------ the step under XLA
@pytest.mark.skipif(not host_xla.available(), reason="no XLA for the host in this TensorFlow (the TPU wheel)")
def test_train_step_has_static_shapes_and_compiles_with_xla_on_cpu(data_dir):
    import keras

    from albert_tf.data import pretraining_dataset
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.training import LAMB, WarmupPolynomialDecay
    from albert_tf.training.pretrain import make_train_step

    batch_size = 8
    dataset = pretraining_dataset(str(data_dir / "train.tfrecord"), seq_length=SEQ, max_predictions=PRED,
                                  batch_size=batch_size, is_training=True, seed=0)
    for spec in dataset.element_spec.values():
        assert spec.shape.is_fully_defined(), dataset.element_spec
    batch = next(iter(dataset))

    def run_steps(jit):
        keras.utils.set_random_seed(0)
        model = AlbertPretrainer(TINY)
        optimizer = LAMB(WarmupPolynomialDecay(0.01, 10, 0))
        optimizer.build(model.trainable_variables)
        step = tf.function(make_train_step(model, optimizer, batch_size), jit_compile=jit)
        sums = [step(batch, True) for _ in range(2)]
        if jit:  # XLA compiled the whole step — forward, backward, clipping and the LAMB update — in one module
            hlo = step.experimental_get_compiler_ir(batch, True)(stage="hlo")
            assert "ENTRY" in hlo and " dot(" in hlo and "rsqrt" in hlo or "sqrt" in hlo
        return [float(s["mlm_nll"]) for s in sums], [v.numpy() for v in model.trainable_variables]

    losses_xla, weights_xla = run_steps(True)
    losses_ref, weights_ref = run_steps(False)
    np.testing.assert_allclose(losses_xla, losses_ref, rtol=1e-4)
    assert losses_ref[0] != losses_ref[1]
    for a, b in zip(weights_xla, weights_ref):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


# ------------------------------------------------------------------------------------------ it learns
def test_tiny_model_learns_sentence_order_and_masked_tokens(tmp_path):
    # Records whose order is learnable (see helpers.make_example) over a 16-id alphabet.
    ph.write_records(str(tmp_path / "train.tfrecord"), 2048, SEQ, PRED, seed=3, alphabet=8)
    ph.write_records(str(tmp_path / "eval.tfrecord"), 256, SEQ, PRED, seed=4, alphabet=8)
    # A wider initializer than the paper's 0.02 lets a 2-layer, 32-wide model see [CLS]'s context early.
    TINY.replace(num_hidden_layers=2, initializer_range=0.2).to_json_file(str(tmp_path / "albert_config.json"))
    model_dir = tmp_path / "model"
    args = base_args(tmp_path, model_dir, steps=300, eval_data=tmp_path / "eval.tfrecord", max_eval_steps=8)
    for flag, value in {"--train-batch-size": "32", "--num-warmup-steps": "20", "--steps-per-loop": "25",
                        "--save-checkpoints-steps": "300", "--learning-rate": "0.005"}.items():
        args[args.index(flag) + 1] = value
    assert run_in_process(args) == 0
    rows = [json.loads(line) for line in open(model_dir / "metrics.jsonl", encoding="utf-8")]
    first_loop = rows[0]
    final_eval = [r for r in rows if r["split"] == "eval"][-1]
    assert first_loop["step"] == 25 and final_eval["step"] == 300
    assert final_eval["sentence_order_accuracy"] >= 0.9, final_eval
    assert final_eval["masked_lm_accuracy"] >= first_loop["masked_lm_accuracy"] + 0.05, (first_loop, final_eval)
    assert final_eval["masked_lm_loss"] < first_loop["masked_lm_loss"] - 1.0


@pytest.mark.slow  # four short training runs in this process
def test_no_dropout_after_step_switches_dropout_off_at_that_step(data_dir, tmp_path):
    """Dropout 0.3 in the config. Switching at step 2 in one run must equal a run to step 2 with dropout resumed
    with --no-dropout; switching at step 0 must equal --no-dropout; and dropout must really have been on before."""
    config = tmp_path / "dropout_config.json"
    TINY.replace(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3).to_json_file(str(config))

    def args(model_dir, steps=4, **extra):
        a = base_args(data_dir, tmp_path / model_dir, steps=steps, **extra)
        a[a.index("--config") + 1] = str(config)
        return a

    assert run_in_process(args("switch", no_dropout_after_step=2)) == 0
    assert run_in_process(args("split", steps=2, no_dropout_after_step=4)) == 0  # steps 1..2 with dropout
    assert run_in_process(args("split", steps=4, no_dropout=True)) == 0  # resumed at 2, steps 3..4 without
    assert_same_checkpoint(tmp_path / "switch", tmp_path / "split", 4)
    assert run_in_process(args("at_zero", no_dropout_after_step=0)) == 0
    assert run_in_process(args("never", no_dropout=True)) == 0
    assert_same_checkpoint(tmp_path / "at_zero", tmp_path / "never", 4)
    a, b = checkpoint_values(tmp_path / "switch", 2), checkpoint_values(tmp_path / "never", 2)
    assert max(np.abs(a[n] - b[n]).max() for n in a if "model" in n) > 1e-4  # dropout was on in steps 1..2


# ------------------------------------------------------------------------------------------ checked before writing
def test_vocabulary_disagreeing_with_the_config_is_refused_before_anything_is_written(data_dir, tmp_path, capsys,
                                                                                      tiny_spm_model):
    model_dir = tmp_path / "m"
    assert run_in_process(base_args(data_dir, model_dir, spm_model=tiny_spm_model)) == 2  # 300 pieces vs 1000
    err = capsys.readouterr().err
    assert "has 300 pieces but the config's vocab_size is 1,000" in err and len(err.strip().splitlines()) == 1
    assert not model_dir.exists()


def test_token_ids_past_the_vocabulary_are_refused_before_anything_is_written(data_dir, tmp_path, capsys):
    config = tmp_path / "small_vocab.json"
    TINY.replace(vocab_size=100).to_json_file(str(config))
    args = base_args(data_dir, tmp_path / "m")
    args[args.index("--config") + 1] = str(config)
    assert run_in_process(args) == 2
    err = capsys.readouterr().err
    assert "train.tfrecord" in err and "outside the config's vocab_size 100" in err
    assert not (tmp_path / "m").exists()


def test_truncated_records_are_refused_before_anything_is_written(data_dir, tmp_path, capsys):
    cut = tmp_path / "cut.tfrecord"
    data = (data_dir / "train.tfrecord").read_bytes()
    cut.write_bytes(data[: len(data) - 100])
    args = base_args(data_dir, tmp_path / "m")
    args[args.index("--train-data") + 1] = str(cut)
    assert run_in_process(args) == 2
    err = capsys.readouterr().err
    assert "--train-data: " in err and "cut.tfrecord: truncated or corrupt TFRecord file" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "m").exists()


def test_rerunning_a_finished_run_says_it_is_complete(data_dir, tmp_path, capsys):
    model_dir = tmp_path / "done"
    assert run_in_process(base_args(data_dir, model_dir, steps=2)) == 0
    capsys.readouterr()
    assert run_in_process(base_args(data_dir, model_dir, steps=2)) == 0
    out = capsys.readouterr().out
    assert "already complete at step 2" in out and "train step" not in out
    assert len(train_metrics(model_dir)) == 1


def test_a_batch_this_machine_cannot_hold_is_refused_with_what_fits(data_dir, tmp_path, capsys):
    from albert_tf.training import pretrain

    args = cli.build_parser(["pretrain"]).parse_args(["pretrain"] + base_args(data_dir, tmp_path / "m"))
    args.train_batch_size, args.max_seq_length, args.max_predictions = 4096, 512, 20
    base = AlbertConfig.from_preset("albert_base")
    check = lambda: pretrain.check_host_memory(args, base, replicas=1, dtype="float32", total=16 * 2**30)  # noqa
    with pytest.raises(ValueError) as info:
        check()
    message = str(info.value)
    assert "--train-batch-size 4096 at --max-seq-length 512 needs about" in message and "16.0 GiB" in message
    # what keeps the global batch comes first: the fewest accumulation steps that fit
    steps = int(message.split("(--gradient-accumulation-steps ")[1].split()[0])
    assert "same global batch" in message
    args.gradient_accumulation_steps = steps
    check()  # the hint is true
    args.gradient_accumulation_steps = steps // 2
    with pytest.raises(ValueError):
        check()  # and the least
    # a model too big for any batch: the smaller-batch advice
    args.gradient_accumulation_steps = 1
    with pytest.raises(ValueError, match="no batch fits"):
        pretrain.check_host_memory(args, base, replicas=1, dtype="float32", total=2**30)

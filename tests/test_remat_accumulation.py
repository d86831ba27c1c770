"""`pretrain --remat` and `--gradient-accumulation-steps`: the same weights as the plain step (in process, under XLA,
with --cpu-replicas 4 and across a resume), the recomputation present in the compiled HLO, and the refusals."""
import signal

import numpy as np
import pytest
import tensorflow as tf

import helpers as ph
import albert_tf
from albert_tf.runtime import host_xla
from albert_tf.config import AlbertConfig

SEQ, PRED = ph.PRETRAIN_SEQ, ph.PRETRAIN_PRED
# Two layers in one group (a shared block applied twice), with dropout: the recomputation must redraw nothing.
DROPOUT = AlbertConfig(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_hidden_groups=1,
                       num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                       hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The shared pretraining records with the DROPOUT config."""
    return ph.write_pretrain_data(tmp_path_factory.mktemp("remat_data"), DROPOUT, eval_records=0)


def batches(data_dir, batch_size, count):
    from albert_tf.data import pretraining_dataset

    dataset = pretraining_dataset(str(data_dir / "train.tfrecord"), seq_length=SEQ, max_predictions=PRED,
                                  batch_size=batch_size, is_training=True, seed=0)
    return list(dataset.take(count))


def train(batch_list, training, remat=False, accumulation_steps=1, streams=1, jit=False, step_jit=False):
    """5 (len(batch_list)) steps of make_train_step from one seeded init; returns (weights, mlm_nll per step, the
    compiled step's optimized HLO when step_jit)."""
    import keras

    from albert_tf.training.pretrain_step import build_model_and_optimizer, make_train_step

    keras.utils.set_random_seed(0)
    model, optimizer, _ = build_model_and_optimizer(DROPOUT, 0.01, 10, 1, training_streams=streams, remat=remat)
    batch_size = int(batch_list[0]["input_word_ids"].shape[0])
    step = tf.function(make_train_step(model, optimizer, batch_size, jit, accumulation_steps), jit_compile=step_jit)
    losses = [float(step(batch, training)["mlm_nll"]) for batch in batch_list]
    hlo = step.experimental_get_compiler_ir(batch_list[0], training)(stage="optimized_hlo") if step_jit else None
    return [v.numpy() for v in model.trainable_variables], losses, hlo


def assert_same_weights(a, b, tolerance=1e-5):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=tolerance, atol=tolerance)


# ------------------------------------------------------------------------------------------ remat
@pytest.mark.parametrize("training, streams", [(True, 1), (True, 2), (False, 1)],
                         ids=["dropout", "dropout-2-streams", "no-dropout"])
def test_remat_gives_the_same_weights(data_dir, training, streams):
    data = batches(data_dir, 8, 5)
    plain, plain_losses, _ = train(data, training, streams=streams)
    remat, remat_losses, _ = train(data, training, remat=True, streams=streams)
    np.testing.assert_allclose(remat_losses, plain_losses, rtol=1e-5)
    assert plain_losses[0] != plain_losses[-1]  # it trained
    assert_same_weights(remat, plain)


def test_remat_needs_the_fused_path():
    from albert_tf.modeling.encoder import AlbertEncoder

    with pytest.raises(ValueError, match="remat=True needs fused=True"):
        AlbertEncoder(DROPOUT, fused=False, remat=True)
    assert AlbertEncoder(DROPOUT, remat=True).get_config()["remat"] is True


@pytest.mark.slow  # two XLA compilations of the whole step: ~1 min idle, 3 on the shared machine
@pytest.mark.skipif(not host_xla.available(), reason="no XLA for the host in this TensorFlow (the TPU wheel)")
def test_the_recomputation_survives_xla(data_dir):
    """The whole step compiled by XLA: with remat it holds the blocks' forward dots once more (the recomputation),
    which XLA would merge with the forward without the barrier of encoder.recompute_grad."""
    data = batches(data_dir, 8, 2)
    plain, _, plain_hlo = train(data, True, step_jit=True)
    remat, _, remat_hlo = train(data, True, remat=True, step_jit=True)
    # per applied block: q·k·v (one [H, 3H] matmul), scores, context, output, FFN in, FFN out
    forward_block_dots = DROPOUT.num_hidden_layers * 6
    assert remat_hlo.count(" dot(") == plain_hlo.count(" dot(") + forward_block_dots
    assert_same_weights(remat, plain)


# ------------------------------------------------------------------------------------------ accumulation
@pytest.mark.parametrize("jit", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["graph", "xla"])
def test_four_micro_batches_give_the_weights_of_one_batch(data_dir, jit):
    if jit and not host_xla.available():
        pytest.skip("no XLA for the host in this TensorFlow")
    data = batches(data_dir, 16, 5)
    one, one_losses, _ = train(data, False, jit=jit)
    four, four_losses, _ = train(data, False, accumulation_steps=4, jit=jit)
    np.testing.assert_allclose(four_losses, one_losses, rtol=1e-5)
    assert_same_weights(four, one)
    # and with remat on top (one micro-batch of 4 recomputed block by block)
    both, _, _ = train(data, False, accumulation_steps=4, remat=True, jit=jit)
    assert_same_weights(both, one)


def test_the_normalizer_is_the_global_batch(data_dir):
    """Micro-batches with very different numbers of masked tokens: averaging per micro-batch would differ."""
    data = batches(data_dir, 16, 1)
    weights = data[0]["masked_lm_weights"].numpy()
    weights[:4] = 0.0       # the first micro-batch predicts nothing
    weights[4:8, 1:] = 0.0  # the second one token per example
    data = [dict(data[0], masked_lm_weights=tf.constant(weights))]
    one, one_losses, _ = train(data, False)
    four, four_losses, _ = train(data, False, accumulation_steps=4)
    np.testing.assert_allclose(four_losses, one_losses, rtol=1e-6)
    assert_same_weights(four, one)


def test_bad_accumulation_steps_are_refused(data_dir, tmp_path):
    with pytest.raises(ValueError, match="--gradient-accumulation-steps 3 does not divide the per-replica batch 16"):
        albert_tf.pretrain(ph.pretrain_config(data_dir, tmp_path / "m", gradient_accumulation_steps=3))
    assert not (tmp_path / "m").exists()
    with pytest.raises(ValueError, match="--gradient-accumulation-steps must be positive, got 0"):
        albert_tf.pretrain(ph.pretrain_config(data_dir, tmp_path / "m", gradient_accumulation_steps=0))


# ------------------------------------------------------------------------------------------ the CLI, 4 replicas
# 6 steps of 16 examples on 4 replicas, one dropout stream everywhere (dropout masks are drawn per stream, and
# --remat's default on CPU is 1, else 2). --gradient-accumulation-steps runs with --no-dropout on both sides: dropout
# masks depend on the micro-batch shape. The accumulated run is killed after its first checkpoint and resumed: its
# weights at the end are those of an uninterrupted run only if both the accumulation and the resume are right, so
# one run (two processes) serves both checks of the test below.
CLI_RUNS = {"plain": [], "remat": ["--remat"], "plain_nd": ["--no-dropout"],
            "accumulated": ["--no-dropout", "--gradient-accumulation-steps", "2", "--remat"]}
KILLED_AND_RESUMED = ("accumulated",)


@pytest.fixture(scope="module")
def cli_run(data_dir, tmp_path_factory):
    """cli_run(name) -> (model dir, [CompletedProcess], step of the last checkpoint when killed or None) of `albert-tf
    pretrain` with CLI_RUNS[name]'s flags in fresh processes, run once per module on first use: one process to the
    end, or for KILLED_AND_RESUMED one SIGKILLed (from the outside) as soon as it has written a checkpoint and the
    same command again, which resumes."""
    root, done = tmp_path_factory.mktemp("cli_runs"), {}

    def run(name):
        if name not in done:
            model_dir, procs, killed_at = root / name, [], None
            args = cli_args(data_dir, model_dir, name)
            if name in KILLED_AND_RESUMED:
                procs.append(ph.run_cli_killed_when("pretrain", args, model_dir / "checkpoint"))
                latest = tf.train.latest_checkpoint(str(model_dir))
                killed_at = int(latest.rsplit("-", 1)[1]) if latest else None
            procs.append(ph.run_cli("pretrain", args))
            assert all("on 4 replica(s) (MirroredStrategy)" in proc.stdout for proc in procs)
            done[name] = model_dir, procs, killed_at
        return done[name]
    return run


def cli_args(data_dir, model_dir, name):
    return ph.pretrain_args(data_dir, model_dir, cpu_replicas=4, streams=1) + CLI_RUNS[name]


@pytest.mark.slow  # fresh TensorFlow processes
def test_cli_remat_and_accumulation_under_four_cpu_replicas(cli_run):
    """16 examples per step on 4 replicas: plain; --remat (dropout on: same masks); --gradient-accumulation-steps 2
    with --remat (--no-dropout on both sides). The accumulated run is killed (from the outside) after its first
    checkpoint and restarted: it sees the same data and ends with the same weights as the one-batch run of the same
    global batch. (One test, not two sharing a module fixture: under xdist the second one ran on another worker or
    after the fixture's teardown and started the runs again.)"""
    runs = {name: cli_run(name)[0] for name in CLI_RUNS}
    killed, (killed_proc, resumed), killed_at = cli_run("accumulated")
    for proc in (killed_proc, resumed):
        assert "2 accumulated micro-batches of 2 per replica" in proc.stdout and "remat" in proc.stdout
    assert killed_proc.returncode == -signal.SIGKILL, killed_proc.stderr
    assert killed_at is not None and killed_at < 6
    assert f"at step {killed_at}" in resumed.stdout
    assert sorted(ph.train_metrics(killed)) == [2, 4, 6]
    ph.assert_same_checkpoint(runs["plain"], runs["remat"], 6)
    ph.assert_same_checkpoint(runs["plain_nd"], runs["accumulated"], 6)
    for a, b in (("plain", "remat"), ("plain_nd", "accumulated")):
        for step in (2, 6):
            np.testing.assert_allclose(ph.train_metrics(runs[b])[step]["loss"],
                                       ph.train_metrics(runs[a])[step]["loss"], rtol=1e-5)

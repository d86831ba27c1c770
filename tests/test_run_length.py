"""A run's length and shape: the schedules (--schedule) with LAMB and AdamW (--optimizer), the budgets
(--budget-tokens, --budget-hours) and the sequence-length phases (--phases), each stopped at a step and resumed:
the final checkpoint equals an uninterrupted run's to the last bit."""
import itertools
import json
import random

import pytest

import albert_tf
import helpers as ph
from albert_tf.training import pretraining

# Not tpu_stack: what these add (the length, the schedule, the phases) is the package's arithmetic; a resume's
# bit-exactness on each TensorFlow build is test_pretrain's (tpu_stack).

STEPS = 8


def stopped_at(monkeypatch, step):
    """Makes the next run stop (as after SIGTERM: it saves and returns "stopped") once `step` steps are trained;
    with --steps-per-loop 1 every compiled call is one step, so the calls counted are the steps."""
    agree, calls = pretraining.agree, []

    def stop_there(strategy, num_steps, save_now, stop_now):
        calls.append(num_steps)
        return agree(strategy, num_steps, save_now, stop_now or len(calls) == step)

    monkeypatch.setattr(pretraining, "agree", stop_there)
    return lambda: monkeypatch.setattr(pretraining, "agree", agree)


def stop_and_resume(monkeypatch, config, step, run=albert_tf.pretrain, again=None):
    """Runs `config` stopped after `step` steps (by `run`), then again to its end (by `again`, default `run`).
    Returns the two results."""
    restore = stopped_at(monkeypatch, step)
    first = run(config)
    restore()
    return first, (again or run)(config)


def fake_clock(seconds):
    """A clock whose every compiled call (run_steps reads it before and after) lasts `seconds`."""
    ticks = itertools.count()
    return lambda: next(ticks) * seconds


# One arm in the default suite: a new schedule with the new optimizer (LAMB's resumes are test_pretrain's, and every
# schedule is a pure function of the step: tests/test_schedules.py); the paper's LAMB with linear under -m slow.
@pytest.mark.parametrize("schedule,optimizer", [("wsd", "adamw"),
                                                pytest.param("linear", "lamb", marks=pytest.mark.slow)])
def test_a_schedule_with_either_optimizer_resumes_bit_exact(pretrain_data, tmp_path, monkeypatch, schedule,
                                                             optimizer):
    extra = {"decay_start": 0.5, "decay_length": 0.25} if schedule == "wsd" else {}
    configs = {name: ph.pretrain_config(pretrain_data, tmp_path / name, steps=STEPS, steps_per_loop=1,
                                        save_checkpoints_steps=STEPS, schedule=schedule, optimizer=optimizer, **extra)
               for name in ("whole", "resumed")}
    whole = albert_tf.pretrain(configs["whole"])
    step = random.Random(schedule).randint(2, STEPS - 1)
    first, resumed = stop_and_resume(monkeypatch, configs["resumed"], step)
    assert (first.status, first.step, whole.status, resumed.status) == ("stopped", step, "done", "done")
    ph.assert_bit_exact(tmp_path / "whole", tmp_path / "resumed", STEPS)
    # the schedule ends at 0 at the last step: the last row's rate (of step STEPS - 1) is the formula's
    peak, warmup = 0.01, 2
    last = {"linear": peak * 1 / (STEPS - warmup), "wsd": 0.0}[schedule]
    assert ph.train_metrics(tmp_path / "whole")[STEPS]["learning_rate"] == pytest.approx(last, abs=1e-9)


def test_pretrain_adamw_is_keras_adamw_without_decay_on_layer_norm_and_biases():
    """One update of --optimizer adamw against AdamW written in numpy: decoupled decay lr·λ·w (none for a LayerNorm
    or bias path), then the bias-corrected Adam step lr·√(1−β2)/(1−β1)·m/(√v+ε), m = (1−β1)g, v = (1−β2)g²."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    from albert_tf.training.pretrain_step import PretrainAdamW  # pylint: disable=import-outside-toplevel

    start = {"encoder/dense/kernel": np.array([[0.5, -1.0]], "float32"),
             "encoder/LayerNorm/gamma": np.array([1.0, 2.0], "float32"),
             "encoder/dense/bias": np.array([0.3, -0.2], "float32")}
    grads = [np.array([[0.2, -0.4]], "float32"), np.array([0.1, 0.3], "float32"), np.array([-0.5, 0.05], "float32")]
    variables = ph.named_variables(start)
    optimizer = PretrainAdamW(0.1)
    optimizer.build(variables)
    optimizer.apply_reduced_gradients(grads, variables)
    for (path, w), g, variable in zip(start.items(), grads, variables):
        decayed = w if path.endswith(("gamma", "bias")) else w - 0.1 * 0.01 * w
        m, v = 0.1 * g, 0.001 * g * g
        expected = decayed - 0.1 * np.sqrt(1 - 0.999) / (1 - 0.9) * m / (np.sqrt(v) + 1e-6)
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-5, err_msg=path)


# ---------------------------------------------------------------------------------------------- budgets
def test_a_token_budget_ends_at_the_first_step_that_reaches_it(pretrain_data, tmp_path):
    """--budget-tokens 3000 at batch 16 x 32 tokens (512 a step): 5 steps give 2,560 tokens, 6 give 3,072, so the
    run trains 6 steps, and its linear schedule reaches 0 there."""
    config = ph.pretrain_config(pretrain_data, tmp_path / "m", steps=6, budget_tokens=3000, schedule="linear",
                                num_train_steps=125000)  # the default: the budget decides
    assert config.num_train_steps == 6
    result = albert_tf.pretrain(config)
    assert (result.status, result.step) == ("done", 6)
    assert 5 * 16 * 32 < 3000 <= 6 * 16 * 32
    assert result.metrics["learning_rate"] == pytest.approx(0.01 * (6 - 5) / (6 - 2))  # the last step's rate
    assert json.loads((tmp_path / "m" / "pretrain_config.json").read_text())["num_train_steps"] == 6


def test_an_hours_budget_is_decided_once_recorded_and_kept_by_a_resume(pretrain_data, tmp_path, monkeypatch):
    """--budget-hours 0.004 = 14.4 s; a fake clock makes every one-step call last 1 s, so the rate measured on the
    second call buys floor(14.4 / 1) = 14 steps. A run stopped after that is resumed under a clock five times
    slower: it keeps the recorded 14 and ends bit-exact with the uninterrupted run."""
    def config(name):
        return ph.pretrain_config(pretrain_data, tmp_path / name, steps=6, budget_hours=0.004, num_warmup_steps=3,
                                  num_train_steps=125000, steps_per_loop=1, save_checkpoints_steps=50,
                                  schedule="linear")

    whole = pretraining.run(config("whole"), exits=False, clock=fake_clock(1.0))
    assert (whole.status, whole.step) == ("done", 14)
    record = json.loads((tmp_path / "whole" / "pretrain_config.json").read_text())
    assert (record["budget_hours_steps"], record["num_train_steps"]) == (14, 14)
    assert whole.metrics["learning_rate"] == pytest.approx(0.01 * (14 - 13) / (14 - 3))  # ends at the budget
    step = random.Random(14).randint(3, 13)
    first, resumed = stop_and_resume(monkeypatch, config("resumed"), step,
                                     run=lambda c: pretraining.run(c, exits=False, clock=fake_clock(1.0)),
                                     again=lambda c: pretraining.run(c, exits=False, clock=fake_clock(5.0)))
    assert (first.status, first.step, resumed.status, resumed.step) == ("stopped", step, "done", 14)
    ph.assert_bit_exact(tmp_path / "whole", tmp_path / "resumed", 14)


# ---------------------------------------------------------------------------------------------- phases
@pytest.mark.slow  # five tiny runs (about a minute on 2 cores)
def test_phases_switch_at_their_step_and_resume_bit_exact_at_the_switch_and_mid_phase(pretrain_data, tmp_path,
                                                                                       monkeypatch, capsys):
    """--phases 32:0.5:32,64:0.5 over 8 steps: steps 1..4 at length 32 with batch 32 (--phase-data 32), 5..8 at 64
    with --batch-size 16 (--train-data). Stopped exactly at the switch (step 4) and at a random step of the second
    phase, each resumes to the uninterrupted run's final checkpoint, to the bit."""
    ph.write_records(str(tmp_path / "train64.tfrecord"), 128, 64, ph.PRETRAIN_PRED, seed=3)

    def config(name):
        return ph.pretrain_config(pretrain_data, tmp_path / name, steps=STEPS, steps_per_loop=1,
                                  save_checkpoints_steps=STEPS, max_seq_length=64, phases="32:0.5:32,64:0.5",
                                  train_data=tmp_path / "train64.tfrecord",
                                  phase_data={"32": str(pretrain_data / "train.tfrecord")})

    assert albert_tf.pretrain(config("whole")).status == "done"
    out = capsys.readouterr().out
    assert "phase 32:0.5: steps 1..4 at sequence length 32, global batch 32" in out
    assert "phase 64:0.5: steps 5..8 at sequence length 64, global batch 16" in out
    rows = ph.train_metrics(tmp_path / "whole")
    assert rows[4]["tokens_per_sec"] == pytest.approx(rows[4]["examples_per_sec"] * 32)  # the row ends at the switch
    assert rows[8]["tokens_per_sec"] == pytest.approx(rows[8]["examples_per_sec"] * 64)
    for name, step in (("at_switch", STEPS // 2), ("mid_phase", random.Random(64).randint(STEPS // 2 + 1, STEPS - 1))):
        first, resumed = stop_and_resume(monkeypatch, config(name), step)
        assert (first.status, first.step, resumed.status) == ("stopped", step, "done"), name
        ph.assert_bit_exact(tmp_path / "whole", tmp_path / name, STEPS)


@pytest.mark.slow  # three tiny runs
def test_a_batch_ramp_switches_batch_at_its_step_and_resumes_bit_exact_at_the_switch(pretrain_data, tmp_path,
                                                                                      monkeypatch, capsys):
    """--phases 32:0.5:8,32:0.5 over 8 steps (--batch-size 16): one length, one set of records, steps 1..4 at
    global batch 8 and 5..8 at 16, the second phase's data order drawn with the next seed. Stopped at the switch,
    the run resumes to the uninterrupted run's final checkpoint, to the bit."""
    def config(name):
        return ph.pretrain_config(pretrain_data, tmp_path / name, steps=STEPS, steps_per_loop=1,
                                  save_checkpoints_steps=STEPS, phases=f"{ph.PRETRAIN_SEQ}:0.5:8,{ph.PRETRAIN_SEQ}:0.5")

    assert albert_tf.pretrain(config("whole")).status == "done"
    out = capsys.readouterr().out
    assert f"phase {ph.PRETRAIN_SEQ}:0.5: steps 1..4 at sequence length {ph.PRETRAIN_SEQ}, global batch 8" in out
    assert f"phase {ph.PRETRAIN_SEQ}:0.5: steps 5..8 at sequence length {ph.PRETRAIN_SEQ}, global batch 16" in out
    first, resumed = stop_and_resume(monkeypatch, config("at_switch"), STEPS // 2)
    assert (first.status, first.step, resumed.status) == ("stopped", STEPS // 2, "done")
    ph.assert_bit_exact(tmp_path / "whole", tmp_path / "at_switch", STEPS)

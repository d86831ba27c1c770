"""A run's length and shape: the schedules (--schedule) with LAMB and AdamW (--optimizer), the budgets
(--budget-tokens, --budget-hours) and the sequence-length phases (--phases), each stopped at a step and resumed:
the final checkpoint equals an uninterrupted run's to the last bit."""
import random

import pytest

import albert_tf
import helpers as ph
from albert_tf.training import pretraining

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)

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


def stop_and_resume(monkeypatch, config, step):
    """Runs `config` stopped after `step` steps, then again to its end. Returns the two results."""
    restore = stopped_at(monkeypatch, step)
    first = albert_tf.pretrain(config)
    restore()
    return first, albert_tf.pretrain(config)


@pytest.mark.parametrize("schedule,optimizer", [("wsd", "adamw"), ("linear", "lamb")])
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
    or bias path), then the bias-corrected Adam step lr·√(1−β2)/(1−β1)·m/(√v+ε) with m = (1−β1)g, v = (1−β2)g²."""
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

"""The warm-up + polynomial decay schedule against the original optimization.py formula, computed by hand."""
import numpy as np
import pytest

from albert_tf.training import WarmupPolynomialDecay


def reference_lr(step, init_lr, num_train_steps, num_warmup_steps, power=1.0):
    """tf.train.polynomial_decay(end 0, no cycle), then the linear warm-up override, as the original."""
    decayed = init_lr * (1 - min(step, num_train_steps) / num_train_steps) ** power
    if num_warmup_steps and step < num_warmup_steps:
        return init_lr * step / num_warmup_steps
    return decayed


@pytest.mark.parametrize("power", [1.0, 0.5])
def test_schedule_matches_reference(power):
    schedule = WarmupPolynomialDecay(0.00176, num_train_steps=100, num_warmup_steps=10, power=power)
    for step in [0, 1, 5, 9, 10, 11, 50, 99, 100, 150]:
        np.testing.assert_allclose(float(schedule(step)), reference_lr(step, 0.00176, 100, 10, power),
                                   rtol=1e-6, atol=1e-12, err_msg=f"step {step}")


def test_hand_computed_points():
    schedule = WarmupPolynomialDecay(1.0, num_train_steps=10, num_warmup_steps=4)
    assert float(schedule(0)) == 0.0          # the first update uses lr 0, as the original
    assert float(schedule(2)) == pytest.approx(0.5)
    assert float(schedule(4)) == pytest.approx(0.6)   # warm-up over: decayed value 1 − 4/10
    assert float(schedule(10)) == 0.0
    assert float(schedule(20)) == 0.0
    no_warmup = WarmupPolynomialDecay(2.0, num_train_steps=4)
    assert [float(no_warmup(s)) for s in range(5)] == pytest.approx([2.0, 1.5, 1.0, 0.5, 0.0])


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="num_train_steps"):
        WarmupPolynomialDecay(1.0, num_train_steps=0)
    with pytest.raises(ValueError, match="num_warmup_steps"):
        WarmupPolynomialDecay(1.0, num_train_steps=10, num_warmup_steps=-1)

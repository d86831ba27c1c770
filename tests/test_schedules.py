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


# ---------------------------------------------------------------------------------------------- the budget schedules
def budget_reference(kind, step, peak, total, warmup, start=0.9, length=0.1):
    """The schedules of schedules.py's docstring, written again in plain Python from their formulas."""
    import math  # pylint: disable=import-outside-toplevel

    step = min(step, total)
    if warmup and step < warmup:
        return peak * step / warmup
    if kind == "linear":
        return peak * (total - step) / (total - warmup)
    if kind == "one-cycle":
        return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))
    begin, span = start * total, length * total
    return peak * (1 - min(max((step - begin) / span, 0.0), 1.0))


@pytest.mark.parametrize("kind", ["linear", "one-cycle", "wsd"])
@pytest.mark.parametrize("warmup", [0, 6])
def test_budget_schedules_match_their_formulas(kind, warmup):
    from albert_tf.training.schedules import make_schedule  # pylint: disable=import-outside-toplevel

    schedule = make_schedule(kind, 0.005, 100, warmup, decay_start=0.5, decay_length=0.3)
    for step in [0, 1, 3, 5, 6, 7, 30, 49, 50, 51, 65, 79, 80, 81, 99, 100, 140]:
        np.testing.assert_allclose(float(schedule(step)), budget_reference(kind, step, 0.005, 100, warmup, 0.5, 0.3),
                                   rtol=1e-5, atol=1e-9, err_msg=f"{kind} step {step}")


def test_budget_schedules_hand_computed_points():
    from albert_tf.training.schedules import make_schedule  # pylint: disable=import-outside-toplevel

    linear = make_schedule("linear", 1.0, 10, 2)
    assert [float(linear(s)) for s in (0, 1, 2, 6, 10, 12)] == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.0, 0.0])
    cosine = make_schedule("one-cycle", 1.0, 10, 2)
    assert [float(cosine(s)) for s in (2, 6, 10)] == pytest.approx([1.0, 0.5, 0.0], abs=1e-6)
    wsd = make_schedule("wsd", 1.0, 10, 2, decay_start=0.6, decay_length=0.2)
    assert [float(wsd(s)) for s in (2, 5, 6, 7, 8, 9)] == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.0, 0.0])


def test_budget_schedules_refuse_bad_shapes():
    from albert_tf.training.schedules import make_schedule  # pylint: disable=import-outside-toplevel

    with pytest.raises(ValueError, match="decay_start"):
        make_schedule("wsd", 1.0, 10, 2, decay_start=0.95, decay_length=0.1)
    with pytest.raises(ValueError, match="inside the warm-up"):
        make_schedule("wsd", 1.0, 10, 5, decay_start=0.2, decay_length=0.1)
    with pytest.raises(ValueError, match="num_warmup_steps"):
        make_schedule("linear", 1.0, 10, 10)
    with pytest.raises(ValueError, match="expected one of polynomial, linear, one-cycle, wsd"):
        make_schedule("cosine", 1.0, 10)


@pytest.mark.parametrize("kind", ["linear", "one-cycle", "wsd"])
def test_budget_schedules_round_trip_through_keras_serialization(kind):
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.training.schedules import make_schedule  # pylint: disable=import-outside-toplevel

    schedule = make_schedule(kind, 0.01, 50, 5, decay_start=0.7, decay_length=0.2)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert type(again) is type(schedule) and again.get_config() == schedule.get_config()
    assert [float(again(s)) for s in range(0, 55, 7)] == [float(schedule(s)) for s in range(0, 55, 7)]

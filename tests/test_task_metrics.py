"""albert_tf.tasks.metrics against hand-computed values (the sklearn / scipy definitions)."""
import math

import numpy as np
import pytest

from albert_tf.tasks import metrics

PREDICTIONS = [1, 1, 0, 0, 1, 0]
LABELS = [1, 0, 0, 1, 1, 0]  # tp 2 (0, 4), fp 1 (1), fn 1 (3), tn 2 (2, 5)


def test_accuracy_hand_computed():
    assert metrics.accuracy(PREDICTIONS, LABELS) == pytest.approx(4 / 6)


def test_f1_hand_computed():
    assert metrics.f1(PREDICTIONS, LABELS) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    # F1 of class 0: tp 2 (2, 5), fp 1 (3), fn 1 (1)
    assert metrics.f1(PREDICTIONS, LABELS, positive=0) == pytest.approx(4 / 6)
    # no positive prediction and no positive label: sklearn's zero_division gives 0
    assert metrics.f1([0, 0], [0, 0]) == 0.0
    assert metrics.f1([1, 1, 1], [0, 1, 1]) == pytest.approx(2 * 2 / (2 * 2 + 1))


def test_mcc_binary_hand_computed():
    # (tp·tn − fp·fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (4 − 1) / sqrt(3·3·3·3)
    assert metrics.matthews_corrcoef(PREDICTIONS, LABELS) == pytest.approx(3 / 9)
    assert metrics.matthews_corrcoef(LABELS, LABELS) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef([1 - x for x in LABELS], LABELS) == pytest.approx(-1.0)


def test_mcc_multiclass_hand_computed():
    labels = [0, 0, 1, 1, 2, 2]
    predictions = [0, 1, 1, 1, 2, 0]
    # confusion rows (label) [1,1,0] [0,2,0] [1,0,1]: t = (2,2,2), p = (2,3,1), c = 4, s = 6
    # (c·s − t·p) / sqrt((s² − p·p)(s² − t·t)) = (24 − 12) / sqrt((36 − 14)(36 − 12))
    assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(12 / math.sqrt(22 * 24))


def test_mcc_constant_prediction_is_zero():
    assert metrics.matthews_corrcoef([1, 1, 1, 1], [0, 1, 0, 1]) == 0.0


def test_pearson_hand_computed():
    # deviations (-1, 0, 1) and (-1, 1, 0): 1 / sqrt(2 · 2)
    assert metrics.pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    assert metrics.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert math.isnan(metrics.pearson([1, 1, 1], [1, 2, 3]))


def test_rankdata_ties_share_their_average_rank():
    np.testing.assert_allclose(metrics.rankdata([10, 20, 10, 30, 20, 20]), [1.5, 4, 1.5, 6, 4, 4])
    np.testing.assert_allclose(metrics.rankdata([3.0, 1.0, 2.0]), [3, 1, 2])


def test_spearman_with_ties_hand_computed():
    # ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4); deviations (-1.5, 0, 0, 1.5), (-1.5, .5, -.5, 1.5)
    assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    # monotone but not linear: 1
    assert metrics.spearman([1, 2, 3, 4], [1, 10, 100, 1000]) == pytest.approx(1.0)


def test_shape_errors():
    with pytest.raises(ValueError, match="two vectors of one length"):
        metrics.accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="no predictions"):
        metrics.accuracy([], [])

"""Classification and regression metrics as scikit-learn / SciPy define them, in numpy (no sklearn, no scipy).

Used by the GLUE and RACE evaluations (SQuAD's exact match and F1 live in `albert_tf.tasks.squad`).
Every function takes array-likes of equal length N and returns a Python float.
"""
import numpy as np


def _pair(predictions, labels, dtype):
    predictions = np.asarray(predictions, dtype)
    labels = np.asarray(labels, dtype)
    if predictions.ndim != 1 or predictions.shape != labels.shape:
        raise ValueError(f"predictions {predictions.shape} and labels {labels.shape} must be two vectors of one "
                         "length")
    if predictions.size == 0:
        raise ValueError("no predictions to score")
    return predictions, labels


def accuracy(predictions, labels):
    """Fraction of predictions equal to their label (sklearn.metrics.accuracy_score)."""
    predictions, labels = _pair(predictions, labels, np.int64)
    return float(np.mean(predictions == labels))


def f1(predictions, labels, positive=1):
    """F1 of the positive class (sklearn.metrics.f1_score, average="binary"): 2·tp / (2·tp + fp + fn), 0.0 when
    there is no positive prediction or label at all (sklearn's zero_division default)."""
    predictions, labels = _pair(predictions, labels, np.int64)
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    denominator = 2 * tp + fp + fn
    return float(2 * tp / denominator) if denominator else 0.0


def matthews_corrcoef(predictions, labels):
    """Matthews correlation coefficient (sklearn.metrics.matthews_corrcoef, any number of classes).

    From the confusion matrix C (rows: label, columns: prediction), t = row sums, p = column sums, c = trace,
    s = N: (c·s − t·p) / sqrt((s² − p·p)(s² − t·t)); 0.0 when the denominator is 0 (a constant prediction or label).
    """
    predictions, labels = _pair(predictions, labels, np.int64)
    classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    n = labels.size
    confusion = np.zeros([classes.size, classes.size], np.float64)
    np.add.at(confusion, (encoded[:n], encoded[n:]), 1.0)
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    c, s = np.trace(confusion), float(n)
    cov_yp = c * s - t @ p
    cov_pp = s * s - p @ p
    cov_yy = s * s - t @ t
    if cov_pp * cov_yy == 0:
        return 0.0
    return float(cov_yp / np.sqrt(cov_pp * cov_yy))


def pearson(predictions, labels):
    """Pearson's r (scipy.stats.pearsonr); NaN when either side is constant."""
    x, y = _pair(predictions, labels, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    if denominator == 0:
        return float("nan")
    return float(np.clip((x @ y) / denominator, -1.0, 1.0))


def rankdata(values):
    """1-based ranks, ties given their average rank (scipy.stats.rankdata, method="average")."""
    values = np.asarray(values)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # Group equal values: each group's members share the mean of the positions it spans.
    starts = np.flatnonzero(np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]]))
    ends = np.append(starts[1:], values.size)
    average = (starts + ends + 1) / 2.0  # mean of the 1-based positions starts+1 .. ends
    ranks = np.empty(values.size, np.float64)
    ranks[order] = np.repeat(average, ends - starts)
    return ranks


def spearman(predictions, labels):
    """Spearman's rho (scipy.stats.spearmanr): Pearson's r of the average ranks (ties share their mean rank)."""
    x, y = _pair(predictions, labels, np.float64)
    return pearson(rankdata(x), rankdata(y))

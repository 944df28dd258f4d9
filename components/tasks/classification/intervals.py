"""Class labels' part of the Evaluator's bootstrap (evaluator/intervals.py): the arrays resampled and every metric
of a chunk of resamples at once, the formulas of evaluation.py over a leading resample axis.

A resample's confusion matrix is a bincount of its drawn cells; its log loss and ECE are products of the draw
counts with per-example values (the examples kept sorted by confidence bin, so each bin is one block).
For one resample the metrics equal `evaluation.overall_metrics` on the same counts:

>>> from shardflow.tasks.classification.evaluation import overall_metrics
>>> confusion = np.array([[3, 1, 0], [0, 2, 0], [0, 0, 0]])
>>> batched = classification_metrics(confusion[None], np.array([1.5]))
>>> single = overall_metrics(confusion, 1.5)
>>> all(round(float(batched[k][0]), 9) == round(single[k], 9) for k in single)
True
"""
from __future__ import annotations

import numpy as np

from ...evaluator.calibration import ECE_BINS, calibration_residuals, confidence_bins, correct_of
from ...evaluator.resampled_metrics import mean_over, ratio

Arrays = dict[str, np.ndarray]


def classification_metrics(confusion: np.ndarray, loss_sum: np.ndarray) -> dict[str, np.ndarray]:
    """[b, C, C] confusion matrices (rows true) and [b] summed log losses → [b] per metric."""
    confusion = np.asarray(confusion, dtype=np.float64)
    total = confusion.sum(axis=(1, 2))
    true_positives = np.diagonal(confusion, axis1=1, axis2=2)
    predicted, actual = confusion.sum(axis=1), confusion.sum(axis=2)
    in_use = (predicted + actual) > 0  # scikit-learn's default label set
    return {
        "accuracy": ratio(true_positives.sum(axis=1), total, empty=np.nan),
        "log_loss": ratio(np.asarray(loss_sum, np.float64), total, empty=np.nan),
        "macro_precision": mean_over(ratio(true_positives, predicted), in_use),
        "macro_recall": mean_over(ratio(true_positives, actual), in_use),
        "macro_f1": mean_over(ratio(2 * true_positives, predicted + actual), in_use),
    }


def bootstrap_arrays(data: Arrays, num_classes: int) -> Arrays:
    """The per-example arrays the resampling reads: cells and log losses; for ECE, the examples' order by
    confidence bin, the bins' bounds in it and the residuals in it."""
    prepared = {"cells": np.asarray(data["cells"]).astype(np.int64)}
    if data.get("losses") is not None:
        prepared["losses"] = np.asarray(data["losses"], np.float64)
    if data.get("confidences") is not None:
        confidence = np.asarray(data["confidences"])
        bins = confidence_bins(confidence)
        order = np.argsort(bins, kind="stable")
        residuals = calibration_residuals(confidence, correct_of(prepared["cells"], num_classes))
        prepared.update(order=order, residuals=residuals[order],
                        bounds=np.searchsorted(bins[order], np.arange(ECE_BINS + 1)))
    return prepared


def _bin_sums(weights: np.ndarray, data: Arrays) -> np.ndarray:
    """[b, ECE_BINS]: per resample, each confidence bin's draw-weighted residual sum. The examples are kept
    sorted by bin, so a bin is a contiguous block of the reordered draw counts: one product per bin."""
    ordered = weights[:, data["order"]]
    sums = np.zeros((len(weights), ECE_BINS))
    for b, (start, stop) in enumerate(zip(data["bounds"][:-1], data["bounds"][1:])):
        if stop > start:
            sums[:, b] = ordered[:, start:stop] @ data["residuals"][start:stop]
    return sums


def bootstrap_metrics(indices: np.ndarray, weights: np.ndarray, data: Arrays,
                      num_classes: int) -> dict[str, np.ndarray]:
    """Every classification metric for each resample of one chunk: [b] arrays. The confusion matrices are a
    bincount of the drawn cells; the log loss and ECE sums products of the draw counts with per-example values."""
    rows, n = indices.shape
    size = num_classes * num_classes
    drawn = data["cells"][indices] + np.arange(0, rows * size, size)[:, None]
    confusion = np.bincount(drawn.ravel(), minlength=rows * size).reshape(rows, num_classes, num_classes)
    losses = data.get("losses")
    metrics = classification_metrics(confusion, weights @ losses if losses is not None else np.full(rows, np.nan))
    if losses is None:
        del metrics["log_loss"]
    if "order" in data:  # ECE: per resample, the bins' absolute residual sums over N
        metrics["ece"] = np.abs(_bin_sums(weights, data)).sum(axis=1) / n
    return metrics

"""The overall metrics of many resamples at once: the formulas of tasks/classification/evaluation.py and
tasks/segmentation/evaluation.py over a leading resample axis, so the bootstrap needs no Python loop over resamples.

For one resample they give what `classification.overall_metrics` and `segmentation.overall_metrics`
give for the same counts (same label set for the macro averages, same undefined classes):

>>> from shardflow.tasks.classification.evaluation import overall_metrics
>>> confusion = np.array([[3, 1, 0], [0, 2, 0], [0, 0, 0]])
>>> batched = classification_metrics(confusion[None], np.array([1.5]))
>>> single = overall_metrics(confusion, 1.5)
>>> all(round(float(batched[k][0]), 9) == round(single[k], 9) for k in single)
True
>>> seg = segmentation_metrics(np.array([[5.0, 8.0, 0.0]]), np.array([[2.0, 1.0, 0.0]]), np.array([[1.0, 2.0, 0.0]]))
>>> [round(float(seg[k][0]), 4) for k in ("pixel_accuracy", "mean_iou", "mean_dice")]
[0.8125, 0.6761, 0.8057]
"""
from __future__ import annotations

import numpy as np


def _ratio(numerator: np.ndarray, denominator: np.ndarray, empty: float = 0.0) -> np.ndarray:
    out = np.full(np.broadcast(numerator, denominator).shape, empty, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def _mean_over(values: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """Per row, the mean of `values` where `chosen`; NaN for a row with nothing chosen."""
    count = chosen.sum(axis=1)
    return _ratio(np.where(chosen, values, 0.0).sum(axis=1), count, empty=np.nan)


def classification_metrics(confusion: np.ndarray, loss_sum: np.ndarray) -> dict[str, np.ndarray]:
    """[b, C, C] confusion matrices (rows true) and [b] summed log losses → [b] per metric."""
    confusion = np.asarray(confusion, dtype=np.float64)
    total = confusion.sum(axis=(1, 2))
    true_positives = np.diagonal(confusion, axis1=1, axis2=2)
    predicted, actual = confusion.sum(axis=1), confusion.sum(axis=2)
    in_use = (predicted + actual) > 0  # scikit-learn's default label set
    return {
        "accuracy": _ratio(true_positives.sum(axis=1), total, empty=np.nan),
        "log_loss": _ratio(np.asarray(loss_sum, np.float64), total, empty=np.nan),
        "macro_precision": _mean_over(_ratio(true_positives, predicted), in_use),
        "macro_recall": _mean_over(_ratio(true_positives, actual), in_use),
        "macro_f1": _mean_over(_ratio(2 * true_positives, predicted + actual), in_use),
    }


def segmentation_metrics(true_positives: np.ndarray, false_positives: np.ndarray,
                         false_negatives: np.ndarray) -> dict[str, np.ndarray]:
    """[b, C] pixel counts summed over a resample's masks → [b] per metric (means over defined classes)."""
    union = true_positives + false_positives + false_negatives
    defined = union > 0
    iou = _ratio(true_positives, union)
    dice = _ratio(2 * true_positives, 2 * true_positives + false_positives + false_negatives)
    pixels = (true_positives + false_negatives).sum(axis=1)  # every pixel has one true class
    return {
        "pixel_accuracy": _ratio(true_positives.sum(axis=1), pixels, empty=np.nan),
        "mean_iou": _mean_over(iou, defined),
        "mean_dice": _mean_over(dice, defined),
    }

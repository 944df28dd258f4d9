"""Masks' part of the Evaluator's bootstrap (evaluator/intervals.py): a mask is one example (images are
resampled, never pixels), its 3C true/false positive/negative pixel counts summed per resample by one product
of the draw counts, and every metric of evaluation.py over a leading resample axis.

>>> seg = segmentation_metrics(np.array([[5.0, 8.0, 0.0]]), np.array([[2.0, 1.0, 0.0]]), np.array([[1.0, 2.0, 0.0]]))
>>> [round(float(seg[k][0]), 4) for k in ("pixel_accuracy", "mean_iou", "mean_dice")]
[0.8125, 0.6761, 0.8057]
"""
from __future__ import annotations

import numpy as np

from ...evaluator.resampled_metrics import mean_over, ratio

Arrays = dict[str, np.ndarray]


def segmentation_metrics(true_positives: np.ndarray, false_positives: np.ndarray,
                         false_negatives: np.ndarray) -> dict[str, np.ndarray]:
    """[b, C] pixel counts summed over a resample's masks → [b] per metric (means over defined classes)."""
    union = true_positives + false_positives + false_negatives
    defined = union > 0
    iou = ratio(true_positives, union)
    dice = ratio(2 * true_positives, 2 * true_positives + false_positives + false_negatives)
    pixels = (true_positives + false_negatives).sum(axis=1)  # every pixel has one true class
    return {
        "pixel_accuracy": ratio(true_positives.sum(axis=1), pixels, empty=np.nan),
        "mean_iou": mean_over(iou, defined),
        "mean_dice": mean_over(dice, defined),
    }


def bootstrap_arrays(data: Arrays, num_classes: int) -> Arrays:
    """The [N, 3C] per-mask counts (the cells as the scorer keeps them) beside the cells."""
    cells = np.asarray(data["cells"])
    return {"cells": cells, "counts": cells.reshape(len(cells), 3 * num_classes).astype(np.float64)}


def bootstrap_metrics(indices: np.ndarray, weights: np.ndarray, data: Arrays,
                      num_classes: int) -> dict[str, np.ndarray]:
    summed = (weights @ data["counts"]).reshape(len(indices), 3, num_classes)
    return segmentation_metrics(summed[:, 0], summed[:, 1], summed[:, 2])

"""Segmentation metrics from a pixel confusion matrix accumulated over a split: pure numpy.

Per class c (rows = true, columns = predicted): IoU = TP / (TP + FP + FN), Dice = 2TP / (2TP + FP + FN).
A class that is neither in any mask nor in any prediction has no IoU or Dice (None in the report,
NaN in arrays); the means run over the classes that have one. Pixel accuracy = trace / all pixels.
Summing counts first and dividing once gives the split's IoU (not a mean of per-image IoUs), which
is what the usual mean-IoU definitions (Pascal VOC, Keras MeanIoU) report.

>>> confusion = np.array([[5, 1], [2, 8]])       # background: TP 5, FP 2, FN 1; object: TP 8, FP 1, FN 2
>>> report = segmentation_report(confusion, ["background", "object"])
>>> report["per_class"]["object"]["iou"], report["per_class"]["object"]["dice"]
(0.7272727272727273, 0.8421052631578947)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

OVERALL_METRICS = ("pixel_accuracy", "mean_iou", "mean_dice")


def iou_and_dice(confusion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-class IoU and Dice; NaN for a class absent from both masks and predictions."""
    confusion = np.asarray(confusion, dtype=np.int64)
    true_positives = np.diag(confusion).astype(np.float64)
    predicted = confusion.sum(axis=0)
    actual = confusion.sum(axis=1)
    union = predicted + actual - true_positives  # TP + FP + FN
    iou = np.full(true_positives.shape, np.nan)
    dice = np.full(true_positives.shape, np.nan)
    np.divide(true_positives, union, out=iou, where=union > 0)
    np.divide(2 * true_positives, predicted + actual, out=dice, where=union > 0)
    return iou, dice


def _mean_defined(values: np.ndarray) -> float:
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if defined.size else float("nan")


def overall_metrics(confusion: np.ndarray) -> dict[str, float]:
    confusion = np.asarray(confusion, dtype=np.int64)
    total = int(confusion.sum())
    iou, dice = iou_and_dice(confusion)
    return {
        "pixel_accuracy": float(np.trace(confusion)) / total if total else float("nan"),
        "mean_iou": _mean_defined(iou),
        "mean_dice": _mean_defined(dice),
    }


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def segmentation_report(confusion: np.ndarray, class_names: list[str], num_examples: int | None = None
                        ) -> dict[str, Any]:
    """{"num_examples", "num_pixels", "overall", "per_class": {name: {iou, dice, pixels}}, "confusion_matrix"}."""
    confusion = np.asarray(confusion, dtype=np.int64)
    iou, dice = iou_and_dice(confusion)
    actual = confusion.sum(axis=1)
    per_class = {name: {"iou": _json_number(iou[i]), "dice": _json_number(dice[i]), "pixels": int(actual[i])}
                 for i, name in enumerate(class_names)}
    return {"num_examples": num_examples, "num_pixels": int(confusion.sum()), "overall": overall_metrics(confusion),
            "per_class": per_class, "confusion_matrix": confusion.tolist()}


def pixel_counts(labels: np.ndarray, predicted: np.ndarray, num_classes: int) -> np.ndarray:
    """[N, C*C] per-example pixel counts of (true, predicted) pairs, in one bincount for the batch.

    >>> pixel_counts(np.array([[[0, 1]]]), np.array([[[0, 0]]]), 2).tolist()
    [[1, 0, 1, 0]]
    """
    size = num_classes * num_classes
    count = len(labels)
    cells = (labels * num_classes + predicted).reshape(count, -1)
    cells += np.arange(count, dtype=np.int64)[:, None] * size  # each example its own block of cells
    return np.bincount(cells.ravel(), minlength=count * size).reshape(count, size)

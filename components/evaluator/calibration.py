"""Calibration of a classifier: expected calibration error (ECE) and the reliability table behind its diagram.

Each example has a confidence (the probability the model gave its predicted class) and is right or
wrong. Confidences fall into 15 equal-width bins, (0, 1/15], (1/15, 2/15], ... (14/15, 1] (Guo et
al., 2017); a bin's gap is |accuracy − mean confidence| of its examples, and ECE is the gaps'
average weighted by the bins' shares of the examples:

    ECE = Σ_bins |Σ_{i in bin} (correct_i − confidence_i)| / N

written as a sum of per-example residuals so the bootstrap (intervals.py) recomputes it on every
resample with one weighted bincount.

>>> confidence = np.array([0.95, 0.95, 0.95, 0.95, 0.55, 0.55])
>>> correct = np.array([True, True, True, False, True, False])
>>> round(expected_calibration_error(confidence, correct), 6)   # (4 × |0.75 − 0.95| + 2 × |0.5 − 0.55|) / 6
0.15
>>> confidence_bins(np.array([0.0, 1 / 15, 0.07, 0.5, 1.0])).tolist()
[0, 0, 1, 7, 14]
>>> table = reliability_table(confidence, correct)
>>> [(row["bin"], row["examples"], row["accuracy"]) for row in table if row["examples"]]
[(8, 2, 0.5), (14, 4, 0.75)]
"""
from __future__ import annotations

from typing import Any

import numpy as np

ECE_BINS = 15


def confidence_bins(confidence: np.ndarray, bins: int = ECE_BINS) -> np.ndarray:
    """Each confidence's bin, 0..bins-1: bin b holds (b/bins, (b+1)/bins]; a confidence of 0 goes to bin 0."""
    index = np.ceil(np.asarray(confidence, np.float64) * bins).astype(np.int64) - 1
    return np.clip(index, 0, bins - 1)


def calibration_residuals(confidence: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """correct − confidence per example (float64): ECE is the bins' absolute sums of these, over N."""
    return np.asarray(correct, np.float64) - np.asarray(confidence, np.float64)


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS) -> float:
    """ECE over `bins` equal-width confidence bins; NaN without examples."""
    if len(confidence) == 0:
        return float("nan")
    sums = np.bincount(confidence_bins(confidence, bins), weights=calibration_residuals(confidence, correct),
                       minlength=bins)
    return float(np.abs(sums).sum() / len(confidence))


def reliability_table(confidence: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS) -> list[dict[str, Any]]:
    """Per bin: its bounds, example count, mean confidence and accuracy (None for an empty bin)."""
    index = confidence_bins(confidence, bins)
    counts = np.bincount(index, minlength=bins)
    confidence_sums = np.bincount(index, weights=np.asarray(confidence, np.float64), minlength=bins)
    correct_sums = np.bincount(index, weights=np.asarray(correct, np.float64), minlength=bins)
    rows = []
    for b in range(bins):
        n = int(counts[b])
        rows.append({"bin": b, "low": b / bins, "high": (b + 1) / bins, "examples": n,
                     "confidence": float(confidence_sums[b] / n) if n else None,
                     "accuracy": float(correct_sums[b] / n) if n else None})
    return rows


def correct_of(cells: np.ndarray, num_classes: int) -> np.ndarray:
    """Per example, whether the prediction is the label, from its cell `label * C + prediction`."""
    return cells // num_classes == cells % num_classes

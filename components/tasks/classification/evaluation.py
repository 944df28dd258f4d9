"""Classification metrics from an accumulated confusion matrix and a summed log loss: pure numpy.

Rows of the confusion matrix are true classes, columns predicted classes (scikit-learn's layout).
Precision, recall and F1 of a class without predictions or without examples are 0 (scikit-learn's
`zero_division=0`); the macro averages run over the classes that occur as a label or a prediction
(scikit-learn's default label set), so an OOV class nobody uses does not drag them down.

>>> confusion = np.array([[3, 1], [0, 2]])
>>> report = classification_report(confusion, loss_sum=1.5, class_names=["a", "b"])
>>> round(report["overall"]["accuracy"], 4), report["overall"]["log_loss"], report["per_class"]["b"]["precision"]
(0.8333, 0.25, 0.6666666666666666)
"""
from __future__ import annotations

from typing import Any

import numpy as np

OVERALL_METRICS = ("accuracy", "log_loss", "macro_precision", "macro_recall", "macro_f1")
LOWER_IS_BETTER = frozenset({"log_loss"})
_EPSILON = float(np.finfo(np.float32).eps)  # log loss clips probabilities to [eps, 1 - eps] like scikit-learn


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0."""
    out = np.zeros(numerator.shape, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def per_class_scores(confusion: np.ndarray) -> dict[str, np.ndarray]:
    """Per class: precision, recall, F1 (= 2TP / (2TP + FP + FN)) and support (true examples)."""
    confusion = np.asarray(confusion, dtype=np.int64)
    true_positives = np.diag(confusion).astype(np.float64)
    predicted = confusion.sum(axis=0)
    actual = confusion.sum(axis=1)
    return {
        "precision": _ratio(true_positives, predicted),
        "recall": _ratio(true_positives, actual),
        "f1": _ratio(2 * true_positives, predicted + actual),
        "support": actual,
    }


def overall_metrics(confusion: np.ndarray, loss_sum: float) -> dict[str, float]:
    """accuracy, log_loss (mean over examples) and the macro averages over classes in use."""
    confusion = np.asarray(confusion, dtype=np.int64)
    total = int(confusion.sum())
    scores = per_class_scores(confusion)
    in_use = (confusion.sum(axis=0) + confusion.sum(axis=1)) > 0
    nan = float("nan")
    return {
        "accuracy": float(np.trace(confusion)) / total if total else nan,
        "log_loss": loss_sum / total if total else nan,
        "macro_precision": float(scores["precision"][in_use].mean()) if in_use.any() else nan,
        "macro_recall": float(scores["recall"][in_use].mean()) if in_use.any() else nan,
        "macro_f1": float(scores["f1"][in_use].mean()) if in_use.any() else nan,
    }


def classification_report(confusion: np.ndarray, loss_sum: float, class_names: list[str]) -> dict[str, Any]:
    """{"num_examples", "overall", "per_class": {name: {precision, recall, f1, support}}, "confusion_matrix"}."""
    confusion = np.asarray(confusion, dtype=np.int64)
    scores = per_class_scores(confusion)
    per_class = {
        name: {"precision": float(scores["precision"][i]), "recall": float(scores["recall"][i]),
               "f1": float(scores["f1"][i]), "support": int(scores["support"][i])}
        for i, name in enumerate(class_names)
    }
    return {"num_examples": int(confusion.sum()), "overall": overall_metrics(confusion, loss_sum),
            "per_class": per_class, "confusion_matrix": confusion.tolist()}


def batch_counts(labels: np.ndarray, predicted: np.ndarray, probabilities: np.ndarray, label_classes: int
                 ) -> dict[str, np.ndarray]:
    """One scored batch → per example its confusion cell (true * classes + predicted), log loss, confidence (the
    probability of the predicted class: what calibration compares with being right, 4 bytes an example), and the
    probabilities. `label_classes`: the served classes, plus the OOV id of a vocabulary, which the served model
    (it answers the trained classes only) gives probability 0.

    >>> out = batch_counts(np.array([0, 1]), np.array([0, 0]), np.array([[0.75, 0.25], [0.5, 0.5]]), 2)
    >>> out["cells"].tolist(), out["losses"].round(4).tolist(), out["confidences"].tolist()
    ([0, 2], [0.2877, 0.6931], [0.75, 0.5])
    """
    count = len(labels)
    truth = np.pad(probabilities, [(0, 0), (0, label_classes - probabilities.shape[-1])])[np.arange(count), labels]
    # scikit-learn's log loss: probabilities clipped to [eps, 1 - eps] of float32
    losses = -np.log(np.clip(truth, _EPSILON, 1.0 - _EPSILON).astype(np.float64))
    confidences = probabilities[np.arange(count), predicted].astype(np.float32)
    return {"cells": labels * label_classes + predicted, "losses": losses, "confidences": confidences,
            "probabilities": probabilities}

"""Reference metric computations the Evaluator's results are checked against (scikit-learn, plain masks)."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, log_loss, precision_recall_fscore_support


def assert_equals_sklearn(group: dict, names: list[str], truth: np.ndarray, probabilities: np.ndarray) -> None:
    """A classification metrics group equals scikit-learn on the same labels and probabilities."""
    classes = probabilities.shape[1]
    predicted = probabilities.argmax(axis=1)
    labels = list(range(classes))
    assert group["num_examples"] == len(truth)
    assert group["confusion_matrix"] == confusion_matrix(truth, predicted, labels=labels).tolist()
    overall = group["overall"]
    assert overall["accuracy"] == pytest.approx(accuracy_score(truth, predicted), abs=1e-12)
    assert overall["log_loss"] == pytest.approx(log_loss(truth, probabilities, labels=labels), rel=1e-5)
    macro = precision_recall_fscore_support(truth, predicted, average="macro", zero_division=0)
    assert [overall["macro_precision"], overall["macro_recall"], overall["macro_f1"]] == pytest.approx(macro[:3])
    precision, recall, f1, support = precision_recall_fscore_support(truth, predicted, labels=labels, zero_division=0)
    assert list(group["per_class"]) == names  # in class id order
    per_class = [group["per_class"][name] for name in names]
    assert [c["precision"] for c in per_class] == pytest.approx(precision.tolist())
    assert [c["recall"] for c in per_class] == pytest.approx(recall.tolist())
    assert [c["f1"] for c in per_class] == pytest.approx(f1.tolist())
    assert [c["support"] for c in per_class] == support.tolist()


def expected_segmentation(classes: list[str], truth: np.ndarray, predicted: np.ndarray) -> dict[str, object]:
    """IoU and Dice per class straight from boolean masks, independently of the confusion-matrix code."""
    out: dict[str, object] = {}
    for k, name in enumerate(classes):
        t, p = truth == k, predicted == k
        union = (t | p).sum()
        out[name] = None if union == 0 else ((t & p).sum() / union, 2 * (t & p).sum() / (t.sum() + p.sum()))
    return out


def assert_segmentation(group: dict, classes: list[str], truth: np.ndarray, predicted: np.ndarray) -> None:
    """A segmentation metrics group equals IoU/Dice computed from the masks directly."""
    assert group["confusion_matrix"] == confusion_matrix(truth.ravel(), predicted.ravel(), labels=range(len(classes))).tolist()
    expected = expected_segmentation(classes, truth, predicted)
    for k, (name, value) in enumerate(expected.items()):
        got = group["per_class"][name]
        assert (got["iou"], got["dice"]) == ((None, None) if value is None else pytest.approx(value))
        assert got["pixels"] == (truth == k).sum()
    defined = [v for v in expected.values() if v is not None]
    assert group["overall"]["pixel_accuracy"] == pytest.approx((truth == predicted).mean())
    assert group["overall"]["mean_iou"] == pytest.approx(np.mean([v[0] for v in defined]))
    assert group["overall"]["mean_dice"] == pytest.approx(np.mean([v[1] for v in defined]))

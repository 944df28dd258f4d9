"""`metrics.json`: overall, per-class and per-slice metrics of the model and the baseline, and their deltas.

    report = model_report(task.group_report, scores, class_names)   # a confusion task's report of one group
    report["overall"]["accuracy"], report["slices"]["site"]["a"]["overall"]["accuracy"]
    report["overall"]["ece"], report["calibration"]["bins"]     # classifiers: calibration, overall only
    deltas(report, baseline_report)["overall"]["accuracy"]       # candidate − baseline

Undefined values (the IoU of a class nobody uses) are NaN in memory and null in the JSON.

The OOV class of a string label (ids past the vocabulary) is left out of the per-class tables
(overall and per slice) when no example has it and the model never predicts it: a row of zeros
nobody asked about. It stays in `class_names` and `confusion_matrix`, whose positions are class ids.

>>> unused_oov_classes(["a", "b"], np.array([[3, 1, 0], [0, 2, 0], [0, 0, 0]]))
[2]
>>> unused_oov_classes(["a", "b"], np.array([[3, 0, 1], [0, 2, 0], [0, 0, 0]]))   # predicted: kept
[]
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .calibration import correct_of, expected_calibration_error, reliability_table
from .slicing import Scores, Tally

# A task's metrics of one group of examples (the whole split, or one slice value) from its tally.
GroupReport = Callable[[Tally, list[str]], dict[str, Any]]


def _slice_order(key: str) -> tuple[int, float, str]:
    """Numbers in numeric order first, then strings in text order."""
    try:
        return 0, float(key), key
    except ValueError:
        return 1, 0.0, key


def unused_oov_classes(label_vocabulary: list[str] | None, confusion: np.ndarray) -> list[int]:
    """Class ids past the vocabulary (OOV) that are neither a true class nor a prediction of any example."""
    if label_vocabulary is None:
        return []
    confusion = np.asarray(confusion)
    used = confusion.sum(axis=0) + confusion.sum(axis=1)
    return [i for i in range(len(label_vocabulary), len(used)) if used[i] == 0]


def _without(report: dict[str, Any], names: list[str]) -> dict[str, Any]:
    report["per_class"] = {name: row for name, row in report["per_class"].items() if name not in names}
    return report


def model_report(group_report: GroupReport, scores: Scores, class_names: list[str],
                 label_vocabulary: list[str] | None = None) -> dict[str, Any]:
    """The report of one model, each group's by the task's `group_report`; `hidden_classes` names the unused OOV
    classes left out of the tables; calibration where the scores have confidences (class labels)."""
    hidden = [class_names[i] for i in unused_oov_classes(label_vocabulary, scores.overall.confusion)]
    report = _without(group_report(scores.overall, class_names), hidden)
    report["hidden_classes"] = hidden
    confidences = scores.example_confidences()
    if confidences is not None:  # calibration: overall only
        correct = correct_of(scores.example_cells(), scores.num_classes)
        report["overall"]["ece"] = expected_calibration_error(confidences, correct)
        report["calibration"] = {"ece": report["overall"]["ece"], "bins": reliability_table(confidences, correct)}
    report["slices"] = {
        column: {key: _without(group_report(tallies[key], class_names), hidden)
                 for key in sorted(tallies, key=_slice_order)}
        for column, tallies in scores.slices.items()
    }
    return report


def _difference(candidate: dict[str, float], baseline: dict[str, float]) -> dict[str, float]:
    return {name: candidate[name] - baseline[name] for name in candidate if name in baseline}


def deltas(candidate: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """candidate − baseline for every overall metric, overall and per slice."""
    return {
        "overall": _difference(candidate["overall"], baseline["overall"]),
        "slices": {column: {key: _difference(group["overall"], baseline["slices"][column][key]["overall"])
                            for key, group in groups.items()}
                   for column, groups in candidate["slices"].items()},
    }


def json_safe(value: Any) -> Any:
    """NaN → None, recursively (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value

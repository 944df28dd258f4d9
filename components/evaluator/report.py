"""`metrics.json`: overall, per-class and per-slice metrics of the model and the baseline, and their deltas.

    report = model_report("classification", scores, class_names)
    report["overall"]["accuracy"], report["slices"]["site"]["a"]["overall"]["accuracy"]
    deltas(report, baseline_report)["overall"]["accuracy"]       # candidate − baseline

Undefined values (the IoU of a class nobody uses) are NaN in memory and null in the JSON.
"""
from __future__ import annotations

import math
from typing import Any

from .classification import classification_report
from .segmentation import segmentation_report
from .slicing import Scores, Tally


def group_report(task: str, tally: Tally, class_names: list[str]) -> dict[str, Any]:
    """The metrics of one group of examples (the whole split, or one slice value)."""
    if task == "classification":
        return classification_report(tally.confusion, tally.loss_sum, class_names)
    return segmentation_report(tally.confusion, class_names, tally.examples)


def _slice_order(key: str) -> tuple[int, float, str]:
    """Numbers in numeric order first, then strings in text order."""
    try:
        return 0, float(key), key
    except ValueError:
        return 1, 0.0, key


def model_report(task: str, scores: Scores, class_names: list[str]) -> dict[str, Any]:
    report = group_report(task, scores.overall, class_names)
    report["slices"] = {
        column: {key: group_report(task, tallies[key], class_names) for key in sorted(tallies, key=_slice_order)}
        for column, tallies in scores.slices.items()
    }
    return report


def _difference(candidate: dict[str, float], baseline: dict[str, float]) -> dict[str, float]:
    return {name: candidate[name] - baseline[name] for name in candidate}


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

"""A detector's part of metrics.json and its plots, from the accumulators `score_detections` filled.

    sections, plots = detection_outcome(config, plan, scores)
    sections["overall"]["ap50"], sections["ap_per_class"]["disc"], sections["intervals"]["delta"]["ap"]
    plots[DETECTIONS_PLOT], plots[PRECISION_RECALL_PLOT]                     # PNG bytes

The layout follows the other tasks': `num_examples`, `overall` (detection_report's names: ap, ap50, ap75, ap_small,
ap_medium, ap_large, ar1, ar10, ar100, ar_small, ar_medium, ar_large), `ap_per_class`, `slices` (each value's
images scored alone: `summarize(images=...)`), `baseline` and `deltas` (None where either side is undefined),
`intervals` (percentile bootstrap over images, paired with the baseline; per slice too). COCO's -1 is None.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..core.pixel_codec import decode_pixels
from .config import DETECTIONS_PLOT, PRECISION_RECALL_PLOT, EvaluatorConfig
from .detection_plots import detections_png, precision_recall_png
from .detection_report import detection_intervals, detection_metrics_report
from .detection_scorer import DetectionScores
from .scorer import ScoringPlan, image_feature

INTERVAL_ROLES = ("candidate", "baseline", "delta")


def _report(scores: DetectionScores, role: str, class_names: list[str], images: np.ndarray | None = None
            ) -> tuple[dict[str, Any], Any]:
    accumulator = scores.accumulators[role]
    summary = accumulator.summarize(images=images)
    report = detection_metrics_report(accumulator, class_names, summary)
    count = scores.examples if images is None else len(images)
    return {"num_examples": count, **report}, summary


def _slice_images(scores: DetectionScores) -> dict[str, dict[str, np.ndarray]]:
    """column → value → the image ids of that value."""
    return {column: {key: np.flatnonzero(ids == index) for index, key in enumerate(keys)}
            for column, (keys, ids) in scores.slices.items()}


def model_sections(scores: DetectionScores, role: str, class_names: list[str]) -> tuple[dict[str, Any], Any]:
    """One model's report (overall, per class, per slice) and its whole-split `DetectionMetrics`."""
    report, summary = _report(scores, role, class_names)
    report["slices"] = {column: {key: _report(scores, role, class_names, ids)[0] for key, ids in values.items()}
                        for column, values in _slice_images(scores).items()}
    return report, summary


def _difference(candidate: dict[str, float | None], baseline: dict[str, float | None]) -> dict[str, float | None]:
    return {name: None if value is None or baseline.get(name) is None else value - baseline[name]
            for name, value in candidate.items()}


def detection_deltas(candidate: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """candidate − baseline of every overall metric, overall and per slice; None where either is undefined."""
    return {"overall": _difference(candidate["overall"], baseline["overall"]),
            "slices": {column: {key: _difference(group["overall"], baseline["slices"][column][key]["overall"])
                                for key, group in groups.items()}
                       for column, groups in candidate["slices"].items()}}


def intervals_of(config: EvaluatorConfig, scores: DetectionScores) -> dict[str, Any] | None:
    """The 95% bootstrap intervals over images (paired with the baseline), overall and per slice value."""
    if config.bootstrap_resamples == 0:
        return None
    started = time.perf_counter()
    candidate, baseline = scores.accumulators["candidate"], scores.accumulators.get("baseline")
    draws = {"resamples": config.bootstrap_resamples, "seed": config.bootstrap_seed, "baseline": baseline}
    found = detection_intervals(candidate, np.arange(scores.examples), **draws)
    found["slices"] = {column: {key: {role: part[role] for role in INTERVAL_ROLES}
                                for key, ids in values.items()
                                for part in [detection_intervals(candidate, ids, **draws)]}
                       for column, values in _slice_images(scores).items()}
    return {**found, "seconds": round(time.perf_counter() - started, 3)}


def detection_plots(plan: ScoringPlan, scores: DetectionScores, summary: Any, class_names: list[str]
                    ) -> dict[str, bytes]:
    """The first images with their true (solid) and predicted (dashed) boxes; precision-recall per class."""
    feature = image_feature(plan.manifest, plan.examples)
    sample = scores.sample
    images = [decode_pixels(image, feature.encoding, feature.dtype, tuple(feature.shape)) for image in sample.images]
    grid = detections_png(images, sample.true_boxes, sample.true_classes, sample.det_boxes, sample.det_scores,
                          sample.det_classes, class_names)
    return {DETECTIONS_PLOT: grid, PRECISION_RECALL_PLOT: precision_recall_png(summary, class_names)}


def detection_outcome(config: EvaluatorConfig, plan: ScoringPlan, scores: DetectionScores
                      ) -> tuple[dict[str, Any], dict[str, bytes]]:
    """metrics.json's task sections (report, baseline, deltas, intervals) and the plots' PNG bytes."""
    class_names = list(plan.info.class_names)
    report, summary = model_sections(scores, "candidate", class_names)
    baseline = model_sections(scores, "baseline", class_names)[0] if "baseline" in scores.accumulators else None
    sections = {**report, "num_boxes": scores.boxes, "baseline": baseline,
                "deltas": detection_deltas(report, baseline) if baseline else None,
                "intervals": intervals_of(config, scores),
                "label_issues": {"count": None, "note": "label issues are found for classification and "
                                                        "segmentation, not for boxes"},
                "records_bytes": {role: acc.nbytes for role, acc in scores.accumulators.items()}}
    return sections, detection_plots(plan, scores, summary, class_names)

"""A detector's part of metrics.json and its plots, from the accumulators `score_detections` filled.

    evaluation = evaluate_detection(run)            # base.TaskEvaluation: what `DetectionTask.evaluate` returns
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

from ...core.pixel_codec import decode_pixels
from ...evaluator.outputs import DETECTIONS_PLOT, PRECISION_RECALL_PLOT
from ...evaluator.scorer import ScoringPlan
from ..base import EvaluationRun, TaskEvaluation
from .plots import detections_png, precision_recall_png
from .report import detection_intervals, detection_metrics_report
from .scoring import DetectionScores, image_feature, score_detections

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


def intervals_of(config: Any, scores: DetectionScores) -> dict[str, Any] | None:
    """The 95% bootstrap intervals over images (paired with the baseline), overall and per slice value.
    `config`: the EvaluatorConfig (its bootstrap_resamples, bootstrap_seed)."""
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


def detection_outcome(config: Any, plan: ScoringPlan, scores: DetectionScores
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


def served_detections(out: dict[str, Any]) -> Any:
    """A detector's canary predictions: [N, M, 6] (outputs.CANARY_DETECTION_COLUMNS) of its served outputs."""
    import tensorflow as tf

    columns = [out["detection_scores"][..., None], out["detection_classes"][..., None]]
    return tf.concat([tf.cast(out["detection_boxes"], tf.float32)] + [tf.cast(c, tf.float32) for c in columns], -1)


def evaluate_detection(run: EvaluationRun) -> TaskEvaluation:
    """COCO metrics from the accumulators, overall, per class and per slice, with the baseline's and the plots."""
    result = score_detections(run.plan, run.models, run.batch_size, run.echo)
    sections, plots = detection_outcome(run.config, run.plan, result)
    intervals, overall = sections["intervals"], sections["overall"]
    shown = ", ".join(f"{name} {overall[name]:.3f}" for name in ("ap", "ap50", "ar100") if overall[name] is not None)
    return TaskEvaluation(
        {"class_names": list(run.plan.info.class_names), **sections}, plots, result.examples, result.seconds,
        timing={"intervals_seconds": intervals["seconds"] if intervals else None},
        summary=f"{result.examples:,} images, {result.boxes:,} boxes in {result.seconds:.1f} s: "
                f"{shown or 'no true boxes'}")

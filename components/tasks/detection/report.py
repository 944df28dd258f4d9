"""Object detection's report: COCO's 12 numbers and per-class AP by the names thresholds use, and their
95% bootstrap intervals over images, paired for a candidate against a baseline.

    report = detection_metrics_report(accumulator, class_names)
    report["overall"]["ap50"], report["ap_per_class"]["cat"]        # a float, or None when undefined
    intervals = paired_detection_intervals(candidate, baseline, image_ids, resamples=1000, seed=0)
    intervals["candidate"]["ap"], intervals["delta"]["ap"]          # [low, high] each

**The None rule.** pycocotools reports -1 for a metric with no ground-truth box in its class or area
range among the images scored (AP_small of a set without small objects, the AP of a class no image
has). That is not a score: it is None here (null in metrics.json); `gate_values` hands it to the gate
as NaN, on which every threshold and regression check fails; resamples where it is undefined are left
out of its interval ([None, None] if all are). No other value is touched: a real 0 stays 0.

**The bootstrap.** A resample draws N of the N image ids with replacement (`intervals.resample_indices`:
the classification bootstrap's seeded draws, in chunks) and each chunk's draw counts are scored at once by
`DetectionAccumulator.resampled_stats`: the same arithmetic as `summarize(images=...)` (core/
detection_curves.py), weights instead of copies. Its memory is bounded in bytes whatever the number of
detections; its time grows with resamples x detections (1,000 resamples of 500 images with ~3 boxes each:
~0.5 s). `image_ids` lists the images scored, those without any box included: the accumulator keeps no
per-image state.

>>> from shardflow.core.detection_metrics import DetectionAccumulator
>>> acc = DetectionAccumulator(num_classes=2)
>>> box = np.array([[.25, .25, .75, .75]])
>>> acc.add_image(1, 100, 200, box, np.array([0]), box, np.array([.9]), np.array([0]))
>>> report = detection_metrics_report(acc, ["cat", "dog"])
>>> round(report["overall"]["ap"], 6), report["overall"]["ap_small"], report["ap_per_class"]["dog"]
(1.0, None, None)
>>> paired_detection_intervals(acc, acc, [1], resamples=50)["delta"]["ap"]
[0.0, 0.0]
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...core.detection_metrics import METRIC_NAMES, DetectionAccumulator, DetectionMetrics

from ...evaluator.intervals import (CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED, draw_counts, percentile_interval,
                                    resample_indices)

METHOD = "percentile bootstrap over images, paired for the difference"


def defined(value: float) -> float | None:
    """A COCO value, or None where pycocotools has -1 (no ground truth counted) or NaN."""
    value = float(value)
    return None if value < 0 or np.isnan(value) else value


def detection_metrics_report(accumulator: DetectionAccumulator, class_names: Sequence[str],
                             metrics: DetectionMetrics | None = None) -> dict[str, Any]:
    """{"overall": {ap, ap50, ..., ar_large}, "ap_per_class": {name: AP@[.5:.95]}}, undefined values None.
    `metrics`: the accumulator's `summarize()` when the caller has it already."""
    if len(class_names) != accumulator.num_classes:
        raise ValueError(f"{len(class_names)} class names for {accumulator.num_classes} classes")
    metrics = metrics if metrics is not None else accumulator.summarize()
    return {"overall": {name: defined(v) for name, v in zip(METRIC_NAMES, metrics.stats)},
            "ap_per_class": {name: defined(v) for name, v in zip(class_names, metrics.per_class_ap)}}


def gate_values(overall: dict[str, float | None]) -> dict[str, float]:
    """The report's overall metrics for `blessing.bless`, whose checks take NaN (not None) as undefined."""
    return {name: float("nan") if value is None else value for name, value in overall.items()}


def detection_intervals(accumulator: DetectionAccumulator, image_ids: Sequence[int] | np.ndarray,
                        resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE,
                        baseline: DetectionAccumulator | None = None) -> dict[str, Any]:
    """metrics.json's `intervals`: {"confidence", "resamples", "seed", "method", "candidate", "baseline",
    "delta"}, [low, high] per overall metric; with a baseline scored on the same images, the same draws
    score it (paired), and "delta" is candidate − baseline's interval."""
    if len(image_ids) == 0:
        raise ValueError("no image ids: there is nothing to resample")
    models = [accumulator] + ([baseline] if baseline is not None else [])
    ids = np.asarray(image_ids, np.int64).reshape(-1)
    if len(np.unique(ids)) != len(ids):
        raise ValueError("image_ids must be unique")
    n, parts = len(ids), [[] for _ in models]
    for indices in resample_indices(n, resamples, seed):
        counts = draw_counts(indices, n)  # shared by both models: the pairing
        for model, into in zip(models, parts):
            into.append(model.resampled_stats(ids, counts))
    values = [np.concatenate(part) if part else np.zeros((0, len(METRIC_NAMES))) for part in parts]

    def spans(stats: np.ndarray) -> dict[str, list[float | None]]:
        return {name: percentile_interval(stats[:, i], confidence) for i, name in enumerate(METRIC_NAMES)}

    out: dict[str, Any] = {"confidence": confidence, "resamples": resamples, "seed": seed, "method": METHOD,
                           "candidate": spans(values[0]), "baseline": None, "delta": None}
    if baseline is not None:
        out["baseline"], out["delta"] = spans(values[1]), spans(values[0] - values[1])
    return out


def paired_detection_intervals(candidate: DetectionAccumulator, baseline: DetectionAccumulator,
                               image_ids: Sequence[int] | np.ndarray, resamples: int = DEFAULT_RESAMPLES,
                               seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """`detection_intervals` of a candidate and a baseline scored on the same images: a model against
    itself gets exactly [0, 0] for every defined metric."""
    return detection_intervals(candidate, image_ids, resamples, seed, confidence, baseline=baseline)

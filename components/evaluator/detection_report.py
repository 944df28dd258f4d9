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
the classification bootstrap's seeded draws) and is scored as `DetectionAccumulator.summarize(images=...)`
scores it, without calling it: that took 6.5-8 s for 1,000 resamples of 500 images with ~3 boxes each,
this 0.8 s (1.6 s paired), growing with resamples x detections. Every resample of a chunk is done at
once from the accumulator's records, per class and (area, IoU) column:
a detection drawn w times is w consecutive detections of equal score, so cumulative sums of the draw
counts give the true/false positives, and the interpolated precision at recall r is the best precision
at a true positive whose recall reaches r. Detections of one image and class with the same score are
interleaved copy by copy, as summarize's concatenation orders them. The result equals `summarize` to
float rounding (tests/evaluator/test_detection_report.py). `image_ids` lists the images scored,
those without any box included: the accumulator keeps no per-image state.

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

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from shardflow.core.detection_metrics import (
    AREA_RANGES, RECALL_THRESHOLDS, STAT_NAMES, DetectionAccumulator, DetectionMetrics,
)

from .intervals import CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED, draw_counts, percentile_interval, resample_indices

METRIC_NAMES = tuple(name.lower() for name in STAT_NAMES)  # ap, ap50, ..., ar_large
METHOD = "percentile bootstrap over images, paired for the difference"
_EPS = np.spacing(1)  # pycocotools' tp / (tp + fp + eps)


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


@dataclass(frozen=True)
class _Records:
    """The accumulator's records of the listed images, and their per-image sums (order-free parts)."""

    position: np.ndarray  # [D] the detection's image's index in image_ids
    image: np.ndarray  # [D] image ids: ties in score break by them, as in summarize
    label: np.ndarray
    rank: np.ndarray
    score: np.ndarray
    tp: np.ndarray  # [D, A, T] true positive: matched to a counted ground truth
    valid: np.ndarray  # [D, A, T] not ignored: a true or a false positive
    image_truths: np.ndarray  # [N, K * A] ground truth counted per image, class and area
    image_tp: np.ndarray  # [N, K * A * 3 * T] true positives per image within each AR cut (1, 10, max)


def _positions(image_ids: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Each of `of`'s index in `image_ids`, -1 where absent."""
    sorter = np.argsort(image_ids)
    at = np.minimum(np.searchsorted(image_ids, of, sorter=sorter), len(image_ids) - 1)
    return np.where(image_ids[sorter[at]] == of, sorter[at], -1) if len(image_ids) else np.full(len(of), -1)


def _records(accumulator: DetectionAccumulator, image_ids: Sequence[int] | np.ndarray) -> _Records:
    ids = np.asarray(image_ids, np.int64).reshape(-1)
    if len(np.unique(ids)) != len(ids):
        raise ValueError("image_ids must be unique")
    # The accumulator has no public view of its records yet: its private columns are read here.
    dets, truths = accumulator.records()
    n, classes, areas, cuts = len(ids), accumulator.num_classes, len(AREA_RANGES), (1, 10, accumulator.max_detections)
    at, kept = _positions(ids, dets["image"]), _positions(ids, truths["image"])
    keep, counted = at >= 0, kept >= 0
    tp = dets["matched"][keep] & ~dets["ignored"][keep]
    label, rank = dets["label"][keep].astype(np.int64), dets["rank"][keep]
    image_truths = np.zeros((n, classes, areas))
    np.add.at(image_truths, (kept[counted], truths["label"][counted]), truths["counted"][counted])
    image_tp = np.zeros((n, classes, len(cuts), *tp.shape[1:]))
    for m, cut in enumerate(cuts):
        within = rank < cut
        np.add.at(image_tp[:, :, m], (at[keep][within], label[within]), tp[within])
    return _Records(at[keep], dets["image"][keep], label, rank, dets["score"][keep], tp, ~dets["ignored"][keep],
                    image_truths.reshape(n, -1), image_tp.transpose(0, 1, 3, 2, 4).reshape(n, -1))


def _units(records: _Records, label: int, copies: int) -> tuple[np.ndarray, np.ndarray]:
    """One class's detections in the order summarize sorts a resample's: score down, image id, copy, rank.
    Returns (record row, copy) per unit: copy -1 is a detection whose copies are adjacent (weight: its
    image's draws); copy c >= 0 the c-th copy of a detection tied in score with another of its image
    and class (weight 1 when its image is drawn more than c times)."""
    rows = np.flatnonzero(records.label == label)
    order = np.lexsort((records.score[rows], records.image[rows]))
    same = np.diff(records.image[rows][order]) == 0
    same &= np.diff(records.score[rows][order]) == 0
    tied = np.zeros(len(rows), bool)
    tied[order[1:][same]], tied[order[:-1][same]] = True, True
    unit_row = np.concatenate([rows[~tied], np.repeat(rows[tied], copies)])
    unit_copy = np.concatenate([np.full((~tied).sum(), -1), np.tile(np.arange(copies), tied.sum())])
    by = np.lexsort((records.rank[unit_row], np.maximum(unit_copy, 0), records.image[unit_row],
                     -records.score[unit_row]))
    return unit_row[by], unit_copy[by]


def _reach_table(positives: np.ndarray) -> np.ndarray:
    """[P + 1, b]: how many recall thresholds n true positives reach (r <= n / P, pycocotools' recall) in
    each resample, for n up to the most ground truth [b] `positives` has, which bounds the true positives."""
    counts = np.arange(int(positives.max(initial=0)) + 1, dtype=np.float64)[:, None]
    return np.searchsorted(RECALL_THRESHOLDS, counts / np.maximum(positives, 1), side="right")


def _curve_sums(weights: np.ndarray, tp: np.ndarray, valid: np.ndarray, reach: np.ndarray,
                cache: dict[bytes, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """[b] sums over the 101 recall thresholds of the interpolated precision, for units in order with
    [U, b] draw weights, their true/false positive flags [U] and `_reach_table` of the class and area.
    `cache`: the draws and running tp + fp of each set of valid units already seen (IoU thresholds share them)."""
    if not tp.any():
        return np.zeros(weights.shape[1])
    key = valid.tobytes()
    if key not in cache:
        drawn = weights[valid]
        cache[key] = drawn, np.cumsum(drawn, axis=0) + _EPS  # tp + fp (+ eps) up to each unit
    drawn, seen = cache[key]
    hits = tp[valid]
    drawn, seen = drawn[hits], seen[hits]
    found = np.cumsum(drawn, axis=0)  # tp at each true positive
    precision = np.divide(found, seen, out=np.zeros_like(found), where=drawn > 0)
    envelope = np.maximum.accumulate(precision[::-1], axis=0)[::-1]
    # The thresholds a true positive reaches first take its envelope; r = 0 takes the first one's.
    columns = reach.shape[1]
    reached = np.take(reach, (found * columns + np.arange(columns)).astype(np.intp))
    return envelope[0] + (envelope * np.diff(reached, axis=0, prepend=1)).sum(axis=0)


def _precision_sums(records: _Records, counts: np.ndarray, classes: int, positives: np.ndarray) -> np.ndarray:
    """[b, K, A, T]: per resample, the sum over recall thresholds of each precision curve (max detections)."""
    copies, by_image = int(counts.max(initial=0)), np.ascontiguousarray(counts.T)  # [N, b]: units gather rows
    areas, thresholds = records.tp.shape[1:]
    sums = np.zeros((len(counts), classes, areas, thresholds))
    for k in range(classes):
        unit_row, unit_copy = _units(records, k, copies)
        weights = by_image[records.position[unit_row]]
        weights = np.where(unit_copy[:, None] < 0, weights, weights > unit_copy[:, None])
        for a in range(areas):
            reach, cache = _reach_table(positives[:, k, a]), {}
            for t in range(thresholds):
                sums[:, k, a, t] = _curve_sums(weights, records.tp[unit_row, a, t], records.valid[unit_row, a, t],
                                               reach, cache)
    return sums


def _mean_defined(values: np.ndarray, defined_classes: np.ndarray, per_class: int) -> np.ndarray:
    """[b] mean over the defined classes' `per_class` values each ([b, K, ...] summed), NaN where none."""
    total = np.where(defined_classes, values.reshape(*defined_classes.shape, -1).sum(axis=2), 0.0).sum(axis=1)
    count = defined_classes.sum(axis=1) * per_class
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _resampled_stats(records: _Records, counts: np.ndarray, classes: int, iou_thresholds: np.ndarray) -> np.ndarray:
    """[b, 12] COCO numbers of each resample (counts [b, N]: draws per image), NaN where pycocotools has -1."""
    areas, thresholds, points = len(AREA_RANGES), len(iou_thresholds), len(RECALL_THRESHOLDS)
    positives = (counts @ records.image_truths).reshape(-1, classes, areas)
    found = (counts @ records.image_tp).reshape(-1, classes, areas, 3, thresholds)
    recall = found / np.maximum(positives, 1)[..., None, None]
    sums = _precision_sums(records, counts, classes, positives)
    has = positives > 0

    def ap(area: int, columns: np.ndarray) -> np.ndarray:
        return _mean_defined(sums[:, :, area][..., columns], has[:, :, area], len(columns) * points)

    every = np.arange(thresholds)
    at = [np.flatnonzero(np.isclose(iou_thresholds, iou)) for iou in (.5, .75)]
    stats = [ap(0, every)] + [ap(0, c) if len(c) else np.full(len(counts), np.nan) for c in at]
    stats += [ap(a, every) for a in (1, 2, 3)]
    stats += [_mean_defined(recall[:, :, 0, m], has[:, :, 0], thresholds) for m in range(3)]
    stats += [_mean_defined(recall[:, :, a, 2], has[:, :, a], thresholds) for a in (1, 2, 3)]
    return np.stack(stats, axis=1)


def resampled_detection_stats(accumulator: DetectionAccumulator, image_ids: Sequence[int] | np.ndarray,
                              counts: np.ndarray) -> np.ndarray:
    """[b, 12] (STAT_NAMES) of the resamples drawing image_ids[i] counts[r, i] times: what
    `summarize(images=...)` of each gives, NaN where it gives -1."""
    return _resampled_stats(_records(accumulator, image_ids), np.asarray(counts, np.float64),
                            accumulator.num_classes, accumulator.iou_thresholds)


def detection_intervals(accumulator: DetectionAccumulator, image_ids: Sequence[int] | np.ndarray,
                        resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE,
                        baseline: DetectionAccumulator | None = None) -> dict[str, Any]:
    """metrics.json's `intervals`: {"confidence", "resamples", "seed", "method", "candidate", "baseline",
    "delta"}, [low, high] per overall metric; with a baseline scored on the same images, the same draws
    score it (paired), and "delta" is candidate − baseline's interval."""
    if len(image_ids) == 0:
        raise ValueError("no image ids: there is nothing to resample")
    models = [accumulator] + ([baseline] if baseline is not None else [])
    records = [_records(model, image_ids) for model in models]
    n, parts = len(image_ids), [[] for _ in models]
    for indices in resample_indices(n, resamples, seed):
        counts = draw_counts(indices, n)  # shared by both models: the pairing
        for model, found, into in zip(models, records, parts):
            into.append(_resampled_stats(found, counts, model.num_classes, model.iou_thresholds))
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

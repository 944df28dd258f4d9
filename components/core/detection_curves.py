"""COCOeval.accumulate and summarize over weighted image sets: the one precision/recall/AP arithmetic.

An image set is a weight per image: 1 for each image scored (`DetectionAccumulator.summarize`), or how many
times a bootstrap resample drew it; b sets are scored at once from one weight matrix [b, N]. The inputs are
the per-detection and per-ground-truth records the accumulator keeps (`MatchRecords`: matched per IoU
threshold and area range in core/detection_metrics.py); nothing here looks at a box.

A detection drawn w times is w consecutive detections of equal score, so cumulative sums of the weights give
the true and false positives, and the interpolated precision at recall r is the best precision at a true
positive whose recall reaches r (pycocotools' envelope and `searchsorted(side='left')`). Ties: pycocotools
sorts a class's detections by score, stably, after concatenating images by id (a repeated image's copies
adjacent) and each image's detections by rank. A detection tied in score with another of its image and class
is therefore one unit per copy (weight 1 where its image was drawn more than c times), interleaved copy by
copy; any other detection's copies are adjacent: one unit weighing its image's draws.

Memory: one class's units times a block of weight columns at a time, the block sized to `BLOCK_BYTES`, so
bytes stay bounded whatever the number of detections or resamples; time grows with detections x resamples.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

# pycocotools' Params.setDetParams recall thresholds, built the same way so they compare bit for bit.
RECALL_THRESHOLDS = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)
EPS = np.spacing(1)  # pycocotools' tp / (tp + fp + eps)
BLOCK_BYTES = 48 << 20  # per class: units x weight columns x ~6 float64 arrays at most this many bytes


@dataclass(frozen=True)
class MatchRecords:
    """The accumulator's records: one row per detection (D) and per ground-truth box (G)."""

    det_image: np.ndarray  # [D] image id
    det_label: np.ndarray  # [D] class id, 0-based
    det_rank: np.ndarray  # [D] position among its image's detections of its class, by score
    det_score: np.ndarray  # [D] float64
    true_positive: np.ndarray  # [D, A, T] bool: matched to a counted ground truth
    valid: np.ndarray  # [D, A, T] bool: not ignored (a true or a false positive)
    truth_image: np.ndarray  # [G] image id
    truth_label: np.ndarray  # [G]
    counted: np.ndarray  # [G, A] bool: a positive of the area range (in range and not a crowd)


@dataclass(frozen=True)
class WeightedCurves:
    """Each weighted set's figures; M indexes the detection cuts (1, 10, max) where a field has it."""

    positives: np.ndarray  # [b, K, A] counted ground truth
    precision_sums: np.ndarray  # [b, K, A, T] interpolated precision summed over RECALL_THRESHOLDS, max cut
    recall: np.ndarray  # [b, K, A, T, M]; meaningless where positives is 0
    precision: np.ndarray | None  # [b, K, A, T, R, M] the interpolated curves, when asked for


def positions(image_ids: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Each of `of`'s index in `image_ids` (unique), -1 where absent."""
    if not len(image_ids):
        return np.full(len(of), -1)
    sorter = np.argsort(image_ids)
    at = np.minimum(np.searchsorted(image_ids, of, sorter=sorter), len(image_ids) - 1)
    return np.where(image_ids[sorter[at]] == of, sorter[at], -1)


def _image_sums(by_image: np.ndarray, at: np.ndarray, values: np.ndarray) -> np.ndarray:
    """[b, F]: per set, the weighted sum of rows `values` [n, F] whose images are at `at` in by_image [N, b]."""
    if not len(at):
        return np.zeros((by_image.shape[1], values.shape[1]))
    images, inverse = np.unique(at, return_inverse=True)
    per_image = np.zeros((len(images), values.shape[1]))
    np.add.at(per_image, inverse, values)
    return by_image[images].T @ per_image


def _units(records: MatchRecords, rows: np.ndarray, copies: int) -> tuple[np.ndarray, np.ndarray]:
    """A class's detections in the order pycocotools sorts a weighted set's: score down, image, copy, rank.
    Returns (record row, copy) per unit: copy -1 weighs its image's draws, copy c >= 0 is 1 or 0."""
    image, score = records.det_image[rows], records.det_score[rows]
    order = np.lexsort((score, image))
    same = (np.diff(image[order]) == 0) & (np.diff(score[order]) == 0)
    tied = np.zeros(len(rows), bool)
    tied[order[1:][same]], tied[order[:-1][same]] = True, True
    unit_row = np.concatenate([rows[~tied], np.repeat(rows[tied], copies)])
    unit_copy = np.concatenate([np.full((~tied).sum(), -1), np.tile(np.arange(copies), tied.sum())])
    by = np.lexsort((records.det_rank[unit_row], np.maximum(unit_copy, 0), records.det_image[unit_row],
                     -records.det_score[unit_row]))
    return unit_row[by], unit_copy[by]


def _reach_table(positives: np.ndarray) -> np.ndarray:
    """[P + 1, c]: how many recall thresholds n true positives reach (r <= n / P, pycocotools' recall) in
    each column, n up to the most ground truth `positives` [c] has, which bounds the true positives."""
    counts = np.arange(int(positives.max(initial=0)) + 1, dtype=np.float64)[:, None]
    return np.searchsorted(RECALL_THRESHOLDS, counts / np.maximum(positives, 1), side="right")


def _envelope(weights: np.ndarray, tp: np.ndarray, valid: np.ndarray, reach: np.ndarray,
              cache: dict[bytes, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """At each true-positive unit [H, c]: the precision envelope, and how many recall thresholds are reached.
    Units in order with [U, c] weights and flags [U]; `cache`: each valid set's weights and running tp + fp
    (IoU thresholds share them)."""
    key = valid.tobytes()
    if key not in cache:
        drawn = weights[valid]
        cache[key] = drawn, np.cumsum(drawn, axis=0) + EPS  # tp + fp (+ eps) up to each unit
    drawn, seen = cache[key]
    hits = tp[valid]
    drawn, seen = drawn[hits], seen[hits]
    found = np.cumsum(drawn, axis=0)  # tp at each true positive
    # A hit weighing 0 in a column (not drawn, or past a cut) adds no threshold there, and its precision is at
    # most the previous hit's: it changes neither read-out, so no mask is needed.
    precision = found / seen
    envelope = np.maximum.accumulate(precision[::-1], axis=0)[::-1]
    columns = reach.shape[1]
    return envelope, np.take(reach, (found * columns + np.arange(columns)).astype(np.intp))


def _precision_sum(envelope: np.ndarray, reached: np.ndarray) -> np.ndarray:
    """[c] the curve summed over the recall thresholds: each true positive's envelope times the thresholds it
    reaches first; r = 0 takes the first one's (pycocotools' first detection's envelope, the best)."""
    if not len(envelope):
        return np.zeros(envelope.shape[1])
    return envelope[0] + (envelope * np.diff(reached, axis=0, prepend=1)).sum(axis=0)


def _precision_points(envelope: np.ndarray, reached: np.ndarray) -> np.ndarray:
    """[c, R] the curve itself: threshold j takes the envelope of the first true positive reaching past j."""
    points = np.zeros((envelope.shape[1], len(RECALL_THRESHOLDS)))
    for column in range(envelope.shape[1]):
        first = np.searchsorted(reached[:, column], np.arange(len(RECALL_THRESHOLDS)), side="right")
        inside = first < len(envelope)
        points[column, inside] = envelope[first[inside], column]
    return points


def _blocks(units: int, columns: int) -> Iterator[slice]:
    step = max(1, BLOCK_BYTES // (6 * 8 * max(units, 1)))
    return (slice(start, min(start + step, columns)) for start in range(0, columns, step))


def weighted_curves(records: MatchRecords, num_classes: int, max_detections: int, image_ids: np.ndarray,
                    weights: np.ndarray, points: bool = False) -> WeightedCurves:
    """COCOeval.accumulate of each weighted set: weights [b, N] of the unique `image_ids` [N] (records of
    other images are left out); `points` adds the interpolated precision curves of every detection cut."""
    ids = np.asarray(image_ids, np.int64).reshape(-1)
    weights = np.asarray(weights, np.float64).reshape(-1, len(ids))
    det_at, truth_at = positions(ids, records.det_image), positions(ids, records.truth_image)
    by_image, cuts = np.ascontiguousarray(weights.T), np.array([1, 10, max_detections])  # [N, b]
    sums = np.zeros((len(weights), num_classes, *records.valid.shape[1:]))
    positives, recall = np.zeros(sums.shape[:3]), np.zeros((*sums.shape, len(cuts)))
    precision = np.zeros((*sums.shape, len(RECALL_THRESHOLDS), len(cuts))) if points else None
    for k in range(num_classes):
        truths = np.flatnonzero((records.truth_label == k) & (truth_at >= 0))
        positives[:, k] = _image_sums(by_image, truth_at[truths], records.counted[truths].astype(np.float64))
        rows = np.flatnonzero((records.det_label == k) & (det_at >= 0))
        for m, cut in enumerate(cuts):
            hits = records.true_positive[rows] & (records.det_rank[rows] < cut)[:, None, None]
            flags = hits.reshape(len(rows), recall[0, 0, ..., 0].size).astype(np.float64)
            found = _image_sums(by_image, det_at[rows], flags)
            recall[:, k, ..., m] = found.reshape(sums.shape[:1] + sums.shape[2:]) / np.maximum(
                positives[:, k], 1)[..., None]
        if records.true_positive[rows].any():
            _class_precision(records, rows, det_at, by_image, positives[:, k], cuts if points else cuts[-1:],
                             sums[:, k], None if precision is None else precision[:, k])
    return WeightedCurves(positives, sums, recall, precision)


def _class_precision(records: MatchRecords, rows: np.ndarray, det_at: np.ndarray, by_image: np.ndarray,
                     positives: np.ndarray, cuts: np.ndarray, sums: np.ndarray, precision: np.ndarray | None) -> None:
    """Fills one class's `sums` [b, A, T] (the last cut's) and `precision` [b, A, T, R, M]. Each cut is a
    column of weights: a detection ranked past it in its image weighs 0, as if cut away."""
    unit_row, unit_copy = _units(records, rows, int(by_image.max(initial=0)))
    # Units after the last that is ever a true positive add to no precision anywhere: most low-scored
    # false positives of a detector that answers its maximum number of boxes.
    useful = np.flatnonzero(records.true_positive[unit_row].any(axis=(1, 2)))
    unit_row, unit_copy = unit_row[:useful[-1] + 1], unit_copy[:useful[-1] + 1]
    within = records.det_rank[unit_row, None] < cuts  # [U, M]
    areas, thresholds = records.valid.shape[1:]
    for block in _blocks(len(unit_row) * len(cuts), by_image.shape[1]):
        drawn = by_image[det_at[unit_row], block]  # [U, b']
        drawn = np.where(unit_copy[:, None] < 0, drawn, drawn > unit_copy[:, None])
        drawn = (drawn[:, :, None] * within[:, None, :]).reshape(len(unit_row), -1)  # column: set * M + cut
        for a in range(areas):
            reach, cache = _reach_table(np.repeat(positives[block, a], len(cuts))), {}
            for t in range(thresholds):
                tp = records.true_positive[unit_row, a, t]
                if not tp.any():
                    continue
                envelope, reached = _envelope(drawn, tp, records.valid[unit_row, a, t], reach, cache)
                sums[block, a, t] = _precision_sum(envelope, reached).reshape(-1, len(cuts))[:, -1]
                if precision is not None:
                    curves = _precision_points(envelope, reached).reshape(-1, len(cuts), len(RECALL_THRESHOLDS))
                    precision[block, a, t] = curves.transpose(0, 2, 1)


def _mean_defined(values: np.ndarray, defined: np.ndarray, per_class: int) -> np.ndarray:
    """[b] mean over the defined classes' `per_class` values each ([b, K, ...] summed), NaN where none."""
    total = np.where(defined, values.reshape(*defined.shape, -1).sum(axis=2), 0.0).sum(axis=1)
    count = defined.sum(axis=1) * per_class
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def coco_stats(curves: WeightedCurves, iou_thresholds: np.ndarray) -> np.ndarray:
    """[b, 12] COCOeval.summarize's numbers per set (its `_summarizeDets` order: AP, AP50, AP75, AP by size,
    AR@1/10/max, AR by size), NaN where pycocotools has -1 (no ground truth counted)."""
    sums, recall, has = curves.precision_sums, curves.recall, curves.positives > 0
    points, every = len(RECALL_THRESHOLDS), np.arange(sums.shape[-1])

    def ap(area: int, columns: np.ndarray) -> np.ndarray:
        if not len(columns):
            return np.full(len(sums), np.nan)
        return _mean_defined(sums[:, :, area][..., columns], has[:, :, area], len(columns) * points)

    at = [np.flatnonzero(np.isclose(iou_thresholds, iou)) for iou in (.5, .75)]
    stats = [ap(0, every), ap(0, at[0]), ap(0, at[1])] + [ap(a, every) for a in (1, 2, 3)]
    stats += [_mean_defined(recall[:, :, 0, :, m], has[:, :, 0], len(every)) for m in range(3)]
    stats += [_mean_defined(recall[:, :, a, :, -1], has[:, :, a], len(every)) for a in (1, 2, 3)]
    return np.stack(stats, axis=1)


def class_ap(curves: WeightedCurves) -> np.ndarray:
    """[b, K] AP@[.5:.95] of each class over all areas, NaN where it has no ground truth."""
    sums, has = curves.precision_sums[:, :, 0], curves.positives[:, :, 0] > 0
    return np.where(has, sums.sum(axis=-1) / (sums.shape[-1] * len(RECALL_THRESHOLDS)), np.nan)

"""COCO detection metrics (pycocotools' COCOeval for bboxes, without crowds) over a stream of images.

Boxes arrive as the TF Object Detection API stores them: normalised (ymin, xmin, ymax, xmax) with the
image's (height, width) in pixels. `coco_boxes` turns them into COCO's [x, y, w, h] in pixels, and IoU,
areas and area ranges are computed from those, in pycocotools' arithmetic (its C `bbIou`: w = x2 - x1,
no +1; ranges inclusive at both ends, so an area of exactly 32² is both small and medium).

`DetectionAccumulator.add_image` matches an image's detections at once (greedy by descending score,
per class, IoU threshold and area range, as `COCOeval.evaluateImg`) and keeps one record per detection
and per ground-truth box, never the image: bytes grow with boxes, not with images or pixels.
`summarize` is `COCOeval.accumulate` and `summarize` over those records (101-point interpolated
precision, its monotone envelope, `searchsorted(side='left')`); `summarize(images=...)` recomputes for a
subset or a bootstrap resample of image ids (a repeated id counts as another image).

As pycocotools, `max_detections` keeps the top-scoring detections per image *and class*, and AR@1/@10
count the top 1/10 per image and class.

>>> acc = DetectionAccumulator(num_classes=2)
>>> box = np.array([[.25, .25, .75, .75]])  # 50 x 100 pixels in a 100 x 200 image: medium
>>> acc.add_image(1, 100, 200, box, np.array([0]), box, np.array([.9]), np.array([0]))
>>> metrics = acc.summarize()
>>> metrics.stats.round(6).tolist()  # pycocotools' precision is tp / (tp + fp + eps), a hair under 1
[1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0, -1.0, 1.0, -1.0]
>>> metrics.per_class_ap.round(6).tolist()  # class 1 has no ground truth: -1, left out of the means
[1.0, -1.0]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

# pycocotools' Params.setDetParams, built the same way so thresholds compare bit for bit.
IOU_THRESHOLDS = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
RECALL_THRESHOLDS = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)
AREA_RANGES = (("all", 0.0, 1e5 ** 2), ("small", 0.0, 32.0 ** 2), ("medium", 32.0 ** 2, 96.0 ** 2),
               ("large", 96.0 ** 2, 1e5 ** 2))
# The 12 numbers of COCOeval.summarize, in its order.
STAT_NAMES = ("AP", "AP50", "AP75", "AP_small", "AP_medium", "AP_large",
              "AR1", "AR10", "AR100", "AR_small", "AR_medium", "AR_large")
_EPS = np.spacing(1)  # pycocotools' guard against 0/0 in precision


def coco_boxes(boxes: np.ndarray, height: float, width: float) -> np.ndarray:
    """Normalised (ymin, xmin, ymax, xmax) [N, 4] → COCO [x, y, w, h] in pixels, float64 [N, 4].

    Corners are scaled first and subtracted after, as TF's coco_tools does for absolute boxes.
    >>> coco_boxes(np.array([[.25, .125, .75, .5]]), height=100, width=200).tolist()
    [[25.0, 25.0, 75.0, 50.0]]
    """
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    ymin, xmin, ymax, xmax = b[:, 0] * height, b[:, 1] * width, b[:, 2] * height, b[:, 3] * width
    return np.stack([xmin, ymin, xmax - xmin, ymax - ymin], axis=1)


def box_iou(detections: np.ndarray, truths: np.ndarray) -> np.ndarray:
    """IoU [D, G] of COCO [x, y, w, h] boxes, operation for operation pycocotools' `bbIou` (no crowd)."""
    d, g = detections[:, None, :], truths[None, :, :]
    w = np.minimum(d[..., 2] + d[..., 0], g[..., 2] + g[..., 0]) - np.maximum(d[..., 0], g[..., 0])
    h = np.minimum(d[..., 3] + d[..., 1], g[..., 3] + g[..., 1]) - np.maximum(d[..., 1], g[..., 1])
    inter = w * h
    union = d[..., 2] * d[..., 3] + g[..., 2] * g[..., 3] - inter
    overlaps = (w > 0) & (h > 0)  # bbIou leaves 0 where either side does not overlap
    return np.divide(inter, union, out=np.zeros(inter.shape), where=overlaps)


def _outside(areas: np.ndarray) -> np.ndarray:
    """bool [A, N]: an area outside each range (pycocotools ignores those, ends included in the range)."""
    return np.stack([(areas < lo) | (areas > hi) for _, lo, hi in AREA_RANGES])


def match_greedy(ious: np.ndarray, true_ignored: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`COCOeval.evaluateImg`'s matching for one image and class, all thresholds at once.

    `ious` [D, G] with detections by descending score and ground truth in its given order. Each
    detection takes the unmatched ground truth of highest IoU ≥ t (the last one on a tie), a regular one
    before an ignored one. Returns (matched [T, D], matched to an ignored ground truth [T, D]).
    """
    order = np.argsort(true_ignored, kind="mergesort")  # pycocotools moves ignored ground truth last
    ious, ignored = ious[:, order], true_ignored[order]
    count, (detections, truths) = len(thresholds), ious.shape
    matched, on_ignored = np.zeros((count, detections), bool), np.zeros((count, detections), bool)
    taken = np.zeros((count, truths), bool)
    limits = np.minimum(thresholds, 1 - 1e-10)[:, None]
    rows = np.arange(count)
    for d in range(detections if truths else 0):
        fits = ~taken & (ious[d] >= limits)
        regular = fits & ~ignored
        allowed = np.where(regular.any(axis=1, keepdims=True), regular, fits & ignored)
        values = np.where(allowed, ious[d], -np.inf)
        pick = truths - 1 - np.argmax(values[:, ::-1], axis=1)  # the last of equal best IoUs
        hit = allowed.any(axis=1)
        matched[hit, d], on_ignored[hit, d] = True, ignored[pick[hit]]
        taken[rows[hit], pick[hit]] = True
    return matched, on_ignored


class _Columns:
    """Record columns grown by doubling: bytes follow the number of rows, whatever was added in between."""

    def __init__(self, **columns: tuple[type, tuple[int, ...]]) -> None:
        self._arrays = {name: np.zeros((0, *shape), dtype) for name, (dtype, shape) in columns.items()}
        self.size = 0

    def extend(self, **values: np.ndarray) -> None:
        rows = len(next(iter(values.values())))
        if self.size + rows > len(self._arrays[next(iter(self._arrays))]):
            capacity = max(64, 2 * (self.size + rows))
            for name, array in self._arrays.items():
                grown = np.zeros((capacity, *array.shape[1:]), array.dtype)
                grown[:self.size] = array[:self.size]
                self._arrays[name] = grown
        for name, value in values.items():
            self._arrays[name][self.size:self.size + rows] = value
        self.size += rows

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[name][:self.size]

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self._arrays.values())


@dataclass(frozen=True)
class DetectionMetrics:
    """Results in COCOeval's layout: `precision` [T, R, K, A, M], `recall` [T, K, A, M], -1 where
    pycocotools has -1 (no ground truth in that class and area range); M indexes (1, 10, max_detections)."""

    stats: np.ndarray  # float64 [12], STAT_NAMES
    per_class_ap: np.ndarray  # float64 [K] AP@[.5:.95] of each class, -1 without ground truth
    precision: np.ndarray
    recall: np.ndarray

    def as_dict(self) -> dict[str, float]:
        return dict(zip(STAT_NAMES, map(float, self.stats)))


class DetectionAccumulator:
    """Per-detection and per-ground-truth records of images matched as they come (module docstring).

    Image ids must be unique and sortable ints: ties in score break by image id, as in pycocotools.
    """

    def __init__(self, num_classes: int, max_detections: int = 100,
                 iou_thresholds: np.ndarray = IOU_THRESHOLDS) -> None:
        if num_classes < 1 or max_detections < 10:
            raise ValueError("num_classes must be ≥ 1 and max_detections ≥ 10 (AR@10 is reported)")
        self.num_classes, self.max_detections = num_classes, max_detections
        self.iou_thresholds = np.asarray(iou_thresholds, np.float64)
        flags = (len(AREA_RANGES), len(self.iou_thresholds))
        # rank: position among the image's detections of its class by score, which AR@1/@10 cut on.
        self._detections = _Columns(image=(np.int64, ()), label=(np.int32, ()), rank=(np.int32, ()),
                                    score=(np.float64, ()), matched=(bool, flags), ignored=(bool, flags))
        self._truths = _Columns(image=(np.int64, ()), label=(np.int32, ()), counted=(bool, flags[:1]))

    @property
    def nbytes(self) -> int:
        """Bytes of the kept records (no per-image state is kept)."""
        return self._detections.nbytes + self._truths.nbytes

    def records(self) -> tuple[Any, Any]:
        """(detections, truths): the kept per-detection and per-object columns, read only (a bootstrap that
        resamples images computes from them: evaluator/detection_report.py)."""
        return self._detections, self._truths

    def add_image(self, image_id: int, height: float, width: float, true_boxes: np.ndarray,
                  true_classes: np.ndarray, det_boxes: np.ndarray, det_scores: np.ndarray,
                  det_classes: np.ndarray, num_true: int | None = None, num_detections: int | None = None) -> None:
        """Matches one image; `num_true`/`num_detections` cut padded arrays to their valid rows."""
        truths = coco_boxes(np.asarray(true_boxes)[:num_true], height, width)
        true_labels = self._labels(true_classes, num_true, len(truths))
        dets = coco_boxes(np.asarray(det_boxes)[:num_detections], height, width)
        det_labels = self._labels(det_classes, num_detections, len(dets))
        scores = np.asarray(det_scores, np.float64).reshape(-1)[:num_detections]
        if len(scores) != len(dets):
            raise ValueError(f"image {image_id}: {len(dets)} detection boxes but {len(scores)} scores")
        true_areas = truths[:, 2] * truths[:, 3]
        self._truths.extend(image=np.full(len(truths), image_id), label=true_labels,
                            counted=~_outside(true_areas).T)
        for label in np.unique(det_labels):
            self._add_class(image_id, label, dets[det_labels == label], scores[det_labels == label],
                            truths[true_labels == label])

    def _labels(self, classes: np.ndarray, count: int | None, rows: int) -> np.ndarray:
        labels = np.asarray(classes, np.int64).reshape(-1)[:count]
        if len(labels) != rows or np.any((labels < 0) | (labels >= self.num_classes)):
            raise ValueError(f"expected {rows} class ids in 0..{self.num_classes - 1}, got {labels.tolist()}")
        return labels

    def _add_class(self, image_id: int, label: int, dets: np.ndarray, scores: np.ndarray,
                   truths: np.ndarray) -> None:
        """One image's detections of one class: the top `max_detections` by score (stable), matched."""
        order = np.argsort(-scores, kind="mergesort")[:self.max_detections]
        dets, scores = dets[order], scores[order]
        ious = box_iou(dets, truths)
        true_out, det_out = _outside(truths[:, 2] * truths[:, 3]), _outside(dets[:, 2] * dets[:, 3])
        matched = np.zeros((len(dets), len(AREA_RANGES), len(self.iou_thresholds)), bool)
        ignored = np.zeros_like(matched)
        for area in range(len(AREA_RANGES)):
            hit, on_ignored = match_greedy(ious, true_out[area], self.iou_thresholds)
            matched[:, area], ignored[:, area] = hit.T, (on_ignored | (~hit & det_out[area])).T
        self._detections.extend(image=np.full(len(dets), image_id), label=np.full(len(dets), label),
                                rank=np.arange(len(dets)), score=scores, matched=matched, ignored=ignored)

    def summarize(self, images: Sequence[int] | np.ndarray | None = None) -> DetectionMetrics:
        """COCOeval.accumulate + summarize over all images, or over `images` (ids; repeats count again)."""
        rows, truth_weight = self._selection(images)
        cuts = (1, 10, self.max_detections)
        shape = (len(self.iou_thresholds), len(RECALL_THRESHOLDS), self.num_classes, len(AREA_RANGES), len(cuts))
        precision, recall = -np.ones(shape), -np.ones(shape[:1] + shape[2:])
        labels, ranks = self._detections["label"][rows], self._detections["rank"][rows]
        positives = np.zeros((self.num_classes, len(AREA_RANGES)))
        np.add.at(positives, self._truths["label"], self._truths["counted"] * truth_weight[:, None])
        for k in range(self.num_classes):
            for a in range(len(AREA_RANGES)):
                if positives[k, a] == 0:  # pycocotools leaves -1 where no ground truth counts
                    continue
                for m, cut in enumerate(cuts):
                    chosen = rows[(labels == k) & (ranks < cut)]
                    precision[:, :, k, a, m], recall[:, k, a, m] = self._curve(chosen, a, positives[k, a])
        return DetectionMetrics(_stats(precision, recall, self.iou_thresholds),
                                _mean_valid(precision[:, :, :, 0, -1], axes=(0, 1)), precision, recall)

    def _selection(self, images: Sequence[int] | np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Detection rows in pycocotools' concatenation order (images by id, then by score within one),
        repeated per occurrence of their image in `images`; and each ground-truth box's count."""
        ids, rank = self._detections["image"], self._detections["rank"]
        order = np.lexsort((rank, ids))
        if images is None:
            return order, np.ones(self._truths.size)
        wanted = np.sort(np.asarray(images, np.int64).reshape(-1))
        starts, ends = np.searchsorted(ids[order], wanted, "left"), np.searchsorted(ids[order], wanted, "right")
        lengths = ends - starts
        offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        unique, counts = np.unique(wanted, return_counts=True)
        truth_ids, weight = self._truths["image"], np.zeros(self._truths.size)
        if len(unique):
            at = np.minimum(np.searchsorted(unique, truth_ids), len(unique) - 1)
            weight = np.where(unique[at] == truth_ids, counts[at], 0)
        return order[np.arange(lengths.sum()) + offsets], weight

    def _curve(self, rows: np.ndarray, area: int, positives: float) -> tuple[np.ndarray, np.ndarray]:
        """Interpolated precision [T, R] and recall [T] of the given detections, as COCOeval.accumulate."""
        rows = rows[np.argsort(-self._detections["score"][rows], kind="mergesort")]
        matched = self._detections["matched"][rows, area].T
        ignored = self._detections["ignored"][rows, area].T
        tp = np.cumsum(matched & ~ignored, axis=1).astype(float)
        fp = np.cumsum(~matched & ~ignored, axis=1).astype(float)
        count = len(rows)
        recall = tp / positives
        precision = tp / (fp + tp + _EPS)
        # The envelope: each precision raised to the best one at a higher recall.
        envelope = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]
        curves = np.zeros((len(tp), len(RECALL_THRESHOLDS)))
        for t in range(len(tp)):
            at = np.searchsorted(recall[t], RECALL_THRESHOLDS, side="left")
            reached = at < count  # past the last detection pycocotools leaves 0
            curves[t, reached] = envelope[t, at[reached]]
        return curves, (recall[:, -1] if count else np.zeros(len(tp)))


def _mean_valid(values: np.ndarray, axes: tuple[int, ...] | None = None) -> np.ndarray:
    """Mean over entries > -1, -1 where there is none (pycocotools' `np.mean(s[s > -1])`)."""
    valid = values > -1
    total, count = np.where(valid, values, 0).sum(axis=axes), valid.sum(axis=axes)
    return np.where(count > 0, total / np.maximum(count, 1), -1.0)


def _stats(precision: np.ndarray, recall: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """COCOeval.summarize's 12 numbers (its `_summarizeDets`), AP at the last detection cut."""
    def at(iou: float) -> np.ndarray:
        return precision[np.flatnonzero(np.isclose(thresholds, iou))][..., 0, -1]
    ap = [precision[..., 0, -1], at(.5), at(.75)] + [precision[..., a, -1] for a in (1, 2, 3)]
    ar = [recall[..., 0, m] for m in range(3)] + [recall[..., a, -1] for a in (1, 2, 3)]
    return np.array([float(_mean_valid(values)) for values in ap + ar])

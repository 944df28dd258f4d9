"""COCO detection metrics (pycocotools' COCOeval for bboxes, crowd regions included) over a stream of images.

Boxes arrive as the TF Object Detection API stores them: normalised (ymin, xmin, ymax, xmax) with the
image's (height, width) in pixels. `coco_boxes` turns them into COCO's [x, y, w, h] in pixels, and IoU,
areas and area ranges are computed from those, in pycocotools' arithmetic (its C `bbIou`: w = x2 - x1,
no +1; ranges inclusive at both ends, so an area of exactly 32² is both small and medium).

`DetectionAccumulator.add_image` matches an image's detections at once (greedy by descending score,
per class, IoU threshold and area range, as `COCOeval.evaluateImg`) and keeps one record per detection
and per ground-truth box, never the image: bytes grow with boxes, not with images or pixels.
`summarize` is `COCOeval.accumulate` and `summarize` over those records (101-point interpolated
precision, its monotone envelope, `searchsorted(side='left')`); `summarize(images=...)` recomputes for a
subset or a bootstrap resample of image ids (a repeated id counts as another image), and
`resampled_stats` for many resamples at once. Both run the one arithmetic of core/detection_curves.py.

Crowds follow pycocotools: a crowd ground truth is ignored in every area range (never a positive), its
IoU with a detection is the intersection over the detection's area, it may absorb any number of
detections, and a detection matched to it is neither a true nor a false positive.

As pycocotools, `max_detections` keeps the top-scoring detections per image *and class*, and AR@1/@10
count the top 1/10 per image and class.

Area ranges are measured as pycocotools measures them: a ground truth's given area (`true_areas`, the
annotation's `area`, in the original image's pixels) and a detection's own box area in the same units. The boxes
are normalised to a stored image that may be a resize of the original; IoU is the same on either (scaling an
axis scales every area alike), so only the areas need the original's units: a detection's area is its box's
area on (height, width) times `area_scale`, original pixels per stored pixel (the Evaluator's scorer takes it
from the image's own true boxes: their `true_areas` over their areas on (height, width)). Without `true_areas`,
areas are in (height, width)'s pixels.

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
from typing import Sequence

import numpy as np

from .detection_curves import RECALL_THRESHOLDS, MatchRecords, class_ap, coco_stats, weighted_curves

__all__ = ["AREA_RANGES", "IOU_THRESHOLDS", "METRIC_NAMES", "RECALL_THRESHOLDS", "STAT_NAMES", "DetectionAccumulator",
           "DetectionMetrics", "box_iou", "coco_boxes", "match_greedy"]

# pycocotools' Params.setDetParams, built the same way so thresholds compare bit for bit.
IOU_THRESHOLDS = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
AREA_RANGES = (("all", 0.0, 1e5 ** 2), ("small", 0.0, 32.0 ** 2), ("medium", 32.0 ** 2, 96.0 ** 2),
               ("large", 96.0 ** 2, 1e5 ** 2))
# The 12 numbers of COCOeval.summarize, in its order.
STAT_NAMES = ("AP", "AP50", "AP75", "AP_small", "AP_medium", "AP_large",
              "AR1", "AR10", "AR100", "AR_small", "AR_medium", "AR_large")
METRIC_NAMES = tuple(name.lower() for name in STAT_NAMES)  # as metrics.json and the gate name them: ap, ..., ar_large


def coco_boxes(boxes: np.ndarray, height: float, width: float) -> np.ndarray:
    """Normalised (ymin, xmin, ymax, xmax) [N, 4] → COCO [x, y, w, h] in pixels, float64 [N, 4].

    Corners are scaled first and subtracted after, as TF's coco_tools does for absolute boxes.
    >>> coco_boxes(np.array([[.25, .125, .75, .5]]), height=100, width=200).tolist()
    [[25.0, 25.0, 75.0, 50.0]]
    """
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    ymin, xmin, ymax, xmax = b[:, 0] * height, b[:, 1] * width, b[:, 2] * height, b[:, 3] * width
    return np.stack([xmin, ymin, xmax - xmin, ymax - ymin], axis=1)


def box_iou(detections: np.ndarray, truths: np.ndarray, crowd: np.ndarray | None = None) -> np.ndarray:
    """IoU [D, G] of COCO [x, y, w, h] boxes, operation for operation pycocotools' `bbIou`: against a crowd
    ground truth (`crowd` [G] bool) the union is the detection's own area."""
    d, g = detections[:, None, :], truths[None, :, :]
    w = np.minimum(d[..., 2] + d[..., 0], g[..., 2] + g[..., 0]) - np.maximum(d[..., 0], g[..., 0])
    h = np.minimum(d[..., 3] + d[..., 1], g[..., 3] + g[..., 1]) - np.maximum(d[..., 1], g[..., 1])
    inter = w * h
    detection_area = d[..., 2] * d[..., 3]
    union = detection_area + g[..., 2] * g[..., 3] - inter
    if crowd is not None:
        union = np.where(np.asarray(crowd, bool)[None, :], detection_area, union)
    overlaps = (w > 0) & (h > 0)  # bbIou leaves 0 where either side does not overlap
    return np.divide(inter, union, out=np.zeros(inter.shape), where=overlaps)


def _outside(areas: np.ndarray) -> np.ndarray:
    """bool [A, N]: an area outside each range (pycocotools ignores those, ends included in the range)."""
    return np.stack([(areas < lo) | (areas > hi) for _, lo, hi in AREA_RANGES])


def match_greedy(ious: np.ndarray, true_ignored: np.ndarray, thresholds: np.ndarray,
                 crowd: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`COCOeval.evaluateImg`'s matching for one image and class, all thresholds at once.

    `ious` [D, G] with detections by descending score and ground truth in its given order. Each
    detection takes the unmatched ground truth of highest IoU ≥ t (the last one on a tie), a regular one
    before an ignored one; a crowd (`crowd` [G], also in `true_ignored`) stays matchable by any number of
    detections. Returns (matched [T, D], matched to an ignored ground truth [T, D]).
    """
    order = np.argsort(true_ignored, kind="mergesort")  # pycocotools moves ignored ground truth last
    ious, ignored = ious[:, order], true_ignored[order]
    reusable = np.zeros(len(order), bool) if crowd is None else np.asarray(crowd, bool)[order]
    count, (detections, truths) = len(thresholds), ious.shape
    matched, on_ignored = np.zeros((count, detections), bool), np.zeros((count, detections), bool)
    taken = np.zeros((count, truths), bool)
    limits = np.minimum(thresholds, 1 - 1e-10)[:, None]
    rows = np.arange(count)
    for d in range(detections if truths else 0):
        fits = (~taken | reusable) & (ious[d] >= limits)
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

    def add_image(self, image_id: int, height: float, width: float, true_boxes: np.ndarray,
                  true_classes: np.ndarray, det_boxes: np.ndarray, det_scores: np.ndarray,
                  det_classes: np.ndarray, num_true: int | None = None, num_detections: int | None = None,
                  true_crowd: np.ndarray | None = None, true_areas: np.ndarray | None = None,
                  area_scale: float = 1.0) -> None:
        """Matches one image; `num_true`/`num_detections` cut padded arrays to their valid rows. `true_crowd`
        flags COCO's crowd regions (`is_crowd`): never counted as objects, and a detection matched to one is
        neither a true nor a false positive. `true_areas` and `area_scale`: the area ranges' units (module
        docstring)."""
        truths = coco_boxes(np.asarray(true_boxes)[:num_true], height, width)
        true_labels = self._labels(true_classes, num_true, len(truths))
        crowd = np.zeros(len(truths), bool) if true_crowd is None else np.asarray(true_crowd, bool).ravel()[:num_true]
        if len(crowd) != len(truths):
            raise ValueError(f"image {image_id}: {len(truths)} true boxes but {len(crowd)} crowd flags")
        dets = coco_boxes(np.asarray(det_boxes)[:num_detections], height, width)
        det_labels = self._labels(det_classes, num_detections, len(dets))
        scores = np.asarray(det_scores, np.float64).reshape(-1)[:num_detections]
        if len(scores) != len(dets):
            raise ValueError(f"image {image_id}: {len(dets)} detection boxes but {len(scores)} scores")
        given = None if true_areas is None else np.asarray(true_areas, np.float64).ravel()[:num_true]
        true_areas = truths[:, 2] * truths[:, 3] if given is None else given
        if len(true_areas) != len(truths):
            raise ValueError(f"image {image_id}: {len(truths)} true boxes but {len(true_areas)} areas")
        self._truths.extend(image=np.full(len(truths), image_id), label=true_labels,
                            counted=~_outside(true_areas).T & ~crowd[:, None])
        for label in np.unique(det_labels):
            same = true_labels == label
            self._add_class(image_id, label, dets[det_labels == label], scores[det_labels == label],
                            truths[same], crowd[same], true_areas[same], area_scale)

    def _labels(self, classes: np.ndarray, count: int | None, rows: int) -> np.ndarray:
        labels = np.asarray(classes, np.int64).reshape(-1)[:count]
        if len(labels) != rows or np.any((labels < 0) | (labels >= self.num_classes)):
            raise ValueError(f"expected {rows} class ids in 0..{self.num_classes - 1}, got {labels.tolist()}")
        return labels

    def _add_class(self, image_id: int, label: int, dets: np.ndarray, scores: np.ndarray, truths: np.ndarray,
                   crowd: np.ndarray, true_areas: np.ndarray, area_scale: float) -> None:
        """One image's detections of one class: the top `max_detections` by score (stable), matched.
        A crowd is ignored in every area range (pycocotools' `ignore` flag)."""
        order = np.argsort(-scores, kind="mergesort")[:self.max_detections]
        dets, scores = dets[order], scores[order]
        ious = box_iou(dets, truths, crowd)
        true_out, det_out = _outside(true_areas) | crowd, _outside(dets[:, 2] * dets[:, 3] * area_scale)
        matched = np.zeros((len(dets), len(AREA_RANGES), len(self.iou_thresholds)), bool)
        ignored = np.zeros_like(matched)
        for area in range(len(AREA_RANGES)):
            hit, on_ignored = match_greedy(ious, true_out[area], self.iou_thresholds, crowd)
            matched[:, area], ignored[:, area] = hit.T, (on_ignored | (~hit & det_out[area])).T
        self._detections.extend(image=np.full(len(dets), image_id), label=np.full(len(dets), label),
                                rank=np.arange(len(dets)), score=scores, matched=matched, ignored=ignored)

    def match_records(self) -> MatchRecords:
        """The kept records as arrays: what the one precision/recall arithmetic (detection_curves.py) reads."""
        dets, truths = self._detections, self._truths
        return MatchRecords(dets["image"], dets["label"], dets["rank"], dets["score"],
                            dets["matched"] & ~dets["ignored"], ~dets["ignored"],
                            truths["image"], truths["label"], truths["counted"])

    def summarize(self, images: Sequence[int] | np.ndarray | None = None) -> DetectionMetrics:
        """COCOeval.accumulate + summarize over all images, or over `images` (ids; repeats count again)."""
        ids, weights = self._image_weights(images)
        curves = weighted_curves(self.match_records(), self.num_classes, self.max_detections, ids, weights[None],
                                 points=True)
        undefined = curves.positives[0] == 0  # [K, A]: pycocotools' -1
        precision = np.where(undefined[:, :, None, None, None], -1.0, curves.precision[0])
        recall = np.where(undefined[:, :, None, None], -1.0, curves.recall[0])
        stats, per_class = coco_stats(curves, self.iou_thresholds)[0], class_ap(curves)[0]
        return DetectionMetrics(np.nan_to_num(stats, nan=-1.0), np.nan_to_num(per_class, nan=-1.0),
                                precision.transpose(2, 3, 0, 1, 4), recall.transpose(2, 0, 1, 3))

    def resampled_stats(self, image_ids: Sequence[int] | np.ndarray, counts: np.ndarray) -> np.ndarray:
        """[b, 12] (STAT_NAMES) of the resamples drawing image_ids[i] (unique) counts[r, i] times: what
        `summarize(images=...)` of each gives, NaN where it gives -1. Every resample of `counts` at once."""
        ids = np.asarray(image_ids, np.int64).reshape(-1)
        if len(np.unique(ids)) != len(ids):
            raise ValueError("image_ids must be unique")
        curves = weighted_curves(self.match_records(), self.num_classes, self.max_detections, ids, counts)
        return coco_stats(curves, self.iou_thresholds)

    def _image_weights(self, images: Sequence[int] | np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(unique image ids, how many times each counts): every image with a record, or `images`."""
        if images is None:
            ids = np.union1d(self._detections["image"], self._truths["image"])
            return ids, np.ones(len(ids))
        ids, counts = np.unique(np.asarray(images, np.int64).reshape(-1), return_counts=True)
        return ids, counts.astype(np.float64)

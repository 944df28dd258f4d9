"""Label issues of boxes: an image's given boxes judged against a detector's out-of-fold detections.

The three kinds of cleanlab's `object_detection` (Tkachenko et al., 2023, "ObjectLab"), scored our own
way (cleanlab is AGPL-3.0: the label-issue benchmark runs it as a contender on the same detections):

- **swapped**: a given box that a confident detection of another class covers (IoU >= `iou`) more
  strongly than any detection of its own class does; the suggested class is that detection's. A detection
  covering a given box of its own class is that box's object, not a rival (a small object drawn over a
  larger one of another class is covered by both).
- **badly_located**: a given box no confident detection of its class covers, beside an *orphan* (a confident
  detection covering no given box nor crowd region) of its class overlapping it: the object the box was
  meant for, suggested as its box. An orphan goes to the open box it overlaps most, each overlap weighed by
  1 − the box's support (the best score of its class's detections covering it): a box its class is already seen
  on, if weakly, is less likely the misplaced one (measured: +1 of 30 planted faults on one of three sets). A box that no
  detection of its class touches at all lies on background (no suggested box). A box only unsure
  detections of its class touch, with no orphan beside it, is no issue: the model doubts, not the box.
- **overlooked**: an orphan no open box of its class overlaps; the suggested box is the orphan. Peaks on
  one object (IoU >= `iou` with a stronger orphan) count once.

Crowd boxes are ignore regions: never an issue, never a reason for one (a detection mostly inside one is
no orphan).

Confident, as confident learning's per-class threshold (core/label_issues.py): a detection of class k is
confident when its score reaches CONFIDENT_FACTOR × t_k, t_k the mean score of the detections of class k
that cover a given box of class k (what the model scores a class when it is right about it). A class the
model never found has t_k = 1.

Each issue's `quality` is in [0, 1], lower is more likely an error (cleanlab's convention, and the
classification list's): overlooked 1 − s (s the detection's score); swapped 1 − (s_other − s_own);
badly_located with a suggestion 1 − s·(1 − IoU) (s the orphan's), on background 1 − BACKGROUND_WEIGHT·(1 −
s_other), s_other the best score of another class's detections covering it. Boxes are normalised (ymin, xmin, ymax, xmax).

>>> given = Annotation(np.array([[.1, .1, .4, .4], [.6, .6, .9, .9]]), np.array([1, 2]))
>>> found = Detections(np.array([[.1, .1, .4, .4], [.6, .6, .9, .9], [.1, .6, .4, .9]]),
...                    np.array([.9, .8, .85]), np.array([1, 1, 2]))
>>> [(i.kind, i.box, i.given_class, i.suggested_class, round(i.quality, 3))
...  for i in find_box_issues([given], [found], {1: .8, 2: .8})]
[('overlooked', -1, None, 2, 0.15), ('swapped', 1, 2, 1, 0.2)]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .detection_metrics import box_iou, coco_boxes

KINDS = ("overlooked", "swapped", "badly_located")
# A detection is confident from this share of its class's threshold: a CenterNet score is a heat-map peak, and
# half the right detections score under the mean. On the demo shapes (1,000 images, 30 planted faults, fold
# models at 64 px) the top 60 issues found 16 faults at 1.0 and 19 at 0.8, and no more at 0.7, 0.6 or 0.5.
CONFIDENT_FACTOR = 0.8
DEFAULT_IOU = 0.5  # COCO's AP50 match: a box covers an object when IoU >= 0.5
# A box no detection of its class touches ranks below boxes with a better-placed detection beside them: a
# model that missed an object gives the same evidence as a box on background.
BACKGROUND_WEIGHT = 0.25


@dataclass(frozen=True)
class Annotation:
    """An image's given boxes [G, 4], their class ids [G] (the label map's) and crowd flags [G]."""

    boxes: np.ndarray
    classes: np.ndarray
    crowd: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __post_init__(self) -> None:
        if len(self.crowd) != len(self.classes):
            object.__setattr__(self, "crowd", np.zeros(len(self.classes), bool))


@dataclass(frozen=True)
class Detections:
    """An image's detections: boxes [D, 4], scores [D], class ids [D] (the label map's)."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray


@dataclass(frozen=True)
class BoxIssue:
    """One issue of image `image` (its place in the lists given); `box`: the given box's place in its
    image (-1 for an overlooked object). Boxes as tuples of 4 floats, or None."""

    image: int
    kind: str
    box: int
    given_class: int | None
    suggested_class: int | None
    given_box: tuple[float, ...] | None
    suggested_box: tuple[float, ...] | None
    quality: float


def iou_matrix(a: np.ndarray, b: np.ndarray, crowd: np.ndarray | None = None) -> np.ndarray:
    """IoU [A, B] of normalised boxes (against a crowd box of b: intersection over a's area).

    >>> iou_matrix(np.array([[0, 0, .5, .5]]), np.array([[0, 0, .5, 1.]])).round(3).tolist()
    [[0.5]]
    """
    if not len(a) or not len(b):
        return np.zeros((len(a), len(b)))
    return box_iou(coco_boxes(a, 1.0, 1.0), coco_boxes(b, 1.0, 1.0), crowd)


def class_thresholds(given: Sequence[Annotation], found: Sequence[Detections], iou: float = DEFAULT_IOU
                     ) -> dict[int, float]:
    """Per class id, the mean score of its detections covering a given box of its class (module docstring)."""
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for truth, seen in zip(given, found):
        keep = ~np.asarray(truth.crowd, bool)
        overlaps = iou_matrix(seen.boxes, truth.boxes[keep])
        same = seen.classes[:, None] == truth.classes[keep][None, :]
        for d in np.flatnonzero(((overlaps >= iou) & same).any(axis=1)):
            k = int(seen.classes[d])
            sums[k], counts[k] = sums.get(k, 0.0) + float(seen.scores[d]), counts.get(k, 0) + 1
    return {k: sums[k] / counts[k] for k in sums}


def find_box_issues(given: Sequence[Annotation], found: Sequence[Detections], thresholds: dict[int, float],
                    iou: float = DEFAULT_IOU) -> list[BoxIssue]:
    """Every image's issues (module docstring), most likely first (lowest quality; ties by image, box)."""
    issues = [issue for image, (truth, seen) in enumerate(zip(given, found))
              for issue in image_issues(image, truth, seen, thresholds, iou)]
    return sorted(issues, key=lambda i: (i.quality, i.image, i.box))


def image_issues(image: int, truth: Annotation, seen: Detections, thresholds: dict[int, float],
                 iou: float = DEFAULT_IOU) -> list[BoxIssue]:
    """One image's issues, unsorted: swaps first; then each orphan (a confident detection covering no given
    box nor crowd region), strongest first, is the true place of the unconfirmed box of its class it overlaps
    most (badly located), else an overlooked object; last, unconfirmed boxes nothing of their class touches."""
    crowd = np.asarray(truth.crowd, bool)
    regular = np.flatnonzero(~crowd)
    overlaps = iou_matrix(seen.boxes, truth.boxes)  # [D, G]
    confident = seen.scores >= CONFIDENT_FACTOR * np.array([thresholds.get(int(k), 1.0) for k in seen.classes]) - 1e-9
    own = seen.classes[:, None] == np.asarray(truth.classes)[None, :]  # [D, G]
    covers = (overlaps >= iou) & ~crowd[None, :]
    explained = (own & covers).any(axis=1)  # a detection of a given box's class covering it: that box's object
    issues = [issue for g in regular if (issue := _swapped(image, int(g), truth, seen, overlaps[:, g], own[:, g],
                                                           confident & ~explained, iou)) is not None]
    settled = {issue.box for issue in issues} | {int(g) for g in regular if (confident & own[:, g] & covers[:, g]).any()}
    orphans = confident & ~covers.any(axis=1) & ~_in_crowd(truth, seen, crowd, iou)
    support = np.max(np.where(own & covers, seen.scores[:, None], 0.0), axis=0, initial=0.0)  # [G], any score
    loose = []
    for d in np.argsort(-seen.scores, kind="stable"):
        if not orphans[d]:
            continue
        open_boxes = [int(g) for g in regular if g not in settled and own[d, g] and overlaps[d, g] > 0]
        if not open_boxes:
            loose.append(int(d))
            continue
        g = max(open_boxes, key=lambda b: overlaps[d, b] * (1.0 - support[b]))
        settled.add(g)
        issues.append(BoxIssue(image, "badly_located", g, int(truth.classes[g]), int(truth.classes[g]),
                               _box(truth.boxes[g]), _box(seen.boxes[d]),
                               1.0 - float(seen.scores[d]) * (1.0 - float(overlaps[d, g]))))
    issues += _overlooked(image, seen, loose, iou)
    for g in regular:
        if g not in settled and not (own[:, g] & (overlaps[:, g] > 0)).any():  # on background
            other = float(np.max(seen.scores[overlaps[:, g] >= iou], initial=0.0))  # another class there, weakly
            issues.append(BoxIssue(image, "badly_located", int(g), int(truth.classes[g]), None, _box(truth.boxes[g]),
                                   None, 1.0 - BACKGROUND_WEIGHT * (1.0 - other)))
    return issues


def _box(values: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def _swapped(image: int, g: int, truth: Annotation, seen: Detections, overlap: np.ndarray, own: np.ndarray,
             confident: np.ndarray, iou: float) -> BoxIssue | None:
    """Given box g as swapped: a confident detection of another class covers it more strongly than its own does."""
    own_cover = float(np.max(seen.scores[own & (overlap >= iou)], initial=0.0))
    rivals = np.flatnonzero(~own & confident & (overlap >= iou) & (seen.scores > own_cover))
    if not len(rivals):
        return None
    d = int(rivals[np.argmax(seen.scores[rivals])])
    return BoxIssue(image, "swapped", g, int(truth.classes[g]), int(seen.classes[d]), _box(truth.boxes[g]),
                    _box(truth.boxes[g]), 1.0 - float(seen.scores[d] - own_cover))


def _in_crowd(truth: Annotation, seen: Detections, crowd: np.ndarray, iou: float) -> np.ndarray:
    """bool [D]: detections mostly inside a crowd region (intersection over the detection's area >= iou)."""
    if not crowd.any():
        return np.zeros(len(seen.scores), bool)
    return (iou_matrix(seen.boxes, truth.boxes[crowd], np.ones(int(crowd.sum()), bool)) >= iou).any(axis=1)


def _overlooked(image: int, seen: Detections, loose: list[int], iou: float) -> list[BoxIssue]:
    """The loose orphans (strongest first) as overlooked objects, one per object: a peak on an object already
    listed (IoU >= iou with a stronger one) is left out."""
    taken: list[int] = []
    for d in loose:
        if not taken or not (iou_matrix(seen.boxes[[d]], seen.boxes[taken]) >= iou).any():
            taken.append(d)
    return [BoxIssue(image, "overlooked", -1, None, int(seen.classes[d]), None, _box(seen.boxes[d]),
                     1.0 - float(seen.scores[d])) for d in taken]

"""Rows gathered per image and settled by box_index.py's rule: an image is kept only when every row of it is
good; otherwise each of its other rows is rejected as `image_rejected` (`image_rejects`, also what box_rows.py
gives an image whose box reaches past the decoded picture). The counts reconcile by construction.

>>> cause = Reject(2, "train", None, "a.jpg", "box_reversed", "xmin > xmax")
>>> [(r.row, r.code, r.reason) for r in image_rejects([1, 4], "train", "a.jpg", cause)][1]
(4, 'image_rejected', 'row 2 of the same image was rejected (box_reversed)')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Iterable

from .box_types import BadBox, Box, BoxIndex, BoxReject, ImageBoxes
from .box_units import UnitsDecision
from .reject import Reject

IMAGE_REJECTED = "image_rejected"


def image_rejects(rows: Iterable[int], split: str | None, path: str | None, cause: Reject) -> list[Reject]:
    """The image's other `rows`, each rejected as `image_rejected` naming `cause`, its first rejected row."""
    reason = f"row {cause.row} of the same image was rejected ({cause.code})"
    return [Reject(row, split, None, path, IMAGE_REJECTED, reason) for row in rows]


@dataclass
class Group:
    """One image's rows so far: good boxes (row, box, class, crowd), negative rows, and its rejects."""

    path: str
    split: str | None
    boxes: list[tuple[int, Box, str, bool]] = field(default_factory=list)  # row, box, class, crowd
    negatives: list[int] = field(default_factory=list)
    bad: list[BoxReject] = field(default_factory=list)
    declared: tuple[int, int] | None = None  # (height, width) the annotation file declares
    source: str = ""  # the file its rows are in, when not the index (ImageBoxes.source)


class ImageGroups:
    """Rows gathered per image in a dict: an image's rows join wherever they are in the file, in linear time."""

    def __init__(self, index: str, max_boxes: int) -> None:
        self.index, self.max_boxes = index, max_boxes
        self.groups: dict[Hashable, Group] = {}
        self.rejects: list[BoxReject] = []

    def reject(self, row: int, split: str | None, path: str | None, bad: BadBox, group: Group | None = None) -> None:
        self._record(Reject(row, split, bad.column, path, bad.code, bad.reason), group)

    def _record(self, reject: Reject, group: Group | None) -> None:
        """The reject kept as this index file's (and as one of `group`'s bad rows)."""
        self.rejects.append(BoxReject(**vars(reject), index=self.index))
        if group is not None:
            group.bad.append(self.rejects[-1])

    def finish(self, rows: int, units: UnitsDecision, category_ids: dict[str, int] | None = None) -> BoxIndex:
        kept = tuple(image for image in map(self._settle, self.groups.values()) if image is not None)
        labels = sorted(category_ids) if category_ids is not None else sorted({c for i in kept for c in i.classes})
        return BoxIndex(self.index, units.units, rows, kept, tuple(sorted(self.rejects, key=lambda r: r.row)),
                        tuple(labels), dict(category_ids or {}), units.as_json())

    def _settle(self, group: Group) -> ImageBoxes | None:
        box_rows = [row for row, *_ in group.boxes]
        if group.boxes and group.negatives:
            self._reject_all(group, group.negatives, "negative_with_boxes",
                             f"empty label and box, but the image has boxes on rows {box_rows[:5]}")
        elif len(group.boxes) > self.max_boxes:
            self._reject_all(group, box_rows, "too_many_boxes",
                             f"the image has {len(box_rows)} boxes, more than max_boxes={self.max_boxes}")
        if not group.bad:
            rows, boxes, classes, crowd = zip(*group.boxes) if group.boxes else ((), (), (), ())
            return ImageBoxes(group.path, group.split, boxes, classes, tuple(sorted(rows + tuple(group.negatives))),
                              crowd, group.declared, group.source)
        first, done = min(group.bad, key=lambda r: r.row), {r.row for r in group.bad}
        others = [row for row in box_rows + group.negatives if row not in done]
        for reject in image_rejects(others, group.split, group.path, first):
            self._record(reject, group)
        return None

    def _reject_all(self, group: Group, rows: list[int], code: str, reason: str) -> None:
        for row in rows:
            self.reject(row, group.split, group.path, BadBox(code, None, reason), group)

"""The values a detection index is read into (options, a box, an image's boxes, a reject, the index) and the
one check of a box's corners that the CSV and COCO readers share; box_index.py describes the rules.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import ConfigError
from .reject import Reject

UNITS = ("normalized", "pixels", "auto")
COORDINATES = ("x_min", "y_min", "x_max", "y_max")  # their names in reasons, without a header


@dataclass(frozen=True, kw_only=True)
class BoxIndexOptions:
    """`units`: normalized | pixels | auto (CSV only: COCO is in pixels); `max_boxes`: most boxes an image may
    have (the TF Object Detection API's default, 100).

    >>> BoxIndexOptions(max_boxes=0)
    Traceback (most recent call last):
    shardflow.core.errors.ConfigError: max_boxes must be an integer >= 1, got 0
    """

    units: str = "auto"
    max_boxes: int = 100

    def __post_init__(self) -> None:
        if self.units not in UNITS:
            raise ConfigError(f"units must be one of {', '.join(UNITS)}, got {self.units!r}")
        if isinstance(self.max_boxes, bool) or not isinstance(self.max_boxes, int) or self.max_boxes < 1:
            raise ConfigError(f"max_boxes must be an integer >= 1, got {self.max_boxes!r}")


@dataclass(frozen=True)
class Box:
    """A box in the TF Object Detection API's order, in [0, 1] or, `normalized` False, in pixels.

    >>> Box(10, 20, 50, 80, normalized=False).normalize(height=100, width=160)
    Box(ymin=0.1, xmin=0.125, ymax=0.5, xmax=0.5, normalized=True)
    """

    ymin: float
    xmin: float
    ymax: float
    xmax: float
    normalized: bool = True

    def normalize(self, height: float, width: float) -> Box:
        """The box in [0, 1] given its image's size; ValueError when it reaches past the image."""
        if self.normalized:
            return self
        if not (height > 0 and width > 0):
            raise ValueError(f"image size {width}x{height} is not positive")
        if self.xmax > width or self.ymax > height:
            raise ValueError(f"box reaches ({self.xmax:g}, {self.ymax:g}), past the image's {width:g}x{height:g}")
        return Box(self.ymin / height, self.xmin / width, self.ymax / height, self.xmax / width)


@dataclass(frozen=True)
class ImageBoxes:
    """One image's example: boxes and class names in row order, every source row (negative rows too)."""

    path: str
    split: str | None
    boxes: tuple[Box, ...]
    classes: tuple[str, ...]
    rows: tuple[int, ...]
    crowd: tuple[bool, ...]  # an ignore region per box: COCO's iscrowd, VOC's difficult; False from a CSV
    declared: tuple[int, int] | None = None  # (height, width) the annotation file declares (COCO, VOC), checked
    source: str = ""  # the file its rows are in when not the index (a YOLO label file, a VOC XML): rejects name it

    @property
    def pending(self) -> bool:
        """Whether boxes are in pixels, to be normalised once the image's size is known."""
        return any(not box.normalized for box in self.boxes)

    def array(self) -> np.ndarray:
        """float64 [N, 4]: ymin, xmin, ymax, xmax."""
        return np.array([(b.ymin, b.xmin, b.ymax, b.xmax) for b in self.boxes], np.float64).reshape(-1, 4)


@dataclass(frozen=True)
class BoxReject(Reject):
    """A rejected row of file `index`: ExampleGen's own Reject, which knows its file."""

    index: str = ""

    def to_json(self, index: str | None = None) -> dict[str, Any]:
        # Its own file first: a YOLO or VOC reject names the label or XML file, not the index the chunk came from
        return super().to_json(self.index or index or "")


@dataclass(frozen=True)
class BoxIndex:
    """Images (in order of first row; COCO: of `images`), rejects (by row), and `rows`: the rows read.

    `units`: the file's coordinates ("auto" decided), `units_decision` how (box_units.py). `labels`: sorted class
    names of kept boxes (COCO: of every category); `category_ids`: the file's own label map, name → served id
    (COCO's category ids, YOLO's names index + 1; empty for a format without ids: names are then sorted from 1)."""

    index: str
    units: str
    rows: int
    images: tuple[ImageBoxes, ...]
    rejects: tuple[BoxReject, ...]
    labels: tuple[str, ...]
    category_ids: dict[str, int] = field(default_factory=dict)
    units_decision: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Where each row went, for the manifest: rows == box_rows + negative_rows + rejected."""
        box_rows = sum(len(i.boxes) for i in self.images)
        negative_rows = sum(len(i.rows) for i in self.images) - box_rows  # an image's rows hold its boxes' rows
        return {"rows": self.rows, "box_rows": box_rows, "negative_rows": negative_rows, "rejected": len(self.rejects),
                "images": len(self.images), "negative_images": sum(not i.boxes for i in self.images)}

    @property
    def reconciled(self) -> bool:
        counts = self.counts()
        return counts["rows"] == counts["box_rows"] + counts["negative_rows"] + counts["rejected"]

    def rejected_by_reason(self) -> dict[str, int]:
        return dict(sorted(Counter(r.code for r in self.rejects).items()))


class BadBox(Exception):
    """A row's fault: its rejects.jsonl code, the column at fault (or None) and the reason."""

    def __init__(self, code: str, column: str | None, reason: str) -> None:
        super().__init__(reason)
        self.code, self.column, self.reason = code, column, reason


def checked_box(values: tuple[float, ...], names: tuple[str, ...], normalized: bool) -> Box:
    """The checked box of (xmin, ymin, xmax, ymax); BadBox names the first fault."""
    for name, value in zip(names, values):
        if normalized and not 0.0 <= value <= 1.0:
            raise BadBox("box_out_of_range", name, f"{name} {value:g} is outside [0, 1] (normalized units)")
        if value < 0:
            raise BadBox("box_negative", name, f"{name} {value:g} is negative (pixel units)")
    xmin, ymin, xmax, ymax = values
    for low, high, a, b in ((xmin, xmax, names[0], names[2]), (ymin, ymax, names[1], names[3])):
        if low > high:
            raise BadBox("box_reversed", a, f"{a} {low:g} is greater than {b} {high:g}")
        if low == high:
            raise BadBox("box_zero_area", a, f"{a} and {b} are both {low:g}: the box has no area")
    return Box(ymin, xmin, ymax, xmax, normalized)

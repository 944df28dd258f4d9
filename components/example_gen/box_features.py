"""An image's boxes as the TF Object Detection API stores them in a tf.train.Example, and a split's box figures.

The features (`core.example_proto.encode_example` takes them as they are):
- `image/object/bbox/ymin|xmin|ymax|xmax`: float lists, normalised to the image's outer pixel edges;
- `image/object/class/text`: the class names (bytes); `image/object/class/label`: their ids in the label
  map, from 1 (the TF OD API keeps 0 for the background); `image/object/is_crowd`: an ignore region (COCO's
  crowd, VOC's difficult), 0 or 1; `image/object/area`: the box's area in pixels of the decoded image.
An image without objects (a negative example) has the features with empty lists, so every example parses
with the same spec.

Boxes survive ExampleGen's `--resize` exactly: a stretch keeps a box normalised on the outer pixel edges the
same fraction of the image; a letterbox (the default, `--box-resize`) moves it into the padded frame after these
features are made (box_frame.py), the area staying the decoded image's. Pixel boxes are normalised by
the file's own size as decoded (EXIF orientation applied, before any resize: `images.decode_sized`); boxes of
every source are taken as drawn on the upright image, as labelling tools show it, so orientation moves pixels
and boxes alike. The decoded size is checked first (`decode_faults`): a declared size (COCO, VOC) that differs
rejects the image (`size_mismatch`), a box past the image or under one pixel of it rejects its row.

>>> image = ImageBoxes("a.jpg", "train", (Box(10, 20, 50, 80, normalized=False),), ("cat",), (1,), (False,))
>>> features = box_features(image, (100, 160), {"cat": 1})
>>> features["image/object/bbox/xmin"].tolist(), features["image/object/class/label"].tolist()
([0.125], [1])
>>> features["image/object/area"].tolist()  # 40 x 60 pixels
[2400.0]
>>> decode_faults(ImageBoxes("a.jpg", "train", (Box(0.1, 0.1, 0.105, 0.5),), ("cat",), (7,), (False,)), (100, 160))
{7: ('box_below_pixel', 'the box is 64 x 0.5 pixels of the decoded 160x100 image (width x height): under one pixel')}
"""
from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.box_schema import AREA, BBOX, BOX_FEATURES, CLASS_LABEL, CLASS_TEXT, IS_CROWD
from .box_types import Box, ImageBoxes

# Box sides as fractions of the image's, in buckets a person reads (COCO's small/medium/large are in pixels
# and depend on the resize; fractions do not).
SIDE_EDGES = (0.0, 0.05, 0.1, 0.2, 0.4, 1.0)


class BoxesUnfit(ValueError):
    """Rows of an image whose boxes do not fit the decoded picture: `faults`, row → (reject code, reason)."""

    def __init__(self, faults: dict[int, tuple[str, str]]) -> None:
        super().__init__(next(iter(faults.values()))[1])
        self.faults = faults


def decode_faults(image: ImageBoxes, size: tuple[int, int]) -> dict[int, tuple[str, str]]:
    """Row → (code, reason) of each row that the decoded `size` (height, width) refutes: every row when the
    declared size differs (`size_mismatch`), else each box past the image or under one pixel of it."""
    return _fitted(image, size)[1]


def _fitted(image: ImageBoxes, size: tuple[int, int]) -> tuple[list[Box], dict[int, tuple[str, str]]]:
    """The image's boxes normalised by the decoded `size`, and the faults of `decode_faults`."""
    height, width = size
    if image.declared is not None and tuple(image.declared) != (height, width):
        reason = (f"the annotation declares {image.declared[1]}x{image.declared[0]} (width x height), the image "
                  f"decodes to {width}x{height} (EXIF orientation applied)")
        return [], {row: ("size_mismatch", reason) for row in image.rows or (0,)}
    boxes, faults = [], {}
    for row, box in zip(image.rows, image.boxes):  # a kept image's rows are its boxes' rows, in box order
        try:
            box = box.normalize(height, width)
        except ValueError as error:
            faults[row] = ("box_past_image", f"{error} (the image as decoded, EXIF orientation applied)")
            continue
        sides = ((box.xmax - box.xmin) * width, (box.ymax - box.ymin) * height)
        if min(sides) < 1.0:
            faults[row] = ("box_below_pixel", f"the box is {sides[0]:.3g} x {sides[1]:.3g} pixels of the decoded "
                                              f"{width}x{height} image (width x height): under one pixel")
        boxes.append(box)
    return boxes, faults


def label_map(classes: list[str]) -> dict[str, int]:
    """Class name → id from 1, in sorted order: the TF OD API's label map (0 is the background)."""
    return {name: number for number, name in enumerate(sorted(set(classes)), start=1)}


def box_features(image: ImageBoxes, size: tuple[int, int], labels: dict[str, int]) -> dict[str, Any]:
    """The features of `image`'s boxes, its pixel boxes normalised by `size` (height, width); BoxesUnfit when
    the size refutes a row (`decode_faults`)."""
    boxes, faults = _fitted(image, size)
    if faults:
        raise BoxesUnfit(faults)
    # Arrays: a negative example's empty lists keep their kinds (float, int64), as a parser expects them.
    corners = [(b.ymin, b.xmin, b.ymax, b.xmax) for b in boxes]
    columns = np.array(corners, np.float64).reshape(-1, 4).astype(np.float32).T
    features: dict[str, Any] = {name: columns[i] for i, name in enumerate(BBOX)}
    features[CLASS_TEXT] = [name.encode() for name in image.classes]
    features[CLASS_LABEL] = np.array([labels[name] for name in image.classes], np.int64)
    features[IS_CROWD] = np.array(image.crowd, np.int64)
    # In float64, then rounded once, as numpy's columns would be: a few boxes cost less as Python floats.
    features[AREA] = np.array([(xmax - xmin) * (ymax - ymin) * size[0] * size[1] for ymin, xmin, ymax, xmax in corners],
                              np.float64).astype(np.float32)
    return features


@dataclass
class BoxFigures:
    """A split's box statistics, merged across workers: boxes per image, box sides, boxes per class."""

    images: int = 0
    boxes_per_image: Counter = field(default_factory=Counter)
    side_buckets: np.ndarray = field(default_factory=lambda: np.zeros(len(SIDE_EDGES) - 1, np.int64))
    classes: Counter = field(default_factory=Counter)

    def add(self, boxes: list[Box], classes: tuple[str, ...]) -> None:
        self.add_corners([(b.ymin, b.xmin, b.ymax, b.xmax) for b in boxes], classes)

    def add_corners(self, corners: list[tuple[float, float, float, float]], classes: tuple[str, ...]) -> None:
        """An image's normalised boxes as (ymin, xmin, ymax, xmax): plain floats, a few per image, so a loop
        of math.sqrt and bisect (about 1 µs a box) rather than numpy's per-call cost."""
        self.images += 1
        self.boxes_per_image[len(corners)] += 1
        self.classes.update(classes)
        for ymin, xmin, ymax, xmax in corners:
            side = math.sqrt(max(ymax - ymin, 0.0) * max(xmax - xmin, 0.0))  # of a normalised box
            self.side_buckets[min(bisect.bisect_right(SIDE_EDGES, side) - 1, len(SIDE_EDGES) - 2)] += 1

    def merge(self, other: BoxFigures) -> BoxFigures:
        return BoxFigures(self.images + other.images, self.boxes_per_image + other.boxes_per_image,
                          self.side_buckets + other.side_buckets, self.classes + other.classes)

    def as_json(self) -> dict[str, Any]:
        """For the manifest: counts keyed as text, sides by bucket `[low, high)` of sqrt(box area / image area)."""
        buckets = {f"{low:g}-{high:g}": int(count)
                   for low, high, count in zip(SIDE_EDGES, SIDE_EDGES[1:], self.side_buckets)}
        return {"images": self.images, "boxes": int(sum(self.classes.values())),
                "boxes_per_image": {str(k): v for k, v in sorted(self.boxes_per_image.items())},
                "box_side_fraction": buckets, "boxes_per_class": dict(sorted(self.classes.items()))}

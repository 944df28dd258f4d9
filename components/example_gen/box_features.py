"""An image's boxes as the TF Object Detection API stores them in a tf.train.Example, and a split's box figures.

The features (`core.example_proto.encode_example` takes them as they are):
- `image/object/bbox/ymin|xmin|ymax|xmax`: float lists, normalised to the image's outer pixel edges;
- `image/object/class/text`: the class names (bytes); `image/object/class/label`: their ids in the label
  map, from 1 (the TF OD API keeps 0 for the background); `image/object/is_crowd`: an ignore region (COCO's
  crowd, VOC's difficult), 0 or 1; `image/object/area`: the box's area in pixels of the decoded image.
An image without objects (a negative example) has the features with empty lists, so every example parses
with the same spec.

Boxes survive ExampleGen's `--resize` exactly: the resize stretches the whole image, and a box normalised on
the outer pixel edges is the same fraction of the image before and after it. Pixel boxes are normalised by
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
    height, width = size
    if image.declared is not None and tuple(image.declared) != (height, width):
        reason = (f"the annotation declares {image.declared[1]}x{image.declared[0]} (width x height), the image "
                  f"decodes to {width}x{height} (EXIF orientation applied)")
        return {row: ("size_mismatch", reason) for row in image.rows or (0,)}
    faults = {}
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
    return faults


def label_map(classes: list[str]) -> dict[str, int]:
    """Class name → id from 1, in sorted order: the TF OD API's label map (0 is the background)."""
    return {name: number for number, name in enumerate(sorted(set(classes)), start=1)}


def box_features(image: ImageBoxes, size: tuple[int, int], labels: dict[str, int]) -> dict[str, Any]:
    """The features of `image`'s boxes, its pixel boxes normalised by `size` (height, width); BoxesUnfit when
    the size refutes a row (`decode_faults`)."""
    faults = decode_faults(image, size)
    if faults:
        raise BoxesUnfit(faults)
    boxes = [box.normalize(*size) for box in image.boxes]
    # Arrays: a negative example's empty lists keep their kinds (float, int64), as a parser expects them.
    features: dict[str, Any] = {name: np.array([getattr(box, name.rsplit("/", 1)[1]) for box in boxes], np.float32)
                                for name in BBOX}
    features[CLASS_TEXT] = [name.encode() for name in image.classes]
    features[CLASS_LABEL] = np.array([labels[name] for name in image.classes], np.int64)
    features[IS_CROWD] = np.array(image.crowd, np.int64)
    features[AREA] = np.array([(b.xmax - b.xmin) * (b.ymax - b.ymin) * size[0] * size[1] for b in boxes], np.float32)
    return features


@dataclass
class BoxFigures:
    """A split's box statistics, merged across workers: boxes per image, box sides, boxes per class."""

    images: int = 0
    boxes_per_image: Counter = field(default_factory=Counter)
    side_buckets: np.ndarray = field(default_factory=lambda: np.zeros(len(SIDE_EDGES) - 1, np.int64))
    classes: Counter = field(default_factory=Counter)

    def add(self, boxes: list[Box], classes: tuple[str, ...]) -> None:
        self.images += 1
        self.boxes_per_image[len(boxes)] += 1
        self.classes.update(classes)
        for box in boxes:
            side = np.sqrt(max(box.ymax - box.ymin, 0.0) * max(box.xmax - box.xmin, 0.0))  # of a normalised box
            bucket = min(int(np.searchsorted(SIDE_EDGES, side, side="right")) - 1, len(SIDE_EDGES) - 2)
            self.side_buckets[bucket] += 1

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

"""Object detection's shared names: how boxes are stored in examples, named in a manifest and served.

The one contract between ExampleGen (writes), the Trainer (reads, exports), the Evaluator, the infra check
and predict (read what the model answers); docs/detection.md tells it in prose.

Examples (the TF Object Detection API's features, `BOX_FEATURES`): `image/object/bbox/ymin|xmin|ymax|xmax`
float lists normalised to [0, 1] on the image's outer pixel edges, `image/object/class/text` (bytes),
`image/object/class/label` (int64 ids in the label map, from 1: 0 is the OD API's background) and
`image/object/is_crowd` (int64 0/1: an ignore region, COCO's crowd or VOC's difficult: neither a positive nor a
negative in training or evaluation) and `image/object/area` (float32: the box's area in pixels of the image as
decoded, EXIF orientation applied, before any resize: COCO's area ranges are measured on it). An image without
objects has the eight features with empty lists.

Manifest: each of the eight is a `FeatureSpec` with role `BOX_ROLE`, shape [-1] (a list of any length),
encoding "value"; `manifest.extra[BOXES_KEY]` is {"label_map": {name: id}, "units": ..., "max_boxes": K,
"format": "automl" | "header" | "coco"}. The target a Trainer trains on is `BOX_TARGET`.

Served model (`ModelInfo.task == "detection"`): both signatures answer the OD API's outputs
`DETECTION_OUTPUTS`: `detection_boxes` float32 [N, M, 4] (ymin, xmin, ymax, xmax) normalised to the image
the request carried (a letterboxed image's padding and scale undone: core/letterbox.py), `detection_scores`
float32 [N, M] descending, `detection_classes` float32 [N, M] label
map ids (from 1; 0 past `num_detections`), `num_detections` float32 [N]. M is `MAX_DETECTIONS`.

Class ids (`LabelMap`, the one owner of the rule): the label map {name: id} keeps the source's ids (COCO's
category ids, YOLO's `names` index + 1, a CSV's names sorted from 1); the model trains on 0-based class
indices, index i being the i-th smallest id, and serves the id itself.

>>> labels = LabelMap({"tri": 12, "disc": 3, "square": 7})
>>> labels.names, labels.training_ids([12, 3]).tolist(), labels.served_ids([0, 2]).tolist()
(('disc', 'square', 'tri'), [2, 0], [3, 12])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

import numpy as np

BBOX = ("image/object/bbox/ymin", "image/object/bbox/xmin", "image/object/bbox/ymax", "image/object/bbox/xmax")
CLASS_TEXT, CLASS_LABEL, IS_CROWD = "image/object/class/text", "image/object/class/label", "image/object/is_crowd"
AREA = "image/object/area"
BOX_FEATURES = (*BBOX, CLASS_TEXT, CLASS_LABEL, IS_CROWD, AREA)
BOX_DTYPES = {**{name: "float32" for name in BBOX}, CLASS_TEXT: "string", CLASS_LABEL: "int64", IS_CROWD: "int64",
              AREA: "float32"}
BOX_ROLE = "boxes"
BOX_TARGET = "image/object"  # the name a detection target goes by (--label, ModelInfo.label)
BOXES_KEY = "boxes"  # manifest.extra's key
DETECTION_TASK = "detection"
# Each served output's dimensions: "N" the request's examples, "M" MAX_DETECTIONS, a number that size. The one
# table of the outputs' shapes: the Evaluator holds a signature's declared ones to it (loaded_model.py), the infra
# check the arrays a signature returns (tasks/detection/serving_checks.py).
DETECTION_OUTPUT_SHAPES: dict[str, tuple[str | int, ...]] = {
    "detection_boxes": ("N", "M", 4), "detection_scores": ("N", "M"), "detection_classes": ("N", "M"),
    "num_detections": ("N",)}
DETECTION_OUTPUTS = tuple(DETECTION_OUTPUT_SHAPES)
MAX_DETECTIONS = 100  # the OD API's max_total_detections and COCO's AR@100


def detection_output_shape(name: str, examples: int | None, detections: int | None = MAX_DETECTIONS
                           ) -> tuple[int | None, ...]:
    """Output `name`'s shape for `examples` in the request and `detections` per example (None: any number).

    >>> detection_output_shape("detection_boxes", 8), detection_output_shape("detection_scores", None, None)
    ((8, 100, 4), (None, None))
    """
    sizes = {"N": examples, "M": detections}
    return tuple(sizes[dim] if isinstance(dim, str) else dim for dim in DETECTION_OUTPUT_SHAPES[name])


def detection_shape_text(name: str) -> str:
    """Output `name`'s shape as the contract writes it: "[N, M, 4]"."""
    return "[" + ", ".join(map(str, DETECTION_OUTPUT_SHAPES[name])) + "]"


@dataclass(frozen=True, eq=False)
class LabelMap(Mapping[str, int]):
    """A detector's label map {class name: id} (ids >= 1, unique; 0 is the OD API's background). Class index i,
    what the model trains on, is the i-th smallest id; the id is what the model serves and the examples store.
    A read-only mapping name → id, equal to any mapping with the same pairs (a manifest's dict)."""

    ids_by_name: Mapping[str, int]

    def __post_init__(self) -> None:
        pairs = {str(name): int(i) for name, i in dict(self.ids_by_name).items()}
        if not pairs:
            raise ValueError("a label map needs at least one class")
        if min(pairs.values()) < 1 or len(set(pairs.values())) != len(pairs):
            raise ValueError(f"label map ids must be unique and >= 1 (0 is the background), got {pairs}")
        object.__setattr__(self, "ids_by_name", dict(sorted(pairs.items(), key=lambda pair: pair[1])))

    def __getitem__(self, name: str) -> int:
        return self.ids_by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids_by_name)

    def __len__(self) -> int:
        return len(self.ids_by_name)

    @classmethod
    def of_names(cls, names: Iterable[str]) -> "LabelMap":
        """Names in class index order with ids 1..K: a model exported before its label map kept other ids."""
        return cls({name: i for i, name in enumerate(names, start=1)})

    @property
    def ids(self) -> tuple[int, ...]:
        """The ids, ascending: `ids[i]` is class index i's id."""
        return tuple(self.ids_by_name.values())

    @property
    def names(self) -> tuple[str, ...]:
        """The names in class index order."""
        return tuple(self.ids_by_name)

    def training_ids(self, label_ids: Iterable[float] | np.ndarray) -> np.ndarray:
        """Label map ids → 0-based class indices (int64); ValueError naming the first id not in the map."""
        ids = np.rint(np.asarray(label_ids, np.float64)).astype(np.int64).reshape(-1)
        known = np.asarray(self.ids, np.int64)
        index = np.minimum(np.searchsorted(known, ids), len(known) - 1)
        outside = known[index] != ids
        if outside.any():
            raise ValueError(f"label id {int(ids[outside][0])} is not in the label map {self.describe()}")
        return index

    def served_ids(self, class_indices: Iterable[int] | np.ndarray) -> np.ndarray:
        """0-based class indices → label map ids (int64)."""
        return np.asarray(self.ids, np.int64)[np.asarray(class_indices, np.int64)]

    def describe(self) -> str:
        """The map in one line: {disc: 3, square: 7}."""
        return "{" + ", ".join(f"{name}: {i}" for name, i in self.ids_by_name.items()) + "}"

"""Object detection's shared names: how boxes are stored in examples, named in a manifest and served.

The one contract between ExampleGen (writes), the Trainer (reads, exports), the Evaluator, the infra check
and predict (read what the model answers); docs/detection.md tells it in prose.

Examples (the TF Object Detection API's features, `BOX_FEATURES`): `image/object/bbox/ymin|xmin|ymax|xmax`
float lists normalised to [0, 1] on the image's outer pixel edges, `image/object/class/text` (bytes),
`image/object/class/label` (int64 ids in the label map, from 1: 0 is the OD API's background) and
`image/object/is_crowd` (int64 0/1). An image without objects has the seven features with empty lists.

Manifest: each of the seven is a `FeatureSpec` with role `BOX_ROLE`, shape [-1] (a list of any length),
encoding "value"; `manifest.extra[BOXES_KEY]` is {"label_map": {name: id}, "units": ..., "max_boxes": K,
"format": "automl" | "header" | "coco"}. The target a Trainer trains on is `BOX_TARGET`.

Served model (`ModelInfo.task == "detection"`): both signatures answer the OD API's outputs
`DETECTION_OUTPUTS`: `detection_boxes` float32 [N, M, 4] (ymin, xmin, ymax, xmax) normalised to the image
the request carried, `detection_scores` float32 [N, M] descending, `detection_classes` float32 [N, M] label
map ids (from 1; 0 past `num_detections`), `num_detections` float32 [N]. M is `MAX_DETECTIONS`.

>>> served_class_id(0), training_class_id(1)
(1, 0)
"""
from __future__ import annotations

BBOX = ("image/object/bbox/ymin", "image/object/bbox/xmin", "image/object/bbox/ymax", "image/object/bbox/xmax")
CLASS_TEXT, CLASS_LABEL, IS_CROWD = "image/object/class/text", "image/object/class/label", "image/object/is_crowd"
BOX_FEATURES = (*BBOX, CLASS_TEXT, CLASS_LABEL, IS_CROWD)
BOX_DTYPES = {**{name: "float32" for name in BBOX}, CLASS_TEXT: "string", CLASS_LABEL: "int64", IS_CROWD: "int64"}
BOX_ROLE = "boxes"
BOX_TARGET = "image/object"  # the name a detection target goes by (--label, ModelInfo.label)
BOXES_KEY = "boxes"  # manifest.extra's key
DETECTION_TASK = "detection"
# Each served output's dimensions: "N" the request's examples, "M" MAX_DETECTIONS, a number that size. The one
# table of the outputs' shapes: the Evaluator holds a signature's declared ones to it (loaded_model.py), the infra
# check the arrays a signature returns (detection_checks.py).
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


def served_class_id(training_id: int) -> int:
    """The label map id (from 1) the model serves for a 0-based class id it trains on."""
    return training_id + 1


def training_class_id(label_map_id: int) -> int:
    """The 0-based class id trained on for a label map id (from 1)."""
    return label_map_id - 1

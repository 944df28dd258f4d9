"""Streaming one split through a detector (and a baseline) into COCO accumulators, batch by batch.

    result = score_detections(plan, {"candidate": model, "baseline": baseline}, batch_size=64)
    result.accumulators["candidate"].summarize().stats        # COCO's 12 numbers

The split is read in manifest order by the one input stream, each example's serialized bytes kept; the
serialized batch goes to each model's `serving_default` (core/box_schema.py's outputs), and the true boxes are
parsed from the same bytes with the reader's parse spec (the box features, `true_box_parser`). Both sides'
classes are label map ids (what ExampleGen stores and the model serves; the executor has checked that the eval
data's label map is each model's), turned into the accumulator's class indices by the one rule,
`box_schema.LabelMap`: an id outside the model's map is an error, never another class. Image i of the split is
image id i; its height and width in pixels are the manifest's image shape (ExampleGen stores every image at one
size). COCO's area ranges are in the original image's pixels when the examples carry `image/object/area` (each
box's area before any resize): a detection's area is scaled by its image's factor, the median over its true
boxes of their area over their stored area; an image without true boxes takes the mean factor of the images
before it (1 before the first). Examples without the feature are measured in stored pixels, as before.

Memory: each image is matched as it comes and only its per-detection and per-box records are kept
(`DetectionAccumulator`), plus each example's slice value ids: bytes grow with boxes, never with pixels. The
first `PLOT_IMAGES` images' stored bytes, true boxes and the candidate's detections are kept for the plot.
Crowd boxes (`is_crowd` 1) are COCO's crowd regions, as pycocotools scores them (core/detection_metrics.py): never
counted as objects, and a detection on one is neither a true nor a false positive. An example whose
`is_crowd` list is empty has no crowds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from ...core.box_schema import (AREA, BBOX, BOX_FEATURES, CLASS_LABEL, DETECTION_OUTPUTS, IS_CROWD, MAX_DETECTIONS,
                                LabelMap)
from ...core.detection_metrics import DetectionAccumulator, coco_boxes
from ...core.input_stream import SERIALIZED
from ...core.manifest import FeatureSpec, Manifest
from ...core.reader import feature_spec
from ...evaluator.outputs import EvaluationError
from ...evaluator.loaded_model import LoadedModel
from ...evaluator.scorer import PROGRESS_SECONDS, ScoringPlan, batches, split_stream
from ...evaluator.slicing import slice_key

PLOT_IMAGES = 16  # images drawn with their boxes (detection_plots' grid)
PLOT_BYTES = 16 << 20  # and at most this many bytes of their stored images
TRUE_BOX_FEATURES = (*BBOX, CLASS_LABEL, IS_CROWD)  # what scoring reads of an example's true boxes
# Per example: boxes, label ids, crowd flags, areas in original pixels (None without the area feature).
TrueBoxes = tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray | None]]


def image_feature(manifest: Manifest, examples: str) -> FeatureSpec:
    """The examples' one image feature: a detector's boxes are normalised to it, its shape is every image's size."""
    images = [feature for feature in manifest.features.values() if feature.role == "image"]
    if len(images) != 1:
        raise EvaluationError(f"detection needs exactly one image feature in {examples}, found "
                              f"{[feature.name for feature in images]}")
    return images[0]


def check_box_examples(manifest: Manifest, examples: str) -> None:
    """EvaluationError unless the examples have the box features and exactly one image feature."""
    # AREA is optional: examples made before it have their area ranges measured in stored pixels.
    missing = [name for name in BOX_FEATURES if name not in manifest.features and name != AREA]
    if missing:
        raise EvaluationError(f"a detection model needs the box features of {examples}, which lacks {missing}: "
                              "is it a box index's ExampleGen output?")
    image_feature(manifest, examples)


def true_box_parser(manifest: Manifest) -> Callable[[tf.Tensor], TrueBoxes]:
    """Serialized examples of `manifest`'s output → per example its normalised (ymin, xmin, ymax, xmax) boxes
    [K, 4], label map ids [K], crowd flags [K] (bool; all False where its `is_crowd` list is empty) and areas [K]
    in original pixels (None when the examples have no `AREA`, or an example with boxes has an empty list). The
    box features are parsed with the reader's spec (core/reader.py's `feature_spec`: a list is a ragged row)."""
    with_area = AREA in manifest.features
    spec = feature_spec(manifest, list(TRUE_BOX_FEATURES) + ([AREA] if with_area else []))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def parsed_boxes(records: tf.Tensor) -> tuple[tf.Tensor, ...]:
        parsed = tf.io.parse_example(records, spec)
        corners = tf.stack([parsed[name].flat_values for name in BBOX], axis=-1)
        areas = parsed[AREA] if with_area else parsed[CLASS_LABEL]  # a stand-in, dropped
        return (corners, parsed[CLASS_LABEL].flat_values, parsed[CLASS_LABEL].row_lengths(),
                parsed[IS_CROWD].flat_values, parsed[IS_CROWD].row_lengths(), areas.flat_values, areas.row_lengths())

    def parse(records: tf.Tensor) -> TrueBoxes:
        *boxes, areas, area_lengths = (value.numpy() for value in parsed_boxes(records))
        found = _per_example(*boxes)
        if not with_area:
            return (*found, [None] * len(found[0]))
        if np.any((area_lengths != boxes[2]) & (area_lengths > 0)):
            raise ValueError(f"{AREA} lists {area_lengths.tolist()} for {boxes[2].tolist()} boxes")
        split = np.split(areas.astype(np.float64), np.cumsum(area_lengths)[:-1])
        return (*found, [area if len(area) == count else None for area, count in zip(split, boxes[2])])

    return parse


def _per_example(corners: np.ndarray, labels: np.ndarray, lengths: np.ndarray, crowd: np.ndarray,
                 crowd_lengths: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """A batch's flat box values cut into each example's, its crowd flags checked against its boxes."""
    if len(corners) != len(labels):
        raise ValueError(f"{len(corners)} boxes for {len(labels)} class labels")
    ends = np.cumsum(lengths)[:-1]
    flags = np.split(crowd.astype(bool), np.cumsum(crowd_lengths)[:-1])
    flags = [np.zeros(count, bool) if not len(flag) else flag for flag, count in zip(flags, lengths)]
    if any(len(flag) != count for flag, count in zip(flags, lengths)):
        raise ValueError(f"{IS_CROWD} lists {crowd_lengths.tolist()} for {lengths.tolist()} boxes")
    return np.split(corners, ends), np.split(labels, ends), flags


def to_class_ids(label_ids: np.ndarray, label_map: LabelMap, what: str) -> np.ndarray:
    """Label map ids → the accumulator's class indices (`LabelMap.training_ids`); EvaluationError naming `what`
    for an id outside the model's label map."""
    try:
        return label_map.training_ids(label_ids)
    except ValueError as err:
        raise EvaluationError(f"{what}: {err}") from None


def area_scale(boxes: np.ndarray, areas: np.ndarray | None, height: int, width: int) -> float | None:
    """Original pixels per stored pixel of an image: the median over its true boxes of their given area over
    their area on the stored (height, width); None without areas or boxes of positive stored area.

    >>> area_scale(np.array([[0.0, 0.0, 0.5, 0.5]]), np.array([400.0]), 10, 10)  # 25 stored px, 400 original
    16.0
    """
    if areas is None:
        return None
    coco = coco_boxes(boxes, height, width)
    stored = coco[:, 2] * coco[:, 3]
    usable = stored > 0
    return float(np.median(areas[usable] / stored[usable])) if usable.any() else None


@dataclass
class PlotSample:
    """The first images as stored, their true boxes and the candidate's detections (0-based classes)."""

    images: list[bytes] = field(default_factory=list)
    true_boxes: list[np.ndarray] = field(default_factory=list)
    true_classes: list[np.ndarray] = field(default_factory=list)
    det_boxes: list[np.ndarray] = field(default_factory=list)
    det_scores: list[np.ndarray] = field(default_factory=list)
    det_classes: list[np.ndarray] = field(default_factory=list)

    def wants(self, image: bytes) -> bool:
        kept = sum(map(len, self.images))
        return len(self.images) < PLOT_IMAGES and (not self.images or kept + len(image) <= PLOT_BYTES)


@dataclass(frozen=True)
class DetectionScores:
    accumulators: dict[str, DetectionAccumulator]  # "candidate", "baseline"
    examples: int
    boxes: int  # true boxes in the split
    seconds: float
    slices: dict[str, tuple[list[str], np.ndarray]]  # column → (value keys, each image's key index)
    sample: PlotSample


def _served(model: LoadedModel, records: tf.Tensor, count: int) -> dict[str, np.ndarray]:
    out = model.signature(examples=records)
    served = {name: out[name].numpy() for name in DETECTION_OUTPUTS}
    if served["detection_boxes"].shape[:1] != (count,) or served["detection_boxes"].shape[-1] != 4:
        raise EvaluationError(f"model {model.path}: detection_boxes of shape {served['detection_boxes'].shape} "
                              f"for {count} examples")
    return served


class _Batcher:
    """Adds each batch's images to every model's accumulator; keeps the plot sample and the slice values."""

    def __init__(self, plan: ScoringPlan, image: FeatureSpec, models: dict[str, LoadedModel]) -> None:
        self.plan, self.image, self.models = plan, image, models
        self.height, self.width = image.shape[0], image.shape[1]
        self.classes = plan.info.num_classes
        self.label_map = models["candidate"].label_map or LabelMap.of_names(plan.info.class_names)
        self.accumulators = {role: DetectionAccumulator(self.classes, MAX_DETECTIONS) for role in models}
        self.scales: list[float] = []  # each image's area factor so far (an image without boxes takes their mean)
        self.parse_true_boxes = true_box_parser(plan.manifest)
        self.sample, self.seen, self.boxes = PlotSample(), 0, 0
        self.slice_values: dict[str, list[Any]] = {column: [] for column in plan.slice_by}

    def add(self, element: dict[str, tf.Tensor]) -> None:
        records = element[SERIALIZED]
        true_boxes, true_labels, true_crowd, true_areas = self.parse_true_boxes(records)
        true_classes = [to_class_ids(labels, self.label_map, f"example {self.seen + i} of split {self.plan.split!r}")
                        for i, labels in enumerate(true_labels)]
        scales = [self._scale(boxes, areas) for boxes, areas in zip(true_boxes, true_areas)]
        for column in self.plan.slice_by:
            self.slice_values[column].extend(element[column].numpy().reshape(-1).tolist())
        for role, model in self.models.items():
            try:
                served = _served(model, records, len(true_boxes))
            except tf.errors.OpError as err:
                raise EvaluationError(f"{role} {model.path} could not score examples {self.seen}.. of split "
                                      f"{self.plan.split!r} ({type(err).__name__}): {err.message}") from err
            self._add_model(role, model, served, (true_boxes, true_classes, true_crowd, true_areas, scales), element)
        self.boxes += sum(len(classes) for classes in true_classes)
        self.seen += len(true_boxes)

    def _scale(self, boxes: np.ndarray, areas: np.ndarray | None) -> float:
        """The image's area factor (`area_scale`); 1 without the area feature."""
        found = area_scale(boxes, areas, self.height, self.width)
        if found is None:
            return float(np.mean(self.scales)) if areas is not None and self.scales else 1.0
        self.scales.append(found)
        return found

    def _add_model(self, role: str, model: LoadedModel, served: dict[str, np.ndarray],
                   truths: tuple[list[np.ndarray], ...], element: dict[str, tf.Tensor]) -> None:
        """`truths`: each example's true boxes, class indices, crowd flags, original areas and area factor."""
        accumulator, counts = self.accumulators[role], served["num_detections"].astype(np.int64)
        label_map = model.label_map or self.label_map
        for i, (boxes, classes, crowd, areas, scale) in enumerate(zip(*truths)):
            count = int(counts[i])
            found = to_class_ids(served["detection_classes"][i, :count], label_map,
                                 f"{role} {model.path} on example {self.seen + i}")
            accumulator.add_image(self.seen + i, self.height, self.width, boxes, classes,
                                  served["detection_boxes"][i, :count], served["detection_scores"][i, :count], found,
                                  true_crowd=crowd, true_areas=areas, area_scale=scale)
            if role == "candidate":
                self._sample(element[self.image.name][i].numpy(), boxes, classes, served, i, found)

    def _sample(self, image: bytes, boxes: np.ndarray, classes: np.ndarray, served: dict[str, np.ndarray],
                i: int, found: np.ndarray) -> None:
        sample = self.sample
        if not sample.wants(image):
            return
        count = len(found)
        sample.images.append(image)
        sample.true_boxes.append(boxes)
        sample.true_classes.append(classes)
        sample.det_boxes.append(served["detection_boxes"][i, :count])
        sample.det_scores.append(served["detection_scores"][i, :count])
        sample.det_classes.append(found)

    def slices(self) -> dict[str, tuple[list[str], np.ndarray]]:
        out = {}
        for column, values in self.slice_values.items():
            distinct, inverse = np.unique(np.asarray(values), return_inverse=True)
            out[column] = ([slice_key(value) for value in distinct], inverse.reshape(-1))
        return out


def score_detections(plan: ScoringPlan, models: dict[str, LoadedModel], batch_size: int,
                     echo: Callable[[str], None] = print) -> DetectionScores:
    """Every example of the split through every model once, matched into per-model accumulators."""
    image = image_feature(plan.manifest, plan.examples)
    batcher, started = _Batcher(plan, image, models), time.perf_counter()
    next_report = started + PROGRESS_SECONDS
    for element in batches(split_stream(plan, batch_size), plan, count_key=SERIALIZED):
        batcher.add(element)
        if time.perf_counter() >= next_report:
            echo(f"evaluate: {batcher.seen:,} of {plan.num_examples:,} examples scored")
            next_report += PROGRESS_SECONDS
    if batcher.seen != plan.num_examples:
        raise EvaluationError(f"split {plan.split!r} of {plan.examples}: read {batcher.seen} examples, "
                              f"the manifest lists {plan.num_examples}")
    return DetectionScores(batcher.accumulators, batcher.seen, batcher.boxes, time.perf_counter() - started,
                           batcher.slices(), batcher.sample)

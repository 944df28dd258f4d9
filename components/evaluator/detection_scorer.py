"""Streaming one split through a detector (and a baseline) into COCO accumulators, batch by batch.

    result = score_detections(plan, {"candidate": model, "baseline": baseline}, batch_size=64)
    result.accumulators["candidate"].summarize().stats        # COCO's 12 numbers

The split is read in manifest order by the one input stream, each example's serialized bytes kept; the
serialized batch goes to each model's `serving_default` (core/box_schema.py's outputs), and the true boxes are
parsed from the same bytes with the reader's parse spec (the box features, `true_box_parser`). Both sides'
classes are label map ids from 1 (what ExampleGen stores and the model serves), turned into the accumulator's
0-based ids by the one rule `box_schema.training_class_id`. Image i of the split is image id i; its height and
width in pixels (COCO's area ranges) are the manifest's image shape: ExampleGen stores every image at one size.

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

from ..core.box_schema import BBOX, CLASS_LABEL, DETECTION_OUTPUTS, IS_CROWD, MAX_DETECTIONS, training_class_id
from ..core.detection_metrics import DetectionAccumulator
from ..core.input_stream import SERIALIZED
from ..core.manifest import FeatureSpec, Manifest
from ..core.reader import feature_spec
from .config import EvaluationError
from .loaded_model import LoadedModel
from .scorer import PROGRESS_SECONDS, ScoringPlan, batches, image_feature, split_stream
from .slicing import slice_key

PLOT_IMAGES = 16  # images drawn with their boxes (detection_plots' grid)
PLOT_BYTES = 16 << 20  # and at most this many bytes of their stored images
TRUE_BOX_FEATURES = (*BBOX, CLASS_LABEL, IS_CROWD)  # what scoring reads of an example's true boxes
TrueBoxes = tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]  # per example: boxes, label ids, crowd


def true_box_parser(manifest: Manifest) -> Callable[[tf.Tensor], TrueBoxes]:
    """Serialized examples of `manifest`'s output → per example its normalised (ymin, xmin, ymax, xmax) boxes
    [K, 4], label map ids [K] and crowd flags [K] (bool; all False where its `is_crowd` list is empty). The box
    features are parsed with the reader's spec (core/reader.py's `feature_spec`: a list is a ragged row)."""
    spec = feature_spec(manifest, list(TRUE_BOX_FEATURES))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def parsed_boxes(records: tf.Tensor) -> tuple[tf.Tensor, ...]:
        parsed = tf.io.parse_example(records, spec)
        corners = tf.stack([parsed[name].flat_values for name in BBOX], axis=-1)
        return (corners, parsed[CLASS_LABEL].flat_values, parsed[CLASS_LABEL].row_lengths(),
                parsed[IS_CROWD].flat_values, parsed[IS_CROWD].row_lengths())

    def parse(records: tf.Tensor) -> TrueBoxes:
        return _per_example(*(value.numpy() for value in parsed_boxes(records)))

    return parse


def _per_example(corners: np.ndarray, labels: np.ndarray, lengths: np.ndarray, crowd: np.ndarray,
                 crowd_lengths: np.ndarray) -> TrueBoxes:
    """A batch's flat box values cut into each example's, its crowd flags checked against its boxes."""
    if len(corners) != len(labels):
        raise ValueError(f"{len(corners)} boxes for {len(labels)} class labels")
    ends = np.cumsum(lengths)[:-1]
    flags = np.split(crowd.astype(bool), np.cumsum(crowd_lengths)[:-1])
    flags = [np.zeros(count, bool) if not len(flag) else flag for flag, count in zip(flags, lengths)]
    if any(len(flag) != count for flag, count in zip(flags, lengths)):
        raise ValueError(f"{IS_CROWD} lists {crowd_lengths.tolist()} for {lengths.tolist()} boxes")
    return np.split(corners, ends), np.split(labels, ends), flags


def to_class_ids(label_ids: np.ndarray, num_classes: int, what: str) -> np.ndarray:
    """Label map ids (from 1) → the accumulator's class ids (from 0); EvaluationError outside the label map."""
    ids = training_class_id(np.rint(np.asarray(label_ids)).astype(np.int64))
    outside = (ids < 0) | (ids >= num_classes)
    if outside.any():
        raise EvaluationError(f"{what}: label map id {int(np.asarray(label_ids)[outside][0])} is outside the "
                              f"model's label map (ids 1..{num_classes})")
    return ids


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
        self.accumulators = {role: DetectionAccumulator(self.classes, MAX_DETECTIONS) for role in models}
        self.parse_true_boxes = true_box_parser(plan.manifest)
        self.sample, self.seen, self.boxes = PlotSample(), 0, 0
        self.slice_values: dict[str, list[Any]] = {column: [] for column in plan.slice_by}

    def add(self, element: dict[str, tf.Tensor]) -> None:
        records = element[SERIALIZED]
        true_boxes, true_labels, true_crowd = self.parse_true_boxes(records)
        true_classes = [to_class_ids(labels, self.classes, f"example {self.seen + i} of split {self.plan.split!r}")
                        for i, labels in enumerate(true_labels)]
        for column in self.plan.slice_by:
            self.slice_values[column].extend(element[column].numpy().reshape(-1).tolist())
        for role, model in self.models.items():
            try:
                served = _served(model, records, len(true_boxes))
            except tf.errors.OpError as err:
                raise EvaluationError(f"{role} {model.path} could not score examples {self.seen}.. of split "
                                      f"{self.plan.split!r} ({type(err).__name__}): {err.message}") from err
            self._add_model(role, model, served, (true_boxes, true_classes, true_crowd), element)
        self.boxes += sum(len(classes) for classes in true_classes)
        self.seen += len(true_boxes)

    def _add_model(self, role: str, model: LoadedModel, served: dict[str, np.ndarray],
                   truths: tuple[list[np.ndarray], ...], element: dict[str, tf.Tensor]) -> None:
        """`truths`: each example's true boxes, 0-based classes and crowd flags."""
        accumulator, counts = self.accumulators[role], served["num_detections"].astype(np.int64)
        for i, (boxes, classes, crowd) in enumerate(zip(*truths)):
            count = int(counts[i])
            found = to_class_ids(served["detection_classes"][i, :count], self.classes,
                                 f"{role} {model.path} on example {self.seen + i}")
            accumulator.add_image(self.seen + i, self.height, self.width, boxes, classes,
                                  served["detection_boxes"][i, :count], served["detection_scores"][i, :count], found,
                                  true_crowd=crowd)
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

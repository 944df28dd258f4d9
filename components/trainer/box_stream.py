"""Detection's part of the Trainer's stream: parsed box lists → a padded box batch → CenterNet targets.

The stream parses an example's boxes as lists of any length (core/reader.py: ragged rows, or one record's
dense list on the per-record path). The model step pads them to K = the manifest's `max_boxes` (ExampleGen
rejects an image with more), so every tensor after it is dense and of a fixed shape: what batching, the
tf.data service and tf.distribute carry. Label map ids become class indices (an id's rank among the label map's
ids, `box_schema.LabelMap`; an id outside the map stops the stream naming it); an `is_crowd` box becomes an
ignore region (`box_augment.ignore_class`); padding rows are zero boxes of class `box_augment.PADDING_CLASS`.

After the batch, `DetectionBatches` is the stream's augment stage for every detection stream (training and
evaluation alike): the configured box-aware ops (training only), then `detection_targets` on the model's grid.

    target = padded_boxes(parsed, max_boxes=5, label_ids=(3, 7, 12))  # {"boxes": [B, 5, 4], "classes", "count"}
    stage = DetectionBatches(grid=(24, 24), num_classes=3, ops=("flip",), seed=0, global_batch=64)
    images, targets = stage(images, target, index, rows)   # targets: detection_targets' dict
"""
from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

from ..core.box_schema import BBOX, CLASS_LABEL, IS_CROWD
from ..core.errors import ConfigError
from .augment import Rows
from .box_augment import PADDING_CLASS, BoxBatch, augment_detection_batch, check_box_ops, ignore_class
from .detector_targets import detection_targets

BOXES, CLASSES, COUNT = "boxes", "classes", "count"


def padded_boxes(parsed: dict[str, tf.Tensor], max_boxes: int, label_ids: tuple[int, ...]) -> dict[str, tf.Tensor]:
    """float32 boxes [B, K, 4] (ymin, xmin, ymax, xmax), int32 class indices [B, K], int32 count [B].

    `label_ids`: the label map's ids, ascending (`LabelMap.ids`): class index i is label_ids[i]."""
    columns = [_dense(parsed[name], max_boxes, 0.0, tf.float32) for name in BBOX]
    stored = _dense(parsed[CLASS_LABEL], max_boxes, 0, tf.int64)
    count = tf.cast(_lengths(parsed[CLASS_LABEL]), tf.int32)
    real = tf.range(max_boxes)[None, :] < count[:, None]
    same = tf.equal(stored[..., None], tf.constant(label_ids, tf.int64))  # [B, K, C]
    unknown = real & ~tf.reduce_any(same, axis=-1)
    checked = tf.debugging.Assert(~tf.reduce_any(unknown), [
        f"label ids not in the label map (ids {list(label_ids)}):", tf.boolean_mask(stored, unknown)], summarize=10)
    with tf.control_dependencies([checked]):
        index = tf.cast(tf.argmax(tf.cast(same, tf.int32), axis=-1), tf.int32)
    crowd = _dense(parsed[IS_CROWD], max_boxes, 0, tf.int64) > 0 if IS_CROWD in parsed else tf.zeros_like(real)
    classes = tf.where(real, tf.where(crowd, ignore_class(index), index), PADDING_CLASS)
    boxes = tf.where(real[..., None], tf.stack(columns, axis=-1), 0.0)
    return {BOXES: boxes, CLASSES: classes, COUNT: tf.minimum(count, max_boxes)}


def _dense(values: tf.Tensor | tf.RaggedTensor, width: int, fill: float | int, dtype: tf.DType) -> tf.Tensor:
    """[B, width]: rows padded with `fill` (a longer row is cut: ExampleGen never writes one)."""
    if not isinstance(values, tf.RaggedTensor):  # the per-record path: one record's list, batched as [1, n]
        values = tf.RaggedTensor.from_tensor(values)
    return tf.cast(values.to_tensor(default_value=tf.cast(fill, values.dtype), shape=[None, width]), dtype)


def _lengths(values: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
    if isinstance(values, tf.RaggedTensor):
        return values.row_lengths()
    return tf.fill([tf.shape(values)[0]], tf.shape(values, out_type=tf.int64)[1])


def check_detection_ops(ops: tuple[str, ...]) -> None:
    """ConfigError (one line) for an augmentation that cannot move boxes with the pixels."""
    try:
        check_box_ops(ops)
    except ValueError as err:
        raise ConfigError(f"augment: {err}") from None


@dataclass(frozen=True)
class DetectionBatches:
    """The detection stream's batch stage: `ops` (box-aware, seeded by (seed, global batch index) as every
    augmentation is), then the CenterNet targets on `grid` (the model's heat-map rows and columns)."""

    grid: tuple[int, int]
    num_classes: int
    ops: tuple[str, ...] = ()
    seed: int = 0
    global_batch: int = 1

    def __post_init__(self) -> None:
        check_detection_ops(self.ops)

    def __call__(self, images: tf.Tensor, target: dict[str, tf.Tensor], index: tf.Tensor,
                 rows: tf.Tensor) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        boxes = BoxBatch(target[BOXES], target[CLASSES], target[COUNT])
        if self.ops:
            seed = tf.stack([tf.constant(self.seed, tf.int64), tf.cast(index, tf.int64)])
            images, boxes = augment_detection_batch(images, boxes, self.ops, seed, rows=Rows(rows, self.global_batch))
        return images, detection_targets(boxes.boxes, boxes.classes, boxes.count, self.grid, self.num_classes)

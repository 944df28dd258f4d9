"""A served detector's post-processing after the heat-map peaks: duplicates suppressed, boxes put in the request's frame.

`suppress_duplicates`: class-aware IoU non-maximum suppression, as the TF Object Detection API's post-processing
runs after its box decoder (per class, IoU threshold 0.5-0.6 in its configs). CenterNet's 3x3 max-pool keeps one
peak per neighbourhood, but an object whose centre falls between cells, or a large one, can light two peaks a
cell or more apart: two boxes of one object, the second a false positive. Classes are kept apart by shifting
each class's boxes by 2 x its index (boxes lie in [0, 1]), so one suppression per image never compares two
classes. The op is `tf.image.non_max_suppression`, i.e. NonMaxSuppressionV3 (TensorFlow 1.9 on), not V5
(`..._with_scores`, 1.15) nor CombinedNonMaxSuppression (1.14): an older TF Serving lacks V5 (kserve#997).

`in_request_frame`: boxes answered on a letterboxed input (ExampleGen's `--box-resize letterbox`) normalised to
the image the request carried: the padding and scale undone (`box_augment.unletterbox_boxes`, resize_with_pad's
arithmetic) and clipped to [0, 1].

Both take and give the OD API's outputs as `detector.decode_detections` makes them: boxes [B, M, 4], scores
[B, M] descending, classes [B, M], num_detections [B]; rows past the count are zeros.
"""
from __future__ import annotations

import tensorflow as tf

from .box_augment import unletterbox_boxes

# The top of the OD API's usual 0.5-0.6: on issue 65's mixed photos 0.6 was not worse than no suppression in any of
# AP50, AP, AP75, AR100 on two models, 0.5 cost 0.0003 AP50 on the better one (docs/trainer.md). 0 turns it off.
NMS_IOU = 0.6
_CLASS_SHIFT = 2.0  # > the side of the unit square: shifted classes never overlap


def suppress_duplicates(found: dict[str, tf.Tensor], iou: float) -> dict[str, tf.Tensor]:
    """`found` with each box dropped that overlaps a higher-scored box of its class by more than `iou`; the
    kept ones in score order, padded back to M rows. `iou` 0: `found` as it is."""
    if not iou:
        return found
    boxes, scores, classes = found["detection_boxes"], found["detection_scores"], found["detection_classes"]
    slots = boxes.shape[1]

    def one(args: tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, ...]:
        image_boxes, image_scores, image_classes, count = args
        real = tf.range(slots) < tf.cast(count, tf.int32)
        shifted = image_boxes + (image_classes * _CLASS_SHIFT)[:, None]
        kept = tf.image.non_max_suppression(shifted, tf.where(real, image_scores, -1.0), slots, iou_threshold=iou,
                                            score_threshold=-0.5)  # drops only the padding rows (score -1)
        missing = slots - tf.shape(kept)[0]
        pad = lambda value: tf.pad(tf.gather(value, kept), [[0, missing]] + [[0, 0]] * (value.shape.rank - 1))  # noqa
        return pad(image_boxes), pad(image_scores), pad(image_classes), tf.cast(tf.shape(kept)[0], tf.float32)

    count = found["num_detections"]
    kept = tf.map_fn(one, (boxes, scores, classes, count), fn_output_signature=(
        tf.TensorSpec([slots, 4], tf.float32), tf.TensorSpec([slots], tf.float32), tf.TensorSpec([slots], tf.float32),
        tf.TensorSpec([], tf.float32)))
    return {**found, "detection_boxes": kept[0], "detection_scores": kept[1], "detection_classes": kept[2],
            "num_detections": kept[3]}


def in_request_frame(found: dict[str, tf.Tensor], sizes: tf.Tensor, stored: tuple[int, int]) -> dict[str, tf.Tensor]:
    """`found`'s boxes, answered on images letterboxed from `sizes` (int [B, 2], each request's (h, w) as decoded,
    EXIF orientation applied) into `stored` (H, W), normalised to the requests' images; padding rows stay 0."""
    boxes = found["detection_boxes"]
    real = tf.range(tf.shape(boxes)[1])[None, :] < tf.cast(found["num_detections"], tf.int32)[:, None]
    moved = unletterbox_boxes(boxes, sizes, stored)
    return {**found, "detection_boxes": tf.where(real[..., None], moved, 0.0)}

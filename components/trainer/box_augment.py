"""Box-aware augmentation for object detection: boxes move with the pixels `augment_batch` moves.

Boxes are a padded batch (`BoxBatch`): float32 [B, K, 4] in the TF Object Detection API's order
(ymin, xmin, ymax, xmax), normalised to [0, 1] by the image's outer pixel edges; int32 classes
[B, K]; an int32 count [B]. Rows at and beyond an example's count are padding: boxes 0.0 and classes
`PADDING_CLASS` (-1, because 0 is a real class id here: labels are 0-based, as in the classifiers). An ignore
region of class c (a COCO crowd, a VOC difficult object) is a row of class `ignore_class(c)` = -2 - c: the ops move
and drop it as any box, and the targets neither centre an object on it nor count it as background of class c.

The geometric ops that keep a box a box (`flip`, `flip_vertical`, `crop`) take their draws from the
image ops' own matrices (`augment.op_matrix` on `augment.op_seeds`), so an example's boxes follow
its pixels under the same (seed, global batch index) row scheme: the same draws whichever worker or
resume point makes the batch. `rotate` is refused: an axis-aligned box of a rotated box holds
background as well as the object. Photometric ops (`brightness`, `contrast`) leave boxes as they are.

    images, boxes = augment_detection_batch(images, BoxBatch(boxes, classes, count), ("flip", "crop"),
                                            tf.constant([seed, global_batch_index]))

`unletterbox_boxes` maps boxes made on `tf.image.resize_with_pad`'s (H, W) output of an (h, w) image back onto
the image, for predictions made on the letterboxed image (ExampleGen letterboxes with core/letterbox.py).
"""
from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from .augment import FLIPS, GEOMETRIC, Rows, augment_batch, op_matrix, op_seeds

BOX_OPS = ("flip", "flip_vertical", "crop")  # the geometric ops after which a box is still a tight box
PADDING_CLASS = -1
# A box survives a crop when at least half of its area stays inside the window. Less than half visible is
# mostly a fragment (a wheel for a car) whose label teaches the detector to fire on fragments; more than half
# is still recognisably the object, and dropping it would label a mostly visible object as background.
MIN_VISIBLE = 0.5


class BoxBatch(NamedTuple):
    """A batch's boxes: float32 [B, K, 4] (ymin, xmin, ymax, xmax) in [0, 1], int32 classes [B, K], int32 count [B].

    Rows >= count are padding: boxes zero, classes PADDING_CLASS; an ignore region's class is `ignore_class(c)`.
    """

    boxes: tf.Tensor
    classes: tf.Tensor
    count: tf.Tensor


def ignore_class(classes: tf.Tensor) -> tf.Tensor:
    """Class c's ignore-region code -2 - c, and back (its own inverse): below PADDING_CLASS, so never a class."""
    return -2 - classes


def augment_detection_batch(images: tf.Tensor, boxes: BoxBatch, ops: tuple[str, ...], seed: tf.Tensor,
                            rows: Rows | None = None) -> tuple[tf.Tensor, BoxBatch]:
    """`augment_batch`'s images (float32 [B, H, W, C]) and the boxes moved with them; seed int [2] is
    (seed, global batch index) and `rows` the examples' rows of their global batch, as for `augment_batch`."""
    check_box_ops(ops)
    augmented, _ = augment_batch(images, None, ops, seed, rows=rows)
    return augmented, augment_boxes(boxes, ops, seed, tf.shape(images)[1:3], rows)


def augment_boxes(boxes: BoxBatch, ops: tuple[str, ...], seed: tf.Tensor, image_size: tf.Tensor | tuple[int, int],
                  rows: Rows | None = None) -> BoxBatch:
    """The boxes after `augment_batch(images, None, ops, seed, rows=rows)` on images of `image_size` (H, W).

    Each op in `ops`' order: `augment_batch` composes output→input matrices in that order, so a box
    goes through their inverses in the same order.
    """
    check_box_ops(ops)
    rows = rows if rows is not None else Rows.every(tf.shape(boxes.boxes)[0])
    size, seeds = tf.cast(image_size, tf.int32), op_seeds(ops, seed)
    for index, op in enumerate(ops):
        if op in FLIPS:
            matrix = op_matrix(op, seeds[index], rows, size[0], size[1])
            axis = 0 if op == "flip" else 1  # the matrix's x row for flip, y row for flip_vertical
            boxes = flip_boxes(boxes, matrix[:, axis, axis] < 0.0, op)
        elif op == "crop":
            boxes = crop_boxes(boxes, _window(op_matrix(op, seeds[index], rows, size[0], size[1]), size))
    return boxes


def crop_window(ops: tuple[str, ...], seed: tf.Tensor, image_size: tf.Tensor | tuple[int, int],
                rows: Rows) -> tf.Tensor:
    """float32 [B, 4] (ymin, xmin, ymax, xmax): the normalised part of each image (of `rows`) that the `crop` of
    `augment_batch(..., ops, seed, rows=rows)` zooms into (`Rows.every(B)` for a whole global batch)."""
    size = tf.cast(image_size, tf.int32)
    return _window(op_matrix("crop", op_seeds(ops, seed)[ops.index("crop")], rows, size[0], size[1]), size)


def check_box_ops(ops: tuple[str, ...]) -> None:
    """Refuses geometric ops that would not keep boxes tight (today `rotate`)."""
    unsupported = [op for op in ops if op in GEOMETRIC and op not in BOX_OPS]
    if unsupported:
        raise ValueError(f"{', '.join(unsupported)} cannot move boxes (box-aware ops: {', '.join(BOX_OPS)})")


def flip_boxes(boxes: BoxBatch, flip: tf.Tensor, op: str) -> BoxBatch:
    """Mirrors the boxes of the examples where `flip` (bool [B]): left-right for "flip", top-bottom for
    "flip_vertical". A mirrored box's min and max edges swap; padding stays zero."""
    ymin, xmin, ymax, xmax = tf.unstack(boxes.boxes, axis=-1)
    if op == "flip":
        mirrored = tf.stack([ymin, 1.0 - xmax, ymax, 1.0 - xmin], axis=-1)
    elif op == "flip_vertical":
        mirrored = tf.stack([1.0 - ymax, xmin, 1.0 - ymin, xmax], axis=-1)
    else:
        raise ValueError(f"not a flip: {op}")
    return _padded(boxes._replace(boxes=tf.where(flip[:, None, None], mirrored, boxes.boxes)))


def crop_boxes(boxes: BoxBatch, window: tf.Tensor) -> BoxBatch:
    """The boxes in each example's crop window (float32 [B, 4], normalised (ymin, xmin, ymax, xmax)), clipped to
    [0, 1]; a box with less than MIN_VISIBLE of its area inside is dropped and the rest move to the front."""
    low = tf.tile(window[:, None, :2], [1, 1, 2])
    extent = tf.tile(window[:, None, 2:] - window[:, None, :2], [1, 1, 2])
    moved = (boxes.boxes - low) / extent
    clipped = tf.clip_by_value(moved, 0.0, 1.0)
    # The ratio is the same in window and image coordinates (each axis is scaled once). A zero-area box has
    # nothing visible and is dropped.
    visible = tf.math.divide_no_nan(_area(clipped), _area(moved))
    keep = _real(boxes.count, tf.shape(boxes.boxes)[1]) & (visible >= MIN_VISIBLE)
    return _compacted(BoxBatch(clipped, boxes.classes, boxes.count), keep)


def unletterbox_boxes(boxes: tf.Tensor, source_size: tf.Tensor, target_size: tuple[int, int]) -> tf.Tensor:
    """ExampleGen's letterbox undone (core/letterbox.py's `letterboxed_boxes`, in the serving graph): boxes
    normalised to the letterboxed (H, W) image, back on the (h, w) original (`source_size` [2], or [B, 2] with
    boxes [B, K, 4]);
    clipped to [0, 1], since a prediction may reach into the padding, which is outside the original."""
    scale, offset = _letterbox(source_size, target_size)
    return tf.clip_by_value((boxes - offset) / scale, 0.0, 1.0)


def _letterbox(source_size: tf.Tensor, target_size: tuple[int, int]) -> tuple[tf.Tensor, tf.Tensor]:
    """Scale and offset [..., 1, 4] of the letterbox, with resize_with_pad's own float32 arithmetic: whole-pixel
    resized sizes (floored) and paddings (floored halves), so boxes land on the pixels that op writes."""
    source = tf.cast(source_size, tf.float32)
    if source.shape.rank == 2:  # one size per example: broadcast over each example's K boxes
        source = source[:, None, :]
    height, width = source[..., 0], source[..., 1]
    target_h, target_w = float(target_size[0]), float(target_size[1])
    ratio = tf.maximum(width / target_w, height / target_h)
    resized_h, resized_w = tf.floor(height / ratio), tf.floor(width / ratio)
    top = tf.maximum(0.0, tf.floor((target_h - height / ratio) / 2.0))
    left = tf.maximum(0.0, tf.floor((target_w - width / ratio) / 2.0))
    scale = tf.stack([resized_h / target_h, resized_w / target_w] * 2, axis=-1)
    offset = tf.stack([top / target_h, left / target_w] * 2, axis=-1)
    return scale, offset


def _window(matrix: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
    """The normalised input window [B, 4] an axis-aligned output→input matrix samples: the output's outer pixel
    edges (-0.5 and n - 0.5 in the matrix's pixel-centre coordinates) mapped through it, +0.5 back to edges."""
    height, width = tf.cast(size[0], tf.float32), tf.cast(size[1], tf.float32)

    def edges(scale: tf.Tensor, shift: tf.Tensor, n: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return (shift - 0.5 * scale + 0.5) / n, (shift + (n - 0.5) * scale + 0.5) / n

    ymin, ymax = edges(matrix[:, 1, 1], matrix[:, 1, 2], height)
    xmin, xmax = edges(matrix[:, 0, 0], matrix[:, 0, 2], width)
    return tf.stack([ymin, xmin, ymax, xmax], axis=1)


def _area(boxes: tf.Tensor) -> tf.Tensor:
    return tf.maximum(boxes[..., 2] - boxes[..., 0], 0.0) * tf.maximum(boxes[..., 3] - boxes[..., 1], 0.0)


def _real(count: tf.Tensor, slots: tf.Tensor) -> tf.Tensor:
    """bool [B, K]: the rows below each example's count."""
    return tf.range(slots)[None, :] < tf.cast(count, tf.int32)[:, None]


def _compacted(boxes: BoxBatch, keep: tf.Tensor) -> BoxBatch:
    """The kept rows first, in their order (a stable sort on "dropped"), count updated, the rest re-padded."""
    order = tf.argsort(tf.cast(tf.logical_not(keep), tf.int32), axis=1, stable=True)
    return _padded(BoxBatch(tf.gather(boxes.boxes, order, batch_dims=1), tf.gather(boxes.classes, order, batch_dims=1),
                            tf.reduce_sum(tf.cast(keep, tf.int32), axis=1)))


def _padded(boxes: BoxBatch) -> BoxBatch:
    """Padding rows set to zero boxes and PADDING_CLASS (a flip would have made 1 - 0 of them)."""
    real = _real(boxes.count, tf.shape(boxes.boxes)[1])
    return BoxBatch(tf.where(real[..., None], boxes.boxes, 0.0),
                    tf.where(real, tf.cast(boxes.classes, tf.int32), PADDING_CLASS), tf.cast(boxes.count, tf.int32))

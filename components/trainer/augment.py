"""Train-time augmentation on whole batches: random per example, vectorized, deterministic per seed.

Geometric ops (flip, flip_vertical, rotate, crop) are composed into one projective transform per
example and applied to the image with bilinear sampling and to its mask with nearest-neighbour
sampling: the same matrix, so image and mask stay aligned and mask ids stay ids. Photometric ops
(brightness, contrast) touch images only. Randomness is stateless and keyed on each example's place
in the stream: every op draws for a whole global batch from (seed, global batch index) and each
example keeps its row's draws (`Rows`). So a seed gives the same augmented stream every run, the
workers of a multi-worker run (each holding its slice of the global batch) draw independently, and
an example gets the same draws whichever worker, how many workers or which resume point made it
(as long as the global batch is the same: a resume keeps it).

A JPEG training set can crop at decode time instead (`crop_windows` + the input stream's fused
`decode_and_crop_jpeg`): the window comes from the same random draws as the `crop` op's matrix
(scale and offsets, rounded to whole pixels), and `augment_batch(..., cropped=True)` then applies
the other ops with their usual draws. What differs: the crop comes first (before flip/rotate,
whatever its place in `ops`), and `rotate` reflects at the crop's edges, not the image's.

    images, masks = augment_batch(images, masks, ("flip", "rotate"), tf.constant([0, 7]))  # a whole global batch
    # worker 1 of 2, its 32 examples of global batch 7 (64 examples): rows 32..63 of that batch's draws
    images, masks = augment_batch(images, masks, ("flip", "rotate"), tf.constant([0, 7]),
                                  rows=Rows(32 + tf.range(32), 64))

Eval data never goes through here: the Trainer gives this to the input stream's augment stage
(core/input_stream.py: after the batch) of its training stream only.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import tensorflow as tf

GEOMETRIC = ("flip", "flip_vertical", "rotate", "crop")
FLIPS = {"flip": 2, "flip_vertical": 1}  # the axis each reverses, in [B, H, W, C] and in [B, H, W]
MAX_ROTATION = math.pi / 12  # ±15°
MIN_CROP_SCALE = 0.8  # a crop keeps at least 80 % of each side
MAX_BRIGHTNESS_DELTA = 0.1
CONTRAST_RANGE = (0.8, 1.2)


class Rows(NamedTuple):
    """Which rows (int [B]) of a global batch of `total` examples a batch holds: each op draws for the whole
    global batch and keeps these rows, so an example's draws depend on its place, not on who augments it.

    >>> rows = Rows(tf.constant([2, 3]), 4)
    >>> whole = Rows.every(4).uniform(tf.constant([1, 2], tf.int64))
    >>> bool(tf.reduce_all(rows.uniform(tf.constant([1, 2], tf.int64)) == whole[2:]))
    True
    """

    index: tf.Tensor
    total: tf.Tensor | int

    @staticmethod
    def every(batch: tf.Tensor | int) -> Rows:
        """All the rows of a batch that is a whole global batch."""
        return Rows(tf.range(batch), batch)

    def uniform(self, seed: tf.Tensor, shape: tuple[int, ...] = (3,), minval: float = 0.0,
                maxval: float = 1.0) -> tf.Tensor:
        """[B, *shape] uniform draws: the global batch's draws for `seed`, at these rows ([total, *shape] drawn:
        a few floats an example, whatever the share of the batch kept)."""
        drawn = tf.random.stateless_uniform([self.total, *shape], seed=seed, minval=minval, maxval=maxval)
        return tf.gather(drawn, self.index)


def augment_batch(images: tf.Tensor, masks: tf.Tensor | None, ops: tuple[str, ...], seed: tf.Tensor,
                  cropped: bool = False, rows: Rows | None = None) -> tuple[tf.Tensor, tf.Tensor | None]:
    """images float32 [B, H, W, C]; masks int [B, H, W] or None; seed int [2]: (seed, global batch index).

    `rows`: the examples' rows in their global batch (default: the batch is a whole global batch).
    `cropped=True`: the images were already cropped by `crop_windows` (fused decode): skip `crop`.
    """
    seeds, rows = op_seeds(ops, seed), rows if rows is not None else Rows.every(tf.shape(images)[0])
    geometric = [op for op in ops if op in GEOMETRIC and not (cropped and op == "crop")]
    if geometric and set(geometric) <= set(FLIPS):
        images, masks = _flipped(images, masks, ops, seeds, rows)
    elif geometric:
        matrices = _identity(tf.shape(images)[0])
        for index, op in enumerate(ops):
            if op in geometric:
                matrices = tf.linalg.matmul(matrices, _matrix(op, images, seeds[index], rows))
        images = _warp(images, matrices, "BILINEAR")
        if masks is not None:
            warped = _warp(tf.cast(masks[..., tf.newaxis], tf.float32), matrices, "NEAREST")
            masks = tf.cast(tf.round(warped[..., 0]), masks.dtype)
    for index, op in enumerate(ops):
        if op == "brightness":
            images = _brightness(images, seeds[index], rows)
        elif op == "contrast":
            images = _contrast(images, seeds[index], rows)
    return images, masks


def crop_windows(ops: tuple[str, ...], seed: tf.Tensor, batch: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """int32 [B, 4] windows (y, x, h, w) of the `crop` op for `augment_batch(..., ops, seed)`'s global batch of B.

    The same draws as the op's matrix: side scale s in [MIN_CROP_SCALE, 1] (both sides, so the
    aspect ratio stays), offsets uniform over the room left; sizes and offsets rounded to pixels.
    """
    u = Rows.every(batch).uniform(op_seeds(ops, seed)[ops.index("crop")])
    scale = MIN_CROP_SCALE + (1.0 - MIN_CROP_SCALE) * u[:, 0]
    crop_h = tf.clip_by_value(tf.round(scale * height), 1.0, float(height))
    crop_w = tf.clip_by_value(tf.round(scale * width), 1.0, float(width))
    y, x = tf.round(u[:, 2] * (height - crop_h)), tf.round(u[:, 1] * (width - crop_w))
    return tf.cast(tf.stack([y, x, crop_h, crop_w], axis=1), tf.int32)


def op_seeds(ops: tuple[str, ...], seed: tf.Tensor) -> tf.Tensor:
    """One seed per op (by position in `ops`), from the batch's seed."""
    return tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=len(ops) + 1)


def flip_drawn(uniform: tf.Tensor) -> tf.Tensor:
    """Which examples a flip op mirrors, from each one's first uniform draw: the one rule for the flip-only
    path, the warp's matrix and the boxes."""
    return uniform < 0.5


def _flipped(images: tf.Tensor, masks: tf.Tensor | None, ops: tuple[str, ...], seeds: tf.Tensor,
             rows: Rows) -> tuple[tf.Tensor, tf.Tensor | None]:
    """Flips alone, by reversing the drawn examples: the warp's result (integer sampling positions) at a fraction of its cost.

    The projective warp costs ~3 ms of CPU per 224x224 RGB example; a reverse, a copy.
    """
    for index, op in enumerate(ops):
        if op in FLIPS:
            flip = flip_drawn(rows.uniform(seeds[index])[:, 0])
            axis = FLIPS[op]
            size = tf.shape(images)[axis]
            # Each example's row/column order, gathered in one pass (a broadcast tf.where over a
            # reversed copy cost ~3x more CPU on 224x224 RGB batches).
            order = tf.where(flip[:, None], tf.range(size - 1, -1, -1), tf.range(size)[None, :])
            images = tf.gather(images, order, axis=axis, batch_dims=1)
            if masks is not None:
                masks = tf.gather(masks, order, axis=axis, batch_dims=1)
    return images, masks


def _identity(batch: tf.Tensor) -> tf.Tensor:
    return tf.eye(3, batch_shape=[batch], dtype=tf.float32)


def _matrix(op: str, images: tf.Tensor, seed: tf.Tensor, rows: Rows | None = None) -> tf.Tensor:
    rows = rows if rows is not None else Rows.every(tf.shape(images)[0])
    return op_matrix(op, seed, rows, tf.shape(images)[1], tf.shape(images)[2])


def op_matrix(op: str, seed: tf.Tensor, rows: Rows, height: tf.Tensor, width: tf.Tensor) -> tf.Tensor:
    """[B, 3, 3] maps from output pixel (x, y, 1) to input pixel of a height x width image, as
    ImageProjectiveTransform wants: the draw of geometric `op` the pixels get, and boxes too (box_augment.py).

    Made for the whole global batch, then `rows` taken: tf.cos and tf.sin are vectorized, and an entry's bits
    depend on its place in the vector (a slice's own angles came out ~5e-7 off the whole batch's).
    """
    height, width = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    u = Rows.every(rows.total).uniform(seed)
    zero, one = tf.zeros([rows.total]), tf.ones([rows.total])
    if op in ("flip", "flip_vertical"):
        flip = tf.where(flip_drawn(u[:, 0]), -one, one)
        size = width if op == "flip" else height
        shift = tf.where(flip < 0, size - 1.0, zero)
        lines = ([flip, zero, shift], [zero, one, zero]) if op == "flip" else ([one, zero, zero], [zero, flip, shift])
    elif op == "rotate":
        angle = (2.0 * u[:, 0] - 1.0) * MAX_ROTATION
        cos, sin = tf.cos(angle), tf.sin(angle)
        cx, cy = (width - 1.0) / 2.0, (height - 1.0) / 2.0
        lines = ([cos, -sin, cx - cos * cx + sin * cy], [sin, cos, cy - sin * cx - cos * cy])
    else:  # crop: zoom into a random window of scale s, resampled to the full size
        scale = MIN_CROP_SCALE + (1.0 - MIN_CROP_SCALE) * u[:, 0]
        tx, ty = u[:, 1] * (1.0 - scale) * (width - 1.0), u[:, 2] * (1.0 - scale) * (height - 1.0)
        lines = ([scale, zero, tx], [zero, scale, ty])
    last = [zero, zero, one]
    whole = tf.stack([tf.stack(lines[0], -1), tf.stack(lines[1], -1), tf.stack(last, -1)], axis=1)
    return tf.gather(whole, rows.index)


def _warp(images: tf.Tensor, matrices: tf.Tensor, interpolation: str) -> tf.Tensor:
    flat = tf.reshape(matrices, [-1, 9])[:, :8] / matrices[:, 2:3, 2]
    return tf.raw_ops.ImageProjectiveTransformV3(
        images=images, transforms=flat, output_shape=tf.shape(images)[1:3], fill_value=0.0,
        interpolation=interpolation, fill_mode="REFLECT")


def _brightness(images: tf.Tensor, seed: tf.Tensor, rows: Rows) -> tf.Tensor:
    return images + rows.uniform(seed, (1, 1, 1), -MAX_BRIGHTNESS_DELTA, MAX_BRIGHTNESS_DELTA)


def _contrast(images: tf.Tensor, seed: tf.Tensor, rows: Rows) -> tf.Tensor:
    factor = rows.uniform(seed, (1, 1, 1), *CONTRAST_RANGE)
    mean = tf.reduce_mean(images, axis=[1, 2], keepdims=True)
    return (images - mean) * factor + mean


class AugmentLayer(tf.keras.layers.Layer):
    """The same ops as a Keras layer in front of the model (runs on the accelerator, training only).

    Only for classification: a layer sees images, not the masks that would have to move with them. Each
    replica holds its part of the step's global batch and draws that part's rows (`_replica_rows`).
    """

    def __init__(self, ops: tuple[str, ...], seed: int, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.ops, self.seed = tuple(ops), int(seed)
        self.calls = tf.Variable(0, dtype=tf.int64, trainable=False, name="augment_calls")

    def call(self, images: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        if not training:
            return images
        self.calls.assign_add(1)
        augmented, _ = augment_batch(images, None, self.ops, tf.stack([tf.constant(self.seed, tf.int64), self.calls]),
                                     rows=_replica_rows(tf.shape(images)[0]))
        return augmented

    def get_config(self) -> dict:
        return {**super().get_config(), "ops": list(self.ops), "seed": self.seed}


def _replica_rows(batch: tf.Tensor) -> Rows:
    """This replica's rows of the step's global batch: tf.distribute gives replica k (of n, across workers) the
    k-th of n equal parts, so replica k's example r is row k·B + r (one replica: rows 0..B-1)."""
    context = tf.distribute.get_replica_context()
    if context is None:  # cross-replica context: the whole batch
        return Rows.every(batch)
    replica = tf.cast(context.replica_id_in_sync_group, tf.int32)
    return Rows(replica * batch + tf.range(batch), context.num_replicas_in_sync * batch)

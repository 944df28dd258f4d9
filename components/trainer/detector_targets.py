"""CenterNet ("Objects as Points", Zhou et al. 2019) training targets from a padded box batch.

Boxes follow box_augment.py: float32 [B, K, 4] (ymin, xmin, ymax, xmax) normalised to the image's outer
pixel edges, int32 classes [B, K] (PADDING_CLASS -1 past each example's count; an ignore region of class c,
`box_augment.ignore_class(c)`), int32 count [B]. A grid of
G rows covers [0, 1] in G equal cells, so cell i spans [i / G, (i + 1) / G] and a normalised coordinate c
lies in cell floor(c * G) at offset c * G - floor(c * G).

Batched, because the Trainer's stream batches before it augments (input_stream.py: batch → augment) and
boxes move with the batch's pixels; a single example goes through with a leading axis of 1. Graph-safe:
the batch may be unknown, K and the grid are static, so it runs in a tf.data map and a tf.function.

    targets = detection_targets(boxes, classes, count, grid_size=16, num_classes=3)
    targets["heatmap"]   # float32 [B, G, G, C]: 1.0 at each object's centre cell, a Gaussian around it
    targets["size"]      # float32 [B, K, 2]: (h, w) normalised
    targets["offset"]    # float32 [B, K, 2]: the centre's sub-cell offset (y, x) in [0, 1)
    targets["indices"]   # int32 [B, K]: the centre cell, row * GW + column
    targets["mask"]      # float32 [B, K]: 1 for a real box, 0 for padding and ignore regions
    targets["heatmap_mask"]  # float32 [B, G, G, C]: 0 in the cells an ignore region of class c touches, else 1

An ignore region (a COCO crowd, a VOC difficult object) is neither positive nor negative, as the Evaluator scores
it: no centre, size or offset, and its class's heat-map cells that it touches are no background either (the
focal loss leaves their negative term out; an object's own centre there stays a positive).
"""
from __future__ import annotations

import tensorflow as tf

from .box_augment import ignore_class

# CenterNet's gaussian_radius: the radius keeps a box whose corners move by it at IoU >= 0.7 with the truth.
MIN_OVERLAP = 0.7
TARGET_KEYS = ("heatmap", "size", "offset", "indices", "mask", "heatmap_mask")


def grid_shape(grid_size: int | tuple[int, int]) -> tuple[int, int]:
    """(rows, columns) of `grid_size`: one int for a square grid."""
    if isinstance(grid_size, int):
        return grid_size, grid_size
    rows, columns = grid_size
    return int(rows), int(columns)


def gaussian_radius(height: tf.Tensor, width: tf.Tensor, min_overlap: float = MIN_OVERLAP) -> tf.Tensor:
    """CenterNet's radius (in cells) for boxes of `height` x `width` cells: the smallest of its three cases.

    As published (CornerNet's code, which CenterNet reuses), each root is divided by 2 rather than 2a; the
    Gaussians it gives are the ones CenterNet's results were trained with, so it is kept as is.
    """
    size_sum, area = height + width, height * width
    b1, c1 = size_sum, area * (1 - min_overlap) / (1 + min_overlap)
    r1 = (b1 + tf.sqrt(tf.maximum(b1 ** 2 - 4 * c1, 0.0))) / 2
    b2, c2 = 2 * size_sum, (1 - min_overlap) * area
    r2 = (b2 + tf.sqrt(tf.maximum(b2 ** 2 - 16 * c2, 0.0))) / 2
    a3, b3, c3 = 4 * min_overlap, -2 * min_overlap * size_sum, (min_overlap - 1) * area
    r3 = (b3 + tf.sqrt(tf.maximum(b3 ** 2 - 4 * a3 * c3, 0.0))) / 2
    return tf.minimum(tf.minimum(r1, r2), r3)


def detection_targets(boxes: tf.Tensor, classes: tf.Tensor, count: tf.Tensor, grid_size: int | tuple[int, int],
                      num_classes: int) -> dict[str, tf.Tensor]:
    """The CenterNet targets of a padded box batch (module docstring); rows >= count or of class < 0 are no
    object, and those of an ignore class (<= -2) are ignore regions."""
    rows, columns = grid_shape(grid_size)
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    classes = tf.cast(classes, tf.int32)
    slots = boxes.shape[1] if boxes.shape[1] is not None else tf.shape(boxes)[1]
    listed = tf.range(slots)[None, :] < tf.cast(count, tf.int32)[:, None]
    real = listed & (classes >= 0) & (classes < num_classes)
    ignored = listed & (ignore_class(classes) >= 0) & (ignore_class(classes) < num_classes)
    scale = tf.constant([rows, columns], tf.float32)
    centre = (boxes[..., :2] + boxes[..., 2:]) / 2 * scale  # [B, K, 2] in cells
    size = boxes[..., 2:] - boxes[..., :2]
    # A centre on the far edge (1.0) belongs to the last cell, as a pixel on that edge would.
    cell = tf.clip_by_value(tf.floor(centre), 0.0, scale - 1)
    cell_int = tf.cast(cell, tf.int32)
    weight = tf.cast(real, tf.float32)
    return {
        "heatmap": _heatmap(cell, size * scale, classes, real, (rows, columns), num_classes),
        "size": size * weight[..., None],
        "offset": (centre - cell) * weight[..., None],
        "indices": tf.where(real, cell_int[..., 0] * columns + cell_int[..., 1], 0),
        "mask": weight,
        "heatmap_mask": _heatmap_mask(boxes, ignore_class(classes), ignored, (rows, columns), num_classes),
    }


def _heatmap_mask(boxes: tf.Tensor, classes: tf.Tensor, ignored: tf.Tensor, grid: tuple[int, int],
                  num_classes: int) -> tf.Tensor:
    """1 - `_ignored_cells`; a batch without ignore regions (most) skips drawing them."""
    shape = tf.stack([tf.shape(classes)[0], grid[0], grid[1], num_classes])
    return tf.cond(tf.reduce_any(ignored),
                   lambda: 1.0 - _ignored_cells(boxes, classes, ignored, grid, num_classes), lambda: tf.ones(shape))


def _ignored_cells(boxes: tf.Tensor, classes: tf.Tensor, ignored: tf.Tensor, grid: tuple[int, int],
                   num_classes: int) -> tf.Tensor:
    """[B, G, G, C]: 1 in each cell an ignore region's box overlaps (by a positive area), in its class."""
    rows, columns = grid
    row_edges = tf.range(rows + 1, dtype=tf.float32) / rows
    column_edges = tf.range(columns + 1, dtype=tf.float32) / columns
    in_rows = (row_edges[None, None, 1:] > boxes[..., 0:1]) & (row_edges[None, None, :-1] < boxes[..., 2:3])
    in_columns = (column_edges[None, None, 1:] > boxes[..., 1:2]) & (column_edges[None, None, :-1] < boxes[..., 3:4])
    inside = in_rows[..., :, None] & in_columns[..., None, :] & ignored[..., None, None]  # [B, K, GH, GW]
    return _per_class_max(tf.cast(inside, tf.float32), classes, ignored, grid, num_classes)


def _heatmap(cell: tf.Tensor, cells: tf.Tensor, classes: tf.Tensor, real: tf.Tensor, grid: tuple[int, int],
             num_classes: int) -> tf.Tensor:
    """[B, G, G, C]: per class, the maximum of its boxes' Gaussians (CenterNet's draw_umich_gaussian).

    Each box's Gaussian has sigma = diameter / 6 with diameter 2r + 1 and is cut to the (2r + 1)^2 square
    around the centre cell, as CenterNet draws it. The per-class maximum is one unsorted_segment_max over
    (example, class) segments: memory B·K·G·G, not B·K·G·G·C.
    """
    rows, columns = grid
    radius = tf.maximum(tf.floor(gaussian_radius(cells[..., 0], cells[..., 1])), 0.0)  # [B, K]
    sigma = (2 * radius + 1) / 6
    reach = radius[..., None]
    dy = tf.range(rows, dtype=tf.float32)[None, None, :] - cell[..., 0:1]  # [B, K, GH]
    dx = tf.range(columns, dtype=tf.float32)[None, None, :] - cell[..., 1:2]  # [B, K, GW]
    inside = (tf.abs(dy) <= reach)[..., :, None] & (tf.abs(dx) <= reach)[..., None, :]
    exponent = -(dy[..., :, None] ** 2 + dx[..., None, :] ** 2) / (2 * sigma[..., None, None] ** 2)
    gaussian = tf.where(inside & real[..., None, None], tf.exp(exponent), 0.0)  # [B, K, GH, GW]
    return _per_class_max(gaussian, classes, real, grid, num_classes)


def _per_class_max(values: tf.Tensor, classes: tf.Tensor, real: tf.Tensor, grid: tuple[int, int],
                   num_classes: int) -> tf.Tensor:
    """[B, GH, GW, C]: per example and class, the maximum of its `real` rows' maps `values` [B, K, GH, GW]."""
    rows, columns = grid
    batch = tf.shape(classes)[0]
    # Padding rows go to a dropped segment (class C) of their example.
    segment = tf.range(batch)[:, None] * (num_classes + 1) + tf.where(real, classes, num_classes)
    peaks = tf.math.unsorted_segment_max(tf.reshape(values, [-1, rows, columns]), tf.reshape(segment, [-1]),
                                         batch * (num_classes + 1))
    peaks = tf.maximum(peaks, 0.0)  # an empty segment is the lowest float
    peaks = tf.reshape(peaks, [batch, num_classes + 1, rows, columns])[:, :num_classes]
    return tf.transpose(peaks, [0, 2, 3, 1])

"""A compact single-stage detector: CenterNet ("Objects as Points", Zhou et al. 2019) heads on a backbone.

On a backbone's feature map at stride S (grid GH x GW = H/S x W/S), three heads, each a 3x3 conv + ReLU and a
1x1 conv as in CenterNet: a per-class centre heat-map (sigmoid), the box size (h, w normalised) and the
centre's sub-cell offset (y, x). Training targets come from detector_targets.py; `fit` takes a stream of
(images, targets dict), the loss lives in `CenterNetModel.compute_loss`, so Keras' own train and test steps
(gradient tape, loss scaling, tf.distribute) run unchanged.

    model = build_detector(tiny_backbone((64, 64, 3)), num_classes=3)   # stride 4: a 16 x 16 grid
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    model.fit(images_and_targets, epochs=...)                          # targets: detection_targets(...)
    outputs = decode_detections(**model(images))                       # TF OD API output names

Loss (CenterNet's): focal loss on the heat-map (alpha 2, beta 4; no negatives inside an ignore region of the
class, the targets' `heatmap_mask`) divided by the objects' count, plus
0.1 x L1 on sizes measured in grid cells and 1 x L1 on offsets at the true centres, divided by the objects'
count (and by 2 coordinates, as CenterNet's RegL1Loss). Counts are those of the global batch (an all-reduce
over replicas), and each replica returns its share, so the replicas' gradients sum to the global batch's.
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from .backbones import BACKBONE
from .detector_targets import grid_shape

HEATMAP, SIZE, OFFSET, BOX = "heatmap", "size", "offset", "box"
# CenterNet's heat-map bias: sigmoid(-2.19) = 0.1, so the first steps' focal loss on the many background
# cells does not swamp the few centres (RetinaNet's prior initialisation).
HEATMAP_BIAS = -2.19
# CenterNet's lambda_size 0.1, lambda_off 1; and 1 - GIoU of the box decoded at each centre (TTFNet, Liu et al.
# 2020, regresses boxes by GIoU alone): L1 on sizes and offsets weighs a 1-pixel error on a small box as on a large
# one, while AP75 asks for overlap. Its weight is GIOU_WEIGHT under box loss "giou" (a detector's default,
# optimizers.task_box_loss; docs/trainer.md#the-recipe), 0 under "l1"; it is logged either way: how well boxes sit.
LOSS_WEIGHTS = {HEATMAP: 1.0, SIZE: 0.1, OFFSET: 1.0, BOX: 0.0}
GIOU_WEIGHT = 1.0
PARTS = (HEATMAP, SIZE, OFFSET, BOX)
FOCAL_ALPHA, FOCAL_BETA = 2.0, 4.0
PROBABILITY_CLAMP = 1e-4  # CenterNet clamps the sigmoid to [1e-4, 1 - 1e-4] before the logs


def tiny_backbone(image_shape: tuple[int, int, int], filters: tuple[int, int, int] = (16, 32, 64)) -> keras.Model:
    """LeNet-size features at stride 4: Conv-BN-ReLU 3x3 at full size, then two stride-2 stages of two convs.

    The last conv is dilated (2), so a feature cell sees 29 pixels and a head's cell 37: a centre cell sees the
    whole of a 24-pixel object, which its size head must measure.
    """
    inputs = keras.Input(shape=image_shape, dtype="float32")
    x = _conv(inputs, filters[0], 1)
    for stage, width in enumerate(filters[1:]):
        x = _conv(x, width, 2)
        x = _conv(x, width, 1, dilation=2 if stage == len(filters) - 2 else 1)
    return keras.Model(inputs, x, name=BACKBONE)


def _conv(x: tf.Tensor, filters: int, strides: int, dilation: int = 1) -> tf.Tensor:
    x = keras.layers.Conv2D(filters, 3, strides=strides, dilation_rate=dilation, padding="same", use_bias=False)(x)
    # Momentum 0.9, not Keras' 0.99: in a run of a few hundred steps 0.99's moving statistics lag the weights
    # (measured: validation loss 3.3 against a training loss of 0.2 after 200 steps; 0.31 with 0.9).
    return keras.layers.ReLU()(keras.layers.BatchNormalization(momentum=0.9)(x))


def build_detector(backbone: keras.Model, num_classes: int, input_name: str = "image",
                   preprocess: keras.layers.Layer | None = None, head_channels: int = 64,
                   loss_weights: dict[str, float] | None = None) -> CenterNetModel:
    """The three heads on `backbone`'s one output (the feature map), uncompiled.

    The model takes `{input_name: float32 [B, H, W, C]}` pixels in [0, 1], optionally through `preprocess`
    (a pretrained backbone's `backbones.BackbonePreprocess`), and gives float32 maps {heatmap [B, GH, GW,
    num_classes], size [B, GH, GW, 2], offset [B, GH, GW, 2]}. The backbone is nested under its own name,
    which the Trainer's fine-tuning looks up (backbones.BACKBONE).
    """
    inputs = keras.Input(shape=backbone.input_shape[1:], name=input_name, dtype="float32")
    features = backbone(preprocess(inputs) if preprocess is not None else inputs)
    outputs = {
        HEATMAP: _head(features, head_channels, num_classes, HEATMAP, "sigmoid",
                       keras.initializers.Constant(HEATMAP_BIAS)),
        SIZE: _head(features, head_channels, 2, SIZE),
        OFFSET: _head(features, head_channels, 2, OFFSET),
    }
    return CenterNetModel(inputs, outputs, loss_weights=loss_weights, name="centernet")


def _head(features: tf.Tensor, channels: int, outputs: int, name: str, activation: str | None = None,
          bias: keras.initializers.Initializer | str = "zeros") -> tf.Tensor:
    x = keras.layers.Conv2D(channels, 3, padding="same", activation="relu", name=f"{name}_conv")(features)
    # float32 even under mixed precision: the focal loss takes logs of values near 0 and 1.
    return keras.layers.Conv2D(outputs, 1, activation=activation, bias_initializer=bias, dtype="float32",
                               name=name)(x)


class CenterNetModel(keras.Model):
    """A functional model whose `compute_loss` is CenterNet's (module docstring); `y` is detection_targets'
    dict. It logs `loss` and its parts `heatmap_loss`, `size_loss`, `offset_loss` (val_ ones in evaluation)."""

    def __init__(self, *args: object, loss_weights: dict[str, float] | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.head_weights = {**LOSS_WEIGHTS, **(loss_weights or {})}
        self.trackers = {name: keras.metrics.Mean(name=name)
                         for name in ("loss", *(f"{part}_loss" for part in PARTS))}

    @property
    def metrics(self) -> list[keras.metrics.Metric]:
        return list(self.trackers.values())  # reset by Keras at each epoch

    def compute_loss(self, x: object = None, y: dict[str, tf.Tensor] | None = None,
                     y_pred: dict[str, tf.Tensor] | None = None, sample_weight: object = None) -> tf.Tensor:
        """This replica's share of the global batch's loss (the shares sum to it)."""
        parts = centernet_loss_parts(y, y_pred)
        total = tf.add_n([self.head_weights[name] * parts[name] for name in PARTS if self.head_weights[name]])
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        # A Mean over replicas of share x replicas is the sum of the shares: the global batch's value.
        for name in PARTS:
            self.trackers[f"{name}_loss"].update_state(parts[name] * replicas)
        self.trackers["loss"].update_state(total * replicas)
        if self.losses:  # weight regularisers: Keras' own scaling per replica
            total += tf.add_n(self.losses) / replicas
        return total

    def compute_metrics(self, x: object, y: object, y_pred: object, sample_weight: object) -> dict[str, tf.Tensor]:
        return {metric.name: metric.result() for metric in self.metrics}

    def get_config(self) -> dict:
        return {**super().get_config(), "loss_weights": self.head_weights}


def centernet_loss_parts(targets: dict[str, tf.Tensor], outputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """This replica's shares of the unweighted heat-map, size, offset and box losses, each divided by a global count."""
    heatmap = tf.cast(outputs[HEATMAP], tf.float32)
    focal, centres = focal_loss_sum(tf.cast(targets[HEATMAP], tf.float32), heatmap, targets.get("heatmap_mask"))
    mask = tf.cast(targets["mask"], tf.float32)
    objects = _global_sum(tf.reduce_sum(mask))
    cells = tf.constant(heatmap.shape.as_list()[1:3], tf.float32)  # sizes in grid cells, as CenterNet regresses them
    size = _l1_sum(outputs[SIZE], targets[SIZE], targets["indices"], mask, cells)
    offset = _l1_sum(outputs[OFFSET], targets[OFFSET], targets["indices"], mask)
    box = tf.reduce_sum((1.0 - centre_giou(outputs, targets, heatmap.shape[1:3])) * mask)
    return {HEATMAP: focal / tf.maximum(_global_sum(centres), 1.0),
            SIZE: size / tf.maximum(2 * objects, 1.0), OFFSET: offset / tf.maximum(2 * objects, 1.0),
            BOX: box / tf.maximum(objects, 1.0)}


def centre_giou(outputs: dict[str, tf.Tensor], targets: dict[str, tf.Tensor], grid: tf.TensorShape) -> tf.Tensor:
    """[B, K]: GIoU (Rezatofighi et al. 2019) of the box the heads give at each true centre cell, decoded as
    `decode_detections` does, with the true box; in normalised coordinates (GIoU does not change when both boxes
    are stretched alike)."""
    rows, columns = int(grid[0]), int(grid[1])
    indices = tf.cast(targets["indices"], tf.int32)
    cell = tf.cast(tf.stack([indices // columns, indices % columns], axis=-1), tf.float32)
    scale = tf.constant([rows, columns], tf.float32)
    predicted = _corners((cell + gather_at(tf.cast(outputs[OFFSET], tf.float32), indices)) / scale,
                         tf.maximum(gather_at(tf.cast(outputs[SIZE], tf.float32), indices), 0.0))
    truth = _corners((cell + tf.cast(targets[OFFSET], tf.float32)) / scale, tf.cast(targets[SIZE], tf.float32))
    return generalized_iou(predicted, truth)


def _corners(centre: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
    return tf.concat([centre - size / 2, centre + size / 2], axis=-1)


def generalized_iou(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """GIoU of boxes [..., 4] (ymin, xmin, ymax, xmax) pairwise: IoU - (hull - union) / hull, in [-1, 1].

    >>> round(float(generalized_iou(tf.constant([0., 0., 2., 2.]), tf.constant([1., 1., 3., 3.]))), 4)  # 1/7 - 2/9
    -0.0794
    """
    def area(box: tf.Tensor) -> tf.Tensor:
        return tf.maximum(box[..., 2] - box[..., 0], 0.0) * tf.maximum(box[..., 3] - box[..., 1], 0.0)

    inner = tf.concat([tf.maximum(a[..., :2], b[..., :2]), tf.minimum(a[..., 2:], b[..., 2:])], axis=-1)
    hull = area(tf.concat([tf.minimum(a[..., :2], b[..., :2]), tf.maximum(a[..., 2:], b[..., 2:])], axis=-1))
    overlap = area(inner)
    union = area(a) + area(b) - overlap
    return overlap / tf.maximum(union, 1e-9) - (hull - union) / tf.maximum(hull, 1e-9)


def focal_loss_sum(target: tf.Tensor, predicted: tf.Tensor,
                   negatives: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """CenterNet's penalty-reduced focal loss, summed, and the count of centres (cells where target is 1).

    Cells near a centre are penalised less as negatives, by (1 - target)^beta; `negatives` (the targets'
    `heatmap_mask`, 0 inside ignore regions) weights each cell's negative term.
    """
    p = tf.clip_by_value(predicted, PROBABILITY_CLAMP, 1 - PROBABILITY_CLAMP)
    positive = tf.cast(tf.equal(target, 1.0), tf.float32)
    positive_loss = tf.math.log(p) * (1 - p) ** FOCAL_ALPHA * positive
    negative_loss = tf.math.log(1 - p) * p ** FOCAL_ALPHA * (1 - target) ** FOCAL_BETA * (1 - positive)
    if negatives is not None:
        negative_loss *= tf.cast(negatives, tf.float32)
    return -tf.reduce_sum(positive_loss + negative_loss), tf.reduce_sum(positive)


def _l1_sum(maps: tf.Tensor, target: tf.Tensor, indices: tf.Tensor, mask: tf.Tensor,
            scale: tf.Tensor | float = 1.0) -> tf.Tensor:
    """Sum of |map at each true centre - target| x scale over the real boxes."""
    predicted = gather_at(tf.cast(maps, tf.float32), indices)
    return tf.reduce_sum(tf.abs(predicted - tf.cast(target, tf.float32)) * scale * mask[..., None])


def gather_at(maps: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
    """[B, K, D]: `maps` [B, GH, GW, D] at the flat cells `indices` [B, K] (row * GW + column)."""
    flat = tf.reshape(maps, [tf.shape(maps)[0], -1, maps.shape[-1]])
    return tf.gather(flat, tf.cast(indices, tf.int32), batch_dims=1)


def _global_sum(value: tf.Tensor) -> tf.Tensor:
    """The sum over the replicas of the global batch (itself outside a replica context)."""
    context = tf.distribute.get_replica_context()
    return value if context is None else context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def decode_detections(heatmap: tf.Tensor, size: tf.Tensor, offset: tf.Tensor, max_detections: int = 100,
                      score_threshold: float = 0.0) -> dict[str, tf.Tensor]:
    """The top `max_detections` heat-map peaks over classes and cells, as the TF OD API names its outputs.

    A peak is a cell whose value is the maximum of its 3x3 neighbourhood in its class (CenterNet's max-pool
    NMS). Returns float32 `detection_boxes` [B, N, 4] (ymin, xmin, ymax, xmax) normalised and clipped to
    [0, 1], `detection_scores` [B, N] descending, `detection_classes` [B, N] (0-based class ids, as
    shardflow's labels; the OD API's are 1-based) and `num_detections` [B], the count of scores above
    `score_threshold`; rows past it are zeros.
    """
    rows, columns = grid_shape(tuple(heatmap.shape[1:3]))
    classes = heatmap.shape[-1]
    batch = tf.shape(heatmap)[0]
    peaks = tf.where(tf.equal(tf.nn.max_pool2d(heatmap, 3, 1, "SAME"), heatmap), heatmap, 0.0)
    scores, flat = tf.math.top_k(tf.reshape(peaks, [batch, -1]), k=min(max_detections, rows * columns * classes))
    cell, label = flat // classes, flat % classes
    centre = tf.cast(tf.stack([cell // columns, cell % columns], axis=-1), tf.float32) + gather_at(offset, cell)
    centre = centre / tf.constant([rows, columns], tf.float32)
    half = tf.maximum(gather_at(size, cell), 0.0) / 2
    boxes = tf.clip_by_value(tf.concat([centre - half, centre + half], axis=-1), 0.0, 1.0)
    valid = scores > score_threshold
    outputs = {"detection_boxes": tf.where(valid[..., None], boxes, 0.0),
               "detection_scores": tf.where(valid, scores, 0.0),
               "detection_classes": tf.where(valid, tf.cast(label, tf.float32), 0.0)}
    missing = max_detections - scores.shape[-1]  # a grid with fewer cells x classes than max_detections
    outputs = {name: tf.pad(value, [[0, 0], [0, missing]] + [[0, 0]] * (value.shape.rank - 2))
               for name, value in outputs.items()}
    outputs["num_detections"] = tf.reduce_sum(tf.cast(valid, tf.float32), axis=1)
    return outputs

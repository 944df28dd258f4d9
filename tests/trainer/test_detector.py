"""CenterNet detector: targets and decoding checked on planted boxes, and a tiny detector that learns a synthetic set.

The set: 64x64 RGB images of noisy backgrounds with 0-3 objects, each a filled red square (class 0), green disc
(class 1) or blue square (class 2) of 10-24 pixels, overlapping no other; scored with COCO AP50
(core/detection_metrics.py).
"""
from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from shardflow.core.box_schema import BBOX, CLASS_LABEL, IS_CROWD
from shardflow.core.detection_metrics import DetectionAccumulator
from shardflow.trainer.backbones import BackbonePreprocess, backbone_spec
from shardflow.trainer.box_augment import PADDING_CLASS, ignore_class
from shardflow.trainer.box_stream import padded_boxes
from shardflow.trainer.detector import build_detector, centernet_loss_parts, decode_detections, tiny_backbone
from shardflow.trainer.detector_targets import detection_targets

pytestmark = pytest.mark.unit  # in process on small tensors, but for the two marked `pipeline`

SIDE, GRID, CLASSES, SLOTS = 64, 16, 3, 4  # stride 4; SLOTS > 3 so every example has a padding row
COLOURS = np.array([(0.9, 0.15, 0.1), (0.1, 0.85, 0.2), (0.15, 0.25, 0.95)], np.float32)
DISC_CLASSES = (1,)
# Optimizer steps of batch 8 (~1.6 epochs of 600 images). Measured (AP50 on the 100 held-out images, the fit's CPU-s):
# 120 of batch 8 0.957 in 28 s (twice); 120 of 16 0.912 in 36 s; 80 of 16 0.879 in 30 s; 100 of 32 0.905 in 47 s;
# the former 200 of 32 0.946 (the whole test 83 CPU-s, now 33).
STEPS, BATCH = 120, 8


def synthetic_set(count: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Images float32 [N, 64, 64, 3], boxes [N, SLOTS, 4] (pixel edges / 64), classes [N, SLOTS], counts [N]."""
    rng = np.random.default_rng(seed)
    images = np.clip(rng.uniform(0.2, 0.6, (count, 1, 1, 3)) + rng.normal(0, 0.08, (count, SIDE, SIDE, 3)), 0, 1)
    boxes, classes = np.zeros((count, SLOTS, 4), np.float32), np.full((count, SLOTS), PADDING_CLASS, np.int32)
    counts = rng.integers(0, 4, count).astype(np.int32)
    yy, xx = np.mgrid[:SIDE, :SIDE] + 0.5
    for n in range(count):
        placed: list[tuple[int, int, int, int]] = []
        while len(placed) < counts[n]:
            side = int(rng.integers(10, 25))
            y0, x0 = (int(v) for v in rng.integers(0, SIDE - side + 1, 2))
            if any(y0 < b[2] and b[0] < y0 + side and x0 < b[3] and b[1] < x0 + side for b in placed):
                continue
            label = int(rng.integers(CLASSES))
            colour = np.clip(COLOURS[label] + rng.normal(0, 0.05, 3), 0, 1)
            if label in DISC_CLASSES:
                inside = (yy - y0 - side / 2) ** 2 + (xx - x0 - side / 2) ** 2 <= (side / 2) ** 2
            else:
                inside = (yy >= y0) & (yy < y0 + side) & (xx >= x0) & (xx < x0 + side)
            images[n][inside] = colour
            boxes[n, len(placed)], classes[n, len(placed)] = np.array([y0, x0, y0 + side, x0 + side]) / SIDE, label
            placed.append((y0, x0, y0 + side, x0 + side))
    return images.astype(np.float32), boxes, classes, counts


def _stream(data: tuple[np.ndarray, ...], batch: int, shuffle: bool) -> tf.data.Dataset:
    """(images, targets) batches: the targets computed in the stream, after batching, as the Trainer will."""
    stream = tf.data.Dataset.from_tensor_slices(data)
    if shuffle:
        stream = stream.shuffle(len(data[0]), seed=1, reshuffle_each_iteration=True).repeat()
    stream = stream.batch(batch, drop_remainder=shuffle)
    return stream.map(lambda images, boxes, classes, count:
                      (images, detection_targets(boxes, classes, count, GRID, CLASSES))).prefetch(2)


@pytest.mark.pipeline
def test_tiny_detector_learns_the_synthetic_set() -> None:
    """Trains in a bounded number of steps; AP50 on held-out images near what it measures (0.957, see STEPS)."""
    keras.utils.set_random_seed(0)
    started = time.monotonic()
    train, held_out = synthetic_set(600, seed=1), synthetic_set(100, seed=2)
    model = build_detector(tiny_backbone((SIDE, SIDE, 3)), CLASSES)
    model.compile(optimizer=keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(3e-3, STEPS)))
    history = model.fit(_stream(train, BATCH, shuffle=True), steps_per_epoch=STEPS // 4, epochs=4, verbose=0).history
    assert history["loss"][-1] < history["loss"][0] / 2, history
    accumulator = DetectionAccumulator(num_classes=CLASSES)
    for start, (images, *_) in zip(range(0, 100, 50), _stream(held_out, 50, shuffle=False)):
        detections = {k: v.numpy() for k, v in decode_detections(**model(images, training=False)).items()}
        for row in range(len(images)):
            image = start + row
            accumulator.add_image(image, SIDE, SIDE, held_out[1][image], held_out[2][image],
                                  detections["detection_boxes"][row], detections["detection_scores"][row],
                                  detections["detection_classes"][row].astype(int), num_true=held_out[3][image],
                                  num_detections=int(detections["num_detections"][row]))
    ap50 = accumulator.summarize().as_dict()["AP50"]
    print(f"AP50 {ap50:.3f} after {STEPS} steps, {time.monotonic() - started:.1f} s")
    assert ap50 >= 0.8



_REPLICAS = """
import numpy as np, tensorflow as tf, tf_keras as keras
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
from shardflow.trainer.detector import build_detector, tiny_backbone
from shardflow.trainer.detector_targets import detection_targets
rng = np.random.default_rng(0)
images = rng.uniform(size=(8, 32, 32, 3)).astype("float32")
corner = rng.uniform(0, 0.5, (8, 3, 2))
boxes = np.concatenate([corner, corner + rng.uniform(0.2, 0.5, (8, 3, 2))], -1).astype("float32")
count = np.array([3, 3, 3, 3, 1, 0, 1, 0], "int32")  # the replicas' halves hold 12 and 2 objects
classes = np.where(np.arange(3) < count[:, None], rng.integers(0, 2, (8, 3)), -1).astype("int32")
stream = tf.data.Dataset.from_tensors((images, detection_targets(boxes, classes, count, 8, 2)))
def built():
    model = build_detector(tiny_backbone((32, 32, 3)), 2, head_channels=8)
    for layer in model.get_layer("backbone").layers:  # BatchNorm's statistics are per replica: frozen here
        layer.trainable = not isinstance(layer, keras.layers.BatchNormalization)
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    return model
alone = built()
start = alone.get_weights()
with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
    mirrored = built()
mirrored.set_weights(start)
alone_history, mirrored_history = (model.fit(stream, verbose=0).history for model in (alone, mirrored))
for name, value in alone_history.items():  # loss and its parts
    np.testing.assert_allclose(mirrored_history[name], value, rtol=1e-6, err_msg=name)
assert not np.allclose(alone.get_weights()[-1], start[-1])
for a, b in zip(alone.trainable_weights, mirrored.trainable_weights):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
print("ok")
"""


@pytest.mark.pipeline  # a subprocess: logical devices must be set before TensorFlow starts
def test_two_replicas_take_the_global_batchs_step() -> None:
    """Loss parts and the SGD step of a batch split over two replicas equal one device's, with 12 objects in one
    half and 2 in the other: the focal and L1 losses are divided by the global batch's counts."""
    done = subprocess.run([sys.executable, "-c", _REPLICAS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_targets_put_the_peak_at_the_centre_cell_with_exact_size_and_offset() -> None:
    # Centre (0.40625, 0.6875) is cell (6.5, 11.0) of 16: cell (6, 11), offset (0.5, 0.0).
    boxes = tf.constant([[[0.25, 0.5, 0.5625, 0.875], [0, 0, 0, 0]]], tf.float32)
    targets = detection_targets(boxes, tf.constant([[2, PADDING_CLASS]]), tf.constant([1]), GRID, CLASSES)
    heatmap = targets["heatmap"].numpy()[0]
    assert np.argwhere(heatmap == 1.0).tolist() == [[6, 11, 2]]
    assert heatmap[..., :2].max() == 0.0 and 0.0 < heatmap[6, 12, 2] < 1.0  # a Gaussian of one class around it
    np.testing.assert_array_equal(targets["size"].numpy()[0], [[0.3125, 0.375], [0.0, 0.0]])
    np.testing.assert_array_equal(targets["offset"].numpy()[0], [[0.5, 0.0], [0.0, 0.0]])
    assert targets["indices"].numpy().tolist() == [[6 * GRID + 11, 0]]
    assert targets["mask"].numpy().tolist() == [[1.0, 0.0]]


def test_padding_rows_produce_no_target_in_a_graph() -> None:
    """Rows past the count, or of class -1, give nothing, in a tf.function with an unknown batch."""
    traced = tf.function(lambda b, c, n: detection_targets(b, c, n, GRID, CLASSES),
                         input_signature=[tf.TensorSpec([None, 3, 4]), tf.TensorSpec([None, 3], tf.int32),
                                          tf.TensorSpec([None], tf.int32)])
    box = [0.1, 0.1, 0.4, 0.4]
    boxes = tf.constant([[box, box, box], [box, box, box]])
    targets = traced(boxes, tf.constant([[0, 1, PADDING_CLASS], [PADDING_CLASS] * 3]), tf.constant([1, 0]))
    assert targets["mask"].numpy().tolist() == [[1, 0, 0], [0, 0, 0]]
    assert targets["heatmap"].numpy()[0, ..., 1:].max() == 0.0 and targets["heatmap"].numpy()[1].max() == 0.0
    assert np.all(targets["size"].numpy()[:, 1:] == 0) and np.all(targets["offset"].numpy()[:, 1:] == 0)
    assert targets["indices"].numpy()[1].tolist() == [0, 0, 0]


def _planted(peaks: list[tuple[int, int, int, float]], size: tuple[float, float] = (0.2, 0.3),
             offset: tuple[float, float] = (0.25, 0.75)) -> dict[str, tf.Tensor]:
    heatmap = np.zeros((1, GRID, GRID, CLASSES), np.float32)
    for y, x, label, score in peaks:
        heatmap[0, y, x, label] = score
    sizes, offsets = np.zeros((1, GRID, GRID, 2), np.float32), np.zeros((1, GRID, GRID, 2), np.float32)
    sizes[...], offsets[...] = size, offset
    return {"heatmap": tf.constant(heatmap), "size": tf.constant(sizes), "offset": tf.constant(offsets)}


def test_decode_returns_the_planted_box() -> None:
    outputs = decode_detections(**_planted([(5, 7, 1, 0.9)]), max_detections=10)
    assert sorted(outputs) == ["detection_boxes", "detection_classes", "detection_scores", "num_detections"]
    centre = np.array([(5 + 0.25) / GRID, (7 + 0.75) / GRID])
    expected = np.concatenate([centre - (0.1, 0.15), centre + (0.1, 0.15)])
    np.testing.assert_allclose(outputs["detection_boxes"].numpy()[0, 0], expected, atol=1e-5)
    assert outputs["num_detections"].numpy().tolist() == [1.0]
    assert outputs["detection_classes"].numpy()[0, 0] == 1.0
    np.testing.assert_allclose(outputs["detection_scores"].numpy()[0], [0.9] + [0.0] * 9, atol=1e-6)
    assert outputs["detection_boxes"].shape == (1, 10, 4) and not outputs["detection_boxes"].numpy()[0, 1:].any()


def test_decode_keeps_the_top_scoring_peaks_and_suppresses_neighbours() -> None:
    """Twelve isolated peaks; max_detections 5 keeps the best. Beside the best one, a weaker cell of its class is
    suppressed (3x3 max-pool NMS) and one of another class is kept. Traced with an unknown batch, as served."""
    peaks = [(y, x, (y + x) % CLASSES, 0.3 + 0.05 * i) for i, (y, x) in enumerate(
        (y, x) for y in (0, 5, 10) for x in (0, 5, 10, 15))]
    best, neighbours = peaks[-1], [(10, 14, 1, 0.84), (9, 15, 0, 0.845)]  # the best: (10, 15), class 1, 0.85
    assert best[:3] == (10, 15, 1)
    decode = tf.function(lambda maps: decode_detections(**maps, max_detections=5), input_signature=[{
        name: tf.TensorSpec([None, GRID, GRID, depth]) for name, depth in (("heatmap", CLASSES), ("size", 2),
                                                                            ("offset", 2))}])
    outputs = decode(_planted(peaks + neighbours, size=(0.5, 0.5)))
    kept = sorted(peaks + neighbours[1:], key=lambda p: -p[3])[:5]
    np.testing.assert_allclose(outputs["detection_scores"].numpy()[0], [p[3] for p in kept], atol=1e-6)
    assert outputs["detection_classes"].numpy()[0].tolist() == [p[2] for p in kept]
    assert outputs["num_detections"].numpy().tolist() == [5.0]
    boxes = outputs["detection_boxes"].numpy()[0]
    assert boxes[0, 3] == 1.0 and boxes[4, 1] == 0.0  # (10, 15) and (10, 0) reach past the edges: clipped


def test_focal_loss_matches_centernet_on_a_known_map() -> None:
    """One centre predicted at 0.5, its neighbour (target 0.5) at 0.5, every other cell at 0.1."""
    targets = detection_targets(tf.constant([[[0.25, 0.25, 0.5, 0.5]]]), tf.constant([[0]]), tf.constant([1]),
                                GRID, CLASSES)
    predicted = np.full((1, GRID, GRID, CLASSES), 0.1, np.float32)
    target = targets["heatmap"].numpy()
    predicted[target == 1.0] = 0.5
    neighbour = (target > 0) & (target < 1)
    predicted[neighbour] = 0.5
    expected = -(np.log(0.5) * 0.25 + (np.log(0.5) * 0.25 * (1 - target[neighbour]) ** 4).sum()
                 + np.log(0.9) * 0.01 * ((predicted == 0.1).sum()))
    outputs = {"heatmap": tf.constant(predicted), "size": tf.zeros((1, GRID, GRID, 2)),
               "offset": tf.zeros((1, GRID, GRID, 2))}
    parts = centernet_loss_parts(targets, outputs)
    np.testing.assert_allclose(parts["heatmap"].numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(parts["size"].numpy(), (0.25 * GRID) * 2 / 2, rtol=1e-6)  # cells, per coordinate


def test_heads_plug_onto_a_mobilenet_v2_feature_map() -> None:
    """The heads take any backbone's feature map: MobileNetV2's stride-8 block, preprocessing inside the model."""
    spec = backbone_spec("mobilenet_v2")
    base = spec.build((SIDE, SIDE, 3), alpha=0.35)
    features = keras.Model(base.input, base.get_layer("block_6_expand_relu").output, name="backbone")
    model = build_detector(features, CLASSES, preprocess=BackbonePreprocess(spec.module), head_channels=16)
    outputs = model(tf.zeros((2, SIDE, SIDE, 3)))
    assert outputs["heatmap"].shape == (2, 8, 8, CLASSES) and model.get_layer("backbone") is features
    assert decode_detections(**outputs, max_detections=20)["detection_boxes"].shape == (2, 20, 4)


def _crowd_targets() -> dict[str, tf.Tensor]:
    """A disc (class 0) at cells 2-5 and a crowd of class 1 over rows 8-11, columns 4-11 (a 16-cell grid)."""
    boxes = tf.constant([[[0.125, 0.125, 0.375, 0.375], [0.5, 0.25, 0.75, 0.75], [0, 0, 0, 0]]], tf.float32)
    classes = tf.constant([[0, int(ignore_class(1)), PADDING_CLASS]])
    return detection_targets(boxes, classes, tf.constant([2]), GRID, CLASSES)


def test_an_ignore_region_has_no_peak_and_no_background_in_its_class() -> None:
    targets = _crowd_targets()
    heatmap, keep = targets["heatmap"].numpy()[0], targets["heatmap_mask"].numpy()[0]
    assert np.argwhere(heatmap == 1.0).tolist() == [[4, 4, 0]] and heatmap[..., 1].max() == 0.0  # no crowd peak
    assert targets["mask"].numpy().tolist() == [[1.0, 0.0, 0.0]]  # no size or offset regressed for it
    assert not targets["size"].numpy()[0, 1].any() and not targets["offset"].numpy()[0, 1].any()
    inside = np.zeros((GRID, GRID), bool)
    inside[8:12, 4:12] = True  # the cells the box [0.5, 0.75) x [0.25, 0.75) covers, and no neighbour
    np.testing.assert_array_equal(keep[..., 1], np.where(inside, 0.0, 1.0))
    assert keep[..., 0].min() == 1.0 and keep[..., 2].min() == 1.0  # other classes' background stays


def test_the_loss_ignores_the_crowd_region_and_still_trains() -> None:
    """The focal loss's gradient is zero in the crowd's cells of its class and not outside them; a detector
    takes optimizer steps on a stream of such targets."""
    targets = _crowd_targets()
    predicted = tf.Variable(tf.fill((1, GRID, GRID, CLASSES), 0.3))
    with tf.GradientTape() as tape:
        parts = centernet_loss_parts(targets, {"heatmap": predicted, "size": tf.zeros((1, GRID, GRID, 2)),
                                               "offset": tf.zeros((1, GRID, GRID, 2))})
    gradient = tape.gradient(parts["heatmap"], predicted).numpy()[0]
    assert not gradient[8:12, 4:12, 1].any() and np.all(gradient[8:12, 4:12, 0] != 0)
    assert np.all(gradient[:8, :, 1] != 0) and np.all(gradient[12:, :, 1] != 0)
    keras.utils.set_random_seed(0)
    model = build_detector(tiny_backbone((SIDE, SIDE, 3), (4, 8, 8)), CLASSES, head_channels=8)
    model.compile(optimizer=keras.optimizers.SGD(0.01))
    stream = tf.data.Dataset.from_tensors((tf.zeros((1, SIDE, SIDE, 3)), targets)).repeat(2)
    history = model.fit(stream, verbose=0).history
    assert np.isfinite(history["heatmap_loss"][0]) and history["heatmap_loss"][0] > 0


def test_stored_ids_become_class_indices_and_crowds_ignore_regions() -> None:
    """The label map's ids (3, 7, 12) are class indices 0, 1, 2 (the id's rank); an is_crowd box is its class's
    ignore region; an id outside the map stops the stream naming it, never becoming another class."""
    parsed = {name: tf.ragged.constant([[0.1, 0.2, 0.3], []], tf.float32) for name in BBOX}
    parsed[CLASS_LABEL] = tf.ragged.constant([[12, 3, 7], []], tf.int64)
    parsed[IS_CROWD] = tf.ragged.constant([[0, 1, 0], []], tf.int64)
    target = padded_boxes(parsed, 4, (3, 7, 12))
    assert target["classes"].numpy().tolist() == [[2, int(ignore_class(0)), 1, PADDING_CLASS], [PADDING_CLASS] * 4]
    assert target["count"].numpy().tolist() == [3, 0]
    parsed[CLASS_LABEL] = tf.ragged.constant([[12, 5, 7], []], tf.int64)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"not in the label map \(ids \[3, 7, 12\]\).*5"):
        tf.data.Dataset.from_tensors(parsed).map(lambda p: padded_boxes(p, 4, (3, 7, 12))).get_single_element()

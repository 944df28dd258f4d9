"""Box-aware augmentation: every stored box still encloses its object's pixels after the Trainer's own image ops.

Scenes are filled rectangles of distinct colours (colour i is class i) on black; after an op, the pixels one
pixel inside each surviving box must be its class's colour and those 1.5-2.5 pixels outside must not be (the
crop zooms at most 1/0.8, so a bilinear sample 1.5 output pixels out reads no pixel of the rectangle).
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from shardflow.core.letterbox import letterboxed_boxes
from shardflow.trainer.augment import Rows, augment_batch
from shardflow.trainer.box_augment import (MIN_VISIBLE, PADDING_CLASS, BoxBatch, augment_boxes, augment_detection_batch,
                                           crop_boxes, crop_window, unletterbox_boxes)

pytestmark = pytest.mark.unit  # in process, small generated tensors

HEIGHT, WIDTH, SLOTS = 48, 64, 7
RECTS = [(4, 4, 20, 24), (6, 30, 22, 58), (28, 4, 44, 22), (26, 28, 42, 42), (28, 48, 44, 60)]  # pixel edges, 48x64
COLOURS = np.array([(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1)], np.float32)


def _scene(batch: int, height: int = HEIGHT, width: int = WIDTH, seed: int = 0) -> tuple[tf.Tensor, BoxBatch]:
    """Each example: 2-5 of the rectangles in a random order (so compaction has work), padded to SLOTS rows."""
    rng = np.random.default_rng(seed)
    images = np.zeros((batch, height, width, 3), np.float32)
    boxes, classes = np.zeros((batch, SLOTS, 4), np.float32), np.full((batch, SLOTS), PADDING_CLASS, np.int32)
    counts = rng.integers(2, len(RECTS) + 1, size=batch).astype(np.int32)
    for b in range(batch):
        for row, kind in enumerate(rng.permutation(len(RECTS))[:counts[b]]):
            y0, x0, y1, x1 = (round(v * size / full) for v, size, full in
                              zip(RECTS[kind], (height, width) * 2, (HEIGHT, WIDTH) * 2))
            images[b, y0:y1, x0:x1] = COLOURS[kind]
            boxes[b, row], classes[b, row] = (y0 / height, x0 / width, y1 / height, x1 / width), kind
    return tf.constant(images), BoxBatch(tf.constant(boxes), tf.constant(classes), tf.constant(counts))


def _strip(low: float, high: float, size: int) -> np.ndarray:
    """Pixel indices whose centres lie in [low, high] (pixel-edge coordinates), inside the image."""
    first, last = max(int(np.ceil(low - 0.5)), 0), min(int(np.floor(high - 0.5)), size - 1)
    return np.arange(first, last + 1)


def _assert_boxes_enclose(images: tf.Tensor, boxes: BoxBatch) -> int:
    """Every real box holds its colour one pixel in and not 1.5-2.5 pixels out; returns how many were checked."""
    pixels, array = images.numpy(), boxes.boxes.numpy()
    height, width, checked = pixels.shape[1], pixels.shape[2], 0
    for b, count in enumerate(boxes.count.numpy()):
        assert np.all(array[b, count:] == 0.0) and np.all(boxes.classes.numpy()[b, count:] == PADDING_CLASS)
        for row in range(count):
            colour = COLOURS[boxes.classes.numpy()[b, row]]
            y0, x0, y1, x1 = array[b, row] * (height, width, height, width)
            assert 0.0 <= y0 < y1 <= height and 0.0 <= x0 < x1 <= width
            ys, xs = _strip(y0 + 1, y1 - 1, height), _strip(x0 + 1, x1 - 1, width)
            assert ys.size and xs.size, f"example {b} row {row}: nothing left one pixel inside {array[b, row]}"
            np.testing.assert_allclose(pixels[b][np.ix_(ys, xs)], np.broadcast_to(colour, (ys.size, xs.size, 3)),
                                       atol=1e-4, err_msg=f"example {b} row {row}: inside is not its colour")
            outside = [pixels[b][np.ix_(_strip(y0 - 2.5, y0 - 1.5, height), xs)],
                       pixels[b][np.ix_(_strip(y1 + 1.5, y1 + 2.5, height), xs)],
                       pixels[b][np.ix_(ys, _strip(x0 - 2.5, x0 - 1.5, width))],
                       pixels[b][np.ix_(ys, _strip(x1 + 1.5, x1 + 2.5, width))]]
            for ring in outside:
                assert np.all(np.abs(ring - colour).max(axis=-1) > 0.05), f"example {b} row {row}: colour outside"
            checked += 1
    return checked


@pytest.mark.parametrize("ops", [("flip",), ("flip_vertical",), ("flip", "flip_vertical")])
def test_flipped_boxes_enclose_the_flipped_pixels(ops: tuple[str, ...]) -> None:
    images, boxes = _scene(16)
    moved_images, moved = augment_detection_batch(images, boxes, ops, tf.constant([3, 11]))
    assert _assert_boxes_enclose(moved_images, moved) == int(boxes.count.numpy().sum())
    np.testing.assert_array_equal(moved.classes.numpy(), boxes.classes.numpy())  # flips drop nothing
    changed = [not np.array_equal(a, b) for a, b in zip(moved.boxes.numpy(), boxes.boxes.numpy())]
    assert 0 < sum(changed) < 16, "some examples are drawn to flip and some not"


@pytest.mark.parametrize("ops", [("crop",), ("crop", "flip"), ("flip_vertical", "crop", "flip")])
def test_cropped_boxes_enclose_the_same_pixels(ops: tuple[str, ...]) -> None:
    """Through `augment_batch`'s own projective warp (the Trainer's augment stage), bilinear, zoomed up to 1.25x."""
    images, boxes = _scene(32, seed=1)
    for index in (5, 6):
        moved_images, moved = augment_detection_batch(images, boxes, ops, tf.constant([2, index]))
        assert _assert_boxes_enclose(moved_images, moved) > 0
        assert np.all(moved.boxes.numpy() >= 0.0) and np.all(moved.boxes.numpy() <= 1.0)


def test_the_crop_window_resamples_to_the_op_s_own_pixels() -> None:
    """Sub-pixel check of `crop_window` on noise: crop_and_resize over that window gives `augment_batch`'s crop.

    crop_and_resize's boxes are in pixel-centre units (0 and 1 are the first and last pixel centres), ours in
    pixel-edge units: a window of edges [e0, e1] of n pixels samples centres e0 + (i + 0.5)(e1 - e0)/n - 0.5."""
    images = tf.random.stateless_uniform([8, HEIGHT, WIDTH, 3], seed=[6, 6])
    ops, seed = ("crop",), tf.constant([8, 2])
    got, _ = augment_batch(images, None, ops, seed)
    window = crop_window(ops, seed, (HEIGHT, WIDTH), Rows.every(8)).numpy().astype(np.float64)
    pixels = np.array([HEIGHT, WIDTH], np.float64)
    scale = window[:, 2:] - window[:, :2]  # the window's side (normalised) = input pixels per output pixel
    first = window[:, :2] * pixels + 0.5 * scale - 0.5  # output pixel 0's centre, in input pixel-centre units
    last = first + scale * (pixels - 1)
    centre = np.concatenate([first, last], axis=1) / np.tile(pixels - 1, 2)
    want = tf.image.crop_and_resize(images, centre.astype(np.float32), tf.range(8), (HEIGHT, WIDTH))
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-4)
    assert not np.allclose(got.numpy(), images.numpy(), atol=1e-2)


def test_letterboxing_the_whole_image_gives_the_content_resize_with_pad_writes() -> None:
    """Exact, in whole pixels: the image's full box lands on resize_with_pad's non-padding rows and columns."""
    for source, target in [((37, 91), (64, 64)), ((45, 91), (64, 64)), ((91, 37), (50, 70)), ((64, 48), (64, 48))]:
        padded = tf.image.resize_with_pad(tf.ones([1, *source, 1]), *target).numpy()[0, ..., 0]
        rows, columns = np.flatnonzero(padded.max(axis=1) > 0), np.flatnonzero(padded.max(axis=0) > 0)
        want = [rows[0], columns[0], rows[-1] + 1, columns[-1] + 1]
        full = _letterboxed(np.array([[0.0, 0.0, 1.0, 1.0]]), source, target).numpy()[0]
        np.testing.assert_allclose(full * np.tile(target, 2), want, atol=1e-4, err_msg=f"{source} → {target}")


def test_a_box_mostly_outside_the_window_is_dropped_and_classes_follow() -> None:
    window = tf.constant([[0.0, 0.25, 1.0, 1.0], [0.0, 0.0, 0.5, 0.5]])
    boxes = BoxBatch(tf.constant([[[0.1, 0.0, 0.3, 0.2], [0.4, 0.1, 0.6, 0.35], [0.5, 0.2, 0.7, 0.4],
                                   [0.2, 0.5, 0.4, 0.75], [0.0, 0.0, 0.0, 0.0]],
                                  [[0.0, 0.0, 0.2, 0.2], [0.25, 0.0, 0.75, 0.25], [0.0, 0.0, 0.0, 0.0],
                                   [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]),
                     tf.constant([[3, 1, 4, 2, PADDING_CLASS], [5, 6, PADDING_CLASS, PADDING_CLASS, PADDING_CLASS]]),
                     tf.constant([4, 2]))
    cropped = crop_boxes(boxes, window)
    # Example 0: outside, 40 % visible: dropped; 75 % visible: kept (clipped at the window's left); inside: kept.
    # Example 1: inside; exactly MIN_VISIBLE visible (y 0.25-0.75 in a window ending at 0.5): kept.
    assert MIN_VISIBLE == 0.5
    np.testing.assert_array_equal(cropped.count.numpy(), [2, 2])
    np.testing.assert_array_equal(cropped.classes.numpy(), [[4, 2, -1, -1, -1], [5, 6, -1, -1, -1]])
    np.testing.assert_allclose(cropped.boxes.numpy()[0, :3], [[0.5, 0.0, 0.7, 0.15 / 0.75],
                                                              [0.2, 0.25 / 0.75, 0.4, 0.5 / 0.75], [0, 0, 0, 0]],
                               atol=1e-6)
    np.testing.assert_allclose(cropped.boxes.numpy()[1, :2], [[0.0, 0.0, 0.4, 0.4], [0.5, 0.0, 1.0, 0.5]], atol=1e-6)


def test_the_drawn_window_drops_a_box_it_mostly_cuts() -> None:
    """The window `crop_window` reports is the one the op draws: a box placed 75 % left of it goes, one inside stays."""
    ops, seed, rows = ("crop",), tf.constant([4, 1]), Rows.every(8)
    window = crop_window(ops, seed, (HEIGHT, WIDTH), rows).numpy()
    b = int(np.argmax(window[:, 1]))
    xmin = float(window[b, 1])
    assert xmin > 0.04
    boxes = np.zeros((8, 3, 4), np.float32)
    boxes[:, 0] = (0.4, xmin - 0.03, 0.6, xmin + 0.01)  # a quarter inside the drawn window
    low, high = window[:, :2], window[:, 2:]
    boxes[:, 1] = np.concatenate([low + 0.25 * (high - low), low + 0.75 * (high - low)], axis=1)  # the middle
    classes = np.tile(np.array([[7, 8, PADDING_CLASS]], np.int32), (8, 1))
    moved = augment_boxes(BoxBatch(tf.constant(boxes), tf.constant(classes), tf.fill([8], 2)), ops, seed,
                          (HEIGHT, WIDTH), rows)
    assert int(moved.count.numpy()[b]) == 1 and moved.classes.numpy()[b].tolist() == [8, -1, -1]
    np.testing.assert_array_equal(moved.boxes.numpy()[b, 1:], 0.0)


def test_the_same_seed_and_batch_give_the_same_boxes_on_any_worker_and_in_a_graph() -> None:
    ops = ("flip", "crop", "flip_vertical")
    _, boxes = _scene(8, seed=2)
    first = augment_boxes(boxes, ops, tf.constant([9, 7]), (HEIGHT, WIDTH))
    other = augment_boxes(boxes, ops, tf.constant([9, 8]), (HEIGHT, WIDTH))
    graph = tf.function(lambda index: augment_boxes(boxes, ops, tf.stack([tf.constant(9, tf.int64), index]),
                                                    (HEIGHT, WIDTH)))
    in_graph, again = graph(tf.constant(7, tf.int64)), graph(tf.constant(7, tf.int64))
    for eager, a, b in zip(first, in_graph, again):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        # Grappler may reorder the float arithmetic of the graph: an ulp or so from eager, the same drop decisions.
        np.testing.assert_allclose(eager.numpy(), a.numpy(), atol=1e-6)
    assert not np.allclose(first.boxes.numpy(), other.boxes.numpy()), "two batch indices drew alike"
    # Worker 1 of 2 holds rows 4..7 of the global batch of 8: its boxes are the whole batch's rows 4..7.
    half = BoxBatch(*(t[4:] for t in boxes))
    sliced = augment_boxes(half, ops, tf.constant([9, 7]), (HEIGHT, WIDTH), rows=Rows(4 + tf.range(4), 8))
    for whole, part in zip(first, sliced):
        np.testing.assert_array_equal(whole.numpy()[4:], part.numpy())


def test_photometric_ops_leave_boxes_identical() -> None:
    images, boxes = _scene(8)
    moved_images, moved = augment_detection_batch(images, boxes, ("brightness", "contrast"), tf.constant([0, 3]))
    assert not np.allclose(moved_images.numpy(), images.numpy())
    for before, after in zip(boxes, moved):
        np.testing.assert_array_equal(before.numpy(), after.numpy())


def test_rotation_is_refused() -> None:
    images, boxes = _scene(2)
    with pytest.raises(ValueError, match="rotate"):
        augment_detection_batch(images, boxes, ("flip", "rotate"), tf.constant([0, 1]))


def _letterboxed(boxes: object, sizes: object, target: tuple[int, int]) -> tf.Tensor:
    """ExampleGen's letterbox of boxes (core/letterbox.py), one size for all or one per example: what the serving
    side's `unletterbox_boxes` must undo."""
    boxes, sizes = np.asarray(boxes), np.asarray(sizes)
    if sizes.ndim == 1:
        return tf.constant(letterboxed_boxes(boxes, tuple(sizes), target), tf.float32)
    return tf.constant(np.stack([letterboxed_boxes(b, tuple(z), target) for b, z in zip(boxes, sizes)]), tf.float32)


SIZES = [(50, 100), (100, 50), (37, 91), (64, 64), (480, 640), (1080, 1920), (91, 37)]


@pytest.mark.parametrize("target", [(320, 320), (224, 300), (96, 64)])
def test_letterbox_round_trip_returns_the_boxes(target: tuple[int, int]) -> None:
    rng = np.random.default_rng(5)
    corners = np.sort(rng.uniform(size=(len(SIZES), 6, 2, 2)), axis=2)  # (y, x) min then max
    boxes = tf.constant(corners.reshape(len(SIZES), 6, 4), tf.float32)
    sizes = tf.constant(SIZES)
    back = unletterbox_boxes(_letterboxed(boxes, sizes, target), sizes, target)  # one size per example
    np.testing.assert_allclose(back.numpy(), boxes.numpy(), atol=1e-5)
    for index, size in enumerate(SIZES):  # and one size for a batch
        single = unletterbox_boxes(_letterboxed(boxes[index], size, target), tf.constant(size), target)
        np.testing.assert_allclose(single.numpy(), boxes.numpy()[index], atol=1e-5)


@pytest.mark.parametrize("source, target", [((30, 80), (64, 64)), ((37, 91), (64, 64)), ((96, 40), (48, 64)),
                                            ((48, 64), (150, 120))])
def test_letterboxed_boxes_enclose_the_pixels_resize_with_pad_writes(source: tuple[int, int],
                                                                    target: tuple[int, int]) -> None:
    """Nearest-neighbour resize: the check is of geometry (sizes and paddings in whole pixels), not of blur."""
    images, boxes = _scene(4, *source, seed=3)
    padded = tf.image.resize_with_pad(images, *target, method="nearest")
    moved = boxes._replace(boxes=tf.where(tf.range(SLOTS)[None, :, None] < boxes.count[:, None, None],
                                          _letterboxed(boxes.boxes, source, target), 0.0))
    assert _assert_boxes_enclose(padded, moved) == int(boxes.count.numpy().sum())

"""COCO detection metrics (core/detection_metrics.py) against pycocotools on the same generated boxes.

The generated images and the reference are tests/coco_reference.py's. pycocotools is fed through
`coco_boxes`, the module's own conversion, so a convention mistake in it would show here as a
difference (the planted-mistake tests show it would). Crowd regions: test_detection_crowd.py.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from coco_reference import (CLASSES, TOLERANCE, Image, accumulated, assert_same, coco_reference, generated_images,
                            random_box)
from pycocotools import mask as mask_utils
from pycocotools.cocoeval import COCOeval

from shardflow.core.detection_metrics import AREA_RANGES, DetectionAccumulator, box_iou, coco_boxes

pytestmark = pytest.mark.unit  # numpy and pycocotools only

@pytest.fixture(scope="module")
def images() -> list[Image]:
    return generated_images()


@pytest.fixture(scope="module")
def reference(images: list[Image]) -> COCOeval:
    return coco_reference(images)


def test_the_data_covers_the_cases(images: list[Image]) -> None:
    """What the comparison below exercises: every area range, empty images both ways, score ties."""
    areas = np.concatenate([np.prod(coco_boxes(im.true_boxes, im.height, im.width)[:, 2:], axis=1) for im in images])
    for _, low, high in AREA_RANGES[1:]:
        assert ((areas >= low) & (areas <= high)).sum() >= 10
    assert sum(len(im.true_classes) == 0 for im in images) >= 3
    assert sum(len(im.det_scores) == 0 for im in images) >= 3
    scores = np.concatenate([im.det_scores for im in images])
    assert len(scores) > len(np.unique(scores)) + 50
    assert len({im.height / im.width for im in images}) > 50


def test_iou_is_pycocotools_bit_for_bit(images: list[Image]) -> None:
    for im in images[:20]:
        dets, truths = (coco_boxes(b, im.height, im.width) for b in (im.det_boxes, im.true_boxes))
        if len(dets) and len(truths):
            expected = mask_utils.iou(dets.tolist(), truths.tolist(), [0] * len(truths))
            np.testing.assert_array_equal(box_iou(dets, truths), expected)


def test_equals_pycocotools(images: list[Image], reference: COCOeval) -> None:
    ours = accumulated(images).summarize()
    assert_same(ours, reference)
    assert ours.per_class_ap[4] == -1 and (ours.per_class_ap[:4] > 0).all()
    assert 0.1 < ours.stats[0] < 0.9  # neither trivial nor hopeless: thresholds decide matches


def crafted_images() -> list[Image]:
    """Corners random boxes almost never reach, in a 128 x 128 image so pixel edges are exact."""
    def px(*rows: tuple[int, int, int, int]) -> np.ndarray:  # (ymin, xmin, ymax, xmax) in pixels
        return np.array(rows, np.float64) / 128

    def image(image_id: int, truths: np.ndarray, dets: np.ndarray, scores: list[float], label: int) -> Image:
        return Image(image_id, 128, 128, truths, np.full(len(truths), label), dets, np.array(scores),
                     np.full(len(dets), label))
    return [
        # The first detection has equal IoU (0.818) with both objects and takes the later one, which leaves
        # the earlier one to the second detection (IoU 1 with it, 0.667 with the other).
        image(1, px((0, 0, 10, 10), (0, 2, 10, 12)), px((0, 1, 10, 11), (0, 0, 10, 10)), [.9, .8], 0),
        # Under "medium" the 30 x 30 object is ignored: the detection takes the medium one (IoU 0.68)
        # although its IoU with the ignored one is higher (0.83).
        image(2, px((0, 0, 40, 40), (0, 0, 30, 30)), px((0, 0, 33, 33)), [.7], 1),
        # IoUs of exactly 0.5 and 0.75 match at those thresholds (IoU >= t).
        image(3, px((0, 0, 10, 20), (50, 50, 60, 70)), px((0, 0, 10, 10), (50, 50, 60, 65)), [.6, .5], 2),
    ]


def test_equals_pycocotools_on_crafted_corners() -> None:
    crafted = crafted_images()
    assert_same(accumulated(crafted).summarize(), coco_reference(crafted))


def test_subsets_and_resamples_equal_pycocotools_on_those_images(images: list[Image]) -> None:
    accumulator = accumulated(images)
    ids = [im.image_id for im in images]
    everything = accumulator.summarize(images=ids[::-1])
    np.testing.assert_array_equal(everything.stats, accumulator.summarize().stats)
    subset = ids[::3]
    assert_same(accumulator.summarize(images=subset), coco_reference(images, image_ids=subset))
    # A bootstrap resample: repeated images are separate images to pycocotools under new ids, numbered
    # in sorted order so that score ties break as the accumulator breaks them.
    drawn = np.sort(np.random.default_rng(3).choice(ids, len(ids)))
    by_id = {im.image_id: im for im in images}
    copies = [replace(by_id[int(image_id)], image_id=position) for position, image_id in enumerate(drawn)]
    assert len(set(drawn)) < len(drawn)
    assert_same(accumulator.summarize(images=drawn), coco_reference(copies))


@pytest.mark.parametrize("mistake", ["detections_xy_swapped", "detections_one_pixel_off", "one_pixel_wider"])
def test_a_planted_convention_mistake_is_caught(images: list[Image], reference: COCOeval, mistake: str) -> None:
    def planted(im: Image) -> Image:
        pixel = np.array([1 / im.height, 1 / im.width] * 2)
        if mistake == "detections_xy_swapped":  # predictions (xmin, ymin, ...), labels (ymin, xmin, ...)
            return replace(im, det_boxes=im.det_boxes[:, [1, 0, 3, 2]])
        if mistake == "detections_one_pixel_off":
            return replace(im, det_boxes=im.det_boxes + pixel)
        grow = pixel * [0, 0, 1, 1]  # the old x2 - x1 + 1 width, on both sides
        return replace(im, det_boxes=im.det_boxes + grow, true_boxes=im.true_boxes + grow)
    wrong = accumulated([planted(im) for im in images]).summarize()
    assert np.abs(wrong.stats - reference.stats).max() > 1e-3


def test_swapping_both_sides_is_invisible_to_coco_metrics(images: list[Image], reference: COCOeval) -> None:
    """Why the planted swap is on the detections only: IoU and area survive swapping the axes of both
    ground truth and detections (a transpose and per-axis scaling), so no COCO number can catch that."""
    swap = [1, 0, 3, 2]
    swapped = [replace(im, det_boxes=im.det_boxes[:, swap], true_boxes=im.true_boxes[:, swap]) for im in images]
    np.testing.assert_allclose(accumulated(swapped).summarize().stats, reference.stats, atol=TOLERANCE)


def test_no_detections_at_all_scores_zero(images: list[Image]) -> None:
    empty = [replace(im, det_boxes=np.zeros((0, 4)), det_scores=np.zeros(0), det_classes=np.zeros(0, int))
             for im in images]
    metrics = accumulated(empty).summarize()
    assert metrics.per_class_ap.tolist() == [0, 0, 0, 0, -1]
    assert metrics.stats.tolist() == [0.0] * 12  # every area range has ground truth


def test_only_the_top_detections_per_image_and_class_count() -> None:
    """150 detections of one class in one image: pycocotools keeps the 100 best (stable on ties), per class."""
    rng = np.random.default_rng(11)
    truth = np.array([[.1, .1, .4, .3], [.5, .5, .9, .8]])
    decoys = np.array([random_box(rng, 480, 640) * [.1, .1, .1, .1] + .85 for _ in range(150)])
    det_boxes = np.concatenate([decoys, truth])
    scores = np.concatenate([np.round(rng.uniform(.2, .9, 150), 1), [.2, .95]])
    classes = np.array([0] * 151 + [1])
    image = Image(1, 480, 640, truth, np.array([0, 1]), det_boxes, scores, classes)
    ours = accumulated([image]).summarize()
    assert_same(ours, coco_reference([image]))
    assert ours.per_class_ap[0] == 0  # its true positive ranks below 100 decoys (ties keep given order)
    assert accumulated([image], max_detections=200).summarize().per_class_ap[0] > 0
    assert ours.per_class_ap[1] > 0.99


def test_padded_arrays_with_counts_equal_the_cut_arrays(images: list[Image]) -> None:
    padded = DetectionAccumulator(CLASSES)
    for im in images:
        pad = lambda a, rows: np.concatenate([a, np.zeros((rows, *a.shape[1:]), a.dtype)])  # noqa: E731
        padded.add_image(im.image_id, im.height, im.width, pad(im.true_boxes, 3), pad(im.true_classes, 3),
                         pad(im.det_boxes, 5), pad(im.det_scores, 5), pad(im.det_classes, 5),
                         num_true=len(im.true_classes), num_detections=len(im.det_scores))
    np.testing.assert_array_equal(padded.summarize().stats, accumulated(images).summarize().stats)


def test_memory_follows_boxes_not_images_or_pixels() -> None:
    """1,000 images: bytes within ~128 per kept box (doubled for growth), the same for any image size,
    and nothing for an image without boxes."""
    rng = np.random.default_rng(5)
    tiny, huge, blank = (DetectionAccumulator(CLASSES) for _ in range(3))
    boxes = 0
    for image_id in range(1000):
        truths, dets = rng.uniform(0, .5, (3, 4)) + [0, 0, .5, .5], rng.uniform(0, .5, (4, 4)) + [0, 0, .5, .5]
        labels, det_labels, scores = rng.integers(0, CLASSES, 3), rng.integers(0, CLASSES, 4), rng.random(4)
        tiny.add_image(image_id, 64, 48, truths, labels, dets, scores, det_labels)
        huge.add_image(image_id, 6000, 4000, truths, labels, dets, scores, det_labels)
        blank.add_image(image_id, 6000, 4000, np.zeros((0, 4)), np.zeros(0, int), np.zeros((0, 4)),
                        np.zeros(0), np.zeros(0, int))
        boxes += 3 + 4
    assert tiny.nbytes == huge.nbytes <= 2 * 128 * boxes
    assert blank.nbytes == 0
    assert huge.summarize().stats.shape == (12,)

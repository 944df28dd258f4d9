"""COCO detection metrics (core/detection_metrics.py) against pycocotools on the same generated boxes.

The images are random but seeded: varied non-square sizes, 0–6 objects of 4 classes from a few pixels
to most of the image (small, medium and large), detections that jitter, duplicate, miss or invent
boxes, scores rounded to hundredths so ties happen across and within images, a fifth class that only
false positives carry. pycocotools is fed through `coco_boxes`, the module's own conversion, so a
convention mistake in it would show here as a difference (the planted-mistake tests show it would).
"""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, replace

import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from shardflow.core.detection_metrics import (
    AREA_RANGES, DetectionAccumulator, DetectionMetrics, box_iou, coco_boxes,
)

pytestmark = pytest.mark.unit  # numpy and pycocotools only

CLASSES = 5  # class 4 has no ground truth: only false positives name it
TOLERANCE = 1e-6


@dataclass(frozen=True)
class Image:
    image_id: int
    height: int
    width: int
    true_boxes: np.ndarray  # normalised (ymin, xmin, ymax, xmax)
    true_classes: np.ndarray
    det_boxes: np.ndarray
    det_scores: np.ndarray
    det_classes: np.ndarray


def random_box(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A normalised box of 6 px to ~90 % of the image's short side, aspect up to 2:1."""
    side = np.exp(rng.uniform(np.log(6), np.log(0.9 * min(height, width))))
    aspect = np.exp(rng.uniform(-0.7, 0.7))
    h, w = min(side * aspect, height - 1), min(side / aspect, width - 1)
    y, x = rng.uniform(0, height - h), rng.uniform(0, width - w)
    return np.array([y / height, x / width, (y + h) / height, (x + w) / width])


def jittered(rng: np.random.Generator, box: np.ndarray) -> np.ndarray:
    """The box with each side moved by ~8 % of its size: IoUs spread over the 0.5–0.95 thresholds."""
    size = np.array([box[2] - box[0], box[3] - box[1]] * 2)
    moved = np.clip(box + rng.normal(0, 0.08, 4) * size, 0, 1)
    return np.concatenate([np.minimum(moved[:2], moved[2:]), np.maximum(moved[:2], moved[2:])])


def random_image(rng: np.random.Generator, image_id: int) -> Image:
    height, width = (int(v) for v in rng.integers(120, 1000, 2))
    objects = 0 if rng.random() < 0.15 else int(rng.integers(1, 7))
    truths = [random_box(rng, height, width) for _ in range(objects)]
    true_classes = rng.integers(0, 4, objects)
    boxes, classes, scores = [], [], []
    for box, label in zip(truths, true_classes):
        for _ in range((rng.random() < 0.75) + (rng.random() < 0.2)):  # missed, found, or found twice
            boxes.append(jittered(rng, box))
            classes.append(label if rng.random() < 0.9 else rng.integers(0, 4))
            scores.append(rng.uniform(0.3, 1))
    for _ in range(rng.poisson(1.5)):  # false positives, some of the class no image has
        boxes.append(random_box(rng, height, width))
        classes.append(rng.integers(0, CLASSES))
        scores.append(rng.uniform(0, 0.8))
    if rng.random() < 0.1:
        boxes, classes, scores = [], [], []
    return Image(image_id, height, width, np.array(truths).reshape(-1, 4), true_classes,
                 np.array(boxes).reshape(-1, 4), np.round(scores, 2), np.array(classes, np.int64))


def generated_images(seed: int = 7, count: int = 60) -> list[Image]:
    rng = np.random.default_rng(seed)
    images = [random_image(rng, 3 * i + 5) for i in range(count)]  # ids not 0..N-1, not contiguous
    # An object of exactly 32 x 32 px: pycocotools counts it both small and medium.
    edge = np.array([[.25, .25, .375, .375]])
    images.append(Image(1000, 256, 256, edge, np.array([1]), edge, np.array([.5]), np.array([1])))
    return images


def accumulated(images: list[Image], **options: object) -> DetectionAccumulator:
    accumulator = DetectionAccumulator(CLASSES, **options)
    for image in images:
        accumulator.add_image(**vars(image))
    return accumulator


def coco_reference(images: list[Image], image_ids: list[int] | None = None) -> COCOeval:
    """pycocotools' evaluation of the same images, boxes converted by `coco_boxes`."""
    truth_json = {"images": [{"id": im.image_id, "height": im.height, "width": im.width} for im in images],
                  "categories": [{"id": k + 1, "name": str(k)} for k in range(CLASSES)], "annotations": []}
    detections = []
    for im in images:
        for box, label in zip(coco_boxes(im.true_boxes, im.height, im.width), im.true_classes):
            truth_json["annotations"].append({
                "id": len(truth_json["annotations"]) + 1, "image_id": im.image_id, "category_id": int(label) + 1,
                "bbox": box.tolist(), "area": float(box[2] * box[3]), "iscrowd": 0})
        for box, label, score in zip(coco_boxes(im.det_boxes, im.height, im.width), im.det_classes, im.det_scores):
            detections.append({"image_id": im.image_id, "category_id": int(label) + 1, "bbox": box.tolist(),
                               "score": float(score)})
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        truth = COCO()
        truth.dataset = truth_json
        truth.createIndex()
        evaluation = COCOeval(truth, truth.loadRes(detections), "bbox")
        if image_ids is not None:
            evaluation.params.imgIds = image_ids
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return evaluation


def reference_class_ap(evaluation: COCOeval) -> np.ndarray:
    """pycocotools per class: precision[:, :, k, area all, maxDets 100], mean over entries > -1."""
    precision = evaluation.eval["precision"]
    return np.array([precision[:, :, k, 0, 2][precision[:, :, k, 0, 2] > -1].mean()
                     if (precision[:, :, k, 0, 2] > -1).any() else -1 for k in range(precision.shape[2])])


def assert_same(ours: DetectionMetrics, reference: COCOeval) -> None:
    np.testing.assert_allclose(ours.stats, reference.stats, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(ours.per_class_ap, reference_class_ap(reference), rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(ours.precision, reference.eval["precision"], rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(ours.recall, reference.eval["recall"], rtol=0, atol=TOLERANCE)


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

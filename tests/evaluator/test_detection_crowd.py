"""COCO's crowd rule in core/detection_metrics.py, against pycocotools on a fixed set with crowd boxes.

pycocotools treats a ground truth with `iscrowd` as an ignore region: never a positive, its IoU with a
detection is the intersection over the detection's area, any number of detections may match it, and a
detection matched to it is neither a true nor a false positive. The set: tests/coco_reference.py's seeded
images with a quarter of the objects made crowds, and detections planted inside and across the crowds.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from coco_reference import Image, accumulated, assert_same, coco_reference, generated_images
from pycocotools import mask as mask_utils

from shardflow.core.detection_metrics import box_iou, coco_boxes
from shardflow.evaluator.intervals import draw_counts, resample_indices

pytestmark = pytest.mark.unit  # numpy and pycocotools only


def inside(rng: np.random.Generator, box: np.ndarray) -> np.ndarray:
    """A box within `box` of 30-90 % of its sides: IoU 1 with it as a crowd, well under 1 otherwise."""
    size = (box[2:] - box[:2]) * rng.uniform(0.3, 0.9, 2)
    corner = box[:2] + rng.uniform(0, 1, 2) * (box[2:] - box[:2] - size)
    return np.concatenate([corner, corner + size])


def with_crowds(im: Image, rng: np.random.Generator) -> Image:
    """A quarter of the image's objects made crowds, each with 0-3 detections of its class planted in it."""
    crowd = rng.random(len(im.true_classes)) < 0.25
    boxes, scores, classes = [im.det_boxes], [im.det_scores], [im.det_classes]
    for box, label in zip(im.true_boxes[crowd], im.true_classes[crowd]):
        count = int(rng.integers(0, 4))
        boxes.append(np.array([inside(rng, box) for _ in range(count)]).reshape(-1, 4))
        scores.append(np.round(rng.uniform(0.1, 1, count), 2))
        classes.append(np.full(count, label))
    return replace(im, det_boxes=np.concatenate(boxes), det_scores=np.concatenate(scores),
                   det_classes=np.concatenate(classes).astype(np.int64), true_crowd=crowd)


@pytest.fixture(scope="module")
def crowded() -> list[Image]:
    rng = np.random.default_rng(23)
    return [with_crowds(im, rng) for im in generated_images(seed=17, count=80)]


def test_the_set_has_crowds_that_absorb_detections(crowded: list[Image]) -> None:
    crowds = np.concatenate([im.true_crowd for im in crowded])
    assert 30 <= crowds.sum() <= crowds.size / 2
    assert sum(im.true_crowd.sum() >= 2 for im in crowded) >= 5  # several crowds in one image


def test_crowd_iou_is_pycocotools_bit_for_bit(crowded: list[Image]) -> None:
    compared = 0
    for im in crowded:
        dets, truths = (coco_boxes(b, im.height, im.width) for b in (im.det_boxes, im.true_boxes))
        if len(dets) and im.true_crowd.any():
            expected = mask_utils.iou(dets.tolist(), truths.tolist(), im.true_crowd.astype(int).tolist())
            np.testing.assert_array_equal(box_iou(dets, truths, im.true_crowd), expected)
            compared += 1
    assert compared >= 10


def test_equals_pycocotools_with_crowds(crowded: list[Image]) -> None:
    ours = accumulated(crowded).summarize()
    assert_same(ours, coco_reference(crowded))  # the 12 numbers, per-class AP, precision and recall arrays
    # The rule matters on this set: counting crowds as objects gives other numbers.
    plain = accumulated([replace(im, true_crowd=None) for im in crowded]).summarize()
    assert np.abs(plain.stats - ours.stats).max() > 0.01


def test_resamples_with_crowds_equal_pycocotools(crowded: list[Image]) -> None:
    """A bootstrap resample (repeated images under new ids, as the accumulator orders them) through
    `summarize(images=...)`, and the many-resample path against `summarize` on the same draws."""
    accumulator = accumulated(crowded)
    ids = np.array([im.image_id for im in crowded])
    drawn = np.sort(np.random.default_rng(5).choice(ids, len(ids)))
    by_id = {im.image_id: im for im in crowded}
    copies = [replace(by_id[int(image_id)], image_id=position) for position, image_id in enumerate(drawn)]
    assert_same(accumulator.summarize(images=drawn), coco_reference(copies))
    indices = next(resample_indices(len(ids), 12, seed=4))
    found = accumulator.resampled_stats(ids, draw_counts(indices, len(ids)))
    expected = np.array([accumulator.summarize(images=ids[row]).stats for row in indices])
    np.testing.assert_allclose(np.nan_to_num(found, nan=-1), expected, rtol=0, atol=1e-12)


def crafted() -> list[Image]:
    """In a 100 x 100 image, pixel edges exact: class 0 has an object and a crowd; class 1 only a crowd."""
    def px(*rows: tuple[int, ...]) -> np.ndarray:
        return np.array(rows, np.float64).reshape(-1, 4) / 100
    truths = px((0, 0, 40, 40), (50, 50, 100, 100), (0, 60, 30, 90))
    dets = px((0, 0, 40, 40),  # the object: a true positive, scored below the next three
              (60, 60, 80, 80), (55, 70, 75, 95), (50, 50, 100, 100),  # in the crowd: ignored, not false
              (0, 20, 40, 60),  # IoU 0.33 with the object, but inside nothing: a false positive
              (5, 65, 25, 85))  # class 1, inside its crowd: ignored
    return [Image(1, 100, 100, truths, np.array([0, 0, 1]), dets, np.array([.6, .9, .8, .7, .5, .4]),
                  np.array([0, 0, 0, 0, 0, 1]), true_crowd=np.array([False, True, True]))]


def test_detections_inside_a_crowd_are_neither_true_nor_false_positives() -> None:
    images = crafted()
    ours = accumulated(images).summarize()
    assert_same(ours, coco_reference(images))
    ap = ours.precision[0, :, 0, 0, -1]  # IoU .5, class 0, all areas, 100 detections
    assert np.allclose(ap, 1.0)  # the crowd's three better-scored detections cost nothing
    assert ours.per_class_ap[1] == -1  # only a crowd: no ground truth counted
    assert ours.recall[0, 0, 0, -1] == 1.0

"""COCO's small/medium/large measured in the original image's pixels while the boxes are scored on a resized copy.

pycocotools scores tests/coco_reference.py's seeded images at their own sizes (120-1000 px a side). The
accumulator sees each of them as ExampleGen stores it, stretched to 96 x 128, with `image/object/area` (float32,
each true box's area in original pixels) as the true areas and a detection's area scaled by the image's factor,
as the Evaluator's scorer takes it (`detection_scorer.area_scale`). The twelve numbers must be pycocotools'.
"""
from __future__ import annotations

import numpy as np
import pytest
from coco_reference import Image, assert_same, coco_reference, generated_images

from shardflow.core.detection_metrics import STAT_NAMES, DetectionAccumulator, coco_boxes
from shardflow.tasks.detection.scoring import area_scale

pytestmark = pytest.mark.unit  # numpy and pycocotools only

STORED = (96, 128)  # (height, width) every image is stored at


def _stored_accumulator(images: list[Image], original_areas: bool) -> DetectionAccumulator:
    accumulator = DetectionAccumulator(5)
    for im in images:
        truths = coco_boxes(im.true_boxes, im.height, im.width)
        areas = (truths[:, 2] * truths[:, 3]).astype(np.float32) if original_areas else None  # as ExampleGen stores
        scale = area_scale(im.true_boxes, areas, *STORED) if original_areas else 1.0
        accumulator.add_image(im.image_id, *STORED, im.true_boxes, im.true_classes, im.det_boxes, im.det_scores,
                              im.det_classes, true_areas=areas, area_scale=scale)
    return accumulator


def test_areas_in_original_pixels_give_pycocotools_figures_on_resized_images() -> None:
    images = [im for im in generated_images(seed=29, count=80) if len(im.true_classes)]  # a factor needs a box
    reference = coco_reference(images)
    assert_same(_stored_accumulator(images, original_areas=True).summarize(), reference)
    stored = dict(zip(STAT_NAMES, _stored_accumulator(images, original_areas=False).summarize().stats))
    expected = dict(zip(STAT_NAMES, reference.stats))
    assert stored["AP"] == pytest.approx(expected["AP"], abs=1e-6)  # IoU does not change with the resize
    assert stored["AR_large"] != pytest.approx(expected["AR_large"], abs=0.01)  # the areas in stored pixels do


def test_the_factor_is_original_pixels_per_stored_pixel() -> None:
    boxes = np.array([[0.0, 0.0, 0.5, 0.25], [0.5, 0.5, 1.0, 1.0]])
    original = coco_boxes(boxes, 480, 640)
    areas = (original[:, 2] * original[:, 3]).astype(np.float32)
    assert area_scale(boxes, areas, *STORED) == pytest.approx(480 * 640 / (96 * 128), rel=1e-6)
    assert area_scale(boxes, None, *STORED) is None and area_scale(np.zeros((0, 4)), areas[:0], *STORED) is None

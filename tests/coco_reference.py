"""pycocotools as the reference for COCO detection metrics: seeded generated images and COCOeval on them.

The images are random but seeded: varied non-square sizes, 0–6 objects of 4 classes from a few pixels
to most of the image (small, medium and large), detections that jitter, duplicate, miss or invent
boxes, scores rounded to hundredths so ties happen across and within images, a fifth class that only
false positives carry. pycocotools is fed through `coco_boxes`, the module under test's own conversion, so
a convention mistake in it would show as a difference. `Image.true_crowd` marks COCO crowd regions.
"""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from shardflow.core.detection_metrics import DetectionAccumulator, DetectionMetrics, coco_boxes

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
    true_crowd: np.ndarray | None = None  # bool per true box: a COCO crowd region


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
        crowd = np.zeros(len(im.true_classes), bool) if im.true_crowd is None else im.true_crowd
        for box, label, is_crowd in zip(coco_boxes(im.true_boxes, im.height, im.width), im.true_classes, crowd):
            truth_json["annotations"].append({
                "id": len(truth_json["annotations"]) + 1, "image_id": im.image_id, "category_id": int(label) + 1,
                "bbox": box.tolist(), "area": float(box[2] * box[3]), "iscrowd": int(is_crowd)})
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

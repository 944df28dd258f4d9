"""Detection's report, bootstrap intervals and plots (evaluator/detection_report.py, detection_plots.py).

Generated scenes: images of varied sizes with 0-8 objects of 3 classes, from a few pixels to most of the
image (small, medium and large), scored by a simulated detector that misses some objects, jitters the
boxes it finds in proportion to their size and adds false positives with lower scores.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from PIL import Image

from shardflow.core.detection_metrics import STAT_NAMES, DetectionAccumulator
from shardflow.tasks.detection.plots import plot_detections, plot_precision_recall
from shardflow.tasks.detection.report import (
    METRIC_NAMES, detection_intervals, detection_metrics_report, gate_values, paired_detection_intervals,
)
from shardflow.evaluator.intervals import bootstrap_intervals, draw_counts, resample_indices
from shardflow.tasks import task_for

pytestmark = pytest.mark.unit  # numpy, matplotlib and Pillow on generated boxes

CLASS_NAMES = ["cat", "dog", "bird"]


@dataclass(frozen=True)
class Scene:
    """One image's ground truth: normalised (ymin, xmin, ymax, xmax) boxes and class ids."""

    image_id: int
    height: int
    width: int
    boxes: np.ndarray
    classes: np.ndarray


@dataclass(frozen=True)
class Found:
    """A detector's output on one scene."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray


def make_scenes(count: int, seed: int) -> list[Scene]:
    rng = np.random.default_rng(seed)
    scenes = []
    for i in range(count):
        objects = int(rng.poisson(3))
        sides = np.exp(rng.uniform(np.log(0.03), np.log(0.7), (objects, 2)))  # height, width shares
        corners = rng.uniform(0, 1 - sides)
        scenes.append(Scene(10 * i + 1, *(int(v) for v in rng.integers(200, 640, 2)),
                            np.hstack([corners, corners + sides]), rng.integers(0, 3, objects)))
    return scenes


def detect(scenes: list[Scene], seed: int, miss: float = 0.15, jitter: float = 0.06,
           decimals: int | None = None) -> list[Found]:
    """A simulated detector; `decimals` rounds the scores, so detections of one image tie."""
    rng = np.random.default_rng(seed)
    out = []
    for scene in scenes:
        kept = rng.random(len(scene.classes)) >= miss
        sizes = np.tile(scene.boxes[kept, 2:] - scene.boxes[kept, :2], 2)
        moved = np.clip(scene.boxes[kept] + rng.normal(0, jitter, sizes.shape) * sizes, 0, 1)
        wrong = rng.random(kept.sum()) < 0.1
        classes = np.where(wrong, rng.integers(0, 3, kept.sum()), scene.classes[kept])
        extra = int(rng.poisson(0.8))
        corner = rng.uniform(0, 0.7, (extra, 2))
        boxes = np.vstack([moved, np.hstack([corner, corner + rng.uniform(0.02, 0.3, (extra, 2))])])
        boxes = np.hstack([np.minimum(boxes[:, :2], boxes[:, 2:]), np.maximum(boxes[:, :2], boxes[:, 2:])])
        scores = np.concatenate([rng.uniform(0.4, 1.0, kept.sum()), rng.uniform(0.05, 0.7, extra)])
        scores = scores if decimals is None else np.round(scores, decimals)
        out.append(Found(boxes, scores, np.concatenate([classes, rng.integers(0, 3, extra)])))
    return out


def accumulate(scenes: list[Scene], found: list[Found]) -> DetectionAccumulator:
    accumulator = DetectionAccumulator(len(CLASS_NAMES))
    for scene, dets in zip(scenes, found):
        accumulator.add_image(scene.image_id, scene.height, scene.width, scene.boxes, scene.classes,
                              dets.boxes, dets.scores, dets.classes)
    return accumulator


def scored(count: int, seed: int = 0, **detector: object) -> tuple[DetectionAccumulator, np.ndarray]:
    scenes = make_scenes(count, seed)
    return accumulate(scenes, detect(scenes, seed + 1, **detector)), np.array([s.image_id for s in scenes])


def test_the_report_names_the_accumulators_numbers() -> None:
    accumulator, _ = scored(80)
    metrics = accumulator.summarize()
    report = detection_metrics_report(accumulator, CLASS_NAMES)
    assert list(report["overall"]) == ["ap", "ap50", "ap75", "ap_small", "ap_medium", "ap_large",
                                       "ar1", "ar10", "ar100", "ar_small", "ar_medium", "ar_large"]
    assert all(stat >= 0 for stat in metrics.stats)  # every area has objects: nothing undefined here
    assert report["overall"] == {name.lower(): float(value) for name, value in zip(STAT_NAMES, metrics.stats)}
    assert report["ap_per_class"] == dict(zip(CLASS_NAMES, metrics.per_class_ap.tolist()))
    with pytest.raises(ValueError, match="2 class names for 3 classes"):
        detection_metrics_report(accumulator, CLASS_NAMES[:2])


def test_minus_one_becomes_none() -> None:
    """Only large objects of two classes; a third class only false positives name."""
    accumulator = DetectionAccumulator(3)
    large = np.array([[0.1, 0.1, 0.8, 0.9], [0.2, 0.05, 0.95, 0.6]])
    for image_id in range(4):
        accumulator.add_image(image_id, 400, 400, large, np.array([0, 1]), np.vstack([large, [[0, 0, .5, .5]]]),
                              np.array([0.9, 0.8, 0.4]), np.array([0, 0, 2]))
    stats = accumulator.summarize().stats
    report = detection_metrics_report(accumulator, CLASS_NAMES)
    undefined = {"ap_small", "ap_medium", "ar_small", "ar_medium"}
    assert {name for name, value in report["overall"].items() if value is None} == undefined
    assert all((stats[i] == -1) == (name in undefined) for i, name in enumerate(METRIC_NAMES))
    assert report["ap_per_class"]["bird"] is None and report["ap_per_class"]["cat"] > 0.99
    assert report["ap_per_class"]["dog"] == 0.0  # has ground truth, never found: a real 0, not None
    assert np.isnan(gate_values(report["overall"])["ap_small"])  # what the gate's checks take as undefined
    intervals = detection_intervals(accumulator, range(4), resamples=100)
    assert intervals["candidate"]["ap_small"] == [None, None] and None not in intervals["candidate"]["ap"]


@pytest.mark.parametrize("decimals", [None, 1])
def test_each_resample_scores_as_summarize_scores_it(decimals: int | None) -> None:
    """The vectorised bootstrap against `summarize(images=...)` on the same draws, with repeated images and,
    with scores rounded to tenths, detections of one image and class tied in score."""
    accumulator, ids = scored(90, seed=3, decimals=decimals)
    indices = next(resample_indices(len(ids), 25, seed=11))
    counts = draw_counts(indices, len(ids))
    assert counts.max() >= 3
    found = accumulator.resampled_stats(ids, counts)
    expected = np.array([accumulator.summarize(images=ids[row]).stats for row in indices])
    assert np.array_equal(np.isnan(found), expected == -1)
    assert np.allclose(found[expected != -1], expected[expected != -1], rtol=0, atol=1e-12)


def _width(interval: list[float]) -> float:
    return interval[1] - interval[0]


def test_the_interval_holds_the_point_estimate_and_narrows_with_more_images() -> None:
    found = {}
    for count in (100, 1600):
        accumulator, ids = scored(count, seed=5)
        report = detection_metrics_report(accumulator, CLASS_NAMES)
        found[count] = detection_intervals(accumulator, ids, resamples=400, seed=0)["candidate"]
        for name, (low, high) in found[count].items():
            assert low <= report["overall"][name] <= high, (count, name)
    for name in ("ap", "ap50", "ap75", "ar100", "ap_large"):
        assert _width(found[1600][name]) < _width(found[100][name]) / 2, name  # ~1/sqrt(16) = 1/4


def test_a_model_against_itself_differs_by_exactly_zero_and_a_worse_one_shows() -> None:
    scenes = make_scenes(300, seed=7)
    good = accumulate(scenes, detect(scenes, 8))
    ids = [scene.image_id for scene in scenes]
    same = paired_detection_intervals(good, good, ids, resamples=300, seed=2)
    assert same["delta"] == {name: [0.0, 0.0] for name in METRIC_NAMES}
    assert same["baseline"] == same["candidate"]
    worse = accumulate(scenes, detect(scenes, 8, miss=0.4, jitter=0.12))
    compared = paired_detection_intervals(worse, good, ids, resamples=300, seed=2)
    assert compared["delta"]["ap"][1] < 0 and compared["delta"]["ar100"][1] < 0
    assert compared["candidate"] == detection_intervals(worse, ids, resamples=300, seed=2)["candidate"]


def test_the_intervals_have_the_classification_intervals_shape_and_a_seed_fixes_them() -> None:
    accumulator, ids = scored(120, seed=9)
    first = detection_intervals(accumulator, ids, resamples=200, seed=4)
    cells = {"cells": np.array([0, 3, 3, 1])}
    assert set(first) == set(bootstrap_intervals(task_for("classification"), 2, cells, resamples=10))
    assert (first["confidence"], first["resamples"], first["seed"], first["baseline"]) == (0.95, 200, 4, None)
    assert all(len(bounds) == 2 for bounds in first["candidate"].values())
    assert detection_intervals(accumulator, ids, resamples=200, seed=4) == first
    assert detection_intervals(accumulator, ids, resamples=200, seed=5)["candidate"] != first["candidate"]
    with pytest.raises(ValueError, match="unique"):
        detection_intervals(accumulator, np.concatenate([ids, ids[:1]]), resamples=10)


def _pixels(scene: Scene, rng: np.random.Generator) -> np.ndarray:
    """A noisy gray picture with the scene's objects painted in."""
    pixels = rng.integers(90, 150, (scene.height, scene.width, 3)).astype(np.uint8)
    for (ymin, xmin, ymax, xmax), label in zip(scene.boxes, scene.classes):
        rows = slice(int(ymin * scene.height), int(ymax * scene.height))
        pixels[rows, int(xmin * scene.width):int(xmax * scene.width)] = (60 + 60 * label, 180, 220 - 60 * label)
    return pixels


def _png(path: object) -> np.ndarray:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return np.asarray(image.convert("RGB"))


def test_the_detection_grid_is_a_png_with_the_boxes_drawn(tmp_path: object) -> None:
    scenes = make_scenes(6, seed=12)
    found, rng = detect(scenes, 13), np.random.default_rng(14)
    images = [_pixels(scene, rng) for scene in scenes]
    arguments = ([s.boxes for s in scenes], [s.classes for s in scenes], [f.boxes for f in found],
                 [f.scores for f in found], [f.classes for f in found])
    plot_detections(images, *arguments, CLASS_NAMES, str(tmp_path / "detections.png"), max_images=5)
    drawn = _png(tmp_path / "detections.png")
    assert drawn.shape == (650, 1200, 3)  # 4 columns of 3 in at 100 dpi, 2 rows and the title
    assert drawn.std() > 20 and len(np.unique(drawn.reshape(-1, 3), axis=0)) > 100
    empty = [np.zeros((0, 4))] * 6
    plot_detections(images, empty, [np.zeros(0, int)] * 6, empty, [np.zeros(0)] * 6, [np.zeros(0, int)] * 6,
                    CLASS_NAMES, str(tmp_path / "bare.png"), max_images=5)
    assert (np.abs(drawn.astype(int) - _png(tmp_path / "bare.png")).sum(axis=2) > 60).sum() > 2000


def test_the_precision_recall_curves_are_a_png_with_one_curve_per_class(tmp_path: object) -> None:
    accumulator, _ = scored(60, seed=15)
    metrics = accumulator.summarize()
    plot_precision_recall(metrics, CLASS_NAMES, str(tmp_path / "pr.png"))
    drawn = _png(tmp_path / "pr.png")
    assert drawn.shape == (500, 750, 3)
    assert (drawn.sum(axis=2) < 700).mean() > 0.01  # not a blank page
    for colour in [(31, 119, 180), (255, 127, 14), (44, 160, 44)]:  # tab10's first three: each class's curve
        assert (np.abs(drawn.astype(int) - colour).sum(axis=2) < 30).sum() > 200, colour

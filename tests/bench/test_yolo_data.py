"""The detection_yolo benchmark's pure pieces (benchmarks/yolo_data.py): the AutoML CSV exported to Ultralytics'
layout, and a prediction JSON scored by shardflow's COCO evaluator against the eval CSV's boxes. No torch."""
from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from benchmarks.yolo_data import class_names, export_yolo, read_truth, score_predictions, upright_size, yolo_name
from shardflow.demo_boxes import write_boxes

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("mixed")
    write_boxes(data, count=24, eval_fraction=0.5, mixed=True)
    return data


def _csv_boxes(path: Path) -> dict[str, list[tuple[str, float, float, float, float]]]:
    found: dict[str, list] = {}
    for row in csv.reader(open(path, newline="")):
        boxes = found.setdefault(row[0], [])
        if row[1]:
            boxes.append((row[1], *map(float, (row[2], row[3], row[6], row[7]))))  # x_min, y_min, x_max, y_max
    return found


def test_export_writes_one_label_line_per_csv_box_on_the_same_files(mixed: Path, tmp_path: Path) -> None:
    exported = export_yolo(mixed / "train.csv", mixed / "eval.csv", mixed, tmp_path / "yolo")
    names = exported["names"]
    assert names == ["disc", "square", "triangle"]
    assert "names:\n  0: disc\n  1: square\n  2: triangle\n" in (tmp_path / "yolo" / "data.yaml").read_text()
    for split, folder in (("train", "train"), ("eval", "val")):
        expected = _csv_boxes(mixed / f"{split}.csv")
        assert exported["counts"][split] == {"images": len(expected), "boxes": sum(map(len, expected.values()))}
        for path, boxes in expected.items():
            image = tmp_path / "yolo" / "images" / folder / yolo_name(path)
            assert os.path.samefile(image, mixed / path) or image.read_bytes() == (mixed / path).read_bytes()
            label = (tmp_path / "yolo" / "labels" / folder / yolo_name(path)).with_suffix(".txt")
            if not boxes:
                assert not label.exists()
                continue
            lines = [line.split() for line in label.read_text().splitlines()]
            assert [names[int(line[0])] for line in lines] == [box[0] for box in boxes]
            got = np.array([[float(v) for v in line[1:]] for line in lines])
            x0, y0, x1, y1 = np.array([box[1:] for box in boxes]).T
            np.testing.assert_allclose(got, np.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], 1), atol=1e-6)


def test_truth_sizes_are_upright_for_exif_turned_files(mixed: Path) -> None:
    names = class_names(mixed / "train.csv", mixed / "eval.csv")
    truth = read_truth(mixed / "train.csv", mixed, names) + read_truth(mixed / "eval.csv", mixed, names)
    turned = 0
    for image in truth:
        with Image.open(mixed / image.path) as opened:
            upright = ImageOps.exif_transpose(opened)
            turned += opened.size != upright.size
            assert (image.height, image.width) == (upright.height, upright.width) == upright_size(mixed / image.path)
    assert turned >= 1  # the set has sideways files: the check above is not vacuous


def _perfect(truth: list) -> dict:
    return {"images": {image.path: {"boxes": image.boxes.tolist(), "scores": [0.9] * len(image.classes),
                                    "classes": image.classes.tolist()} for image in truth}}


def test_scores_perfect_missing_and_wrong_predictions(mixed: Path) -> None:
    names = class_names(mixed / "train.csv", mixed / "eval.csv")
    truth = read_truth(mixed / "eval.csv", mixed, names)
    perfect = score_predictions(truth, _perfect(truth), len(names))
    assert perfect["ap"] == pytest.approx(1.0, abs=1e-3) and perfect["ap50"] == pytest.approx(1.0, abs=1e-3)
    with_boxes = [image for image in truth if len(image.classes)]
    half = _perfect(truth)
    for image in with_boxes[: len(with_boxes) // 2]:
        del half["images"][image.path]  # an image left out counts as one without detections
    assert score_predictions(truth, half, len(names))["ar100"] < 0.9
    shifted = _perfect(truth)
    for found in shifted["images"].values():
        found["classes"] = [(c + 1) % len(names) for c in found["classes"]]  # every box given another class
    assert score_predictions(truth, shifted, len(names))["ap50"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="outside the eval truth"):
        score_predictions(truth, {"images": {"img/elsewhere.jpg": {"boxes": [], "scores": [], "classes": []}}}, 3)

"""The YOLO contender's data and scores (issue 67): a box index exported to Ultralytics' layout, and its
predictions scored with shardflow's COCO evaluator against the same truth. Pure: no TensorFlow, no torch.

- `export_yolo`: an AutoML CSV pair (train, eval) → `data.yaml`, `images/{train,val}`, `labels/{train,val}`
  (one `class x_center y_center width height` line per box, normalised on the upright image, as the CSV's
  boxes are; an image without boxes has no label file, as Ultralytics' own tools leave it). The images are
  hard links to the set's JPEGs (a copy across file systems): the same bytes, EXIF orientation included.
- `eval_truth`: the eval images as ExampleGen reads them (`read_box_csv`, the one reader of the CSV), each with
  its upright (height, width) in pixels: COCO's area ranges are in the original image's pixels, as the
  Evaluator's (`image/object/area`).
- `score_predictions`: a prediction JSON (`{"images": {path: {"boxes": [[ymin, xmin, ymax, xmax], ...] normalised
  on the upright image, "scores": [...], "classes": [0-based ids in `names` order]}}}`) → the Evaluator's
  overall figures (ap, ap50, ..., ar_large) from `DetectionAccumulator`, the pycocotools-equal arithmetic.
  An eval image the JSON does not name counts as one without detections; a path the truth does not have is
  an error (a prediction for another set).
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shardflow.core.box_schema import MAX_DETECTIONS
from shardflow.core.detection_metrics import STAT_NAMES, DetectionAccumulator
from shardflow.example_gen.box_index import read_box_csv

SPLITS = {"train": "train", "eval": "val"}  # the CSV's split → Ultralytics' folder
_TURNED = (5, 6, 7, 8)  # EXIF orientations whose upright image swaps width and height
METRICS = tuple(name.lower() for name in STAT_NAMES)  # the Evaluator's metrics.json names


@dataclass(frozen=True)
class TruthImage:
    path: str  # as the CSV names it, relative to the data root
    height: int  # upright, in pixels
    width: int
    boxes: np.ndarray  # float64 [N, 4] normalised ymin, xmin, ymax, xmax
    classes: np.ndarray  # int64 [N], 0-based in `names` order


def upright_size(path: Path) -> tuple[int, int]:
    """(height, width) of the image as a viewer shows it: EXIF orientations 5-8 swap the stored sides."""
    from PIL import Image

    with Image.open(path) as image:
        width, height = image.size
        orientation = image.getexif().get(0x0112, 1)
    return (width, height) if orientation in _TURNED else (height, width)


def class_names(*csvs: Path) -> list[str]:
    """Sorted class names of the kept boxes of every index: ExampleGen's label map order (ids from 1)."""
    return sorted({name for csv_path in csvs for name in read_box_csv(str(csv_path)).labels})


def read_truth(csv_path: Path, data_root: Path, names: list[str]) -> list[TruthImage]:
    """Each kept image of the index with its boxes and upright size (module docstring)."""
    index, ids = read_box_csv(str(csv_path)), {name: number for number, name in enumerate(names)}
    return [TruthImage(image.path, *upright_size(data_root / image.path), image.array(),
                       np.array([ids[name] for name in image.classes], np.int64))
            for image in index.images]


def _yolo_lines(truth: TruthImage) -> list[str]:
    """`class x_center y_center width height` per box.

    >>> _yolo_lines(TruthImage("a.jpg", 10, 20, np.array([[0.2, 0.1, 0.6, 0.5]]), np.array([2])))
    ['2 0.300000 0.400000 0.400000 0.400000']
    """
    return [f"{label} {(x0 + x1) / 2:.6f} {(y0 + y1) / 2:.6f} {x1 - x0:.6f} {y1 - y0:.6f}"
            for (y0, x0, y1, x1), label in zip(truth.boxes.tolist(), truth.classes.tolist())]


def _link(source: Path, target: Path) -> None:
    if target.exists():
        return
    try:
        os.link(source, target)
    except OSError:  # another file system: the same bytes by copy
        shutil.copyfile(source, target)


def yolo_name(path: str) -> str:
    """The file's name in Ultralytics' flat folders: the CSV path with its folders joined by `__`."""
    return path.replace("/", "__")


def export_yolo(train_csv: Path, eval_csv: Path, data_root: Path, out: Path) -> dict[str, Any]:
    """The index pair in Ultralytics' layout under `out` (module docstring); its names and counts."""
    names = class_names(train_csv, eval_csv)
    counts: dict[str, dict[str, int]] = {}
    for split, csv_path in (("train", train_csv), ("eval", eval_csv)):
        images, labels = out / "images" / SPLITS[split], out / "labels" / SPLITS[split]
        images.mkdir(parents=True, exist_ok=True)
        labels.mkdir(parents=True, exist_ok=True)
        truth = read_truth(csv_path, data_root, names)
        for image in truth:
            _link(data_root / image.path, images / yolo_name(image.path))
            lines = _yolo_lines(image)
            if lines:
                (labels / yolo_name(image.path)).with_suffix(".txt").write_text("\n".join(lines) + "\n")
        counts[split] = {"images": len(truth), "boxes": sum(len(image.classes) for image in truth)}
    (out / "data.yaml").write_text(f"path: {out.resolve()}\ntrain: images/train\nval: images/val\nnames:\n"
                                   + "".join(f"  {number}: {name}\n" for number, name in enumerate(names)))
    return {"names": names, "counts": counts, "data_yaml": str(out / "data.yaml")}


def score_predictions(truth: list[TruthImage], predictions: dict[str, Any],
                      num_classes: int) -> dict[str, float | None]:
    """The COCO figures of `predictions` (module docstring's JSON) on `truth`; None where pycocotools gives -1."""
    found = predictions["images"]
    unknown = sorted(set(found) - {image.path for image in truth})
    if unknown:
        raise ValueError(f"predictions for {len(unknown)} images outside the eval truth, e.g. {unknown[0]}")
    accumulator = DetectionAccumulator(num_classes, MAX_DETECTIONS)
    empty: dict[str, list] = {"boxes": [], "scores": [], "classes": []}
    for number, image in enumerate(truth):
        det = found.get(image.path, empty)
        accumulator.add_image(number, image.height, image.width, image.boxes, image.classes,
                              np.array(det["boxes"], np.float64).reshape(-1, 4), np.array(det["scores"], np.float64),
                              np.array(det["classes"], np.int64))
    stats = accumulator.summarize().stats
    return {name: None if value < 0 else round(float(value), 4) for name, value in zip(METRICS, stats)}


def load_predictions(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())

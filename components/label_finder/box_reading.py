"""What find-label-issues reads for boxes: the given boxes of each example, a fold's detections, each box's row.

A fold's detections are kept as one float64 array of rows (position, ymin, xmin, ymax, xmax, score, label id),
so the finished-fold file (kept_folds.py) holds them as it holds a classifier's probabilities.

>>> found = np.array([[2, .1, .1, .5, .5, .9, 3], [0, 0, 0, .2, .2, .4, 1]])
>>> [len(d.scores) for d in per_image(found, 3)], per_image(found, 3)[2].classes.tolist()
([1, 0, 1], [3])
"""
from __future__ import annotations

import gzip
import json
from typing import Any, Sequence

import numpy as np

from ..core import storage
from ..core.box_issues import Annotation, Detections, iou_matrix
from ..core.box_schema import BBOX, BOXES_KEY, CLASS_LABEL, IS_CROWD
from ..core.manifest import Manifest
from ..core.tfrecord import iter_records
from .out_of_fold import OutOfFoldError

COLUMNS = 7  # position, ymin, xmin, ymax, xmax, score, label id
# predict's floor for the fold models' boxes: low, so a weak detection still says "there is something here"
# (a badly located box's touching score, a swap's own-class score), far below any class's threshold.
SCORE_FLOOR = 0.05
RECALL_SCORE = 0.3  # a fold's box recall counts detections from predict's display floor (predict/config.py)


def given_annotations(raw_dir: str, manifest: Manifest, split: str) -> list[Annotation]:
    """Each example's given boxes, class ids and crowd flags, in position order (shards in manifest order)."""
    from tensorflow.core.example import example_pb2  # the fold models import TensorFlow anyway

    found = []
    for path in manifest.shard_paths(raw_dir, split):
        with storage.open_read(path) as raw:
            stream = gzip.GzipFile(fileobj=raw) if manifest.compression == "GZIP" else raw
            for record in iter_records(stream, path):
                features = example_pb2.Example.FromString(record).features.feature
                boxes = np.array([list(features[name].float_list.value) for name in BBOX], np.float64).T
                classes = np.array(features[CLASS_LABEL].int64_list.value, np.int64)
                crowd = np.array(features[IS_CROWD].int64_list.value, bool) if IS_CROWD in features else None
                found.append(Annotation(boxes.reshape(-1, 4), classes,
                                        crowd if crowd is not None and len(crowd) == len(classes)
                                        else np.zeros(len(classes), bool)))
    if len(found) != manifest.splits[split].num_examples:
        raise OutOfFoldError(f"{raw_dir}: read {len(found)} examples of {split!r}, the manifest lists "
                             f"{manifest.splits[split].num_examples}")
    return found


def read_detections(predict_dir: str, starts: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(int64 [M] positions predicted, float64 [D, COLUMNS] their boxes) from a detector's predict output."""
    summary = storage.read_json(storage.join(predict_dir, "predict.json"))
    positions, rows = [], []
    for name in summary["tables"]:
        for line in storage.read_text(storage.join(predict_dir, name)).splitlines():
            record = json.loads(line)
            position = starts[record["index"]] + record["row"] - 1
            positions.append(position)
            rows += [[position, *box["box"], box["score"], box["label_id"]] for box in record["boxes"]]
    return np.array(positions, np.int64), np.array(rows, np.float64).reshape(-1, COLUMNS)


def per_image(found: np.ndarray, examples: int) -> list[Detections]:
    """The detections of each position (best first, as predict lists them)."""
    order = np.argsort(found[:, 0], kind="stable")
    found = found[order]
    bounds = np.searchsorted(found[:, 0], np.arange(examples + 1))
    return [Detections(found[a:b, 1:5], found[a:b, 5], found[a:b, 6].astype(np.int64))
            for a, b in zip(bounds[:-1], bounds[1:])]


def box_recall(given: Sequence[Annotation], positions: np.ndarray, found: np.ndarray, iou: float) -> float:
    """The share of the positions' regular given boxes that a detection of their class scoring at least
    RECALL_SCORE covers (IoU >= iou): the fold model's figure."""
    detections = per_image(found[found[:, 5] >= RECALL_SCORE], int(max(positions, default=-1)) + 1)
    hit = total = 0
    for p in positions.tolist():
        truth, seen = given[p], detections[p]
        keep = ~np.asarray(truth.crowd, bool)
        overlap = iou_matrix(seen.boxes, truth.boxes[keep]) >= iou
        hit += int((overlap & (seen.classes[:, None] == truth.classes[keep][None, :])).any(axis=0).sum())
        total += int(keep.sum())
    return hit / max(total, 1)


def box_source_rows(manifest: Manifest, images: dict[str, set[int]]) -> tuple[dict[tuple[str, int], tuple[int, ...]],
                                                                              str | None]:
    """{(index file, image's first row): its boxes' rows in order}, read again with ExampleGen's own reader
    (an example records its image's first row only), and None; or {} and why not (rows then name images)."""
    try:
        from ..example_gen.box_index import BoxIndexOptions, box_format, read_box_csv, read_coco

        entry: dict[str, Any] = manifest.extra.get(BOXES_KEY) or {}
        units = {str(i.get("path")): i.get("units", "auto") for i in entry.get("indexes") or []}
        rows: dict[tuple[str, int], tuple[int, ...]] = {}
        for path, firsts in images.items():
            options = BoxIndexOptions(units=units.get(path, "auto"), max_boxes=int(entry.get("max_boxes") or 100))
            index = read_coco(path, options) if box_format(path) == "coco" else read_box_csv(path, options)
            rows.update({(path, image.rows[0]): tuple(image.rows) for image in index.images
                         if image.rows and image.rows[0] in firsts})
        return rows, None
    except Exception as error:  # noqa: BLE001 - any reader failure leaves rows naming images, with the reason
        return {}, f"boxes are named by their image's first row: the index could not be read again ({error})"

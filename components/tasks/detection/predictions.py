"""Boxes as predict writes them: one JSON line per input row, and the Vertex AI / AutoML box CSV.

A JSON line: {"index", "row", "path", "image_size": [height, width] of the image as the file is (EXIF
orientation applied; the stored image's for --examples), "boxes": [...]}, each box {"class_name", "label_id"
(an id of the model's label map: its label_map.pbtxt's), "score", "box": [ymin, xmin, ymax, xmax] normalised to
[0, 1], "pixels": the same in the image's pixels (outer pixel edges, as ExampleGen reads pixel boxes)}, best
first, those scoring at least the floor. A box of zero area after rounding is no box: it is left out (a
labelling tool and ExampleGen would refuse it). A new file's boxes, answered on its letterboxed example, are
mapped back onto the file first (core/letterbox.py).

The CSV (`boxes.csv`, every part's rows in the input's order) is ExampleGen's AutoML input layout without a
set column, `path,label,x_min,y_min,,,x_max,y_max,,` normalised, a row per box; an image with no box above
the floor gets the empty-label row `path,,,,,,,,,`, so every image is in it and the file can be corrected in
a labelling tool and ingested again (example_gen.box_index.read_box_csv reads it back).

>>> outputs = {"boxes": np.array([[0.1, 0.2, 0.5, 0.6]]), "scores": np.array([0.9]), "classes": np.array([2.0])}
>>> line = detection_row("new.csv", 3, "a.jpg", (100, 200), outputs, ((1, "cat"), (2, "dog")), 0.5)
>>> line["boxes"][0]["class_name"], line["boxes"][0]["pixels"]
('dog', [10.0, 40.0, 50.0, 120.0])
>>> automl_rows(line)
[['a.jpg', 'dog', '0.2', '0.1', '', '', '0.6', '0.5', '', '']]
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
from dataclasses import dataclass, replace
from typing import Any, BinaryIO, Iterable

import numpy as np

from ...core import storage
from ...core.box_schema import DETECTION_OUTPUTS
from ...core.errors import ConfigError
from ...core.label_map_file import model_label_map
from ...core.letterbox import source_boxes
from ...core.manifest import read_manifest
from ...predict.errors import PredictionError
from ..base import PredictedRow, PredictionPart, PredictionSpec

DIGITS = 6  # normalised coordinates: a millionth of the side, far below a pixel of any image shardflow reads
PIXEL_DIGITS = 2
BOXES_CSV = "boxes.csv"  # the output's box CSV (DetectionTask.prediction_items)
SUFFIX, AUTOML_SUFFIX = ".jsonl", ".automl.csv"  # a part's JSON lines, and its rows of the box CSV beside them


@dataclass(frozen=True)
class BoxOptions:
    """What a detector's writer reads besides its spec (`PredictionSpec.options`)."""

    min_score: float  # boxes scoring less are not written
    label_names: tuple[tuple[int, str], ...]  # the label map: (id it serves, class name) pairs
    stored_size: tuple[int, int] | None = None  # (H, W) of the examples' stored images: a shard record's size
    letterbox: tuple[int, int] | None = None  # (H, W) ingest letterboxed each image into: boxes mapped back to a file


def check_format(config: Any) -> None:
    """A detector writes JSON lines and a box CSV: another table format asked is refused."""
    if config.format != "csv":
        raise ConfigError(f"format {config.format!r}: a detector's predictions are JSON lines and an AutoML box CSV "
                          "(the default format, csv)")


def box_spec(spec: PredictionSpec, config: Any, info: Any, model_dir: str) -> PredictionSpec:
    """In predict's driver: a detector's spec, JSON lines with its options (the label map read, the examples'
    image size, the letterboxing)."""
    options = BoxOptions(config.min_score, _label_names(model_dir, info),
                         stored_image_size(str(config.examples), info) if config.examples else None,
                         letterbox_target(info))
    return replace(spec, suffix=SUFFIX, format="jsonl", options=options)


def _label_names(model_dir: str, info: Any) -> tuple[tuple[int, str], ...]:
    """A detector's (served id, class name) pairs, from its label_map.pbtxt (core/label_map_file.py)."""
    try:
        label_map = model_label_map(model_dir, info)
    except (OSError, ValueError) as err:
        raise ConfigError(f"model {model_dir}: cannot read its label map: {err}") from None
    return tuple((i, name) for name, i in label_map.ids_by_name.items())


def letterbox_target(info: Any) -> tuple[int, int] | None:
    """(H, W) the model's ingest letterboxed its images into (ingest_ops' resize_mode), else None (stretched)."""
    ops = (info.extra.get("ingest_ops") or {}).get(info.extra.get("input")) or {}
    return tuple(ops["resize"]) if ops.get("resize_mode") == "letterbox" and ops.get("resize") else None  # type: ignore


def stored_image_size(examples: str, info: Any) -> tuple[int, int]:
    """(H, W) of the model's input image as the examples store it (one size for all): a record's pixel boxes."""
    features = read_manifest(examples).features
    name = info.extra.get("input") or next((n for n, f in features.items() if f.role == "image"), None)
    if name not in features or len(features[name].shape) < 2:
        raise ConfigError(f"examples {examples!r} have no image feature {name!r} of a known size")
    height, width = features[name].shape[:2]
    return int(height), int(width)


def finish_boxes(spec: PredictionSpec, stems: list[str], counts: list[dict[str, int]]) -> dict[str, Any]:
    """After predict published the parts: one box CSV for a labelling tool, its rows in the input's order;
    predict.json's entries of a detector."""
    storage.concatenate([stem + AUTOML_SUFFIX for stem in stems], spec.items[BOXES_CSV])
    return {"masks": None, "boxes": sum(c["boxes"] for c in counts), "min_score": spec.options.min_score,
            "boxes_csv": BOXES_CSV}


def served_rows(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Per example, its `num_detections` rows of the served outputs (core/box_schema.py), best first."""
    boxes, scores, classes, counts = (outputs[name].numpy() for name in DETECTION_OUTPUTS)
    return [{"boxes": b[:int(n)], "scores": s[:int(n)], "classes": c[:int(n)]}
            for b, s, c, n in zip(boxes, scores, classes, counts)]


def _boxes(outputs: dict[str, np.ndarray], labels: Iterable[tuple[int, str]], size: tuple[int, int],
           min_score: float) -> list[dict[str, Any]]:
    height, width = size
    names = dict(labels)
    found = []
    for box, score, label in zip(outputs["boxes"], outputs["scores"], outputs["classes"]):
        if score < min_score:
            break  # scores are descending (the served contract)
        ymin, xmin, ymax, xmax = (round(float(v), DIGITS) for v in np.clip(box, 0.0, 1.0))
        if ymin >= ymax or xmin >= xmax:
            continue
        label_id = int(round(float(label)))
        if label_id != float(label) or label_id not in names:
            raise PredictionError(f"the model answered class {float(label):g}, outside its label map's ids "
                                  f"{sorted(names)}: it breaks the detection contract (shardflow infra-validate)")
        found.append({"class_name": names[label_id], "label_id": label_id,
                      "score": round(float(score), DIGITS), "box": [ymin, xmin, ymax, xmax],
                      "pixels": [round(ymin * height, PIXEL_DIGITS), round(xmin * width, PIXEL_DIGITS),
                                 round(ymax * height, PIXEL_DIGITS), round(xmax * width, PIXEL_DIGITS)]})
    return found


def detection_row(index: str, row: int, path: str, size: tuple[int, int], outputs: dict[str, np.ndarray],
                  labels: Iterable[tuple[int, str]], min_score: float) -> dict[str, Any]:
    """A row's JSON line. `outputs`: its detections (boxes [n, 4], scores [n], classes [n] label map ids), best
    first; `labels`: the label map's (id, name) pairs; `size`: (height, width) of the image the pixel boxes are in."""
    return {"index": index, "row": row, "path": path, "image_size": [int(size[0]), int(size[1])],
            "boxes": _boxes(outputs, labels, size, min_score)}


def _number(value: float) -> str:
    return f"{value:.{DIGITS}f}".rstrip("0").rstrip(".") if value else "0"


def automl_rows(line: dict[str, Any]) -> list[list[str]]:
    """The line's boxes as rows of the AutoML CSV (the empty-label row when it has none)."""
    if not line["boxes"]:
        return [[line["path"], "", "", "", "", "", "", "", "", ""]]
    return [[line["path"], box["class_name"], _number(box["box"][1]), _number(box["box"][0]), "", "",
             _number(box["box"][3]), _number(box["box"][2]), "", ""] for box in line["boxes"]]


class DetectionPart(PredictionPart):
    """One part of a bundle's rows: `<stem>.jsonl` and `<stem>.automl.csv`, each appearing whole on `close()`."""

    def __init__(self, spec: PredictionSpec, stem: str) -> None:
        self.options: BoxOptions = spec.options
        self.rows = self.boxes = 0
        self._stack = contextlib.ExitStack()
        self._lines: BinaryIO = self._stack.enter_context(storage.open_write(stem + SUFFIX))
        stream: BinaryIO = self._stack.enter_context(storage.open_write(stem + AUTOML_SUFFIX))
        self._text = io.TextIOWrapper(stream, encoding="utf-8", newline="", write_through=True)
        self._csv = csv.writer(self._text, lineterminator="\n")

    def write(self, row: PredictedRow) -> dict[str, Any]:
        """The row's line and box CSV rows; its outputs as logged (a new file's boxes mapped back onto the file)."""
        options, outputs = self.options, row.outputs
        if row.size and options.letterbox:  # a new row's boxes answered on its letterboxed example
            outputs = {**outputs, "boxes": source_boxes(outputs["boxes"], row.size, options.letterbox)}
        line = detection_row(row.index, row.row, row.path, row.size or options.stored_size or (1, 1), outputs,
                             options.label_names, options.min_score)
        self.rows += 1
        self.boxes += len(line["boxes"])
        self._lines.write((json.dumps(line) + "\n").encode())
        self._csv.writerows(automl_rows(line))
        return outputs

    def close(self) -> dict[str, int]:
        self._text.flush()
        self._text.detach()  # the stream stays open for open_write to finish
        self._stack.close()
        return {"rows": self.rows, "boxes": self.boxes}

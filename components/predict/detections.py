"""A detector's predictions as rows: one JSON line per input row, and the Vertex AI / AutoML box CSV.

Pure Python (no Beam, no TensorFlow): the writer DoFn opens one `DetectionPart` per bundle.

A JSON line: {"index", "row", "path", "image_size": [height, width] of the image as the file is (EXIF
orientation applied; the stored image's for --examples), "boxes": [...]}, each box {"class_name", "label_id"
(an id of the model's label map: its label_map.pbtxt's), "score", "box": [ymin, xmin, ymax, xmax] normalised to
[0, 1], "pixels": the same in the image's pixels (outer pixel edges, as ExampleGen reads pixel boxes)}, best
first, those scoring at least the floor. A box of zero area after rounding is no box: it is left out (a
labelling tool and ExampleGen would refuse it).

The CSV is ExampleGen's AutoML input layout without a set column, `path,label,x_min,y_min,,,x_max,y_max,,`
normalised, a row per box; an image with no box above the floor gets the empty-label row `path,,,,,,,,,`,
so every image is in it and the file can be corrected in a labelling tool and ingested again
(example_gen.box_index.read_box_csv reads it back).

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
from typing import Any, BinaryIO, Iterable

import numpy as np

from ..core import storage
from .config import PredictionError

DIGITS = 6  # normalised coordinates: a millionth of the side, far below a pixel of any image shardflow reads
PIXEL_DIGITS = 2


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


class DetectionPart:
    """One part of a bundle's rows: `<name>.jsonl` and `<name>.automl.csv`, each appearing whole on `close()`."""

    def __init__(self, stem: str) -> None:
        self.rows = self.boxes = 0
        self._stack = contextlib.ExitStack()
        self._lines: BinaryIO = self._stack.enter_context(storage.open_write(stem + ".jsonl"))
        stream: BinaryIO = self._stack.enter_context(storage.open_write(stem + ".automl.csv"))
        self._text = io.TextIOWrapper(stream, encoding="utf-8", newline="", write_through=True)
        self._csv = csv.writer(self._text, lineterminator="\n")

    def write(self, line: dict[str, Any]) -> None:
        self.rows += 1
        self.boxes += len(line["boxes"])
        self._lines.write((json.dumps(line) + "\n").encode())
        self._csv.writerows(automl_rows(line))

    def close(self) -> int:
        self._text.flush()
        self._text.detach()  # the stream stays open for open_write to finish
        self._stack.close()
        return self.rows

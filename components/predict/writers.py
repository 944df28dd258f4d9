"""The DoFn after RunInference: each bundle's predictions into one part file (a detector's: JSON lines and
its AutoML CSV rows, detections.py); masks one PNG per row.

A part goes to the staging area, named by the key of its bundle's first row; when it is whole, a
small `<name>.json` beside it (rows, first key) records it, last. The driver publishes the parts
that have their record: a bundle that failed midway has none. A bundle computed again (a retry,
Dask recomputing) rewrites the same name; one cut differently would overlap another, which the
driver's row reconciliation refuses. Nothing is emitted: Beam's DaskRunner drops what
`finish_bundle` outputs (Beam 2.72), so the records travel through storage, not through Beam.
Masks are named by their row, so a recomputed row rewrites the same file with the same bytes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator

import apache_beam as beam

from ..core import storage
from ..core.letterbox import source_boxes
from ..core.box_schema import DETECTION_TASK
from .detections import DetectionPart, detection_row
from .sources import Key
from .tables import (CLASSIFICATION_SCHEMA, SEGMENTATION_SCHEMA, TablePart, classification_row, log_part, mask_name,
                     mask_png, prediction_log, segmentation_row)

SUFFIX = {"csv": ".csv", "parquet": ".parquet", "jsonl": ".jsonl"}  # jsonl: a detector's parts (detections.py)
AUTOML_SUFFIX = ".automl.csv"  # beside a detector's part: its rows in the AutoML box CSV layout


@dataclass(frozen=True)
class OutputSpec:
    """What a writer needs (picklable, small)."""

    task: str
    class_names: tuple[str, ...]
    top_k: int
    format: str
    staging_dir: str
    masks_dir: str  # where masks are written (OutputDir.staged("masks"))
    sources: tuple[str, ...]  # source id → the index file or shard named in each row
    prediction_log: bool
    model_path: str
    min_score: float = 0.0  # a detector's boxes scoring less are not written
    stored_size: tuple[int, int] | None = None  # (H, W) of the examples' stored images: a shard record's size
    label_names: tuple[tuple[int, str], ...] = ()  # a detector's label map: (id it serves, class name) pairs
    letterbox: tuple[int, int] | None = None  # (H, W) ingest letterboxed each image into: boxes mapped back to a file


@dataclass(frozen=True)
class PartInfo:
    name: str  # file name under <staging>/parts (and <staging>/logs when logging), without suffix
    rows: int
    first_key: tuple[int, int]
    boxes: int = 0  # a detector's boxes written


def list_parts(staging_dir: str) -> list[PartInfo]:
    """The whole parts the writers recorded, in row order."""
    folder = storage.join(staging_dir, "parts")
    names = [n for n in storage.list_names(folder) if n.endswith(".json")] if storage.is_dir(folder) else []
    records = [storage.read_json(storage.join(folder, n)) for n in names]
    parts = [PartInfo(n[:-len(".json")], r["rows"], tuple(r["first_key"]), r.get("boxes", 0))
             for n, r in zip(names, records)]
    return sorted(parts, key=lambda p: p.first_key)


class WritePredictionsFn(beam.DoFn):
    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.predicted_counter = beam.metrics.Metrics.counter("predict", "predicted")

    def start_bundle(self) -> None:
        self.table: TablePart | DetectionPart | None = None
        self.log: Any = None
        self.first_key: tuple[int, int] = (0, 0)

    def _open(self, key: Key) -> None:
        spec = self.spec
        self.name = f"{key[0]:04d}-{key[1]:09d}"
        stem = storage.join(spec.staging_dir, "parts", self.name)
        if spec.task == DETECTION_TASK:
            self.table = DetectionPart(stem)
        else:
            schema = CLASSIFICATION_SCHEMA if spec.task == "classification" else SEGMENTATION_SCHEMA
            self.table = TablePart(stem + SUFFIX[spec.format], spec.format, schema)
        if spec.prediction_log:
            self.log = log_part(storage.join(spec.staging_dir, "logs", self.name + ".tfrecord"))
        self.first_key = (key[0], key[1])

    def process(self, element: tuple[Key, Any]) -> Iterator[Any]:
        key, result = element
        if self.table is None:
            self._open(key)
        source_id, row, path, size = key
        index, outputs, spec = self.spec.sources[source_id], result.inference, self.spec
        if spec.task == DETECTION_TASK:
            if size and spec.letterbox:  # a new row's boxes answered on its letterboxed example: back onto its file
                outputs = {**outputs, "boxes": source_boxes(outputs["boxes"], size, spec.letterbox)}
            record = detection_row(index, row, path, size or spec.stored_size or (1, 1), outputs,
                                   spec.label_names, spec.min_score)
        elif spec.task == "classification":
            record = classification_row(index, row, path, outputs["probabilities"], list(spec.class_names), spec.top_k)
        else:
            name = mask_name(source_id, row)
            storage.write_bytes(storage.join(spec.masks_dir, name), mask_png(outputs["class_ids"]), durable=False)
            record = segmentation_row(index, row, path, f"masks/{name}", outputs["probabilities"],
                                      outputs["class_ids"])
        self.table.write(record)  # type: ignore[union-attr]
        if self.log is not None:
            self.log.write(prediction_log(result.example, outputs, spec.model_path))
        self.predicted_counter.inc()
        return iter(())

    def finish_bundle(self) -> None:
        if self.table is None:
            return
        boxes = getattr(self.table, "boxes", 0)
        rows = self.table.close()
        if self.log is not None:
            self.log.close()
        self.table = None
        record = {"rows": rows, "first_key": list(self.first_key), "boxes": boxes}
        storage.write_text(storage.join(self.spec.staging_dir, "parts", self.name + ".json"), json.dumps(record),
                           durable=False)  # last: the part is whole

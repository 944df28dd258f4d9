"""The DoFn after RunInference: each bundle's predictions into one part file; masks one PNG per row.

Parts go to the staging area under a unique name; what the DoFn emits is one `PartInfo` per bundle
(O(1) metadata). The driver publishes exactly the parts the pipeline's result lists, so a bundle
that a runner retried (or Dask computed twice) leaves only an unlisted file, never a duplicate row.
Masks are named by their row, so a recomputed row rewrites the same file with the same bytes.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Iterator

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from ..core import storage
from .sources import Key
from .tables import (CLASSIFICATION_SCHEMA, SEGMENTATION_SCHEMA, TablePart, classification_row, log_part, mask_name,
                     mask_png, prediction_log, segmentation_row)

SUFFIX = {"csv": ".csv", "parquet": ".parquet"}


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


@dataclass(frozen=True)
class PartInfo:
    name: str  # file name under <staging>/parts (and <staging>/logs when logging)
    rows: int
    first_key: tuple[int, int]


class WritePredictionsFn(beam.DoFn):
    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.predicted_counter = beam.metrics.Metrics.counter("predict", "predicted")

    def start_bundle(self) -> None:
        self.table: TablePart | None = None
        self.log: Any = None
        self.first_key: tuple[int, int] = (0, 0)

    def _open(self, key: Key) -> None:
        spec = self.spec
        self.name = uuid.uuid4().hex
        schema = CLASSIFICATION_SCHEMA if spec.task == "classification" else SEGMENTATION_SCHEMA
        self.table = TablePart(storage.join(spec.staging_dir, "parts", self.name + SUFFIX[spec.format]),
                               spec.format, schema)
        if spec.prediction_log:
            self.log = log_part(storage.join(spec.staging_dir, "logs", self.name + ".tfrecord"))
        self.first_key = (key[0], key[1])

    def process(self, element: tuple[Key, Any]) -> Iterator[Any]:
        key, result = element
        if self.table is None:
            self._open(key)
        source_id, row, path = key
        index, outputs, spec = self.spec.sources[source_id], result.inference, self.spec
        if spec.task == "classification":
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

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if self.table is None:
            return
        rows = self.table.close()
        if self.log is not None:
            self.log.close()
        self.table = None
        yield WindowedValue(PartInfo(self.name, rows, self.first_key), MIN_TIMESTAMP, [GlobalWindow()])

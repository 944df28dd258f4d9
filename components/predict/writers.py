"""The DoFn after RunInference: each bundle's predictions into one part, through the model's task kind.

The kind's part writer (`Task.prediction_part`, components/tasks/<kind>/predictions.py) writes the rows:
a table in CSV or Parquet, a detector's JSON lines and box CSV rows, a mask PNG per row. This DoFn keeps the
mechanics: a part per bundle and its record, the prediction log.

A part goes to the staging area, named by the key of its bundle's first row; when it is whole, a
small `<name>.json` beside it (its counts, first key) records it, last. The driver publishes the parts
that have their record: a bundle that failed midway has none. A bundle computed again (a retry,
Dask recomputing) rewrites the same name; one cut differently would overlap another, which the
driver's row reconciliation refuses. Nothing is emitted: Beam's DaskRunner drops what
`finish_bundle` outputs (Beam 2.72), so the records travel through storage, not through Beam.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

import apache_beam as beam

from ..core import storage
from ..tasks import task_for
from ..tasks.base import PredictedRow, PredictionPart, PredictionSpec
from .sources import Key
from .tables import log_part, prediction_log


@dataclass(frozen=True)
class OutputSpec:
    """What a writer needs (picklable, small): the kind and its spec, where the parts go, the sources."""

    task: str  # the model's kind (tasks.task_for)
    table: PredictionSpec  # made by the kind in the driver (Task.prediction_spec)
    staging_dir: str
    sources: tuple[str, ...]  # source id → the index file or shard named in each row
    prediction_log: bool
    model_path: str


@dataclass(frozen=True)
class PartInfo:
    name: str  # file name under <staging>/parts (and <staging>/logs when logging), without suffix
    rows: int
    first_key: tuple[int, int]
    counts: dict[str, int] = field(default_factory=dict, compare=False)  # the part writer's (a detector's boxes)


def list_parts(staging_dir: str) -> list[PartInfo]:
    """The whole parts the writers recorded, in row order."""
    folder = storage.join(staging_dir, "parts")
    names = [n for n in storage.list_names(folder) if n.endswith(".json")] if storage.is_dir(folder) else []
    records = [storage.read_json(storage.join(folder, n)) for n in names]
    parts = [PartInfo(n[:-len(".json")], r["counts"]["rows"], tuple(r["first_key"]), r["counts"])
             for n, r in zip(names, records)]
    return sorted(parts, key=lambda p: p.first_key)


class WritePredictionsFn(beam.DoFn):
    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.predicted_counter = beam.metrics.Metrics.counter("predict", "predicted")

    def setup(self) -> None:
        self.task = task_for(self.spec.task)

    def start_bundle(self) -> None:
        self.part: PredictionPart | None = None
        self.log: Any = None
        self.first_key: tuple[int, int] = (0, 0)

    def _open(self, key: Key) -> PredictionPart:
        spec = self.spec
        self.name = f"{key[0]:04d}-{key[1]:09d}"
        self.part = self.task.prediction_part(spec.table, storage.join(spec.staging_dir, "parts", self.name))
        if spec.prediction_log:
            self.log = log_part(storage.join(spec.staging_dir, "logs", self.name + ".tfrecord"))
        self.first_key = (key[0], key[1])
        return self.part

    def process(self, element: tuple[Key, Any]) -> Iterator[Any]:
        key, result = element
        part = self.part or self._open(key)
        source_id, row, path, size = key
        outputs = part.write(PredictedRow(self.spec.sources[source_id], source_id, row, path, size, result.inference))
        if self.log is not None:
            self.log.write(prediction_log(result.example, outputs, self.spec.model_path))
        self.predicted_counter.inc()
        return iter(())

    def finish_bundle(self) -> None:
        if self.part is None:
            return
        counts = self.part.close()
        if self.log is not None:
            self.log.close()
        self.part = None
        record = {"counts": counts, "first_key": list(self.first_key)}
        storage.write_text(storage.join(self.spec.staging_dir, "parts", self.name + ".json"), json.dumps(record),
                           durable=False)  # last: the part is whole

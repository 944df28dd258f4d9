"""TFDV statistics of the transformed examples of one split, computed on the transformed Arrow batches.

The batches are the ones being written, so the statistics describe exactly the stored values
(images as float lists: their mean/std show the standardization; masks and labels as ids). Images
kept as their stored bytes (applied at read) have no transformed values here: ExampleGen's
statistics describe them.

    transformed_batches | SplitStatistics(storage.join(out.staged("statistics"), "train.pb"))
"""
from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
import tensorflow_data_validation as tfdv

from ..core.statistics_io import write_statistics
from .raw_input import POSITION, STORED_PREFIX


def without_positions(batch: pa.RecordBatch, dropped: tuple[str, ...] = ()) -> pa.RecordBatch:
    """The batch without the pass-through columns (positions, stored bytes: not transformed features) and `dropped`."""
    keep = [i for i, name in enumerate(batch.schema.names)
            if name != POSITION and not name.startswith(STORED_PREFIX) and name not in dropped]
    return pa.RecordBatch.from_arrays([batch.column(i) for i in keep], [batch.schema.names[i] for i in keep])


class SplitStatistics(beam.PTransform):
    """Transformed record batches → TFDV statistics written to `path` (a path or URI)."""

    def __init__(self, path: str, options: tfdv.StatsOptions | None = None, dropped: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.path, self.dropped = path, dropped  # dropped: features kept as stored bytes (no transformed values)
        self.options = options or tfdv.StatsOptions()

    def expand(self, batches: beam.PCollection) -> beam.pvalue.PDone:
        _ = (
            batches
            | "DropPositions" >> beam.Map(without_positions, self.dropped)
            | "Generate" >> tfdv.GenerateStatistics(self.options)
            | "Write" >> beam.Map(write_statistics, self.path)
        )
        return beam.pvalue.PDone(batches.pipeline)


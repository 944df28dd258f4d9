"""Predict's Beam graph: work units → Reshuffle → (key, example) → RunInference → part files → a result file.

    with make_pipeline(options) as p:
        _ = p | PredictTransform(chunks, EncodeRowsFn(plan), handler, spec)

Work units are CSV chunks (byte ranges of the index, prepared by ExampleGen's encoder) or example
shards. The graph is a single line (no branch), so a runner that recomputes a branch (Dask) has
nothing to recompute; only O(1) metadata per bundle reaches the final combine.
"""
from __future__ import annotations

import pickle
from typing import Any, Callable

import apache_beam as beam
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

from ..core import storage
from .writers import OutputSpec, PartInfo, WritePredictionsFn

RESULT_NAME = "result.pickle"


def _write_result(parts: list[PartInfo], path: str) -> None:
    storage.write_bytes(path, pickle.dumps(parts), durable=False)  # whole or absent


class PredictTransform(beam.PTransform):
    """Work units in; prediction parts under the staging area, `<staging>/result.pickle` listing them."""

    def __init__(self, units: list[Any], prepare: beam.DoFn | Callable, handler: Any, spec: OutputSpec) -> None:
        super().__init__()
        self.units, self.prepare, self.handler, self.spec = units, prepare, handler, spec

    def expand(self, root: beam.pvalue.PBegin) -> beam.PCollection:
        prepare = (beam.ParDo(self.prepare) if isinstance(self.prepare, beam.DoFn)
                   else beam.FlatMap(self.prepare))
        return (
            root
            | "ListUnits" >> beam.Create(self.units)
            | "SpreadUnits" >> beam.Reshuffle()
            | "Prepare" >> prepare
            | "Infer" >> RunInference(KeyedModelHandler(self.handler))
            | "Write" >> beam.ParDo(WritePredictionsFn(self.spec))
            | "GatherParts" >> beam.combiners.ToList()
            | "WriteResult" >> beam.Map(_write_result, path=storage.join(self.spec.staging_dir, RESULT_NAME))
        )

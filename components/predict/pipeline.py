"""Predict's Beam graph: work units → Reshuffle → batches of (key, example) → RunInference → part files.

    with make_pipeline(options) as p:
        _ = p | PredictTransform(chunks, EncodeRowsFn(plan), serving_handler(model_dir), spec)

Work units are CSV chunks (byte ranges of the index, prepared by ExampleGen's encoder) or example
shards. The graph is a single line (no branch), so a runner that recomputes a branch (Dask) has
nothing to recompute. Nothing but part files comes out (see writers.py).
"""
from __future__ import annotations

from typing import Any, Callable

import apache_beam as beam
from apache_beam.ml.inference.base import RunInference

from .writers import OutputSpec, WritePredictionsFn


class PredictTransform(beam.PTransform):
    """Work units in; prediction parts (and their records) under `<staging>/parts`."""

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
            | "Infer" >> RunInference(self.handler)
            | "Write" >> beam.ParDo(WritePredictionsFn(self.spec))
        )

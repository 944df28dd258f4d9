"""ExampleGen's Beam graph: chunks → part files (and column files for statistics) → shards, a result file.

Parts and the result go to the staging location, shards to `plan.publish_root` (see OutputDir), all
through `storage`: local or object store alike.

    with make_pipeline(options) as p:
        _ = p | IngestChunks(chunks, plan, sizing)

Everything the driver needs afterwards lands in `<staging>/result.pickle`, written by the last step.
"""
from __future__ import annotations

import pickle
from typing import Any

import apache_beam as beam

from ..core import storage
from ..core.shard_plan import Part
from ..core.shard_writer import ShardSizing, WriteShards
from .csv_index import Chunk
from .encode_chunks import ChunkResult, EncodeChunkFn, IngestPlan

RESULT_NAME = "result.pickle"


class _EncodeChunkDoFn(beam.DoFn):
    """`EncodeChunkFn` on a Beam runner, with Beam's row counters."""

    def __init__(self, plan: IngestPlan) -> None:
        self.encoder = EncodeChunkFn(plan)
        self.rows_counter = beam.metrics.Metrics.counter("example_gen", "rows")
        self.accepted_counter = beam.metrics.Metrics.counter("example_gen", "accepted")
        self.rejected_counter = beam.metrics.Metrics.counter("example_gen", "rejected")

    def setup(self) -> None:
        self.encoder.setup()

    def process(self, chunk: Chunk):
        for result in self.encoder.process(chunk):
            self.rows_counter.inc(result.rows)
            self.rejected_counter.inc(result.rejected)
            self.accepted_counter.inc(result.rows - result.rejected)
            yield result


def _part_pairs(result: ChunkResult) -> list[tuple[str, Part]]:
    return list(result.parts.items())


def _write_result(shards: list, chunk_results: list[ChunkResult], path: str) -> None:
    # Both lists hold O(1) metadata per chunk or shard (hashes and values stay in files).
    payload: dict[str, Any] = {"chunks": chunk_results, "shards": shards}
    storage.write_bytes(path, pickle.dumps(payload), durable=False)  # whole or absent: Dask may run this twice


class IngestChunks(beam.PTransform):
    """Chunk descriptors in; shards under the publish root, the result file in staging."""

    def __init__(self, chunks: list[Chunk], plan: IngestPlan, sizing: ShardSizing) -> None:
        super().__init__()
        self.chunks, self.plan, self.sizing = chunks, plan, sizing

    def expand(self, root: beam.pvalue.PBegin) -> beam.PCollection:
        staging = self.plan.staging_dir
        results = (
            root
            | "ListChunks" >> beam.Create(self.chunks)
            | "SpreadChunks" >> beam.Reshuffle()
            | "EncodeChunks" >> beam.ParDo(_EncodeChunkDoFn(self.plan))
        )
        shards = (
            results
            | "PartsOfChunk" >> beam.FlatMap(_part_pairs)
            | "WriteShards" >> WriteShards(self.plan.publish_root, self.sizing)
            | "GatherShards" >> beam.combiners.ToList()
        )
        gathered = results | "GatherChunkResults" >> beam.combiners.ToList()
        # It returns a PCollection, not PDone: a PDone stops Beam's runner-API round trip, without
        # which the DaskRunner passes side inputs to DoFns as unresolved AsSingleton objects.
        return shards | "WriteResult" >> beam.Map(
            _write_result,
            chunk_results=beam.pvalue.AsSingleton(gathered),
            path=storage.join(staging, RESULT_NAME),
        )

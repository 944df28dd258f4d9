"""Transform's Beam graph: analyze the train split, transform every split, write graph, shards, statistics.

    with make_pipeline(options) as p:
        features, applied_at_read = build_transform(p, plan, preprocessing_fn)

The analyze split is read twice (once for the analyzers, once to be transformed) instead of being
kept between the two: a local runner would otherwise hold the whole split in memory while the
analyzers finish. Every other PCollection carries either Arrow batches that stream through one
fused stage, or small metadata. Everything the driver needs afterwards lands in
`<scratch>/result.pickle`, written by the last step.

Every location is a path or URI: scratch files (parts, done markers, TFT's temp, the result) go
under `scratch_dir`, what is published (Split-*, statistics, transform graph) under `publish_dir`
(`OutputDir.publish_root`). Nothing assumes a worker sees the launcher's disk.
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, Callable

import apache_beam as beam
import tensorflow_transform.beam as tft_beam

from ..core import storage
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.manifest import FeatureSpec, Manifest, ShardInfo
from ..core.shard_writer import ShardSizing, WriteShards
from .materialize import BatchResult, WritePartsFn
from .output_features import applied_at_read_names, int_domains, output_features
from .raw_input import (POSITION, ReadRecordBatches, carried_names, plan_ranges, raw_schema, stored_name,
                        tensor_adapter_config)
from .statistics import SplitStatistics

RESULT_NAME = "result.pickle"
TRANSFORM_GRAPH = "transform_graph"


@dataclass(frozen=True)
class TransformPlan:
    """What the graph reads and where it writes (decided by the driver)."""

    examples_dir: str
    scratch_dir: str  # parts, done markers, TFT's temp files, the result pickle
    publish_dir: str  # Split-*, statistics/, transform_graph/ (OutputDir.publish_root)
    source: Manifest
    splits: tuple[str, ...]
    analyze_split: str
    batch_size: int
    sizing: ShardSizing
    compact_images: bool = True  # keep image outputs as their stored bytes where the graph allows it

    def read(self, split: str, stored: tuple[str, ...] = ()) -> ReadRecordBatches:
        ranges = plan_ranges(self.examples_dir, self.source, split, self.batch_size)
        return ReadRecordBatches(ranges, raw_schema(self.source), self.batch_size, stored)


def _write_result(shards: list[tuple[str, ShardInfo]], batches: list[BatchResult], path: str) -> None:
    storage.write_bytes(path, pickle.dumps({"shards": shards, "batches": batches}), durable=False)


def load_result(scratch_dir: str) -> dict[str, Any]:
    """{"shards": [(split, ShardInfo)], "batches": [BatchResult]} as the pipeline left them."""
    return pickle.loads(storage.read_bytes(storage.join(scratch_dir, RESULT_NAME)))


def _transform_split(pipeline: beam.Pipeline, plan: TransformPlan, split: str, transform_fn: Any,
                     features: dict[str, FeatureSpec], at_read: tuple[str, ...],
                     domains: beam.PCollection) -> beam.PCollection:
    """Reads, transforms, writes part files and statistics of one split; returns its BatchResults.

    Outputs applied at read are not computed here (`exclude_outputs`): their stored bytes pass
    through instead, so Transform does no per-pixel work on them. Carried features (boxes) pass through too.
    """
    carried = carried_names(plan.source)
    adapter = tensor_adapter_config(raw_schema(plan.source), at_read + carried, carried)
    raw = pipeline | f"Read[{split}]" >> plan.read(split, at_read + carried)
    if set(features) <= set(at_read + carried):
        batches = raw  # nothing left for the graph to compute (TFT refuses to produce no output)
    else:
        transformed, _ = ((raw, adapter), transform_fn) | f"Transform[{split}]" >> tft_beam.TransformDataset(
            exclude_outputs=list(at_read), output_record_batches=True)
        batches = transformed | f"Batches[{split}]" >> beam.Map(lambda pair: pair[0])
    statistics = storage.join(plan.publish_dir, "statistics", f"{split}.pb")
    _ = batches | f"Statistics[{split}]" >> SplitStatistics(statistics, dropped=at_read)
    return batches | f"WriteParts[{split}]" >> beam.ParDo(
        WritePartsFn(split, plan.scratch_dir, tuple(features.values()), at_read + carried),
        domains=beam.pvalue.AsSingleton(domains))


def build_transform(pipeline: beam.Pipeline, plan: TransformPlan,
                    preprocessing_fn: Callable) -> tuple[dict[str, FeatureSpec], tuple[str, ...]]:
    """Adds the whole Transform graph to `pipeline`; returns the output's manifest features and
    the names of the outputs applied at read (stored as their input's bytes)."""
    carried = carried_names(plan.source)
    adapter = tensor_adapter_config(raw_schema(plan.source), carried=carried)
    temp_dir = storage.join(plan.scratch_dir, "tft_tmp")
    enable_tensorflow_filesystems([temp_dir, plan.publish_dir])  # TFT writes its files with tf.io.gfile
    analyze_input = pipeline | f"ReadToAnalyze[{plan.analyze_split}]" >> plan.read(plan.analyze_split)
    with tft_beam.Context(temp_dir=temp_dir, passthrough_keys={POSITION}):
        transform_fn = (analyze_input, adapter) | "Analyze" >> tft_beam.AnalyzeDataset(preprocessing_fn)
    schema = transform_fn[1].dataset_metadata.schema
    at_read = tuple(applied_at_read_names(schema, plan.source.features)) if plan.compact_images else ()
    passthrough = {POSITION, *(stored_name(name) for name in at_read + carried)}
    with tft_beam.Context(temp_dir=temp_dir, passthrough_keys=passthrough):
        _ = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(
            storage.join(plan.publish_dir, TRANSFORM_GRAPH))
        features = {**output_features(schema, plan.source.features, at_read),
                    **{name: plan.source.features[name] for name in carried}}  # written as they were read
        domains = transform_fn[1].deferred_metadata | "IntDomains" >> beam.Map(lambda m: int_domains(m.schema))
        per_split = [_transform_split(pipeline, plan, s, transform_fn, features, at_read, domains)
                     for s in plan.splits]
    results = per_split | "AllSplits" >> beam.Flatten()
    shards = (
        results
        | "PartOfBatch" >> beam.Map(lambda r: (r.split, r.part))
        | "WriteShards" >> WriteShards(plan.publish_dir, plan.sizing)
        | "GatherShards" >> beam.combiners.ToList()
    )
    gathered = results | "GatherBatches" >> beam.combiners.ToList()
    _ = shards | "WriteResult" >> beam.Map(
        _write_result, batches=beam.pvalue.AsSingleton(gathered), path=storage.join(plan.scratch_dir, RESULT_NAME))
    return features, at_read

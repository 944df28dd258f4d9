"""TFDV statistics per split, computed inside the ingest pipeline, and the schema inferred on train."""
from __future__ import annotations

import os

import apache_beam as beam
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from .columns import ColumnSpec


def stats_options(columns: tuple[ColumnSpec, ...]) -> tfdv.StatsOptions:
    """Image features get an image domain, so TFDV reports byte sizes instead of top-k pixel blobs."""
    schema = schema_pb2.Schema()
    for column in columns:
        if column.is_file:
            feature = schema.feature.add(name=column.name, type=schema_pb2.BYTES)
            feature.image_domain.SetInParent()
    return tfdv.StatsOptions(schema=schema)


def _write(stats: statistics_pb2.DatasetFeatureStatisticsList, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as out:
        out.write(stats.SerializeToString())
    os.replace(path + ".tmp", path)


class SplitStatistics(beam.PTransform):
    """(split, RecordBatch) pairs → `<out_dir>/<split>.pb` for each split name."""

    def __init__(self, splits: tuple[str, ...], columns: tuple[ColumnSpec, ...], out_dir: str) -> None:
        super().__init__()
        self.splits, self.columns, self.out_dir = splits, columns, out_dir

    def expand(self, batches: beam.PCollection) -> beam.pvalue.PDone:
        options = stats_options(self.columns)
        for split in self.splits:
            path = os.path.join(self.out_dir, f"{split}.pb")
            _ = (
                batches
                | f"Select[{split}]" >> beam.Filter(lambda kv, s=split: kv[0] == s)
                | f"Batches[{split}]" >> beam.Values()
                | f"Generate[{split}]" >> tfdv.GenerateStatistics(options)
                | f"Write[{split}]" >> beam.Map(_write, path)
            )
        return beam.pvalue.PDone(batches.pipeline)


def load(path: str) -> statistics_pb2.DatasetFeatureStatisticsList:
    with open(path, "rb") as source:
        return statistics_pb2.DatasetFeatureStatisticsList.FromString(source.read())


def infer_schema(train_stats_path: str, columns: tuple[ColumnSpec, ...]) -> schema_pb2.Schema:
    """TFDV's inferred schema, with image domains restored on the file features."""
    schema = tfdv.infer_schema(load(train_stats_path))
    files = {c.name for c in columns if c.is_file}
    for feature in schema.feature:
        if feature.name in files:
            feature.image_domain.SetInParent()
    return schema

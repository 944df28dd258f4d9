"""TFDV statistics per split, computed inside the ingest pipeline, and the schema inferred on train."""
from __future__ import annotations

import os

import apache_beam as beam
import tensorflow_data_validation as tfdv
from tensorflow_data_validation.statistics import stats_impl
from tensorflow_data_validation.utils import feature_partition_util
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2
from tfx_bsl.statistics import merge_util

from ..core.atomic import atomic_write_bytes
from .columns import ColumnSpec


def stats_options(columns: tuple[ColumnSpec, ...]) -> tfdv.StatsOptions:
    """Image features get an image domain, so TFDV reports byte sizes instead of top-k pixel blobs."""
    schema = schema_pb2.Schema()
    for column in columns:
        if column.is_file:
            feature = schema.feature.add(name=column.name, type=schema_pb2.BYTES)
            feature.image_domain.SetInParent()
    return tfdv.StatsOptions(schema=schema)


def _write(stats: statistics_pb2.DatasetFeatureStatisticsList, path: str) -> str:
    atomic_write_bytes(path, stats.SerializeToString())  # a unique temp name: Dask may run this twice
    return path


def _key_with_void(batch: object) -> tuple[None, object]:
    return None, batch


def _in_column_order(stats: statistics_pb2.DatasetFeatureStatisticsList,
                     names: tuple[str, ...]) -> statistics_pb2.DatasetFeatureStatisticsList:
    """A copy with features in column order: partial results merge in a runner-dependent order."""
    rank = {name: i for i, name in enumerate(names)}

    def key(feature: statistics_pb2.FeatureNameStatistics) -> tuple[int, tuple[str, ...]]:
        path = tuple(feature.path.step) or (feature.name,)
        return rank.get(".".join(path), len(rank)), path

    result = statistics_pb2.DatasetFeatureStatisticsList()
    result.CopyFrom(stats)
    for dataset in result.datasets:
        features = [statistics_pb2.FeatureNameStatistics.FromString(f.SerializeToString())
                    for f in sorted(dataset.features, key=key)]
        del dataset.features[:]
        dataset.features.extend(features)
    return result


class GenerateStatistics(beam.PTransform):
    """`tfdv.GenerateStatistics` for unsliced data, with the same graph minus the hot-key fan-out.

    TFDV 1.16 (`stats_impl.GenerateSlicedStatisticsImpl`) combines with `with_hot_key_fanout`, a
    multi-output ParDo whose tags the DaskRunner does not route (there its merge step gets raw
    record batches: "'ListArray' object has no attribute 'input_record_batches'"). Fan-out only
    spreads the combining work, so without it the local runners give the same statistics and
    every step is a ParDo, GroupByKey, Flatten or side input, which Dask runs.
    """

    def __init__(self, options: tfdv.StatsOptions) -> None:
        super().__init__()
        if options.experimental_num_feature_partitions != 1 or options.experimental_result_partitions != 1:
            raise ValueError("feature/result partitions are not supported here")
        if options.sample_rate is not None or options.feature_allowlist or options.slicing_config:
            raise ValueError("sampling, allow-lists and slicing are not supported here")
        self.options = options

    def expand(self, batches: beam.PCollection) -> beam.PCollection:
        options = self.options
        keyed = batches | "KeyWithVoid" >> beam.Map(_key_with_void)
        transforms, combiners, _ = stats_impl._split_generator_types(stats_impl.get_generators(options), 1)
        combine_fn = stats_impl._CombinerStatsGeneratorsCombineFn(combiners, options.desired_batch_size)
        protos = [keyed | g.name >> g.ptransform for g in transforms]
        protos.append(keyed | "RunCombinerStatsGenerators" >> beam.CombinePerKey(combine_fn))
        return (
            protos
            | "FlattenFeatureStatistics" >> beam.Flatten()
            | "AddPlaceholderStatistics" >> stats_impl._AddPlaceholderStatistics()  # pylint: disable=no-value-for-parameter
            | "AddSliceKeyToStatsProto" >> beam.Map(stats_impl._add_slice_key, False)
            | "MakeList" >> beam.Map(stats_impl._make_singleton_dataset_feature_statistics_list_proto)
            | "KeyByPartition" >> beam.ParDo(feature_partition_util.KeyAndSplitByFeatureFn(1))
            | "MergeStatsProtos" >> beam.CombinePerKey(merge_util.merge_dataset_feature_statistics_list)
            | "Values" >> beam.Values()
        )


class SplitStatistics(beam.PTransform):
    """(split, RecordBatch) pairs → `<out_dir>/<split>.pb` for each split name; emits the paths written."""

    def __init__(self, splits: tuple[str, ...], columns: tuple[ColumnSpec, ...], out_dir: str) -> None:
        super().__init__()
        self.splits, self.columns, self.out_dir = splits, columns, out_dir

    def expand(self, batches: beam.PCollection) -> beam.PCollection:
        options = stats_options(self.columns)
        written = []
        for split in self.splits:
            path = os.path.join(self.out_dir, f"{split}.pb")
            written.append(
                batches
                | f"Select[{split}]" >> beam.Filter(lambda kv, s=split: kv[0] == s)
                | f"Batches[{split}]" >> beam.Values()
                | f"Generate[{split}]" >> GenerateStatistics(options)
                | f"Order[{split}]" >> beam.Map(_in_column_order, tuple(c.name for c in self.columns))
                | f"Write[{split}]" >> beam.Map(_write, path)
            )
        return written | "StatisticsWritten" >> beam.Flatten()


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

"""TFDV statistics per split, from the workers' per-chunk column files, and the schema on train.

The pass runs in the launcher on the in-memory FnApiRunner whatever runner ingested the rows: its
input is small (labels, metadata and payload sizes, never pixels), so it needs no cluster, and it
uses TFDV's own `GenerateStatistics` unchanged. File features get an image domain, so TFDV reports
byte sizes for them, which are patched from the real payload sizes.

    write_statistics({"train": [...arrow files...]}, columns, "OUT/.staging/statistics")
"""
from __future__ import annotations

import functools
from typing import Callable

import apache_beam as beam
import pyarrow.compute as pc
import tensorflow_data_validation as tfdv
from apache_beam.options.pipeline_options import PipelineOptions
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from ..core import statistics_io, storage
from ..core.beam_setup import make_pipeline
from .column_files import as_statistics_batch, read_column_file
from .columns import ColumnSpec


def stats_options(columns: tuple[ColumnSpec, ...]) -> tfdv.StatsOptions:
    """Image features get an image domain, so TFDV reports byte sizes instead of top-k pixel blobs."""
    schema = schema_pb2.Schema()
    for column in columns:
        if column.is_file:
            feature = schema.feature.add(name=column.name, type=schema_pb2.BYTES)
            feature.image_domain.SetInParent()
    return tfdv.StatsOptions(schema=schema)


def _payload_sizes(paths: list[str], names: list[str]) -> dict[str, tuple[int, int, int, int]]:
    """count, total, min and max payload bytes per file column, reading each column file once."""
    sizes: dict[str, tuple[int, int, int, int]] = {name: (0, 0, 0, 0) for name in names}
    for path in paths:
        batch = read_column_file(path)
        if batch.num_rows == 0:
            continue
        for name in names:
            count, total, low, high = sizes[name]
            column = batch.column(name)
            column_low, column_high = pc.min(column).as_py(), pc.max(column).as_py()
            sizes[name] = (count + len(column), total + pc.sum(column).as_py(),
                           column_low if count == 0 else min(low, column_low), max(high, column_high))
    return sizes


def _patch_bytes_stats(stats: statistics_pb2.DatasetFeatureStatisticsList, paths: list[str],
                       columns: tuple[ColumnSpec, ...]) -> None:
    sizes = _payload_sizes(paths, [c.name for c in columns if c.is_file])
    for name, (count, total, low, high) in sizes.items():
        for dataset in stats.datasets:
            for feature in dataset.features:
                if tuple(feature.path.step) == (name,) and feature.HasField("bytes_stats"):
                    feature.bytes_stats.avg_num_bytes = total / count if count else 0.0
                    feature.bytes_stats.min_num_bytes = float(low)
                    feature.bytes_stats.max_num_bytes = float(high)
                    feature.bytes_stats.max_num_bytes_int = int(high)


def write_statistics(paths_by_split: dict[str, list[str]], columns: tuple[ColumnSpec, ...], out_dir: str) -> dict[str, str]:
    """Writes `<out_dir>/<split>.pb` for every split (an empty split gets zero examples)."""
    return write_statistics_when_ready(list(paths_by_split), lambda: paths_by_split, columns, out_dir)


_WAITING: list[Callable[[], dict[str, list[str]]]] = []  # the running pass's source of column files


def _column_files_of(split: str) -> list[str]:
    """A split's column files, from the running pass's source (by reference: Beam pickles this function)."""
    return sorted(_WAITING[-1]()[split])


def write_statistics_when_ready(splits: list[str], column_files: Callable[[], dict[str, list[str]]],
                                columns: tuple[ColumnSpec, ...], out_dir: str) -> dict[str, str]:
    """`write_statistics` whose pipeline is built and started before the column files exist.

    `column_files()` may block until they do: it is first called by the pipeline's first step, so
    Beam's construction and start-up happen before (in the statistics process, while rows are encoded).
    """
    options = stats_options(columns)
    written = {split: storage.join(out_dir, f"{split}.pb") for split in splits}
    _WAITING.append(functools.lru_cache(maxsize=None)(column_files))
    try:
        with make_pipeline(PipelineOptions([])) as pipeline:  # no runner named: the in-memory FnApiRunner
            for split in splits:
                _ = (
                    pipeline
                    | f"Split[{split}]" >> beam.Create([split], reshuffle=False)
                    | f"ColumnFiles[{split}]" >> beam.FlatMap(_column_files_of)
                    | f"Read[{split}]" >> beam.Map(lambda p: as_statistics_batch(read_column_file(p), columns))
                    | f"Generate[{split}]" >> tfdv.GenerateStatistics(options)
                    | f"Write[{split}]" >> beam.Map(statistics_io.write_statistics, written[split])
                )
        paths_by_split = _WAITING[-1]()
    finally:
        _WAITING.pop()
    for split in splits:
        if storage.is_file(written[split]):
            stats = statistics_io.read_statistics(written[split])
        else:  # no examples in this split
            stats = statistics_pb2.DatasetFeatureStatisticsList(datasets=[statistics_pb2.DatasetFeatureStatistics()])
        _patch_bytes_stats(stats, paths_by_split.get(split, []), columns)
        statistics_io.write_statistics(stats, written[split])
    return written


def infer_schema(train_stats_path: str, columns: tuple[ColumnSpec, ...]) -> schema_pb2.Schema:
    """TFDV's inferred schema, with image domains restored on the file features."""
    schema = tfdv.infer_schema(statistics_io.read_statistics(train_stats_path))
    files = {c.name for c in columns if c.is_file}
    for feature in schema.feature:
        if feature.name in files:
            feature.image_domain.SetInParent()
    return schema

"""Reading ExampleGen shards as Arrow record batches for tensorflow-transform, in known order.

Only small range descriptors (file, first and end record) travel through Beam; workers read the
records themselves through `storage` (local, s3://, gs://: no TensorFlow, no Beam FileSystems) and
decode a batch at a time with tfx_bsl's C++ decoder. Each batch carries a pass-through column
with the split-wide position of every record, so the transformed output can be written back in
the input's order (and a record is never confused with another), and, for outputs kept compact, a
pass-through copy of the stored image bytes (`stored_name`). Lists of any length (a detection example's
boxes, `carried_names`) are never handed to the preprocessing_fn: they pass through as stored columns too,
and are written unchanged.

    ranges = plan_ranges("s3://bucket/runs/examples", manifest, "train", batch_size=1024)
    batches = pipeline | ReadRecordBatches(ranges, schema, batch_size=1024)
"""
from __future__ import annotations

import contextlib
import gzip
import math
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import apache_beam as beam
import numpy as np
import pyarrow as pa
import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils
from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder
from tfx_bsl.public import tfxio

from ..core import storage
from ..core.manifest import Manifest
from ..core.reader import feature_spec
from ..core.tfrecord import iter_frames

POSITION = "__shardflow_position__"
# Pass-through copies of stored image bytes, for outputs kept compact (see output_features).
STORED_PREFIX = "__shardflow_stored__"
TARGET_BATCH_BYTES = 4 << 20  # decoded input pixels per batch: big enough to amortize a graph call
MAX_BATCH_SIZE = 1024
BATCHES_PER_RANGE = 4
_ITEM_BYTES = {"uint8": 1, "uint16": 2, "int64": 8, "float32": 4, "string": 16}
_HEADER_BYTES, _FOOTER_BYTES = 12, 4


@dataclass(frozen=True)
class RecordRange:
    """Records [start, end) of one shard file; `first_position` is the split position of its record 0."""

    split: str
    path: str
    compression: str
    first_position: int
    start: int
    end: int


def raw_schema(manifest: Manifest) -> schema_pb2.Schema:
    """The TFT input schema: every feature a fixed-shape scalar (files as their stored bytes), lists of any
    length (the reader's ragged rows) as variable-length features, which the Arrow decoder reads as lists."""
    spec = {name: tf.io.VarLenFeature(value.dtype) if isinstance(value, tf.io.RaggedFeature) else value
            for name, value in feature_spec(manifest).items()}
    return schema_utils.schema_from_feature_spec(spec)


def carried_names(manifest: Manifest) -> tuple[str, ...]:
    """The features Transform carries through unchanged, outside the graph: lists of any length (boxes)."""
    return tuple(name for name, spec in manifest.features.items() if list(spec.shape) == [-1])


def stored_name(feature: str) -> str:
    """The pass-through column holding `feature`'s stored bytes."""
    return f"{STORED_PREFIX}{feature}"


def tensor_adapter_config(schema: schema_pb2.Schema, stored: tuple[str, ...] = (),
                          carried: tuple[str, ...] = ()) -> tfxio.TensorAdapterConfig:
    """What TFT needs to turn the batches into tensors; the position and stored-bytes columns are not tensors,
    nor are the `carried` features (the preprocessing_fn never sees them)."""
    base = tfxio.TFExampleBeamRecord(physical_format="tfrecord", schema=schema).TensorAdapterConfig()
    arrow_schema = base.arrow_schema.append(pa.field(POSITION, pa.large_list(pa.int64())))
    for name in stored:
        arrow_schema = arrow_schema.append(pa.field(stored_name(name), base.arrow_schema.field(name).type))
    tensors = {name: value for name, value in base.tensor_representations.items() if name not in carried}
    return tfxio.TensorAdapterConfig(arrow_schema, tensors)


def default_batch_size(manifest: Manifest) -> int:
    """Examples per batch so that a batch holds about TARGET_BATCH_BYTES of decoded values."""
    per_example = sum(math.prod(f.shape or [1]) * _ITEM_BYTES[f.dtype] for f in manifest.features.values())
    return max(1, min(MAX_BATCH_SIZE, TARGET_BATCH_BYTES // max(1, per_example)))


def plan_ranges(root: str, manifest: Manifest, split: str, batch_size: int) -> list[RecordRange]:
    """The split cut into ranges of a few batches each, in shard order (`root`: a path or URI)."""
    per_range = batch_size * BATCHES_PER_RANGE
    ranges, offset = [], 0
    for shard, path in zip(manifest.splits[split].shards, manifest.shard_paths(root, split)):
        for start in range(0, shard.num_examples, per_range):
            end = min(shard.num_examples, start + per_range)
            ranges.append(RecordRange(split, path, manifest.compression, offset, start, end))
        offset += shard.num_examples
    return ranges


@contextlib.contextmanager
def _open(path: str, compression: str) -> Iterator[BinaryIO]:
    """The shard's uncompressed bytes, read through `storage` (any filesystem, one kept client)."""
    with storage.open_read(path) as raw:
        if compression == "GZIP":
            with gzip.GzipFile(fileobj=raw, mode="rb") as unpacked:
                yield unpacked  # type: ignore[misc]
        else:
            yield raw


def read_range(record_range: RecordRange) -> Iterator[bytes]:
    """The serialized records of the range (CRCs checked); fails if the shard ends early."""
    count = 0
    with _open(record_range.path, record_range.compression) as stream:
        for index, whole in enumerate(iter_frames(stream, record_range.path)):
            if index >= record_range.end:
                break
            if index >= record_range.start:
                count += 1
                yield whole[_HEADER_BYTES:-_FOOTER_BYTES]
    if count != record_range.end - record_range.start:
        raise ValueError(f"{record_range.path}: expected records {record_range.start}..{record_range.end}, "
                         f"the file holds {record_range.start + count}")


def with_positions(batch: pa.RecordBatch, first: int, stored: tuple[str, ...] = ()) -> pa.RecordBatch:
    """The batch plus the pass-through columns: split positions first, first+1, ...; copies of `stored` features."""
    count = batch.num_rows
    offsets = pa.array(np.arange(count + 1, dtype=np.int64))
    positions = pa.LargeListArray.from_arrays(offsets, pa.array(np.arange(first, first + count, dtype=np.int64)))
    schema = batch.schema.append(pa.field(POSITION, pa.large_list(pa.int64())))
    columns = list(batch.columns) + [positions]
    for name in stored:  # the same Arrow buffers under a second name: no bytes are copied
        index = batch.schema.get_field_index(name)
        schema = schema.append(pa.field(stored_name(name), batch.schema.field(index).type))
        columns.append(batch.column(index))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class ReadBatchesFn(beam.DoFn):
    """RecordRange → record batches of at most `batch_size` examples, with positions."""

    def __init__(self, schema: schema_pb2.Schema, batch_size: int, stored: tuple[str, ...] = ()) -> None:
        self.schema_bytes = schema.SerializeToString()
        self.batch_size, self.stored = batch_size, stored

    def setup(self) -> None:
        self.decoder = ExamplesToRecordBatchDecoder(self.schema_bytes)

    def process(self, record_range: RecordRange) -> Iterator[pa.RecordBatch]:
        position = record_range.first_position + record_range.start
        records: list[bytes] = []
        for record in read_range(record_range):
            records.append(record)
            if len(records) == self.batch_size:
                yield with_positions(self.decoder.DecodeBatch(records), position, self.stored)
                position += len(records)
                records = []
        if records:
            yield with_positions(self.decoder.DecodeBatch(records), position, self.stored)


class ReadRecordBatches(beam.PTransform):
    """Range descriptors in (spread over workers), Arrow record batches out."""

    def __init__(self, ranges: list[RecordRange], schema: schema_pb2.Schema, batch_size: int,
                 stored: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.ranges, self.schema, self.batch_size, self.stored = ranges, schema, batch_size, stored

    def expand(self, root: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            root
            | "ListRanges" >> beam.Create(self.ranges)
            | "SpreadRanges" >> beam.Reshuffle()
            | "ReadBatches" >> beam.ParDo(ReadBatchesFn(self.schema, self.batch_size, self.stored))
        )


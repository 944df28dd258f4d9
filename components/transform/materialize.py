"""Writing transformed record batches as `tf.train.Example` part files, in input order, memory-flat.

One transformed batch becomes one part file named by the split position of its first example
(`<scratch>/parts/<split>/<position:012d>.tfrecord`, a path or URI), so sorting part paths restores the input order and a
recomputed batch rewrites the same file. Only the part's metadata leaves the DoFn; `WriteShards`
then cuts the parts into shards exactly as for ExampleGen.

Every integer value is checked before it is written: against the feature's int domain in the
transformed schema (e.g. a mask's [0, K-1]) and against its storage dtype. A bad value fails the
run with the split, the example position, the feature and the value.

    batches | beam.ParDo(WritePartsFn("train", out.staging, features), domains=AsSingleton(domains))
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa

from ..core.errors import ShardflowError
from ..core import storage
from ..core.example_proto import encode_example
from ..core.manifest import FeatureSpec
from ..core.shard_plan import Part
from ..core.shard_writer import PartWriter
from ..core.pixel_codec import decode_pixels, encode_pixels
from .raw_input import POSITION, stored_name

MASK_HINT = ("mask ids must be < the number of classes, which is --mask-classes NAME=K or, without it, "
             "the largest id in the analyze split + 1")


class OutOfRangeError(ShardflowError, ValueError):
    """A transformed integer outside its schema domain or its storage dtype; the run fails."""


@dataclass
class BatchResult:
    split: str
    part: Part
    label_counts: dict[str, Counter] = field(default_factory=dict)


def _flat(batch: pa.RecordBatch, name: str, width: int) -> pa.Array:
    index = batch.schema.get_field_index(name)
    if index < 0:
        raise KeyError(f"transformed batch lacks feature {name!r} (has {batch.schema.names})")
    values = batch.column(index).flatten()
    if len(values) != batch.num_rows * width or values.null_count:
        raise ValueError(f"feature {name!r}: {len(values)} values for {batch.num_rows} examples of {width} each")
    return values


def check_range(values: np.ndarray, low: int, high: int, what: str, name: str, split: str, first: int) -> None:
    """Raises OutOfRangeError naming the first example with a value outside [low, high]."""
    bad = (values < low) | (values > high)
    if not bad.any():
        return
    row = int(np.argmax(bad.any(axis=1)))
    value = int(values[row][bad[row]][0])
    hint = f"; {MASK_HINT}" if "mask" in what else ""
    raise OutOfRangeError(f"split {split!r}, example {first + row}: feature {name!r} has value {value} outside "
                          f"[{low}, {high}] ({what}){hint}")


def stored_values(batch: pa.RecordBatch, spec: FeatureSpec, domain: tuple[int, int] | None, split: str,
                  first: int, applied_at_read: bool = False) -> list[list]:
    """Per example, the value list `encode_example` takes for this feature (checked, in storage dtype).

    `applied_at_read`: the input's stored bytes, passed through the transform unchanged.
    """
    if applied_at_read and list(spec.shape) == [-1]:  # a list of any length carried through (boxes)
        column = batch.column(batch.schema.get_field_index(stored_name(spec.name))).to_pylist()
        kind = object if spec.dtype == "string" else np.dtype(spec.dtype)
        return [np.asarray(values or [], dtype=kind) for values in column]
    if applied_at_read:
        payloads = _flat(batch, stored_name(spec.name), 1).to_pylist()
        if spec.role == "mask" and domain is not None:  # ids kept as stored: checked on the stored pixels
            pixels = np.stack([decode_pixels(p, spec.encoding, spec.dtype, tuple(spec.shape)) for p in payloads])
            check_range(pixels.reshape(len(payloads), -1), domain[0], domain[1],
                        f"{spec.role} domain from the transformed schema", spec.name, split, first)
        return [[payload] for payload in payloads]
    width = math.prod(spec.shape) if spec.shape else 1
    values = _flat(batch, spec.name, width)
    if spec.dtype == "string":
        return [[v] for v in values.to_pylist()]
    array = values.to_numpy(zero_copy_only=False).reshape(batch.num_rows, width)
    if array.dtype.kind == "i":
        what = f"{spec.role} domain from the transformed schema"
        if domain is not None:
            check_range(array, domain[0], domain[1], what, spec.name, split, first)
        if spec.dtype in ("uint8", "uint16"):
            limits = np.iinfo(spec.dtype)
            check_range(array, int(limits.min), int(limits.max), f"{spec.role} stored as {spec.dtype}", spec.name,
                        split, first)
    if spec.encoding == "raw":
        stored = array.astype(np.dtype(spec.dtype).newbyteorder("<"), copy=False)
        return [[row.tobytes()] for row in stored]
    if spec.encoding == "png":  # masks: ids compress to a few % of their raw bytes
        pixels = array.astype(spec.dtype, copy=False).reshape(batch.num_rows, *spec.shape)
        return [[encode_pixels(image, "png")] for image in pixels]
    return [[v] for v in array[:, 0].tolist()]


def positions_of(batch: pa.RecordBatch) -> int:
    """The first split position of a batch whose positions must be consecutive."""
    positions = _flat(batch, POSITION, 1).to_numpy(zero_copy_only=False)
    first = int(positions[0])
    if not np.array_equal(positions, np.arange(first, first + len(positions))):
        raise ValueError(f"transformed batch positions are not consecutive from {first}: order would be lost")
    return first


def label_counts(columns: dict[str, list[list]], features: Sequence[FeatureSpec]) -> dict[str, Counter]:
    counts = {}
    for spec in features:
        if spec.role == "label" and spec.dtype in ("int64", "string"):
            counts[spec.name] = Counter(
                v[0].decode("utf-8", "replace") if isinstance(v[0], bytes) else str(v[0]) for v in columns[spec.name])
    return counts


class WritePartsFn(beam.DoFn):
    """A transformed record batch of one split → one part file; yields its BatchResult."""

    def __init__(self, split: str, scratch_dir: str, features: tuple[FeatureSpec, ...],
                 applied_at_read: tuple[str, ...] = ()) -> None:
        self.split, self.scratch_dir, self.features = split, scratch_dir, features
        self.applied_at_read = applied_at_read
        self.examples_counter = beam.metrics.Metrics.counter("transform", f"examples_{split}")

    def process(self, batch: pa.RecordBatch, domains: dict[str, tuple[int, int]]) -> Iterator[BatchResult]:
        first = positions_of(batch)
        columns = {s.name: stored_values(batch, s, domains.get(s.name), self.split, first, s.name in self.applied_at_read)
                   for s in self.features}
        writer = PartWriter(storage.join(self.scratch_dir, "parts", self.split, f"{first:012d}.tfrecord"))
        try:
            for row in range(batch.num_rows):
                writer.write(encode_example({name: values[row] for name, values in columns.items()}))
        except BaseException:
            writer.abort()
            raise
        part = writer.close()
        storage.write_text(storage.join(self.scratch_dir, "done", f"{self.split}-{first:012d}"), str(batch.num_rows),
                           durable=False)
        self.examples_counter.inc(batch.num_rows)
        yield BatchResult(self.split, part, label_counts(columns, self.features))

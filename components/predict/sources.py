"""Predict's inputs as Beam DoFns: chunks of CSV rows (prepared by ExampleGen's own code) or example shards.

Both emit batches of `(key, serialized tf.Example)` pairs with key `(source id, row, path, size)`: the
source id is the index file (or shard) position in the plan, the row its 1-based data-row (or
record) number, the size the (height, width) of a CSV row's image as the file is (a detector's boxes
are told in its pixels too), None for a shard's record. A batch holds at most `batch_size` examples and about `max_batch_bytes`; batches
never span two work units, and are emitted from `process` (not `finish_bundle`, which the
DaskRunner ignores), one at a time: memory holds a batch, not a chunk.
A CSV chunk's rejects (ExampleGen's `Reject`s, same codes and reasons) and its row count go to
small files in the staging area, one per chunk: only the examples travel on through Beam.
"""
from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import apache_beam as beam
import numpy as np

from ..core import storage
from ..core.tfrecord import iter_records
from ..example_gen.columns import ColumnSpec
from ..example_gen.csv_index import Chunk, read_chunk
from ..example_gen.rows import Reject, RowEncoder
from ..example_gen.splitting import SplitAssigner

Key = tuple[int, int, str, "tuple[int, int] | None"]  # (source id, row, path, image size)
Batch = list[tuple[Key, bytes]]
SPLIT = "predict"  # the split name ExampleGen's encoder is given (rejects carry it)


@dataclass(frozen=True)
class Batching:
    batch_size: int
    max_batch_bytes: int


def batched(pairs: Iterable[tuple[Key, bytes]], batching: Batching) -> Iterator[Batch]:
    """Consecutive pairs grouped into batches of at most `batch_size` and about `max_batch_bytes`.

    >>> [len(b) for b in batched((((0, i, "", None), b"x" * 10) for i in range(5)), Batching(2, 1000))]
    [2, 2, 1]
    >>> [len(b) for b in batched((((0, i, "", None), b"x" * 10) for i in range(5)), Batching(9, 25))]
    [3, 2]
    """
    batch: Batch = []
    size = 0
    for pair in pairs:
        batch.append(pair)
        size += len(pair[1])
        if len(batch) >= batching.batch_size or size >= batching.max_batch_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


@dataclass(frozen=True)
class RowsPlan:
    """What a worker needs to prepare CSV rows (picklable, small)."""

    columns: tuple[ColumnSpec, ...]
    data_root: str
    staging_dir: str
    batching: Batching

    def rejects_path(self, chunk: Chunk) -> str:
        return storage.join(self.staging_dir, "rejects", f"{chunk.index_id:04d}-{chunk.chunk_no:06d}.jsonl")

    def counts_path(self, chunk: Chunk) -> str:
        return storage.join(self.staging_dir, "counts", f"{chunk.index_id:04d}-{chunk.chunk_no:06d}.json")

    def done_marker(self, chunk: Chunk) -> str:
        """The rows prepared, as ExampleGen's markers: what `core.progress.ProgressReporter` counts."""
        return storage.join(self.staging_dir, "done", f"{chunk.index_id:04d}-{chunk.chunk_no:06d}")


def read_counts(plan: RowsPlan, chunk: Chunk) -> dict:
    """The chunk's {"rows": n, "rejected": {code: count}}, written once its rows were all prepared."""
    return json.loads(storage.read_text(plan.counts_path(chunk)))


class _SizeSeen:
    """RowEncoder's `add_features` hook, adding nothing: it keeps the row's image size as the file is (EXIF
    orientation applied, before any resize), which the encoder learns when it decodes the image."""

    def __init__(self) -> None:
        self.size: tuple[int, int] | None = None

    def __call__(self, size: tuple[int, int] | None) -> dict:
        self.size = None if size is None else (int(size[0]), int(size[1]))
        return {}


class EncodeRowsFn(beam.DoFn):
    """A chunk of CSV rows → (key, example) for each accepted row; rejects and counts to staging."""

    def __init__(self, plan: RowsPlan) -> None:
        self.plan = plan
        self.rejected_counter = beam.metrics.Metrics.counter("predict", "rejected")

    def setup(self) -> None:
        self.encoder = RowEncoder(list(self.plan.columns), self.plan.data_root, SplitAssigner(((SPLIT, 1),), ()))
        image = next(c for c in self.plan.columns if c.role == "image")
        self.path_position = image.position

    def process(self, chunk: Chunk) -> Iterator[Batch]:
        yield from batched(self._encode(chunk), self.plan.batching)

    def _encode(self, chunk: Chunk) -> Iterator[tuple[Key, bytes]]:
        rejects: list[str] = []
        codes: Counter = Counter()
        rows = 0
        for record in read_chunk(chunk):
            rows += 1
            seen = _SizeSeen()
            outcome = self.encoder.encode(record, SPLIT, add_features=seen)
            if isinstance(outcome, Reject):
                codes[outcome.code] += 1
                rejects.append(json.dumps(outcome.to_json(chunk.path), sort_keys=True))
                continue
            yield ((chunk.index_id, record.row, record.cells[self.path_position], seen.size),  # type: ignore[index]
                   outcome.example)
        # Staging files: no fsync (a crash discards the staging area). Whole or absent, so a chunk
        # computed twice (Dask) writes the same bytes twice.
        storage.write_bytes(self.plan.rejects_path(chunk), "".join(r + "\n" for r in rejects).encode(), durable=False)
        storage.write_text(self.plan.counts_path(chunk), json.dumps({"rows": rows, "rejected": dict(codes)}),
                           durable=False)
        storage.write_text(self.plan.done_marker(chunk), str(rows), durable=False)
        self.rejected_counter.inc(sum(codes.values()))


@dataclass(frozen=True)
class Shard:
    source_id: int
    path: str
    compression: str  # "" or "GZIP"
    batching: Batching
    keep: np.ndarray | None = field(default=None, compare=False)  # bool per record: a fold selection's
    paths: tuple[str, ...] | None = None  # per record, the file its example came from (provenance), when recorded


def read_shard(shard: Shard) -> Iterator[Batch]:
    """The records of one ExampleGen shard (those `keep` marks) in batches, keyed by (shard id, record number,
    its file's path or "", None)."""
    with storage.open_read(shard.path) as raw:
        stream = gzip.GzipFile(fileobj=raw) if shard.compression == "GZIP" else raw
        records = enumerate(iter_records(stream, shard.path), 1)  # type: ignore[arg-type]
        kept = (pair for pair in records if shard.keep is None or shard.keep[pair[0] - 1])
        paths = shard.paths
        yield from batched((((shard.source_id, number, paths[number - 1] if paths else "", None), record)
                            for number, record in kept), shard.batching)

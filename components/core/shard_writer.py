"""The deterministic, memory-flat shard writer shared by ExampleGen and Transform.

Workers first write each bundle of records to a *part* file of framed TFRecords (`PartWriter`).
Only part metadata (path, record count, bytes) then travels through Beam: it is gathered, cut into
shards by `shard_plan`, and each shard is written by copying frames from its parts (TFRecord frames
concatenate byte for byte) through `storage.open_write`: locally a temporary name renamed into
place, on an object store one object that appears when its upload completes. So memory does not
grow with the record count (no GroupByKey carries records), a shard never appears partial, and the
output is the same bytes on any runner and filesystem — including Dask, which may compute an
element twice. Parts and shards may live anywhere `storage` reaches (local, s3://, gs://).

    parts | WriteShards(out_dir, compression, sizing)  # → PCollection of (split, ShardInfo)

Beam is imported when `WriteShards` is first used, not with this module: ExampleGen's local pool
writes shards with `plan_all` and `write_shard` alone.
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import shutil
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable, Iterator

from . import storage
from .manifest import ShardInfo
from .shard_plan import Part, ShardPlan, count_shards, plan_split
from .tfrecord import frame, iter_frames


class _Aborted(Exception):
    """Thrown into `storage.open_write` so that it discards the unfinished file."""


class PartWriter:
    """Appends framed records to `path` (local or URI); the file appears only on `close()`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stack = contextlib.ExitStack()
        self._stream: BinaryIO = self._stack.enter_context(storage.open_write(path))
        self.num_records = 0
        self.payload_bytes = 0

    def write(self, record: bytes, payload_bytes: int | None = None) -> None:
        self._stream.write(frame(record))
        self.num_records += 1
        self.payload_bytes += len(record) if payload_bytes is None else payload_bytes

    def close(self) -> Part:
        self._stack.close()  # staging file: no fsync (a crash discards the staging area)
        return Part(self.path, self.num_records, self.payload_bytes)

    def abort(self) -> None:
        self._stack.__exit__(_Aborted, _Aborted(), None)


@dataclass(frozen=True, kw_only=True)
class ShardSizing:
    compression: str = ""
    shard_size_mb: float = 128.0
    num_shards: int | None = None
    min_shards: int = 1


@contextlib.contextmanager
def _open_output(path: str, compression: str) -> Iterator[BinaryIO]:
    """The shard's stream; it appears at `path` (whole) only when the block ends without error."""
    with storage.open_write(path) as raw:
        if compression != "GZIP":
            yield raw
            return
        # mtime=0 and no file name: the same input gives the same bytes on every runner and store
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) as packed:
            yield packed  # type: ignore[misc]


def _copy_whole(out: BinaryIO, part_path: str) -> None:
    with storage.open_read(part_path) as source:
        shutil.copyfileobj(source, out, 1 << 20)


def _copy_range(out: BinaryIO, part_path: str, start: int, end: int) -> int:
    """Copies records [start, end) of a part file; returns how many were copied."""
    with storage.open_read(part_path) as source:
        copied = 0
        for index, whole in enumerate(iter_frames(source, part_path, verify=False)):
            if index >= end:
                break
            if index >= start:
                out.write(whole)
                copied += 1
        return copied


def write_shard(plan: ShardPlan, out_dir: str, compression: str, whole_parts: dict[str, int]) -> ShardInfo:
    """Writes one shard under `out_dir/Split-<split>/` (local or URI), whole or not at all.

    Returns its manifest entry.
    """
    relative = f"Split-{plan.split}/{plan.file_name(compression)}"
    final = storage.join(out_dir, f"Split-{plan.split}", plan.file_name(compression))
    written = 0
    with _open_output(final, compression) as out:
        for part_path, start, end in plan.pieces:
            if start == 0 and whole_parts.get(part_path) == end:
                _copy_whole(out, part_path)
                written += end
            else:
                written += _copy_range(out, part_path, start, end)
        if written != plan.num_records:  # raised inside the block: no shard appears
            raise RuntimeError(f"shard {relative}: copied {written} records, planned {plan.num_records}")
    return ShardInfo(relative, plan.num_records, storage.size(final))


def plan_all(parts: Iterable[tuple[str, Part]], sizing: ShardSizing) -> Iterator[tuple[ShardPlan, dict[str, int]]]:
    """Every shard of every split, each with the record counts of the parts it reads."""
    by_split: dict[str, list[Part]] = {}
    for split, part in sorted(parts, key=lambda sp: (sp[0], sp[1].path)):
        by_split.setdefault(split, []).append(part)
    for split, split_parts in by_split.items():
        records = sum(p.num_records for p in split_parts)
        payload = sum(p.payload_bytes for p in split_parts)
        num = count_shards(records, payload, sizing.shard_size_mb, sizing.num_shards, sizing.min_shards)
        counts = {p.path: p.num_records for p in split_parts}
        for plan in plan_split(split, split_parts, num):
            yield plan, {path: counts[path] for path, _, _ in plan.pieces}


def __getattr__(name: str) -> Any:
    """`WriteShards` is defined on first use: only Beam pipelines need Beam (~2 s to import)."""
    if name == "WriteShards":
        return _write_shards_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=None)
def _write_shards_class() -> type:
    import apache_beam as beam

    class WriteShards(beam.PTransform):
        """(split, Part) pairs → (split, ShardInfo) for every shard written under `out_dir` (local or URI).

        Part paths must sort in the records' intended order (e.g. zero-padded chunk numbers).
        """

        def __init__(self, out_dir: str, sizing: ShardSizing) -> None:
            super().__init__()
            self.out_dir = out_dir
            self.sizing = sizing

        def expand(self, parts: beam.PCollection) -> beam.PCollection:
            out_dir, sizing = self.out_dir, self.sizing
            return (
                parts
                | "GatherParts" >> beam.combiners.ToList()
                | "PlanShards" >> beam.FlatMap(lambda all_parts: list(plan_all(all_parts, sizing)))
                | "SpreadShards" >> beam.Reshuffle()
                | "WriteShard" >> beam.Map(
                    lambda job: (job[0].split, write_shard(job[0], out_dir, sizing.compression, job[1])))
            )

    WriteShards.__module__ = __name__
    WriteShards.__qualname__ = "WriteShards"
    return WriteShards

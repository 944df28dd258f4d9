"""The chunk encoder: a chunk of CSV rows into part files of serialized Examples (Beam's DoFn: pipeline.py).

One element is one chunk descriptor (a byte range of an index file), so Beam's per-element cost is
paid once per few thousand rows. Records go straight to disk; what the DoFn emits is metadata
(`ChunkResult`); the values statistics need (labels, metadata, payload sizes — never pixels) go
to a small Arrow file per chunk and split, which the launcher turns into TFDV statistics, and the
content hashes of the leakage check to a digest file per chunk and split, which the launcher
checks in bounded memory (and, likewise, the perceptual hashes of the near-duplicate check: a dct, a
centre and a tone table per chunk and split, one entry per image each, `core.perceptual_hash`). Through Beam
travel O(1) metadata per chunk and the chunk's row provenance (provenance.py: a bit per row and split,
and the image paths gzip-compressed, ~10 bytes per example).
Workers never import TensorFlow, which keeps their start-up short, and this module does not import
Beam: the local pool (local_pool.py) runs it without. Every file a worker writes goes
through `storage` into the staging location (a local folder or an object-store prefix): workers
need nothing but that storage, never the launcher's disk.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
from threadpoolctl import threadpool_limits

from ..core import storage
from ..core.box_schema import CLASS_TEXT
from ..core.perceptual_hash import hashes_of
from ..core.shard_plan import Part
from ..core.shard_writer import PartWriter
from .box_features import BoxFigures
from .box_rows import add_figures, box_outcomes
from .column_files import write_column_file
from .columns import ColumnSpec
from .csv_index import Chunk, read_chunk
from .leakage import digest_table
from .provenance import chunk_provenance
from .rows import Encoded, Reject, RowEncoder
from .splitting import SplitAssigner


HASH_BATCH = 256  # images hashed together: numpy's per-call cost paid once per batch, not per image


@dataclass(frozen=True)
class IngestPlan:
    """Everything a worker needs, decided once by the driver (picklable, small)."""

    columns: tuple[ColumnSpec, ...]
    data_root: str
    staging_dir: str  # local path or URI: scratch files (parts, rejects, columns, digests, markers)
    publish_root: str  # where shards are written (OutputDir.publish_root: staging locally, final remotely)
    index_splits: tuple[str | None, ...]  # per index id; None means split by hashing
    split_weights: tuple[tuple[str, int], ...]
    split_key_positions: tuple[int, ...]
    perceptual_hashes: bool = False  # hash every image's pixels for the near-duplicate check
    labels: tuple[tuple[str, int], ...] = ()  # a box index's label map (class name → id from 1)

    def phash_file(self, split: str, chunk: Chunk, kind: str) -> str:
        """The chunk's perceptual hashes of one kind ("dct", "tone" or "centre") for one split."""
        return storage.join(self.staging_dir, "phashes", split, f"{chunk.index_id:04d}-{chunk.chunk_no:06d}.{kind}.npy")

    def part_path(self, split: str, chunk: Chunk) -> str:
        return storage.join(self.staging_dir, "parts", split, f"{chunk.index_id:04d}-{chunk.chunk_no:06d}.tfrecord")

    def rejects_path(self, chunk: Chunk) -> str:
        return storage.join(self.staging_dir, "rejects", f"{chunk.index_id:04d}-{chunk.chunk_no:06d}.jsonl")

    def column_file(self, split: str, chunk: Chunk) -> str:
        return storage.join(self.staging_dir, "columns", split, f"{chunk.index_id:04d}-{chunk.chunk_no:06d}.arrow")

    def digest_file(self, split: str, chunk: Chunk) -> str:
        return storage.join(self.staging_dir, "digests", split, f"{chunk.index_id:04d}-{chunk.chunk_no:06d}.npy")

    def done_marker(self, chunk: Chunk) -> str:
        return storage.join(self.staging_dir, "done", f"{chunk.index_id:04d}-{chunk.chunk_no:06d}")


@dataclass
class ChunkResult:
    index_id: int
    chunk_no: int
    rows: int = 0
    parts: dict[str, Part] = field(default_factory=dict)
    label_counts: dict[str, dict[str, Counter]] = field(default_factory=dict)
    reject_codes: Counter = field(default_factory=Counter)
    # split → (bitmap of the chunk's rows it accepted, gzip of their paths): see provenance.py
    provenance: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)
    box_figures: dict[str, BoxFigures] = field(default_factory=dict)  # split → a box index's figures

    @property
    def rejected(self) -> int:
        return sum(self.reject_codes.values())


class _SplitBuffer:
    """Per split: the part writer, the values for statistics, the label counts and hashes."""

    def __init__(self, path: str, columns: tuple[ColumnSpec, ...]) -> None:
        self.writer = PartWriter(path)
        self.values: dict[str, list] = {c.name: [] for c in columns}
        # Label counts: of a label column, and of a box index's class names (a list per example)
        self.labels: dict[str, Counter] = {c.name: Counter() for c in columns
                                           if c.role == "label" or c.name == CLASS_TEXT}
        self.figures = BoxFigures() if any(c.name == CLASS_TEXT for c in columns) else None
        self.digests: list[int] = []
        self.digest_rows: list[int] = []
        self.rows: list[int] = []  # accepted rows in write order, and their paths: the provenance
        self.paths: list[str] = []
        # Per kind, (hashes, rows); every image gets all three (the tone too, marked STRUCTURED when the image
        # has structure: it corroborates centre pairs), one table each (`phash_file`).
        self.phashes: dict[str, tuple[list[int], list[int]]] = {"dct": ([], []), "tone": ([], []), "centre": ([], [])}
        self.pending: list[tuple[np.ndarray, int]] = []  # hash inputs not hashed yet, with their rows

    def add(self, encoded: Encoded) -> None:
        self.writer.write(encoded.example, encoded.payload_bytes)
        self.rows.append(encoded.row)
        self.paths.append(encoded.path)
        for name, value in encoded.values.items():
            self.values[name].append(value)
            if name == CLASS_TEXT:
                self.labels[name].update(text.decode("utf-8") for text in value)
            elif name in self.labels:
                self.labels[name][str(value)] += 1
        if self.figures is not None:
            add_figures(self.figures, encoded.values)
        for digest in encoded.digests:
            self.digests.append(digest)
            self.digest_rows.append(encoded.row)
        self.pending += [(thumb, encoded.row) for thumb in encoded.phashes]
        if len(self.pending) >= HASH_BATCH:
            self.hash_pending()

    def hash_pending(self) -> None:
        """Perceptual hashes of the images waiting, in one vectorized pass (bounded: HASH_BATCH × at most 12 KB)."""
        if not self.pending:
            return
        hashes = hashes_of([thumb for thumb, _ in self.pending])
        for (dct, centre, tone), (_, row) in zip(hashes, self.pending):
            self._add_phash("dct", dct, row)
            self._add_phash("centre", centre, row)
            self._add_phash("tone", tone, row)
        self.pending = []

    def _add_phash(self, kind: str, value: int, row: int) -> None:
        self.phashes[kind][0].append(value)
        self.phashes[kind][1].append(row)


class EncodeChunkFn:
    """`setup()` once per worker, then `process(chunk)` yields the chunk's `ChunkResult` (a DoFn's shape)."""

    def __init__(self, plan: IngestPlan) -> None:
        self.plan = plan

    def setup(self) -> None:
        assigner = SplitAssigner(self.plan.split_weights, self.plan.split_key_positions)
        self.encoder = RowEncoder(list(self.plan.columns), self.plan.data_root, assigner, self.plan.perceptual_hashes)

    def process(self, chunk: Chunk) -> Iterator[ChunkResult]:
        # One BLAS thread: the rows' numpy work is on tiny matrices (the perceptual hashes), where
        # OpenBLAS's second thread only spins, on the core the other worker needs: 35 → 20 µs of CPU
        # a 28×28 image's hashes, 120 → 65 µs a 224-px photo's.
        with threadpool_limits(1):
            result = self._encode(chunk)
        yield result

    def _outcomes(self, chunk: Chunk, fixed_split: str | None) -> Iterator[tuple[int, Encoded | Reject]]:
        """(rows, outcome) of each example or reject: a CSV row, or a box index's image (box_rows.py)."""
        if chunk.is_box:
            yield from box_outcomes(self.encoder, chunk, dict(self.plan.labels))
            return
        for record in read_chunk(chunk):
            yield 1, self.encoder.encode(record, fixed_split)

    def _encode(self, chunk: Chunk) -> ChunkResult:
        result = ChunkResult(chunk.index_id, chunk.chunk_no)
        buffers: dict[str, _SplitBuffer] = {}
        rejects: list[str] = []
        fixed_split = self.plan.index_splits[chunk.index_id]
        try:
            for rows, outcome in self._outcomes(chunk, fixed_split):
                result.rows += rows
                if isinstance(outcome, Reject):
                    if rows:
                        result.reject_codes[outcome.code] += rows
                    rejects.append(json.dumps(outcome.to_json(chunk.path), sort_keys=True))
                    continue
                if outcome.split not in buffers:
                    buffers[outcome.split] = _SplitBuffer(self.plan.part_path(outcome.split, chunk), self.plan.columns)
                buffers[outcome.split].add(outcome)
        except BaseException:
            for buffer in buffers.values():
                buffer.writer.abort()
            raise
        # Staging files skip the fsync: a crash discards the whole staging dir (see output_dir), and
        # an fsync per chunk and file cost ~10 % of the encode time on a busy disk.
        storage.write_bytes(self.plan.rejects_path(chunk), "".join(line + "\n" for line in rejects).encode("utf-8"),
                           durable=False)
        for split, buffer in sorted(buffers.items()):
            result.parts[split] = buffer.writer.close()
            result.label_counts[split] = buffer.labels
            result.provenance[split] = chunk_provenance(chunk, buffer.rows, buffer.paths)
            if buffer.figures is not None:
                result.box_figures[split] = buffer.figures
            storage.write_bytes(self.plan.digest_file(split, chunk), digest_table(buffer.digests, buffer.digest_rows),
                               durable=False)
            write_column_file(self.plan.column_file(split, chunk), self.plan.columns, buffer.values)
            if self.plan.perceptual_hashes:
                buffer.hash_pending()
                for kind, (values, rows) in buffer.phashes.items():
                    storage.write_bytes(self.plan.phash_file(split, chunk, kind), digest_table(values, rows),
                                       durable=False)
        storage.write_bytes(self.plan.done_marker(chunk), str(result.rows).encode(), durable=False)
        return result

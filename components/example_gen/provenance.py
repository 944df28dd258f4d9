"""ExampleGen's row provenance (core/example_rows.py): each example's index file, row and path, per split.

A worker keeps, per chunk and split, the rows it accepted and their image cells; it returns them in
its `ChunkResult` compactly: the rows as a bitmap over the chunk's rows (num_rows / 8 bytes) and the
paths as one gzip member. The launcher joins the chunks' pieces in the order the shard writer joins
their part files (sorted by part path, `shard_writer.plan_all`) into `provenance/<split>.npz`: no
second pass over the rows or files, and no file per chunk.

>>> bits, packed = chunk_rows(first_row=11, num_rows=5, rows=[11, 14], paths=["a.png", "d.png"])
>>> rows_of(bits, first_row=11, num_rows=5).tolist()
[11, 14]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core import storage
from ..core.example_rows import encode_piece, gzip_paths, rows_entry
from .csv_index import Chunk


def chunk_rows(first_row: int, num_rows: int, rows: Sequence[int], paths: Sequence[str]) -> tuple[bytes, bytes]:
    """(bitmap of the accepted rows among the chunk's rows, gzip member of their paths)."""
    accepted = np.zeros(num_rows, bool)
    accepted[np.asarray(rows, np.int64) - first_row] = True
    return np.packbits(accepted).tobytes(), gzip_paths(paths)


def rows_of(bits: bytes, first_row: int, num_rows: int) -> np.ndarray:
    """The rows a chunk bitmap marks, ascending (the order the worker wrote them)."""
    return np.flatnonzero(np.unpackbits(np.frombuffer(bits, np.uint8), count=num_rows)) + first_row


def chunk_provenance(chunk: Chunk, rows: Sequence[int], paths: Sequence[str]) -> tuple[bytes, bytes]:
    """A chunk's provenance piece: `chunk_rows`, or for a box index's chunk (its rows from anywhere in the file,
    one per image) the rows themselves, 8 bytes each."""
    if chunk.is_box:
        return np.asarray(rows, np.int64).tobytes(), gzip_paths(paths)
    return chunk_rows(chunk.first_row, chunk.num_rows, rows, paths)


def provenance_rows(chunk: Chunk, bits: bytes) -> np.ndarray:
    """The rows of a chunk's provenance piece, in the order the worker wrote them."""
    return np.frombuffer(bits, np.int64) if chunk.is_box else rows_of(bits, chunk.first_row, chunk.num_rows)


def write_provenance(splits: Sequence[str], chunks: Sequence[Chunk], results: Sequence, indexes: Sequence[str],
                     folder: str) -> dict:
    """Writes `<folder>/<split>.npz` for every split; returns the manifest's provenance entry.

    `results` are the chunks' `ChunkResult`s, aligned with `chunks`. The order is the shards' order:
    a split's parts sorted by path, as `plan_all` sorts them.
    """
    examples = {}
    for split in splits:
        pieces = sorted(((r.parts[split].path, chunk, r) for chunk, r in zip(chunks, results) if split in r.parts),
                        key=lambda piece: piece[0])
        ids, rows, paths = [], [], []
        for part_path, chunk, result in pieces:
            bits, packed = result.provenance[split]
            chunk_rows_ = provenance_rows(chunk, bits)
            if len(chunk_rows_) != result.parts[split].num_records:
                raise RuntimeError(f"{part_path}: {result.parts[split].num_records} records, "
                                   f"{len(chunk_rows_)} rows recorded")
            ids.append(np.full(len(chunk_rows_), chunk.index_id, np.int64))
            rows.append(chunk_rows_)
            paths.append(packed)
        index_id = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        row = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        data = encode_piece(indexes, index_id, row, b"".join(paths) if paths else gzip_paths([]))
        storage.write_bytes(storage.join(folder, f"{split}.npz"), data, durable=False)
        examples[split] = len(row)
    return rows_entry(examples)

"""Cross-split leakage: the same file content in more than one split, found from 64-bit hashes.

Workers write each chunk's hashes for one split to a small file (`digest_table`), sorted, next
to its part file; the launcher checks them bucket by bucket (`find_leaks`): a bucket is a range
of hash values, so it reads only that range of each file and its memory is bounded by
`BUCKET_DIGESTS`, not by the number of rows. Hashes never travel through Beam.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> for name, digests, rows in (("a.npy", [1, 2], [1, 2]), ("b.npy", [2], [7])):
...     _ = open(os.path.join(d, name), "wb").write(digest_table(digests, rows))
>>> found = find_leaks([("train", 0, os.path.join(d, "a.npy")), ("eval", 1, os.path.join(d, "b.npy"))])
>>> found["count"], found["examples"][0]["occurrences"]
(1, [{'split': 'eval', 'index_id': 1, 'row': 7}, {'split': 'train', 'index_id': 0, 'row': 2}])
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import tempfile
from typing import Any, Iterator, Sequence

import numpy as np

from ..core import storage
from .box_ingest import first_row
from .columns import ColumnSpec
from .csv_index import Chunk, read_chunk

MAX_EXAMPLES = 5
BUCKET_DIGESTS = 1 << 19  # ~4 MB of hashes per bucket (a few working copies of it at most)
_HASH_END = 1 << 63  # hashes are 63-bit non-negative (see rows.content_digest)


def digest_table(digests: Sequence[int], rows: Sequence[int]) -> bytes:
    """A .npy (2, n) int64 array: hashes ascending, and the row of each (ascending within a hash)."""
    table = np.array([digests, rows], dtype=np.int64).reshape(2, len(digests))
    table = table[:, np.lexsort((table[1], table[0]))]
    buffer = io.BytesIO()
    np.save(buffer, table, allow_pickle=False)
    return buffer.getvalue()


def _open(path: str) -> np.ndarray:
    return np.load(path, mmap_mode="r", allow_pickle=False)


def _bucket_hashes(paths: list[str], low: int, high: int) -> np.ndarray:
    """The distinct hashes in [low, high) over the files; each file read only in that range."""
    pieces = []
    for path in paths:
        hashes = _open(path)[0]
        start, stop = np.searchsorted(hashes, [low, high])
        if stop > start:
            pieces.append(np.array(hashes[start:stop]))
    return np.unique(np.concatenate(pieces)) if pieces else np.empty(0, dtype=np.int64)


def _occurrences(files: list[tuple[str, int, str]], digest: int) -> list[dict[str, Any]]:
    """Up to two rows per file holding `digest`, sorted by split and row."""
    found = []
    for split, index_id, path in files:
        table = _open(path)
        start, stop = np.searchsorted(table[0], [digest, digest + 1])
        for row in table[1, start:min(stop, start + 2)]:
            found.append({"split": split, "index_id": int(index_id), "row": int(row)})
    return sorted(found, key=lambda o: (o["split"], o["row"], o["index_id"]))


@contextlib.contextmanager
def local_copies(files: list[tuple[str, int, str]]) -> Iterator[list[tuple[str, int, str]]]:
    """`files` with remote digest files replaced by local copies (removed afterwards)."""
    if not any(storage.is_remote(path) for _, _, path in files):
        yield files
        return
    with tempfile.TemporaryDirectory(prefix="shardflow-digests-") as folder:
        local = []
        for number, (split, index_id, path) in enumerate(files):
            copy = os.path.join(folder, f"{number:06d}.npy")
            storage.copy_file(path, copy)
            local.append((split, index_id, copy))
        yield local


def locate_rows(report: dict[str, Any], chunks: list[Chunk], columns: list[ColumnSpec],
                indexes: Sequence[str]) -> dict[str, Any]:
    """Replaces each example occurrence's index id by its index file and adds the row's image path
    (the first image column), reading only those rows' chunks."""
    occurrences = [o for example in report["examples"] for o in example["occurrences"]]
    paths = row_paths(chunks, columns, {(o["index_id"], o["row"]) for o in occurrences})
    for occurrence in occurrences:
        index_id = occurrence.pop("index_id")
        occurrence["index"] = indexes[index_id]
        occurrence["path"] = paths.get((index_id, occurrence["row"]))
    return report


def row_paths(chunks: list[Chunk], columns: list[ColumnSpec], wanted: set[tuple[int, int]]
              ) -> dict[tuple[int, int], str | None]:
    """(index id, row) → the row's image path (its first image column), each chunk holding one read once.

    Shared by the exact and near-duplicate checks, which report rows by their paths."""
    image = next((c for c in columns if c.role == "image"), None)
    grouped: dict[int, list[int]] = {}
    for index_id, row in wanted:
        grouped.setdefault(index_id, []).append(row)
    by_index = {index_id: np.sort(np.asarray(rows)) for index_id, rows in grouped.items()}
    paths: dict[tuple[int, int], str | None] = {}
    for chunk in chunks:
        if chunk.is_box:  # a box index's chunk holds its images: an example's row is its image's first row
            paths.update({key: image.path for image in chunk.images or ()
                          if (key := (chunk.index_id, first_row(image))) in wanted})
            continue
        rows = by_index.get(chunk.index_id)
        first = int(np.searchsorted(rows, chunk.first_row)) if rows is not None else 0
        if rows is None or first == len(rows) or rows[first] >= chunk.first_row + chunk.num_rows:
            continue  # no wanted row in this chunk: not read
        for record in read_chunk(chunk):
            if (chunk.index_id, record.row) in wanted:
                paths[(chunk.index_id, record.row)] = record.cells[image.position] if image and record.cells else None
    return paths


def find_leaks(files: list[tuple[str, int, str]]) -> dict[str, Any]:
    """`files` holds (split, index id, digest file) per chunk and split; returns count and a few examples."""
    if len({split for split, _, _ in files}) < 2:
        return {"count": 0, "examples": []}
    with local_copies(files) as local:
        return _find_leaks(local)


def _find_leaks(files: list[tuple[str, int, str]]) -> dict[str, Any]:
    by_split: dict[str, list[str]] = {}
    for split, _, path in files:
        by_split.setdefault(split, []).append(path)
    if len(by_split) < 2:
        return {"count": 0, "examples": []}
    total = sum(_open(path).shape[1] for _, _, path in files)
    buckets = max(1, math.ceil(total / BUCKET_DIGESTS))
    count, leaked_examples = 0, []
    for bucket in range(buckets):
        low, high = _HASH_END * bucket // buckets, _HASH_END * (bucket + 1) // buckets
        uniques = [_bucket_hashes(paths, low, high) for paths in by_split.values()]
        values, counts = np.unique(np.concatenate(uniques), return_counts=True)
        leaked = values[counts > 1]
        count += int(leaked.size)
        leaked_examples += [int(d) for d in leaked[:MAX_EXAMPLES - len(leaked_examples)]]
    examples = [{"hash": f"{digest:016x}", "occurrences": _occurrences(files, digest)} for digest in leaked_examples]
    return {"count": count, "examples": examples}

"""Row provenance: which index file, CSV row and file each example of an output came from.

ExampleGen records, for every split, each example's (index file, row) in the order a reader yields
the split's examples (its shards in manifest order, no shuffle), and the example's file path (the
row's first image cell, as the CSV spells it). Rows are numbered as `rejects.jsonl` numbers them:
the first data row after the header is 1. A list of label issues or near-duplicates names rows
this way, so the user can find and fix them in the CSV.

On disk, a split's provenance is one or more *pieces*, `.npz` files of a few bytes per example:
`indexes` (the index files' names), `index_id` (uint16 or uint32 per example), `row` (uint32 per
example) and `paths` (the paths, each ended by a NUL, gzip-compressed: gzip members concatenate, so
ExampleGen joins its chunks' compressed paths without compressing again). The manifest lists them:

    "provenance": {"eval": [{"file": "provenance/eval.npz", "examples": 359}], ...}

ExampleGen writes one piece per split; a span window's union manifest lists each span's piece (by
absolute location) in the order of the spans' shards; Transform, which keeps its input's order,
copies its input's pieces into its own output (`copy_example_rows`).

>>> import tempfile
>>> root = tempfile.mkdtemp()
>>> piece = encode_piece(("d/eval.csv",), [0, 0], [2, 5], gzip_paths(["a.png", "b.png"]))
>>> storage.write_bytes(storage.join(root, "provenance", "eval.npz"), piece)
>>> manifest = Manifest({}, {"eval": SplitInfo(2, [])}, "", {PROVENANCE_KEY: rows_entry({"eval": 2})})
>>> rows = read_example_rows(root, manifest, "eval")
>>> len(rows), rows.row.tolist(), rows.describe([1])
(2, [2, 5], [{'split': 'eval', 'index': 'd/eval.csv', 'row': 5, 'path': 'b.png'}])
"""
from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from . import storage
from .errors import ShardflowError
from .manifest import Manifest, SplitInfo

PROVENANCE_KEY = "provenance"  # the manifest's entry
PROVENANCE_DIR = "provenance"  # the output's folder of pieces
_SEPARATOR = b"\0"  # no file path holds a NUL: a cell with one names no file, so its row was rejected

__all__ = ["ExampleRows", "NoProvenanceError", "PROVENANCE_DIR", "PROVENANCE_KEY", "Paths", "copy_example_rows",
           "encode_piece", "gzip_paths", "read_example_rows", "rows_entry"]


class NoProvenanceError(ShardflowError, LookupError):
    """The output records no provenance: it predates it (or its input did)."""


class Paths(Sequence[str]):
    """The examples' file paths, kept as one UTF-8 buffer and offsets (not one str object per example)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 0)
        self._starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if len(ends) else ends
        self._ends = ends

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, position: Any) -> Any:
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        position = int(position)
        return self._data[self._starts[position]:self._ends[position]].decode("utf-8")


@dataclass(frozen=True)
class ExampleRows:
    """Per example of one split, in reading order: its index file, CSV row and file path."""

    split: str
    indexes: tuple[str, ...]  # index file names, as the run was given them (and rejects.jsonl names them)
    index_id: np.ndarray  # int64 [N]: position in `indexes`
    row: np.ndarray  # int64 [N]: 1-based data row of that index file
    paths: Paths  # [N]: the row's first image cell ("" when the examples have no image column)

    def __len__(self) -> int:
        return len(self.row)

    def describe(self, positions: np.ndarray | list[int]) -> list[dict[str, Any]]:
        """`{"split", "index", "row", "path"}` of each example position (its place in reading order)."""
        return [{"split": self.split, "index": self.indexes[self.index_id[p]], "row": int(self.row[p]),
                 "path": self.paths[p]} for p in np.asarray(positions, np.int64).tolist()]


def gzip_paths(paths: Iterable[str]) -> bytes:
    """One gzip member of the paths, each ended by a NUL (members concatenate into one gzip stream)."""
    data = b"".join(p.encode("utf-8") + _SEPARATOR for p in paths)
    return gzip.compress(data, compresslevel=6, mtime=0)


def encode_piece(indexes: Sequence[str], index_id: Sequence[int] | np.ndarray, row: Sequence[int] | np.ndarray,
                 paths_gzip: bytes) -> bytes:
    """A piece's bytes (.npz, no pickle): a few bytes per example besides its compressed path."""
    id_type = np.uint16 if len(indexes) <= 1 << 16 else np.uint32
    buffer = io.BytesIO()
    np.savez(buffer, indexes=np.array(list(indexes), dtype=str), index_id=np.asarray(index_id, id_type),
             row=np.asarray(row, np.uint32), paths=np.frombuffer(paths_gzip, np.uint8))
    return buffer.getvalue()


def rows_entry(examples: dict[str, int], folder: str = PROVENANCE_DIR) -> dict[str, list[dict[str, Any]]]:
    """The manifest entry for one piece per split, `<folder>/<split>.npz`, with its example count."""
    return {split: [{"file": f"{folder}/{split}.npz", "examples": count}] for split, count in examples.items()}


def _location(output_dir: str, file: str) -> str:
    """A piece's location: relative names below the output, absolute paths and URIs as they are."""
    return file if storage.is_remote(file) or os.path.isabs(file) else storage.join(output_dir, *file.split("/"))


def _pieces(output_dir: str, manifest: Manifest, split: str) -> list[tuple[str, int]]:
    entry = manifest.extra.get(PROVENANCE_KEY)
    if not isinstance(entry, dict):
        raise NoProvenanceError(
            f"{output_dir} records no example rows (provenance): it was written before shardflow recorded "
            f"them, or from an input that was; run ExampleGen (and Transform) again to have them")
    if split not in entry:
        raise NoProvenanceError(f"{output_dir} records no example rows for split {split!r} "
                                f"(has {sorted(entry)})")
    return [(_location(output_dir, piece["file"]), int(piece["examples"])) for piece in entry[split]]


def read_example_rows(output_dir: str | os.PathLike, manifest: Manifest, split: str) -> ExampleRows:
    """The provenance of `split` of the output at `output_dir` (local, s3:// or gs://); its length is
    checked against the manifest's example count."""
    root = os.fspath(output_dir)
    if split not in manifest.splits:
        raise ShardflowError(f"{root} has no split {split!r} (has {sorted(manifest.splits)})")
    indexes: list[str] = []
    ids, rows, paths = [], [], []
    for location, examples in _pieces(root, manifest, split):
        try:
            with np.load(io.BytesIO(storage.read_bytes(location)), allow_pickle=False) as piece:
                names, index_id, row, packed = (piece[k] for k in ("indexes", "index_id", "row", "paths"))
        except FileNotFoundError:
            raise ShardflowError(f"split {split!r}: the example rows file {location} is missing") from None
        if len(row) != examples or len(index_id) != examples:
            raise ShardflowError(f"split {split!r}: {location} holds {len(row)} example rows, "
                                 f"the manifest says {examples}")
        remap = np.array([_position(indexes, str(name)) for name in names.tolist()], np.int64)
        ids.append(remap[index_id.astype(np.int64)] if len(remap) else index_id.astype(np.int64))
        rows.append(row.astype(np.int64))
        paths.append(packed.tobytes())
    return _checked(root, manifest.splits[split], ExampleRows(
        split, tuple(indexes), _joined(ids), _joined(rows), Paths(gzip.decompress(b"".join(paths)))))


def _position(names: list[str], name: str) -> int:
    """`name`'s position in `names`, appended when new (index names in order of first appearance)."""
    if name not in names:
        names.append(name)
    return names.index(name)


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)


def _checked(root: str, info: SplitInfo, rows: ExampleRows) -> ExampleRows:
    if len(rows) != info.num_examples or len(rows.paths) != len(rows):
        raise ShardflowError(f"split {rows.split!r} of {root}: the example rows list {len(rows)} examples "
                             f"({len(rows.paths)} paths), the manifest {info.num_examples}")
    return rows


def copy_example_rows(source_dir: str, source: Manifest, splits: Iterable[str], target: str
                      ) -> dict[str, list[dict[str, Any]]] | None:
    """Copies the source output's pieces of `splits` into the folder `target` (a staged
    `PROVENANCE_DIR`), for an output that keeps its input's examples in order (Transform). Returns the
    manifest entry of the copies, or None when the source records no provenance."""
    entry: dict[str, list[dict[str, Any]]] = {}
    for split in splits:
        try:
            pieces = _pieces(source_dir, source, split)
        except NoProvenanceError:
            return None
        entry[split] = []
        for number, (location, examples) in enumerate(pieces):
            name = f"{split}.npz" if len(pieces) == 1 else f"{split}-{number:04d}.npz"
            storage.copy_file(location, storage.join(target, name))
            entry[split].append({"file": f"{PROVENANCE_DIR}/{name}", "examples": examples})
    return entry

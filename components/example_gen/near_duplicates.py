"""Near-duplicate images: altered copies (re-encoded, resized, cropped, brightened) in more than one split.

Workers hash each image-role column's decoded pixels (`core.perceptual_hash`) and write, per chunk
and split, a table of dct hashes and one of tone hashes (near-uniform images only) in the leakage
check's format (`leakage.digest_table`). The launcher loads every table (8 bytes per hash and 8 per
row: 1M images ≈ 32 MB), finds every pair within the distance with `core.hamming_search` (no
all-pairs scan) and reports pairs of rows: across splits (count, first examples) and within each
split (counts). Exact copies are near duplicates too (distance 0): they appear here and under
`leakage`. Two image columns of one row are never paired with each other.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> def table(name, hashes, rows):
...     path = os.path.join(d, name)
...     _ = open(path, "wb").write(digest_table(hashes, rows))
...     return path
>>> files = [("train", 0, table("t.dct", [0b1111, 1 << 40], [1, 2]), table("t.tone", [], [])),
...          ("eval", 1, table("e.dct", [0b0111], [5]), table("e.tone", [], []))]
>>> found = find_near_duplicates(files, 2)
>>> found["count"], found["within_split"], found["examples"][0]["distance"]
(1, {'eval': 0, 'train': 0}, 1)
>>> found["examples"][0]["occurrences"]
[{'split': 'eval', 'index_id': 1, 'row': 5}, {'split': 'train', 'index_id': 0, 'row': 1}]
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..core.errors import ShardflowError
from ..core.hamming_search import near_pairs
from ..core.perceptual_hash import tone_radius
from .columns import ColumnSpec
from .config import ExampleGenConfig
from .csv_index import Chunk
from .leakage import digest_table, local_copies, locate_rows  # noqa: F401  (digest_table: the doctest)

if TYPE_CHECKING:  # encode_chunks imports Beam, which this module does not need
    from .encode_chunks import ChunkResult, IngestPlan

MAX_EXAMPLES = 5
MAX_PAIRS = 2_000_000  # per hash kind: the pair arrays stay under ~100 MB however many copies there are
KINDS = ("dct", "tone")


class NearDuplicatesError(ShardflowError, RuntimeError):
    """`--near-duplicates fail` and images in more than one split are near copies; no manifest was written."""


def hash_files(plan: IngestPlan, chunks: list[Chunk], results: list[ChunkResult]) -> list[tuple[str, int, str, str]]:
    """(split, index id, dct table, tone table) per chunk and split, in chunk order."""
    return [(split, c.index_id, plan.phash_file(split, c, "dct"), plan.phash_file(split, c, "tone"))
            for c, r in zip(chunks, results) for split in sorted(r.parts)]


def near_duplicates_report(config: ExampleGenConfig, plan: IngestPlan, chunks: list[Chunk],
                           results: list[ChunkResult], columns: list[ColumnSpec]) -> dict[str, Any]:
    """The manifest's `near_duplicates` entry; raises NearDuplicatesError in "fail" mode when pairs cross splits."""
    if config.near_duplicates == "off":
        return {"mode": "off"}
    found = find_near_duplicates(hash_files(plan, chunks, results), config.near_duplicate_distance)
    report = {"mode": config.near_duplicates, **locate_rows(found, chunks, columns, [i.path for i in config.indexes])}
    if config.near_duplicates == "fail" and report["count"]:
        raise NearDuplicatesError(
            f"{report['count']} near-duplicate image {_pairs(report['count'])} across splits (perceptual hashes within "
            f"{report['distance']} bits), e.g. {describe_pair(report['examples'][0])}; no manifest written "
            f"(--near-duplicates warn reports them without failing)")
    return report


def _pairs(count: int) -> str:
    return "pair" if count == 1 else "pairs"


def describe_pair(example: dict[str, Any]) -> str:
    """One pair on one line: both rows, their index files and paths, and the distance."""
    where = " ~ ".join(f"{o['split']} row {o['row']} of {o.get('index')} ({o.get('path')})" for o in example["occurrences"])
    return f"{where}, {example['hash']} distance {example['distance']}"


def find_near_duplicates(files: list[tuple[str, int, str, str]], distance: int) -> dict[str, Any]:
    """Counts and first examples of row pairs within `distance` (tone hashes: within `tone_radius`)."""
    splits = sorted({split for split, _, _, _ in files})
    radii = {"dct": distance, "tone": tone_radius(distance)}
    pairs, truncated, hashed = [], False, 0
    for number, kind in enumerate(KINDS):
        listed = [(split, index_id, paths[number]) for split, index_id, *paths in files]
        with local_copies(listed) as local:
            rows = _load(local, splits)
        hashed += len(rows["hash"]) if kind == "dct" else 0
        first, second, bits, stopped = near_pairs(rows["hash"], radii[kind], MAX_PAIRS)
        truncated |= stopped
        pairs.append(_row_pairs(rows, first, second, bits, number))
    merged = _merge(pairs)
    cross = merged[:, 0] != merged[:, 3]
    within = {split: int(np.sum(~cross & (merged[:, 0] == number))) for number, split in enumerate(splits)}
    return {"distance": distance, "tone_distance": radii["tone"], "images_hashed": hashed,
            "count": int(cross.sum()), "within_split": within, "truncated": truncated,
            "examples": [_example(pair, splits) for pair in merged[cross][:MAX_EXAMPLES]]}


def _load(files: list[tuple[str, int, str]], splits: list[str]) -> dict[str, np.ndarray]:
    """Every table of one kind: hash, split number, index id and row per hashed image."""
    parts: dict[str, list[np.ndarray]] = {"hash": [], "split": [], "index": [], "row": []}
    for split, index_id, path in files:
        table = np.load(path, allow_pickle=False)
        parts["hash"].append(table[0])
        parts["row"].append(table[1])
        parts["split"].append(np.full(table.shape[1], splits.index(split), dtype=np.int64))
        parts["index"].append(np.full(table.shape[1], index_id, dtype=np.int64))
    return {name: np.concatenate(values) if values else np.empty(0, dtype=np.int64) for name, values in parts.items()}


def _row_pairs(rows: dict[str, np.ndarray], first: np.ndarray, second: np.ndarray, bits: np.ndarray,
               kind: int) -> np.ndarray:
    """(split, index, row) of both ends, ordered so the smaller end comes first, then distance and kind."""
    ends = [np.stack([rows["split"][side], rows["index"][side], rows["row"][side]], axis=1) for side in (first, second)]
    swap = _later_first(ends[0], ends[1])
    low = np.where(swap[:, None], ends[1], ends[0])
    high = np.where(swap[:, None], ends[0], ends[1])
    same_row = np.all(low == high, axis=1)  # two image columns of one row
    table = np.concatenate([low, high, bits[:, None], np.full((len(bits), 1), kind)], axis=1)
    return table[~same_row]


def _later_first(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """True where row identity `a` sorts after `b` (split, then index, then row)."""
    later = np.zeros(len(a), dtype=bool)
    decided = np.zeros(len(a), dtype=bool)
    for column in range(a.shape[1]):
        later |= ~decided & (a[:, column] > b[:, column])
        decided |= a[:, column] != b[:, column]
    return later


def _merge(pairs: Sequence[np.ndarray]) -> np.ndarray:
    """One entry per pair of rows (the smallest distance, dct before tone), sorted by distance then rows."""
    table = np.concatenate(pairs) if pairs else np.empty((0, 8), dtype=np.int64)
    table = table[np.lexsort((table[:, 7], table[:, 6], *table[:, :6].T[::-1]))]  # rows, then distance, kind
    _, first = np.unique(table[:, :6], axis=0, return_index=True)
    table = table[np.sort(first)]
    return table[np.lexsort((*table[:, :6].T[::-1], table[:, 7], table[:, 6]))]


def _example(pair: np.ndarray, splits: list[str]) -> dict[str, Any]:
    occurrences = [{"split": splits[int(pair[offset])], "index_id": int(pair[offset + 1]), "row": int(pair[offset + 2])}
                   for offset in (0, 3)]
    return {"distance": int(pair[6]), "hash": KINDS[int(pair[7])], "occurrences": occurrences}

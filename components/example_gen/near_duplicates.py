"""Near-duplicate images: altered copies (re-encoded, resized, cropped, brightened) in more than one split.

Workers hash each image-role column's decoded pixels (`core.perceptual_hash`) and write, per chunk
and split, a table of each hash kind (dct, centre, tone) in the leakage check's format
(`leakage.digest_table`). The launcher loads every table (16 bytes per image and kind: 1M images ≈
48 MB), groups rows with the same hashes and finds the near pairs of distinct hashes (`near_groups`:
dct and centre hashes within the distance, near-uniform images' tones within it), keeps the pairs
found through a centre hash only where the rows' tones corroborate them (`near_corroboration`; the
rule of `perceptual_hash.near_kind`; across splits only), counts row pairs within each split (the dct and
tone pairs) and across splits exactly, and lists every pair across splits, by row, in `near_duplicates.jsonl`
beside the manifest
(`write_pairs`). Exact copies are near duplicates too (distance 0): they appear here and under
`leakage`. Two image columns of one row are never paired with each other.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> def table(name, hashes, rows):
...     path = os.path.join(d, name)
...     _ = open(path, "wb").write(digest_table(hashes, rows))
...     return path
>>> grey, red = (int(tone_values(np.full((1, 2, 2, 3), v))[0]) | STRUCTURED for v in (100.0, (200.0, 0, 0)))
>>> far, near_far = 0b1111 << 40, 0b11 << 40 | 0b11 << 50  # 4 bits apart, a centre hash 1 bit from near_far
>>> def tables(name, dct, centre, tone, rows):
...     return [table(f"{name}.{k}", v, rows) for k, v in (("dct", dct), ("tone", tone), ("centre", centre))]
>>> centres = [0b1111, 0b11111, 0b11 << 40 | 1 << 50]
>>> files = [("train", 0, *tables("t", [0b1111, 0b1111111, far], centres, [grey] * 3, [1, 2, 3])),
...          ("eval", 1, *tables("e", [0b0111, near_far], [0b0111, near_far], [grey, red], [5, 6]))]
>>> found = find_near_duplicates(files, 2)  # centre pairs count where the tones agree (row 6 is red)
>>> found.summary()["count"], found.summary()["within_split"]  # train rows 1, 2: a centre pair, not counted within
(2, {'eval': 0, 'train': 0})
>>> first, second, bits, kind = next(found.groups.cross_pairs())
>>> [(found.describe_row(a), found.describe_row(b), int(d), HASHES[k]) for a, b, d, k in zip(first, second, bits, kind)]
[(('eval', 1, 5), ('train', 0, 1), 1, 'dct'), (('eval', 1, 5), ('train', 0, 2), 2, 'centre')]
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..core import storage
from ..core.errors import ShardflowError
from ..core.perceptual_hash import LOW_DETAIL_BITS
from ..core.tone_hash import STRUCTURED, is_low_detail, is_structured, tone_values  # noqa: F401  (the doctest's)
from .columns import ColumnSpec
from .config import ExampleGenConfig
from .csv_index import Chunk
from .leakage import digest_table, local_copies, row_paths  # noqa: F401  (digest_table: the doctest)
from .near_corroboration import HASHES, corroborated
from .near_groups import KINDS, RowGroups, distinct_rows, group_rows

if TYPE_CHECKING:  # encode_chunks imports Beam, which this module does not need
    from .encode_chunks import ChunkResult, IngestPlan

MAX_EXAMPLES = 5
PAIRS_FILE = "near_duplicates.jsonl"  # beside manifest.json; written whole, before the manifest


class NearDuplicatesError(ShardflowError, RuntimeError):
    """`--near-duplicates fail` and images in more than one split are near copies; no manifest was written."""


@dataclass(frozen=True)
class NearDuplicates:
    """What the search found: the hashed rows (split, index id, row), their groups, the radii."""

    splits: list[str]
    rows: np.ndarray  # (rows, 3): split number, index id, 1-based row; sorted
    groups: RowGroups
    images_hashed: int
    distance: int
    tone_distance: int

    def summary(self) -> dict[str, Any]:
        """The manifest's counts: pairs across splits, pairs within each split, and low-detail pairs set aside."""
        within = dict(zip(self.splits, self.groups.within_split()))
        low = {"bits": min(self.distance, LOW_DETAIL_BITS),
               "set_aside_across_splits": self.groups.cross_count_of(self.groups.low_detail_aside)}
        return {"distance": self.distance, "tone_distance": self.tone_distance, "images_hashed": self.images_hashed,
                "count": self.groups.cross_count(), "within_split": within, "low_detail": low,
                "truncated": self.groups.truncated}

    def describe_row(self, row: int) -> tuple[str, int, int]:
        split, index_id, number = (int(v) for v in self.rows[row])
        return self.splits[split], index_id, number


def hash_files(plan: IngestPlan, chunks: list[Chunk], results: list[ChunkResult]) -> list[tuple[Any, ...]]:
    """(split, index id, a table per kind in KINDS' order: dct, tone, centre) per chunk and split, in chunk order."""
    return [(split, c.index_id, *(plan.phash_file(split, c, kind) for kind in KINDS))
            for c, r in zip(chunks, results) for split in sorted(r.parts)]


def near_duplicates_report(config: ExampleGenConfig, plan: IngestPlan, chunks: list[Chunk], results: list[ChunkResult],
                           columns: list[ColumnSpec], root: str) -> dict[str, Any]:
    """The manifest's `near_duplicates` entry, every cross-split pair written to `<root>/near_duplicates.jsonl`
    first; raises NearDuplicatesError in "fail" mode when pairs cross splits (the file is written then too)."""
    if config.near_duplicates == "off":
        return {"mode": "off"}
    found = find_near_duplicates(hash_files(plan, chunks, results), config.near_duplicate_distance)
    target = storage.join(root, PAIRS_FILE)
    examples = write_pairs(found, target, chunks, columns, [i.path for i in config.indexes])
    report = {"mode": config.near_duplicates, **found.summary(), "file": PAIRS_FILE, "examples": examples}
    if config.near_duplicates == "fail" and report["count"]:
        raise NearDuplicatesError(
            f"{report['count']} near-duplicate image {_pairs(report['count'])} across splits (perceptual hashes within "
            f"{report['distance']} bits), e.g. {describe_pair(examples[0])}; every pair is listed in {target}; "
            f"no manifest written (--near-duplicates warn reports them without failing)")
    return report


def _pairs(count: int) -> str:
    return "pair" if count == 1 else "pairs"


def describe_pair(example: dict[str, Any]) -> str:
    """One pair on one line: both rows, their index files and paths, and the distance."""
    where = " ~ ".join(f"{o['split']} row {o['row']} of {o.get('index')} ({o.get('path')})" for o in example["occurrences"])
    return f"{where}, {example['hash']} distance {example['distance']}"


def find_near_duplicates(files: list[tuple[Any, ...]], distance: int) -> NearDuplicates:
    """Rows grouped by their hashes, with the pairs near by `perceptual_hash.near_kind`'s rule: dct hashes within
    `distance` Hamming bits, near-uniform images' tones within `distance` (the tone distance), or a centre hash
    within `distance` bits of the other image's dct or centre hash and the rows' tones within `distance`.
    `files`: (split, index id, a table per kind in KINDS' order) per chunk and split."""
    splits = sorted({split for split, *_ in files})
    images = {}
    for number, kind in enumerate(KINDS):
        listed = [(split, index_id, paths[number]) for split, index_id, *paths in files]
        with local_copies(listed) as local:
            images[kind] = _load(local, splits)
    keys = np.concatenate([table[:, 1:] for table in images.values()])  # (split, index, row) of each image
    rows, owner = distinct_rows(keys)
    ends = np.cumsum([len(table) for table in images.values()])
    owners = dict(zip(KINDS, np.split(owner, ends[:-1])))
    tones = images["tone"][:, 0]
    uniform = ~is_structured(tones)  # only near-uniform images pair by their tones alone
    hashed = {kind: (images[kind][:, 0], owners[kind]) for kind in ("dct", "centre")}
    hashed["tone"] = (tones[uniform], owners["tone"][uniform])
    low_detail = np.zeros(len(rows), dtype=bool)
    low_detail[owners["tone"][is_low_detail(tones)]] = True
    groups = group_rows(hashed, rows[:, 0], len(splits), distance, distance, low_detail)
    return NearDuplicates(splits, rows, corroborated(groups, distance, tones, owners["tone"]), len(images["dct"]),
                          distance, distance)


def _load(files: list[tuple[str, int, str]], splits: list[str]) -> np.ndarray:
    """Every table of one kind as (images, 4): hash, split number, index id, row."""
    parts = [np.empty((0, 4), dtype=np.int64)]
    for split, index_id, path in files:
        table = np.load(path, allow_pickle=False)
        parts.append(np.stack([table[0], np.full(table.shape[1], splits.index(split)),
                               np.full(table.shape[1], index_id), table[1]], axis=1).astype(np.int64))
    return np.concatenate(parts)


def write_pairs(found: NearDuplicates, target: str, chunks: list[Chunk], columns: list[ColumnSpec],
                indexes: Sequence[str]) -> list[dict[str, Any]]:
    """Writes every cross-split pair, one JSON object a line, to `target` (whole or absent); returns the first few.

    A line: {"distance": 4, "hash": "dct", "occurrences": [row, row]}, each row {"split", "row", "index",
    "path"}, the smaller (split, index, row) first; closest pairs first."""
    sides = _sides(found, chunks, columns, indexes)
    examples: list[dict[str, Any]] = []
    with storage.open_write(target) as out:
        for first, second, distance, kind in found.groups.cross_pairs():
            lines = [f'{{"distance": {d}, "hash": "{HASHES[k]}", "occurrences": [{sides[a]}, {sides[b]}]}}\n'
                     for a, b, d, k in zip(first.tolist(), second.tolist(), distance.tolist(), kind.tolist())]
            examples += [json.loads(line) for line in lines[:MAX_EXAMPLES - len(examples)]]
            out.write("".join(lines).encode("utf-8"))
    return examples


def _sides(found: NearDuplicates, chunks: list[Chunk], columns: list[ColumnSpec], indexes: Sequence[str]) -> list[str]:
    """Each listed row as its JSON object ("" for rows in no cross-split pair), paths read from the indexes."""
    listed = np.nonzero(found.groups.in_cross_pairs())[0]
    paths = row_paths(chunks, columns, {(int(found.rows[r, 1]), int(found.rows[r, 2])) for r in listed})
    sides = [""] * len(found.rows)
    for row in listed.tolist():
        split, index_id, number = found.describe_row(row)
        sides[row] = json.dumps({"split": split, "row": number, "index": indexes[index_id],
                                 "path": paths.get((index_id, number))})
    return sides

"""Cutting a split's ordered records into shards: how many, and which record ranges each holds.

Pure functions over small metadata (part files and their record counts), never the records.

>>> count_shards(num_records=1000, payload_bytes=300 << 20, shard_size_mb=128, num_shards=None, min_shards=1)
3
>>> plan = plan_split("train", [Part("a", 3, 30), Part("b", 3, 30)], num_shards=2)
>>> [(s.pieces, s.num_records) for s in plan]
[(((\'a\', 0, 3),), 3), (((\'b\', 0, 3),), 3)]
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    """A file of consecutive framed records written by one chunk for one split."""

    path: str
    num_records: int
    payload_bytes: int


@dataclass(frozen=True)
class ShardPlan:
    split: str
    index: int
    num_shards: int
    pieces: tuple[tuple[str, int, int], ...]  # (part path, first record, end record)
    num_records: int

    def file_name(self, compression: str) -> str:
        suffix = ".tfrecord.gz" if compression == "GZIP" else ".tfrecord"
        return f"data-{self.index:05d}-of-{self.num_shards:05d}{suffix}"


def count_shards(num_records: int, payload_bytes: int, shard_size_mb: float, num_shards: int | None,
                 min_shards: int) -> int:
    """Shards for a split: the fixed count or by payload size, at least `min_shards`, at most one per record."""
    if num_records == 0:
        return 0
    by_size = math.ceil(payload_bytes / (shard_size_mb * (1 << 20)))
    wanted = max(min_shards, num_shards or by_size)  # --min-shards bounds a fixed count too
    return max(1, min(wanted, num_records))


def plan_split(split: str, parts: list[Part], num_shards: int) -> list[ShardPlan]:
    """Shard i holds records [i*n/N, (i+1)*n/N) of the split's records in part order."""
    total = sum(p.num_records for p in parts)
    bounds = [total * i // num_shards for i in range(num_shards + 1)] if num_shards else [0]
    plans = []
    for index in range(num_shards):
        lo, hi = bounds[index], bounds[index + 1]
        pieces = []
        offset = 0
        for part in parts:
            start, end = max(lo, offset), min(hi, offset + part.num_records)
            if start < end:
                pieces.append((part.path, start - offset, end - offset))
            offset += part.num_records
        plans.append(ShardPlan(split, index, num_shards, tuple(pieces), hi - lo))
    return plans

"""Assigning rows to splits by hashing, so that the assignment depends on the row alone.

The same row always lands in the same split, whatever else the index holds: adding rows never
moves existing ones. Rows sharing a `--split-key` value (e.g. one patient) share a split.

>>> assigner = SplitAssigner((("train", 9), ("eval", 1)), key_positions=(0,))
>>> assigner.assign(["image/0.png", "5"]) == assigner.assign(["image/0.png", "7"])
True
"""
from __future__ import annotations

import hashlib


class SplitAssigner:
    def __init__(self, weights: tuple[tuple[str, int], ...], key_positions: tuple[int, ...]) -> None:
        self.names = [name for name, _ in weights]
        self.bounds: list[int] = []
        total = 0
        for _, weight in weights:
            total += weight
            self.bounds.append(total)
        self.total = total
        self.key_positions = key_positions

    def bucket(self, key: str) -> int:
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self.total

    def assign(self, cells: list[str]) -> str:
        key = "\x1f".join(cells[p] for p in self.key_positions)
        bucket = self.bucket(key)
        for name, bound in zip(self.names, self.bounds):
            if bucket < bound:
                return name
        raise AssertionError("unreachable: bucket below total weight")

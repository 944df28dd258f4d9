"""Folds of a split for out-of-fold predictions: each example, by its position in the split, in one of K folds.

A position is an example's place in the split's shard order (shard after shard as the manifest lists
them, record after record; Transform keeps that order). The assignment is a pure function of
(examples, K, seed): the positions, ranked by a 64-bit hash of (position, seed), are dealt to folds
0, 1, ..., K-1, 0, 1, ... in that order. So the folds are balanced (sizes differ by at most one),
disjoint, cover the split, and are not stripes of CSV order; the hash (splitmix64) is fixed, so the
assignment does not depend on a random generator's version. The Trainer's reader (every fold but k)
and predict (fold k alone) select examples with this same function (`FoldSelection.mask`).

>>> fold_assignment(10, 3, seed=0).tolist()
[0, 1, 2, 0, 0, 1, 2, 2, 0, 1]
>>> np.bincount(fold_assignment(10, 3, seed=0)).tolist()
[4, 3, 3]
>>> training = FoldSelection.training(3, held_out=1)
>>> training.folds, training.size(10), FoldSelection.held_out(3, 1).mask(10).nonzero()[0].tolist()
((0, 2), 7, [1, 5, 9])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ConfigError

_MASK64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(positions: np.ndarray, seed: int) -> np.ndarray:
    """A bijection of uint64 per seed (Steele et al.'s splitmix64 finalizer): distinct positions, distinct hashes."""
    with np.errstate(over="ignore"):
        z = positions.astype(np.uint64) + np.uint64(seed & _MASK64) * _GOLDEN + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def fold_assignment(num_examples: int, folds: int, seed: int = 0) -> np.ndarray:
    """int8 [num_examples]: the fold of each position (module docstring)."""
    _check_folds(folds)
    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 0:
        raise ConfigError(f"num_examples must be an integer >= 0, got {num_examples!r}")
    order = np.argsort(_splitmix64(np.arange(num_examples), seed), kind="stable")
    assignment = np.empty(num_examples, dtype=np.int8)
    assignment[order] = np.arange(num_examples) % folds
    return assignment


@dataclass(frozen=True, kw_only=True)
class FoldSelection:
    """The examples of a split in `folds` (fold ids) of a `count`-fold assignment seeded by `seed`."""

    count: int
    folds: tuple[int, ...]
    seed: int = 0

    def __post_init__(self) -> None:
        _check_folds(self.count)
        if not isinstance(self.folds, tuple) or not self.folds or list(self.folds) != sorted(set(self.folds)):
            raise ConfigError(f"folds must be a non-empty sorted tuple of distinct fold ids, got {self.folds!r}")
        if any(isinstance(f, bool) or not isinstance(f, int) or not 0 <= f < self.count for f in self.folds):
            raise ConfigError(f"folds {self.folds!r}: fold ids are 0..{self.count - 1}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"seed must be an integer, got {self.seed!r}")

    @classmethod
    def training(cls, count: int, held_out: int, seed: int = 0) -> "FoldSelection":
        """Every fold but `held_out`: what the model that must not see `held_out` trains on."""
        _check_folds(count)
        if isinstance(held_out, bool) or not isinstance(held_out, int) or not 0 <= held_out < count:
            raise ConfigError(f"held_out must be a fold id in 0..{count - 1}, got {held_out!r}")
        return cls(count=count, folds=tuple(f for f in range(count) if f != held_out), seed=seed)

    @classmethod
    def held_out(cls, count: int, fold: int, seed: int = 0) -> "FoldSelection":
        """Fold `fold` alone: what its model predicts."""
        return cls(count=count, folds=(fold,), seed=seed)

    def mask(self, num_examples: int) -> np.ndarray:
        """bool [num_examples]: True at the positions this selection keeps."""
        self.check_size(num_examples)
        return np.isin(fold_assignment(num_examples, self.count, self.seed), self.folds)

    def size(self, num_examples: int) -> int:
        """Examples kept out of `num_examples` (balanced folds: known without hashing)."""
        self.check_size(num_examples)
        base, extra = divmod(num_examples, self.count)
        return sum(base + (fold < extra) for fold in self.folds)

    def check_size(self, num_examples: int) -> None:
        """ConfigError when the split has fewer examples than folds (a fold would be empty)."""
        if num_examples < self.count:
            raise ConfigError(f"{self.count} folds need at least {self.count} examples, the split has {num_examples}")

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "folds": list(self.folds), "seed": self.seed}


def _check_folds(folds: int) -> None:
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ConfigError(f"folds must be an integer >= 2, got {folds!r}")

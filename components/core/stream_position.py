"""Where a repeated stream is, and where its reading starts again: pure arithmetic, no TensorFlow.

A repeated (training) stream is one canonical sequence of records: pass 0, pass 1, ... each pass
every kept record of the split once, its shards in an order seeded by (seed, pass) and its records
permuted in windows of W consecutive records (window k of pass p seeded by the global window number).
A position is the number of records of that sequence already consumed, so it does not depend on
how many workers consumed them: a global batch of B is positions [s·B, (s+1)·B) for step s.

Resuming at a position reads no shard before the one holding the start of the position's window,
skips (reads without decoding) the records of that shard before the window, then reads, permutes and
drops the window's records up to the position: at most one shard and one window are read again.

>>> start = resume_point(position=1_000, shard_sizes=[300, 300, 300], window=250)
>>> start.pass_index, start.window_index, start.shard_rank, start.skip_in_shard, start.drop_in_window
(1, 0, 0, 0, 100)
>>> later = resume_point(position=1_600, shard_sizes=[300, 300, 300], window=250)
>>> later.window_index, later.shard_rank, later.skip_in_shard, later.drop_in_window, later.read_before_first
(2, 1, 200, 200, 400)
>>> WorkerSlice.for_worker(global_batch=32, num_workers=2, worker_index=1)
WorkerSlice(global_batch=32, first=16, count=16)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import ConfigError

WINDOW_SEED_STRIDE = 1 << 32  # window seeds: pass · stride + window, distinct for any pass of < 2^32 windows


@dataclass(frozen=True)
class ResumePoint:
    """Where reading starts for a position (see the module's docstring); counts are records."""

    position: int
    pass_index: int
    offset_in_pass: int
    window_index: int  # the window of the pass that holds the position
    shard_rank: int  # the shard, by its rank in the pass's read order, that holds the window's first record
    skip_in_shard: int  # that shard's records before the window: read past, never decoded
    drop_in_window: int  # the window's records before the position: read, permuted, dropped

    @property
    def read_before_first(self) -> int:
        """Records read before the first record at the position."""
        return self.skip_in_shard + self.drop_in_window


def resume_point(position: int, shard_sizes: Sequence[int], window: int) -> ResumePoint:
    """Where a stream over shards of `shard_sizes` kept records (in the pass's read order) resumes.

    `window` 0: no permutation, the position's own record is the first read after the skip.
    """
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise ConfigError(f"a stream position must be an integer >= 0, got {position!r}")
    size = sum(shard_sizes)
    if size <= 0:
        raise ConfigError("a repeated stream needs at least one record")
    pass_index, offset = divmod(position, size)
    window_index = offset // window if window else 0
    first = window_index * window if window else offset  # the first record that must be read
    rank, before = 0, 0
    while before + shard_sizes[rank] <= first:
        before += shard_sizes[rank]
        rank += 1
    return ResumePoint(position, pass_index, offset, window_index, rank, first - before, offset - first)


def shard_offsets(shard_sizes: Sequence[int]) -> np.ndarray:
    """int64 [shards]: each shard's first position in its split (the shards in manifest order).

    >>> shard_offsets([3, 5, 2]).tolist()
    [0, 3, 8]
    """
    return np.concatenate([[0], np.cumsum(shard_sizes, dtype=np.int64)[:-1]]).astype(np.int64)


def global_positions(start: int, cut: WorkerSlice | None, local: Any) -> Any:
    """Positions in the endless order of a stream's records number `local` (ints, arrays or tensors), for a
    stream that starts at `start` and keeps the slice `cut` of each global batch (None: every record).

    >>> global_positions(64, WorkerSlice(global_batch=32, first=16, count=16), 17)
    113
    """
    if cut is None:
        return start + local
    steps = start // cut.global_batch + local // cut.count
    return steps * cut.global_batch + cut.first + local % cut.count


def window_sizes(pass_size: int, window: int) -> list[int]:
    """The records in each window of a pass: full windows and a last partial one.

    >>> window_sizes(10, 4), window_sizes(8, 4), window_sizes(3, 4)
    ([4, 4, 2], [4, 4], [3])
    """
    full, rest = divmod(pass_size, min(window, pass_size))
    return [min(window, pass_size)] * full + ([rest] if rest else [])


@dataclass(frozen=True, kw_only=True)
class WorkerSlice:
    """This stream's part of every global batch: positions [first, first + count) of each `global_batch`.

    The global batches are the same whatever the number of workers; a worker reads every record
    (bytes only) and parses and decodes its own slice.
    """

    global_batch: int
    first: int
    count: int

    def __post_init__(self) -> None:
        for name in ("global_batch", "count"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"worker slice: {name} must be an integer >= 1, got {value!r}")
        if isinstance(self.first, bool) or not isinstance(self.first, int) or self.first < 0 \
                or self.first + self.count > self.global_batch:
            raise ConfigError(f"worker slice [{self.first}, {self.first + self.count}) does not lie in a global "
                              f"batch of {self.global_batch}")

    @classmethod
    def for_worker(cls, global_batch: int, num_workers: int, worker_index: int) -> WorkerSlice:
        """Worker `worker_index`'s equal share; ConfigError when the global batch does not divide."""
        if global_batch % num_workers:
            raise ConfigError(f"a global batch of {global_batch} cannot be split evenly between {num_workers} "
                              f"workers")
        count = global_batch // num_workers
        return cls(global_batch=global_batch, first=worker_index * count, count=count)

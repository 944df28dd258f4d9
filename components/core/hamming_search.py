"""Every pair of 64-bit hashes within a Hamming radius, without comparing all pairs (multi-index hashing).

The 64 bits are cut into `m` substrings. If two hashes differ in at most `r` bits, one of the
substrings differs in at most `k = r // m` bits (pigeonhole: otherwise they would differ in at
least m·(k+1) > r). So per substring the hashes are bucketed by that substring's value (a sort and
a table of 2^b bucket starts), and for every bit-flip mask of at most `k` bits each hash is paired
with the bucket of its value XOR the mask. Each candidate is checked on all 64 bits and kept only
by the first substring that finds it, so no pair is reported twice and nothing is deduplicated.

Cost: m·V(b, k) vectorized passes over the n hashes (V: masks of ≤ k bits in b bits) plus
m·V(b, k)·n²/2^(b+1) candidates; `_layout` picks m to minimize it. Memory: the hashes, one sort
order, a 2^b table (b ≤ 22: ≤ 32 MB) and at most `BATCH` candidates at a time, whatever n is.

>>> hashes = np.array([0b1011, 0b1001, 0b0100, -1], dtype=np.int64)
>>> [tuple(int(v) for v in t) for t in zip(*near_pairs(hashes, 1)[:3])]
[(0, 1, 1)]
"""
from __future__ import annotations

import itertools
import math
from typing import Iterator

import numpy as np

BATCH = 1 << 22  # candidate pairs generated and checked at a time (~100 MB of working arrays)
MAX_KEY_BITS = 22
_M1, _M2, _M4, _H01 = (np.uint64(v) for v in (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F,
                                               0x0101010101010101))


def popcount(values: np.ndarray) -> np.ndarray:
    """Set bits of each uint64 (numpy 1.26 has no bitwise_count): the classic SWAR sum."""
    x = values.astype(np.uint64, copy=True)
    scratch = x >> np.uint64(1)  # in place from here on: this runs on every candidate pair
    scratch &= _M1
    x -= scratch
    np.right_shift(x, np.uint64(2), out=scratch)
    scratch &= _M2
    x &= _M2
    x += scratch
    np.right_shift(x, np.uint64(4), out=scratch)
    x += scratch
    x &= _M4
    x *= _H01
    x >>= np.uint64(56)
    return x.view(np.int64)


def _volume(bits: int, radius: int) -> int:
    return sum(math.comb(bits, i) for i in range(radius + 1))


def _layout(n: int, radius: int) -> list[tuple[int, int]]:
    """(shift, width) of each substring, for the m with the lowest estimated cost."""
    best: tuple[float, int] | None = None
    fewest = math.ceil(64 / MAX_KEY_BITS)  # keeps the bucket table at 2^22 entries or fewer
    for m in range(fewest, max(fewest, min(64, radius + 1)) + 1):
        width, k = 64 // m, radius // m
        masks = m * _volume(width + 1, k)
        buckets = 2.0 ** width * -math.expm1(-n / 2.0 ** width)  # expected distinct keys
        cost = masks * buckets + 3.0 * masks * n * n / 2.0 ** (width + 1)
        if best is None or cost < best[0]:
            best = (cost, m)
    m = best[1] if best else fewest
    widths = [64 // m + (1 if i < 64 % m else 0) for i in range(m)]
    shifts = [sum(widths[i + 1:]) for i in range(m)]
    return list(zip(shifts, widths))


def _masks(width: int, k: int) -> list[int]:
    return [sum(1 << b for b in bits) for size in range(k + 1) for bits in itertools.combinations(range(width), size)]


def _substring(values: np.ndarray, shift: int, width: int) -> np.ndarray:
    return ((values >> np.uint64(shift)) & np.uint64((1 << width) - 1)).astype(np.int64)


def near_pairs(hashes: np.ndarray, radius: int, max_pairs: int = 10_000_000
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(i, j, distance, truncated): every pair i < j with Hamming distance ≤ radius, at most
    `max_pairs` of them (truncated says the search stopped there)."""
    values = np.ascontiguousarray(hashes, dtype=np.int64).view(np.uint64)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    total = 0
    if len(values) > 1:
        layout = _layout(len(values), radius)
        k = radius // len(layout)
        for number, (shift, width) in enumerate(layout):
            order, batches = _substring_pairs(_substring(values, shift, width), width, k)
            ordered = values[order]  # candidates are positions in this order: nearby reads, no index mapping
            for first, second in batches:
                diff = ordered[first]
                diff ^= ordered[second]
                near = np.nonzero(popcount(diff) <= radius)[0]  # few: the rest of the work is on these only
                first, second, diff = order[first[near]], order[second[near]], diff[near]
                keep = np.ones(len(near), dtype=bool)
                for earlier_shift, earlier_width in layout[:number]:  # found there already
                    keep &= popcount(_substring(diff, earlier_shift, earlier_width).view(np.uint64)) > k
                found.append((np.minimum(first, second)[keep], np.maximum(first, second)[keep], popcount(diff[keep])))
                total += int(keep.sum())
                if total >= max_pairs:
                    return joined_pairs(found, max_pairs) + (True,)
    return joined_pairs(found, max_pairs) + (False,)


def joined_pairs(found: list[tuple[np.ndarray, np.ndarray, np.ndarray]], limit: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batches of (first, second, distance) pairs joined, cut at `limit`, sorted by (first, second)."""
    if not found:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    first, second, distance = (np.concatenate(parts)[:limit] for parts in zip(*found))
    order = np.lexsort((second, first))
    return first[order], second[order], distance[order]


def _substring_pairs(keys: np.ndarray, width: int, k: int) -> tuple[np.ndarray, Iterator[tuple[np.ndarray, np.ndarray]]]:
    """The sort order of `keys`, and batches of position pairs (in that order) whose keys differ in
    ≤ k bits, each unordered pair once.

    Buckets (distinct keys) are paired, not single hashes: with n near 2^width most buckets hold
    one or two hashes, so a pass over the buckets is 2-3x shorter than one over the hashes.
    """
    order = np.argsort(keys, kind="stable")
    buckets, starts, counts = np.unique(keys[order], return_index=True, return_counts=True)
    return order, _bucket_pairs(buckets, starts, counts, width, k)


def _bucket_pairs(buckets: np.ndarray, starts: np.ndarray, counts: np.ndarray, width: int,
                  k: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    slot = np.full(1 << width, -1, dtype=np.int64)  # key → its bucket number
    slot[buckets] = np.arange(len(buckets))
    for mask in _masks(width, k):
        if mask == 0:  # within one bucket: each position with the positions after it
            crowded = counts > 1
            left, right, sizes = starts[crowded], starts[crowded], counts[crowded]
            pairs = within_buckets(left, sizes)
        else:  # two buckets, taken from the side with the smaller key only
            partner = buckets ^ mask
            mine = np.nonzero(buckets < partner)[0]
            other = slot[partner[mine]]
            mine, other = mine[other >= 0], other[other >= 0]
            pairs = across_buckets(starts[mine], counts[mine], starts[other], counts[other])
        yield from pairs


def across_buckets(left: np.ndarray, left_sizes: np.ndarray, right: np.ndarray, right_sizes: np.ndarray
                   ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every position of each left bucket with every position of its right bucket, in batches."""
    totals = left_sizes * right_sizes
    for lo, hi in _batches(totals):
        each = np.repeat(np.arange(lo, hi), totals[lo:hi])
        ends = np.cumsum(totals[lo:hi])
        step = np.arange(ends[-1]) - np.repeat(ends - totals[lo:hi], totals[lo:hi])
        yield left[each] + step // right_sizes[each], right[each] + step % right_sizes[each]


def within_buckets(starts: np.ndarray, sizes: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every pair of positions i < j inside each bucket, in batches."""
    if len(sizes) == 0:
        return
    positions = np.repeat(starts, sizes) + np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    after = np.repeat(starts + sizes, sizes) - positions - 1  # positions after each one in its bucket
    has = after > 0
    positions, after = positions[has], after[has]
    for lo, hi in _batches(after):
        ends = np.cumsum(after[lo:hi])
        offset = np.arange(ends[-1]) - np.repeat(ends - after[lo:hi], after[lo:hi])
        first = np.repeat(positions[lo:hi], after[lo:hi])
        yield first, first + 1 + offset


def _batches(sizes: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive slices of `sizes` whose sums stay near BATCH (one slice per oversized item)."""
    if len(sizes) == 0:
        return []
    cumulative = np.cumsum(sizes)
    if cumulative[-1] <= BATCH:
        return [(0, len(sizes))]
    bounds = np.searchsorted(cumulative, np.arange(BATCH, cumulative[-1], BATCH), side="left")
    edges = sorted(set([0, *(int(b) + 1 for b in bounds), len(sizes)]))
    return [(lo, hi) for lo, hi in zip(edges, edges[1:]) if hi > lo]

"""Near-duplicate pairs of rows, counted over groups of rows with the same hashes, listed across splits.

A row's *signature* is the set of its images' hashes (dct, centre, and tone for near-uniform images).
Rows with one signature are copies of each other (distance 0) and near the same other rows, so they
are counted together: n rows of a signature in one split make n·(n−1)/2 pairs there, and n_a·n_b
pairs between two splits, none of them enumerated. Pairs of distinct signatures come from searches
over the distinct hash values (few, however many exact copies): one Hamming search over the dct and
centre hashes together, `core.tone_hash.tone_pairs` for tone hashes. A pair is of kind "dct" when two
dct hashes are within the radius, "centre" when only pairs with a centre hash are (it still needs its
tones to agree: `near_corroboration`), "tone" for tones; each signature pair is kept once, dct or tone
before centre, then with the smallest distance, dct before tone. Only pairs across splits are listed
row by row (`cross_pairs`), in batches, closest first.

>>> rows, none = np.array([0, 1, 2, 3, 4]), (np.empty(0, int), np.empty(0, int))
>>> hashes = {"dct": (np.array([7, 7, 7, 6, 1 << 40]), rows), "tone": none}
>>> hashes["centre"] = hashes["dct"]  # each image's central frame hashed as the whole
>>> groups = group_rows(hashes, split=np.array([0, 0, 1, 1, 1]), splits=2, radius=1)
>>> groups.within_split(), groups.cross_count()    # {0,1,2} are copies, 3 is 1 bit from them
([1, 1], 4)
>>> [[int(v) for v in batch] for batch in next(groups.cross_pairs())]
[[0, 1, 0, 1], [2, 2, 3, 3], [0, 0, 1, 1], [0, 0, 0, 0]]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from ..core.hamming_search import near_pairs
from ..core.perceptual_hash import LOW_DETAIL_BITS
from ..core.tone_hash import tone_pairs

KINDS = ("dct", "tone", "centre")  # the hashes of an image; a signature pair's kind, by number
DCT, TONE, CENTRE = range(len(KINDS))
MAX_HASH_PAIRS = 2_000_000  # pairs of distinct hash values per search: ~50 MB of pair arrays at most
MAX_SIGNATURE_PAIRS = 4_000_000  # pairs of distinct signatures (only rows with several images make more)
BATCH = 1 << 20  # row pairs listed at a time
Images = dict[str, tuple[np.ndarray, np.ndarray]]  # kind → (hash per image, row number of its row)


@dataclass(frozen=True)
class RowGroups:
    """Rows grouped by signature, and the near pairs of signatures."""

    split: np.ndarray  # per row: its split number
    signature: np.ndarray  # per row: its signature, numbered in the order of their first rows
    counts: np.ndarray  # (signatures, splits): rows of each signature in each split
    pairs: np.ndarray  # (p, 4): signature a < b, distance, kind number; a pair of signatures once
    truncated: bool  # a search stopped at its bound: counts and list are "at least"
    # (p, 4): signature pairs with a low-detail image found only beyond LOW_DETAIL_BITS (`group_rows`)
    low_detail_aside: np.ndarray = field(default_factory=lambda: np.empty((0, 4), dtype=np.int64))

    def within_split(self) -> list[int]:
        """Row pairs inside each split: copies by combinatorics, plus n_a·n_b per near pair of signatures found by
        the dct or tone hashes (centre pairs are sought across splits only: `group_rows`)."""
        n, pairs = self.counts, self.pairs[self.pairs[:, 3] != CENTRE]
        within = (n * (n - 1) // 2).sum(axis=0)
        if len(pairs):
            within = within + (n[pairs[:, 0]] * n[pairs[:, 1]]).sum(axis=0)
        return [int(v) for v in within]

    def cross_count(self) -> int:
        """Row pairs in different splits, from the same counts."""
        n, total = self.counts, self.counts.sum(axis=1)
        return int(((total * total - (n * n).sum(axis=1)) // 2).sum()) + self.cross_count_of(self.pairs)

    def cross_count_of(self, pairs: np.ndarray) -> int:
        """Row pairs in different splits made by `pairs` of these signatures (a, b, ...), copies not counted."""
        if not len(pairs):
            return 0
        n, total = self.counts, self.counts.sum(axis=1)
        a, b = pairs[:, 0], pairs[:, 1]
        return int((total[a] * total[b] - (n[a] * n[b]).sum(axis=1)).sum())

    def cross_pairs(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Batches of (row, other row, distance, kind) over every row pair in different splits, row < other;
        closest first (copies, then by distance, dct before tone), then by signature and row."""
        blocks = _Blocks(self.signature, self.split, self.counts.shape[1])
        groups = self._cross_groups()
        for block_pairs in blocks.block_pairs(groups):
            left, left_count, right, right_count, distance, kind = _pieces(*block_pairs)
            for lo, hi in _slices(left_count * right_count):
                sizes = left_count[lo:hi] * right_count[lo:hi]
                each = np.repeat(np.arange(lo, hi), sizes)
                step = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
                first = blocks.rows[left[each] + step // right_count[each]]
                second = blocks.rows[right[each] + step % right_count[each]]
                yield np.minimum(first, second), np.maximum(first, second), distance[each], kind[each]

    def in_cross_pairs(self) -> np.ndarray:
        """Per row: True when it is in a pair across splits (in a signature of such a pair)."""
        return np.isin(self.signature, self._cross_groups()[:, :2])

    def _cross_groups(self) -> np.ndarray:
        """(a, b, distance, kind) of every signature pair with rows in different splits, copies as (a, a, 0, 0)."""
        n, total = self.counts, self.counts.sum(axis=1)
        spread = np.nonzero(total - n.max(axis=1, initial=0) > 0)[0]  # copies in more than one split
        copies = np.stack([spread, spread, np.zeros_like(spread), np.zeros_like(spread)], axis=1)
        crossing = self.pairs[crosses(n, self.pairs[:, 0], self.pairs[:, 1])]
        groups = np.concatenate([copies, crossing]).astype(np.int64)
        return groups[np.lexsort((groups[:, 1], groups[:, 0], groups[:, 3], groups[:, 2]))]


class _Blocks:
    """Rows sorted by (signature, split): each (signature, split) block is one contiguous range."""

    def __init__(self, signature: np.ndarray, split: np.ndarray, splits: int) -> None:
        self.splits = splits
        key = signature * splits + split
        self.rows = np.argsort(key, kind="stable")
        blocks = (int(signature.max(initial=-1)) + 1) * splits
        self.starts = np.searchsorted(key[self.rows], np.arange(blocks))
        self.sizes = np.bincount(key, minlength=blocks)

    def block_pairs(self, groups: np.ndarray) -> Iterator[tuple[np.ndarray, ...]]:
        """Per batch of groups: left block start and size, right block start and size, distance, kind;
        one entry per ordered pair of splits s ≠ t (s < t only, for copies: both blocks are one signature's)."""
        s, t = np.nonzero(~np.eye(self.splits, dtype=bool))
        for lo in range(0, len(groups), BATCH):
            part = groups[lo:lo + BATCH]
            group = np.repeat(np.arange(len(part)), len(s))
            first, second = np.tile(s, len(part)), np.tile(t, len(part))
            keep = (part[group, 0] != part[group, 1]) | (first < second)
            group, first, second = group[keep], first[keep], second[keep]
            left, right = part[group, 0] * self.splits + first, part[group, 1] * self.splits + second
            filled = (self.sizes[left] > 0) & (self.sizes[right] > 0)
            group, left, right = group[filled], left[filled], right[filled]
            yield (self.starts[left], self.sizes[left], self.starts[right], self.sizes[right],
                   part[group, 2], part[group, 3])


def _pieces(left: np.ndarray, left_count: np.ndarray, *rest: np.ndarray) -> tuple[np.ndarray, ...]:
    """The block pairs with a left block cut into pieces of about BATCH pairs each (a batch's memory is
    bounded however many copies one signature has); the right block start and size, distance and kind
    repeated for each piece."""
    right_count = rest[1]
    pieces = np.maximum(1, -(-(left_count * right_count) // BATCH))
    per_piece = -(-left_count // pieces)
    each = np.repeat(np.arange(len(left)), pieces)
    offset = (np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)) * per_piece[each]
    count = np.minimum(per_piece[each], left_count[each] - offset)
    keep = count > 0
    return (left[each][keep] + offset[keep], count[keep], *(values[each][keep] for values in rest))


def _slices(sizes: np.ndarray) -> Iterator[tuple[int, int]]:
    """Consecutive ranges of `sizes` summing to about BATCH (an item above it alone)."""
    ends = np.cumsum(sizes)
    lo = 0
    while lo < len(sizes):
        base = ends[lo - 1] if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, base + BATCH, side="right")))
        yield lo, hi
        lo = hi


def group_rows(images: Images, split: np.ndarray, splits: int, radius: int, tone_limit: int = 0,
               low_detail: np.ndarray | None = None) -> RowGroups:
    """Rows 0..len(split)-1 (split numbers < `splits`) grouped by signature, and the signature pairs
    within `radius` (dct and centre hashes, Hamming bits: "centre" when one of the two is a centre hash) or
    `tone_limit` (tone hashes, tone distance). `low_detail` (per row): a dct or centre pair with such a row
    counts only within `LOW_DETAIL_BITS`; the pairs it has only further apart are set aside
    (`RowGroups.low_detail_aside`), each once."""
    signature = _signatures(images, len(split))
    signatures = int(signature.max(initial=-1)) + 1
    counts = np.bincount(signature * splits + split, minlength=signatures * splits).reshape(signatures, splits)
    (dct, dct_owners), (centre, centre_owners), (tones, tone_owners) = (images[k] for k in ("dct", "centre", "tone"))
    # One Hamming search over both dct hashes of every image: a copy cut on its sides is often nearer the other
    # image's central frame than its whole (`core.perceptual_hash`). Centre pairs are kept across splits only,
    # where a copy is a leak: within a split they are counted on the dct and tone hashes, so a split of
    # overlapping crops does not pay for them (issue 46's mixed photos, 1.9 million pairs in 20,000 rows).
    if np.count_nonzero(counts.sum(axis=0)) < 2:
        centre, centre_owners = centre[:0], centre_owners[:0]  # one split: nothing to cross
    both = np.concatenate([dct, centre])
    side = np.concatenate([np.zeros(len(dct), np.int64), np.ones(len(centre), np.int64)])
    owners = signature[np.concatenate([dct_owners, centre_owners])]
    near, stopped = _signature_pairs(both, owners, side, radius, near_pairs, (DCT, CENTRE))
    near = near[(near[:, 3] != CENTRE) | crosses(counts, near[:, 0], near[:, 1])]
    near, aside = _low_detail_split(near, signature, low_detail)
    toned, stopped_tone = _signature_pairs(tones, signature[tone_owners], np.zeros(len(tones), np.int64), tone_limit,
                                           tone_pairs, (TONE, TONE))
    pairs, truncated = _closest_once(np.concatenate([near, toned])), stopped or stopped_tone
    if len(pairs) > MAX_SIGNATURE_PAIRS:
        pairs, truncated = pairs[:MAX_SIGNATURE_PAIRS], True
    aside = _closest_once(aside)
    if len(aside) and len(pairs):  # a pair found near by another hash or rule is no look-alike
        width = int(max(pairs[:, 1].max(), aside[:, 1].max())) + 1
        aside = aside[~np.isin(aside[:, 0] * width + aside[:, 1], pairs[:, 0] * width + pairs[:, 1])]
    return RowGroups(split, signature, counts, pairs, truncated, aside)


def _low_detail_split(near: np.ndarray, signature: np.ndarray, low_detail: np.ndarray | None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """`near`'s pairs kept, and those set aside: a low-detail row's signature beyond LOW_DETAIL_BITS."""
    if low_detail is None or not low_detail.any():
        return near, near[:0]
    low = np.zeros(int(signature.max(initial=-1)) + 1, dtype=bool)
    low[signature[low_detail]] = True
    far = (low[near[:, 0]] | low[near[:, 1]]) & (near[:, 2] > LOW_DETAIL_BITS)
    return near[~far], near[far]


def crosses(counts: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per signature pair (a[i], b[i]): has it rows in different splits? (`counts`: rows per signature and split.)"""
    total = counts.sum(axis=1)
    return total[a] * total[b] > (counts[a] * counts[b]).sum(axis=1)


def _signatures(images: Images, rows: int) -> np.ndarray:
    """Per row, the number of its signature (its sorted hashes of each kind), in the order of first rows."""
    if rows == 0:
        return np.empty(0, dtype=np.int64)
    columns = []
    for kind in KINDS:
        hashes, owners = images[kind]
        order = np.lexsort((hashes, owners))
        sizes = np.bincount(owners, minlength=rows)
        table = np.zeros((rows, int(sizes.max(initial=0))), dtype=np.int64)
        table[owners[order], np.arange(len(order)) - np.repeat(np.cumsum(sizes) - sizes, sizes)] = hashes[order]
        columns += [sizes[:, None], table]
    _, inverse = distinct_rows(np.concatenate(columns, axis=1))
    first = np.full(int(inverse.max()) + 1, rows)
    np.minimum.at(first, inverse, np.arange(rows))
    renumber = np.empty(len(first), dtype=np.int64)
    renumber[np.argsort(first)] = np.arange(len(first))
    return renumber[inverse]


def _signature_pairs(hashes: np.ndarray, signatures: np.ndarray, side: np.ndarray, radius: int,
                     search: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray, bool]], kinds: tuple[int, int]
                     ) -> tuple[np.ndarray, bool]:
    """(a, b, distance, kind) of signatures holding hashes `search` finds within `radius` (a shared hash:
    distance 0), a ≠ b; kind: kinds[0] when both hashes are of side 0, else kinds[1]."""
    if not len(hashes):
        return np.empty((0, 4), dtype=np.int64), False
    table, _ = distinct_rows(np.stack([hashes, signatures, side], axis=1))  # each (hash, signature, side) once
    values, starts, sizes = np.unique(table[:, 0], return_index=True, return_counts=True)
    # An image's own dct and centre hashes are often within the radius (78 % of issue 46's at 10 bits): one
    # pair more per value, so that they do not crowd out the pairs between images.
    first, second, bits, truncated = search(values, radius, MAX_HASH_PAIRS + len(values))
    shared = np.nonzero(sizes > 1)[0]  # one hash in several signatures: every two of them, distance 0
    near, cut = _product(starts[first], sizes[first], starts[second], sizes[second], bits)
    same, cut_same = _product(starts[shared], sizes[shared], starts[shared], sizes[shared], np.zeros(len(shared), np.int64))
    both = np.concatenate([near, same])
    a, b = table[both[:, 0], 1], table[both[:, 1], 1]
    kind = np.where((table[both[:, 0], 2] | table[both[:, 1], 2]) == 0, kinds[0], kinds[1])
    keep = a != b
    pairs = np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep], both[keep, 2], kind[keep]], axis=1)
    return pairs, bool(truncated or cut or cut_same)


def _product(left: np.ndarray, left_sizes: np.ndarray, right: np.ndarray, right_sizes: np.ndarray,
             bits: np.ndarray) -> tuple[np.ndarray, bool]:
    """(i, j, bits) for every position i of each left range with every position j of its right range, at
    most MAX_SIGNATURE_PAIRS of them (True: cut there; only hashes shared by many signatures get there)."""
    sizes = left_sizes * right_sizes
    keep = np.cumsum(sizes) <= MAX_SIGNATURE_PAIRS
    cut = not keep.all()
    left, left_sizes, right, right_sizes, bits, sizes = (v[keep] for v in (left, left_sizes, right, right_sizes, bits, sizes))
    each = np.repeat(np.arange(len(sizes)), sizes)
    step = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    pairs = np.stack([left[each] + step // right_sizes[each], right[each] + step % right_sizes[each], bits[each]], axis=1)
    return pairs.astype(np.int64), cut


def distinct_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(matrix, axis=0, return_inverse=True)`: the distinct rows, sorted, and each row's number
    among them; by a lexsort of the columns, 3-5x faster than numpy's sort of rows as opaque bytes."""
    order = np.lexsort(matrix.T[::-1])
    ordered = matrix[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse


def _closest_once(pairs: np.ndarray) -> np.ndarray:
    """One entry per signature pair: dct or tone before centre (a centre pair counts only where tones agree,
    `near_corroboration`), then the smallest distance, dct before tone; sorted by (a, b)."""
    if not len(pairs):
        return np.empty((0, 4), dtype=np.int64)
    pairs = pairs[_closest_first(pairs)]
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = np.any(pairs[1:, :2] != pairs[:-1, :2], axis=1)
    return pairs[first].astype(np.int64)


def _closest_first(pairs: np.ndarray) -> np.ndarray:
    """The order of (a, b, distance, kind) rows by a, b, centre last, distance, kind: one int64 key sorted when
    it fits (a lexsort of the five keys took 1.7 s of 3.7 million pairs, issue 46's mixed photos), else the lexsort."""
    signatures = int(pairs[:, :2].max()) + 1
    if signatures < 1 << 26 and 0 <= int(pairs[:, 2].min()) and int(pairs[:, 2].max()) < 1 << 6:
        rank = ((pairs[:, 3] == CENTRE).astype(np.int64) << 8) | (pairs[:, 2] << 2) | pairs[:, 3]
        return np.argsort(((pairs[:, 0] * signatures + pairs[:, 1]) << 9) | rank)  # equal keys: equal rows
    return np.lexsort((pairs[:, 3], pairs[:, 2], pairs[:, 3] == CENTRE, pairs[:, 1], pairs[:, 0]))

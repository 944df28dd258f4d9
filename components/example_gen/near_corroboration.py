"""Centre pairs, kept where the tones corroborate them (`perceptual_hash.near_kind`).

`near_groups.group_rows` groups rows by their dct, centre and near-uniform tone hashes, and finds the
pairs of kind "centre": hashes within the distance of which one at least is a centre hash (the central
frame's), and no two dct hashes. Rows of one group are then split by their tones (a recoloured copy
shares its original's dct and centre hashes, not its tone: for a centre pair they are no longer
interchangeable), the parts of one group are copies of each other (dct distance 0), and a centre pair
is kept only where a tone of one part is within the distance of a tone of the other. A row's tones
are those of all its images.

>>> from ..core.tone_hash import STRUCTURED, tone_values
>>> grey, red = (int(tone_values(np.full((1, 2, 2, 3), v))[0]) | STRUCTURED for v in (100.0, (200.0, 0, 0)))
>>> groups = RowGroups(np.array([0, 1, 1]), np.array([0, 1, 1]), np.array([[1, 0], [0, 2]]),
...                    np.array([[0, 1, 8, CENTRE]]), False)  # rows 1, 2: one group, 8 bits from row 0's centre
>>> found = corroborated(groups, 10, np.array([grey, grey, red]), np.array([0, 1, 2]))
>>> found.signature.tolist(), found.pairs.tolist()  # row 2, red, split off: a copy of row 1, not near row 0
([0, 1, 2], [[0, 1, 8, 2], [1, 2, 0, 0]])
"""
from __future__ import annotations

import numpy as np

from ..core.hamming_search import within_buckets
from ..core.tone_hash import tones_within
from .near_groups import CENTRE, DCT, KINDS, RowGroups, distinct_rows

HASHES = KINDS  # a listed pair's "hash", by kind number: "dct", "tone" or "centre" (its tones corroborate it)


def corroborated(groups: RowGroups, distance: int, tones: np.ndarray, owners: np.ndarray) -> RowGroups:
    """`groups` split by tones, with their centre pairs kept only when a tone of one part is within `distance` of
    a tone of the other (`owners`: the row of each tone); the low-detail pairs set aside carried onto the parts."""
    signature, parent = _split(groups.signature, tones, owners)
    pairs = _onto_parts(groups.pairs, parent)
    framed = np.nonzero(pairs[:, 3] == CENTRE)[0]
    agree = _tones_agree(pairs[framed, 0], pairs[framed, 1], signature[owners], tones, distance)
    keep = np.ones(len(pairs), dtype=bool)
    keep[framed[~agree]] = False
    splits = groups.counts.shape[1]
    # An explicit shape: with no image at all (every row rejected) there are 0 splits, and -1 cannot be inferred.
    counts = np.bincount(signature * splits + groups.split, minlength=len(parent) * splits).reshape(len(parent), splits)
    aside = _onto_parts(groups.low_detail_aside, parent, copies=False)
    return RowGroups(groups.split, signature, counts, pairs[keep], groups.truncated, aside)


def _split(signature: np.ndarray, tones: np.ndarray, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, its part: its group and its sorted tones, numbered in the order of first rows (the groups'
    numbers when none splits); and per part, its group."""
    rows = len(signature)
    order = np.lexsort((tones, owners))
    sizes = np.bincount(owners, minlength=rows)
    table = np.zeros((rows, int(sizes.max(initial=0))), dtype=np.int64)
    table[owners[order], np.arange(len(order)) - np.repeat(np.cumsum(sizes) - sizes, sizes)] = tones[order]
    _, part = distinct_rows(np.concatenate([signature[:, None], sizes[:, None], table], axis=1))
    first = np.full(int(part.max(initial=-1)) + 1, rows)
    np.minimum.at(first, part, np.arange(rows))
    renumber = np.empty(len(first), dtype=np.int64)
    renumber[np.argsort(first)] = np.arange(len(first))
    part = renumber[part]
    parent = np.empty(len(first), dtype=np.int64)
    parent[part] = signature
    return part, parent


def _onto_parts(pairs: np.ndarray, parent: np.ndarray, copies: bool = True) -> np.ndarray:
    """The groups' pairs (a, b, distance, kind) between every part of a and every part of b, and (`copies`) the
    parts of one group paired at dct distance 0; sorted by (a, b), a < b."""
    order = np.argsort(parent, kind="stable")
    start = np.searchsorted(parent[order], np.arange(int(parent.max(initial=-1)) + 1))
    size = np.bincount(parent, minlength=len(start))
    a, b = pairs[:, 0], pairs[:, 1]
    each = np.repeat(np.arange(len(pairs)), size[a] * size[b])
    step = np.arange(len(each)) - np.repeat(np.cumsum(size[a] * size[b]) - size[a] * size[b], size[a] * size[b])
    left, right = order[start[a[each]] + step // size[b[each]]], order[start[b[each]] + step % size[b[each]]]
    found = [np.stack([np.minimum(left, right), np.maximum(left, right), pairs[each, 2], pairs[each, 3]], axis=1)]
    for first, second in within_buckets(start[size > 1], size[size > 1]) if copies else ():  # parts of a group: copies
        found.append(np.stack([order[first], order[second], np.zeros_like(first), np.full_like(first, DCT)], axis=1))
    joined = np.concatenate(found).astype(np.int64).reshape(-1, 4)
    joined[:, :2] = np.sort(joined[:, :2], axis=1)
    key = joined[:, 0] * len(parent) + joined[:, 1]  # (a, b) as one int64: sorted 3-5x faster than a lexsort
    return joined[np.argsort(key, kind="stable")]


def _tones_agree(first: np.ndarray, second: np.ndarray, part: np.ndarray, tones: np.ndarray, limit: int) -> np.ndarray:
    """Per pair of parts: is some tone of `first`'s within `limit` of some tone of `second`'s? (`part`: each
    tone's part.) Each (part, tone) counts once: a part holds one tone per image column, whatever its rows."""
    held = distinct_rows(np.stack([part, tones], axis=1))[0]  # sorted by part, then tone
    (start_a, count_a), (start_b, count_b) = _ranges(held[:, 0], first), _ranges(held[:, 0], second)
    sizes = count_a * count_b
    each = np.repeat(np.arange(len(first)), sizes)
    step = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    left, right = held[start_a[each] + step // count_b[each], 1], held[start_b[each] + step % count_b[each], 1]
    return np.bincount(each[tones_within(left, right, limit)], minlength=len(first)) > 0


def _ranges(ordered: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each key's run starts in `ordered` (sorted), and its length."""
    start = np.searchsorted(ordered, keys)
    return start, np.searchsorted(ordered, keys, side="right") - start

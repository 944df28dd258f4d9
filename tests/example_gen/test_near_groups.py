"""Near-duplicate row pairs counted over signatures (rows with the same hashes) equal a brute-force count
of row pairs, and exact copies are counted by combinatorics, without listing a pair within a split."""
from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from shardflow.core.perceptual_hash import distance
from shardflow.core.tone_hash import tone_distance, tone_values
from shardflow.example_gen import near_groups
from shardflow.example_gen.near_groups import KINDS, group_rows

pytestmark = pytest.mark.unit  # numpy only: make test-fast runs it


def _random_rows(rng: np.random.Generator, rows: int, columns: int) -> tuple[dict, np.ndarray]:
    """Rows of `columns` images: many exact copies, altered copies a few bits away, some near-uniform
    (a tone hash), in 3 splits. Returns the images per kind (hash, row) and each row's split."""
    originals = rng.integers(-(1 << 63), (1 << 63) - 1, size=rows // 4, dtype=np.int64)
    dct = originals[rng.integers(len(originals), size=rows * columns)]
    flipped = rng.random(len(dct)) < 0.3  # altered copies: 1-12 bits flipped
    for i in np.nonzero(flipped)[0]:
        for bit in rng.choice(64, size=int(rng.integers(1, 13)), replace=False):
            dct[i] ^= np.int64(1 << int(bit)) if bit < 63 else np.int64(-(1 << 63))
    owners = np.repeat(np.arange(rows), columns)
    uniform = rng.random(len(dct)) < 0.3
    colours = rng.choice([40.0, 120.0, 200.0], size=(int(uniform.sum()), 1, 1, 3))  # few colours: tone pairs happen
    brightness = rng.uniform(0.8, 1.2, (len(colours), 1, 1, 1))
    brightness[rng.random(len(colours)) < 0.5] = 1.0
    tones = tone_values(np.broadcast_to(colours * brightness, (len(colours), 2, 2, 3)))
    centre = dct.copy()
    for i in np.nonzero(rng.random(len(dct)) < 0.5)[0]:  # centre hashes: some their image's dct, some 1-12 bits off
        for bit in rng.choice(64, size=int(rng.integers(1, 13)), replace=False):
            centre[i] ^= np.int64(1 << int(bit)) if bit < 63 else np.int64(-(1 << 63))
    images = {"dct": (dct, owners), "tone": (tones, owners[uniform]), "centre": (centre, owners)}
    return images, rng.integers(3, size=rows)


def _brute_force(images: dict, split: np.ndarray, radius: int, tone: int) -> dict[tuple[int, int], tuple[int, int]]:
    """(row, other row) → (distance, kind) of every near pair of rows, by the rule `group_rows` reports: dct and
    centre hashes compared with each other ("centre" when one is a centre hash), tones with tones; dct or tone
    before centre, then the smallest distance."""
    per_row: dict[int, list[tuple[int, int]]] = {}
    for number, kind in enumerate(KINDS):
        for value, row in zip(*(a.tolist() for a in images[kind])):
            per_row.setdefault(row, []).append((number, value))
    found = {}
    for a, b in itertools.combinations(range(len(split)), 2):
        near = []
        for k, x in per_row.get(a, []):
            for j, y in per_row.get(b, []):
                if (k == 1) != (j == 1):  # tones pair with tones only
                    continue
                d = tone_distance(x, y, tone) if k == 1 else distance(x, y)
                kind = k if k == j else 2
                if d <= (tone if k == 1 else radius):
                    near.append((kind == 2, d, kind))
        if near:
            found[(a, b)] = min(near)[1:]
    return found


@pytest.mark.parametrize("columns", [1, 2])
def test_counts_and_cross_split_list_equal_brute_force(columns: int) -> None:
    rng = np.random.default_rng(columns)
    images, split = _random_rows(rng, 160, columns)
    groups = group_rows(images, split, 3, radius=10, tone_limit=10)
    expected = _brute_force(images, split, 10, 10)
    assert any(kind == 1 for _, kind in expected.values())  # tone pairs among them
    cross = {pair: found for pair, found in expected.items() if split[pair[0]] != split[pair[1]]}
    # Within a split, centre pairs are not sought (group_rows): the dct and tone pairs are counted there.
    within = [sum(split[a] == s == split[b] for (a, b), (_, kind) in expected.items() if kind != 2) for s in range(3)]
    assert len(cross) > 100 and min(within) > 20  # copies and altered copies in and across splits
    assert groups.within_split() == within and groups.cross_count() == len(cross) and not groups.truncated
    listed = {}
    for first, second, bits, kind in groups.cross_pairs():
        for a, b, d, k in zip(first.tolist(), second.tolist(), bits.tolist(), kind.tolist()):
            assert (a, b) not in listed, "a pair listed twice"
            listed[(a, b)] = (d, k)
    assert listed == cross
    assert np.array_equal(groups.in_cross_pairs(), np.isin(np.arange(len(split)), np.array(list(cross)).ravel()))


def test_centre_pairs_are_sought_across_splits_only() -> None:
    """Rows 0 and 1: far apart whole, row 1's central frame near row 0's whole (a cropped copy). Across splits
    they are a centre pair; in one split they are not counted, and a single split is not searched for them."""
    whole = np.array([0, -1], dtype=np.int64)  # 64 bits apart
    centre = np.array([0, 0b111], dtype=np.int64)  # row 1's centre: 3 bits from row 0's hashes
    images = {"dct": (whole, np.arange(2)), "centre": (centre, np.arange(2)),
              "tone": (np.empty(0, np.int64), np.empty(0, np.int64))}
    across = group_rows(images, np.array([0, 1]), 2, radius=10, tone_limit=10)
    assert across.cross_count() == 1 and across.pairs.tolist() == [[0, 1, 3, KINDS.index("centre")]]
    within = group_rows(images, np.array([0, 0]), 2, radius=10, tone_limit=10)
    assert within.within_split() == [0, 0] and within.cross_count() == 0


def test_the_list_comes_in_batches_closest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    images, split = _random_rows(np.random.default_rng(9), 120, 1)
    whole = [np.concatenate(parts) for parts in zip(*group_rows(images, split, 3, 10, 10).cross_pairs())]
    monkeypatch.setattr(near_groups, "BATCH", 7)
    batches = list(group_rows(images, split, 3, 10, 10).cross_pairs())
    assert len(batches) > 10 and all(len(b[0]) <= 7 or len(set(b[2].tolist())) == 1 for b in batches)
    for got, want in zip((np.concatenate(parts) for parts in zip(*batches)), whole):
        np.testing.assert_array_equal(got, want)
    assert np.all(np.diff(whole[2]) >= 0)  # distance never decreases down the list


def test_exact_copies_are_counted_by_combinatorics_over_distinct_hashes() -> None:
    """200,000 rows of 1,797 distinct images (the example_gen benchmark's digits), ~111 copies each:
    ~8.9 M pairs within split 0 and 2 M across, counted exactly without one being enumerated."""
    distinct = np.random.default_rng(4).integers(-(1 << 63), (1 << 63) - 1, size=1797, dtype=np.int64)
    rows = 200_000
    copies = np.arange(rows) % len(distinct)
    split = (np.arange(rows) % 10 == 9).astype(np.int64)  # one row in ten in split 1
    images = {"dct": (distinct[copies], np.arange(rows)), "centre": (distinct[copies], np.arange(rows)),
              "tone": (np.empty(0, np.int64), np.empty(0, np.int64))}
    started = time.perf_counter()
    groups = group_rows(images, split, 2, radius=10, tone_limit=10)
    within, cross = groups.within_split(), groups.cross_count()
    seconds = time.perf_counter() - started
    n = np.stack([np.bincount(copies[split == s], minlength=len(distinct)) for s in (0, 1)], axis=1)
    assert within == [int((n[:, s] * (n[:, s] - 1) // 2).sum()) for s in (0, 1)]
    assert cross == int((n[:, 0] * n[:, 1]).sum()) and within[0] > 8_000_000 and not groups.truncated
    assert len(groups.counts) == len(distinct) and len(groups.pairs) == 0  # random hashes: no near pairs
    assert seconds < 5, f"{seconds:.1f} s"  # ~0.3 s here; the 2M-pair cap used to stop the old search
    assert sum(len(batch[0]) for batch in groups.cross_pairs()) == cross

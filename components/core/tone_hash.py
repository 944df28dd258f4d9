"""The tone hash of a near-uniform image, and the tone distance that pairs altered copies of one.

A near-uniform image (a flat colour, a smooth gradient, with or without noise) gives the dct hash
nothing to hold on to. What it has is a colour and a gradient, and an altered copy keeps both:
re-encoding, resizing and small crops leave them nearly as they were, and a brightness change
multiplies every value by one factor. So the tone hash stores them, and the tone distance asks
whether one brightness factor maps one image's values onto the other's.

- **The value** (64 bits, never negative): the mean R, G and B of the image's 2×2 quadrant means
  (8 bits each), then its six linear gradients — right half minus left half and bottom half minus
  top half, per channel — each companded (sign · ln(1 + |g| / 40): fine steps near 0, relative
  steps on steep gradients) to 6 bits. Bit 60, `STRUCTURED`, marks the tone of an image with
  structure (`core.perceptual_hash`: there it only corroborates a centre match); the distance ignores it.
- **The distance** d (0 = the same value): the smallest d for which one brightness factor f within
  1 ± 0.015·d brings every mean channel (f times it, clipped at 255) within 0.3·d grey levels of the
  other image's, and every gradient within 0.6·d levels plus d % of its size. Either image may be
  the altered one. At d = 10, ExampleGen's default: brightness ±15 %, means within 3 grey levels,
  gradients within 6 levels + 10 %. Two flat colours 40 levels apart in a channel are, whatever
  their brightness, further apart than that; so is a gradient from a flat colour.

`tone_pairs` finds every pair of values within a distance, like `hamming_search.near_pairs` for dct
hashes: a grid over the log mean colours, whose cells are as wide as the distance allows the
colours to move, so only neighbouring cells are compared.

>>> def flat(*rgb): return tone_values(np.broadcast_to(np.array(rgb, dtype=float), (1, 2, 2, 3)))[0]
>>> orange, brighter, bluer = flat(200, 120, 40), flat(220, 132, 44), flat(200, 120, 80)
>>> tone_distance(orange, brighter), tone_distance(orange, bluer)  # 10 % brighter is 9.1 % darker: 6; 21: beyond 20
(6, 21)
>>> [v.tolist() for v in tone_features(orange)]
[[[200.0, 120.0, 40.0]], [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]]
"""
from __future__ import annotations

import itertools
from typing import Iterator

import numpy as np

from .hamming_search import across_buckets, joined_pairs, within_buckets

_KNEE = 40.0  # companding knee of the gradients, grey levels
_CODE_MAX = 62  # gradient codes 0..62: 31 is exactly 0 (flat images decode to no gradient at all)
_COMPANDED_MAX = float(np.log1p(255.0 / _KNEE))
_MEAN_SHIFTS = np.array([52, 44, 36], dtype=np.int64)
_GRADIENT_SHIFTS = np.arange(5, -1, -1, dtype=np.int64) * 6
# Tolerances per unit of distance (at the default 10: ±15 %, 3 grey levels, 6 levels + 10 %).
BRIGHTNESS, MEAN_LEVELS, GRADIENT_LEVELS, GRADIENT_SHARE = 0.015, 0.3, 0.6, 0.01
_LOG_OFFSET = 32.0  # the search grid's coordinates: log(mean + 32), so dark colours are not spread apart
_BATCH = 1 << 20
STRUCTURED = 1 << 60  # above the 60 bits of means and gradients: a flag the features never read
# A second flag: the image has fewer pixels on a side than the hashes' 32×32 thumbnail (`perceptual_hash`).
LOW_DETAIL = 1 << 61


def is_structured(values: np.ndarray | int) -> np.ndarray:
    """Per tone value: True when it is the tone of an image with structure (its `STRUCTURED` bit set)."""
    return (np.asarray(values, dtype=np.int64) & STRUCTURED) != 0


def is_low_detail(values: np.ndarray | int) -> np.ndarray:
    """Per tone value: True when its image was hashed from fewer pixels a side than the thumbnail's."""
    return (np.asarray(values, dtype=np.int64) & LOW_DETAIL) != 0


def tone_values(quadrants: np.ndarray) -> np.ndarray:
    """[N, 2, 2, 3] quadrant mean colours (rows, columns, RGB; 0-255) → N tone values (int64)."""
    quadrants = np.asarray(quadrants, dtype=np.float64)
    means = np.clip(np.rint(quadrants.mean(axis=(1, 2))), 0, 255).astype(np.int64)
    gradients = np.concatenate([(quadrants[:, :, 1] - quadrants[:, :, 0]).mean(axis=1),
                                (quadrants[:, 1] - quadrants[:, 0]).mean(axis=1)], axis=1)
    companded = np.sign(gradients) * np.log1p(np.abs(gradients) / _KNEE) / _COMPANDED_MAX
    codes = np.clip(np.rint((companded + 1) * _CODE_MAX / 2), 0, _CODE_MAX).astype(np.int64)
    return (means << _MEAN_SHIFTS).sum(axis=1) + (codes << _GRADIENT_SHIFTS).sum(axis=1)


def tone_features(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tone values → (mean R, G, B [N, 3], gradients [N, 6]: x then y, R, G, B), as float64."""
    values = np.asarray(values, dtype=np.int64).reshape(-1, 1)
    means = ((values >> _MEAN_SHIFTS) & 255).astype(np.float64)
    companded = ((values >> _GRADIENT_SHIFTS) & 63) * (2.0 / _CODE_MAX) - 1
    return means, np.sign(companded) * _KNEE * np.expm1(np.abs(companded) * _COMPANDED_MAX)


def _fits(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], d: np.ndarray) -> np.ndarray:
    """Per pair: is some brightness factor f within the tolerances of distance d (a's values times f ≈ b's)?
    Each constraint bounds f to an interval; the pair fits when the intervals meet."""
    (mean_a, grad_a), (mean_b, grad_b) = a, b
    d = np.asarray(d, dtype=np.float64).reshape(-1, 1)
    low, high = 1 - BRIGHTNESS * d[:, 0], 1 + BRIGHTNESS * d[:, 0]
    levels = MEAN_LEVELS * d
    with np.errstate(divide="ignore", invalid="ignore"):
        # f·a ≥ b − t always; min(f·a, 255) ≤ b + t only binds when b + t < 255 (a brighter copy clips)
        lower = np.where(mean_a > 0, (mean_b - levels) / mean_a, np.where(mean_b <= levels, -np.inf, np.inf))
        upper = np.where((mean_a > 0) & (mean_b + levels < 255), (mean_b + levels) / mean_a, np.inf)
        slack = GRADIENT_LEVELS * d + GRADIENT_SHARE * d * np.maximum(np.abs(grad_a), np.abs(grad_b))
        ends = np.stack([(grad_b - slack) / grad_a, (grad_b + slack) / grad_a])
        still = np.abs(grad_b) <= slack  # a has no gradient: b must have none either, whatever f
        grad_lower = np.where(grad_a != 0, ends.min(axis=0), np.where(still, -np.inf, np.inf))
        grad_upper = np.where(grad_a != 0, ends.max(axis=0), np.inf)
    low = np.maximum(low, np.maximum(lower.max(axis=1), grad_lower.max(axis=1)))
    high = np.minimum(high, np.minimum(upper.min(axis=1), grad_upper.min(axis=1)))
    return low <= high


def _within(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], d: np.ndarray) -> np.ndarray:
    return _fits(a, b, d) | _fits(b, a, d)


def _distances(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], limit: int) -> np.ndarray:
    """Per pair, the tone distance if it is ≤ limit, else limit + 1 (a binary search: fitting only grows with d)."""
    distance = np.full(len(a[0]), limit + 1, dtype=np.int64)
    reached = np.nonzero(_within(a, b, np.full(len(a[0]), limit)))[0]
    a, b = _take(a, reached), _take(b, reached)
    low, high = np.zeros(len(reached), dtype=np.int64), np.full(len(reached), limit, dtype=np.int64)
    while np.any(low < high):
        middle = (low + high) // 2
        fits = _within(a, b, middle)
        high, low = np.where(fits, middle, high), np.where(fits, low, np.minimum(middle + 1, high))
    distance[reached] = high
    return distance


def tone_distances(first: np.ndarray, second: np.ndarray, limit: int) -> np.ndarray:
    """The tone distance of each pair (first[i], second[i]) of values, capped at limit + 1."""
    return _distances(tone_features(first), tone_features(second), limit)


def tones_within(first: np.ndarray, second: np.ndarray, limit: int) -> np.ndarray:
    """Per pair (first[i], second[i]) of values: is their tone distance ≤ limit? (`tone_distances(...) <= limit`
    without the search for the distance itself: a fifth of the work.)"""
    a, b = tone_features(first), tone_features(second)
    return _within(a, b, np.full(len(a[0]), limit))


def tone_distance(a: int, b: int, limit: int = 20) -> int:
    """The tone distance of two values (limit + 1 when it is larger than limit)."""
    return int(tone_distances(np.array([a]), np.array([b]), limit)[0])


def _cell_widths(limit: int) -> np.ndarray:
    """How far apart two values within distance `limit` can be on each of the search grid's axes: the
    three log mean colours (log(mean + 32)) and the companded green gradients (x, y). Bounds, not
    estimates: the grid's cells are this wide, so a pair is always in one cell or two neighbouring ones."""
    spread = BRIGHTNESS * limit + MEAN_LEVELS * limit / _LOG_OFFSET  # the darker side moves further
    widen = 1 + BRIGHTNESS * limit, 1 - GRADIENT_SHARE * limit, 1 - (BRIGHTNESS + GRADIENT_SHARE) * limit
    if spread >= 1 or min(widen) <= 0:
        return np.full(5, np.inf)
    up = GRADIENT_LEVELS * limit / widen[1]  # the steepest gradient b can have above a's (gb ≤ a·ga + up)
    down = GRADIENT_LEVELS * limit / widen[2]  # a gradient of a that can drop to 0 in b
    gradient = max(np.log(widen[0] / widen[1]), -np.log(widen[2]), np.log1p(up / _KNEE) + np.log1p(down / _KNEE))
    return np.array([-np.log1p(-spread)] * 3 + [gradient] * 2)


def _grid_coordinates(features: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    green = features[1][:, [1, 4]]
    return np.concatenate([np.log(features[0] + _LOG_OFFSET), np.sign(green) * np.log1p(np.abs(green) / _KNEE)], axis=1)


def tone_pairs(values: np.ndarray, limit: int, max_pairs: int = 10_000_000
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(i, j, distance, truncated): every pair i < j of distinct values within tone distance `limit`, at
    most `max_pairs` (truncated says the search stopped there). Pairs come from neighbouring cells of a
    grid over the log mean colours and the green gradients, each cell as wide as a value can move there
    within `limit`."""
    features = tone_features(values)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    total = 0
    if len(values) > 1 and limit > 0:
        coordinates, widths = _grid_coordinates(features), _cell_widths(limit)
        cells = np.floor(coordinates / widths).astype(np.int64)
        cells -= cells.min(axis=0) - 1  # ≥ 1, and a neighbour's cell never borrows from the next digit
        bases = cells.max(axis=0) + 2
        radix = np.append(np.cumprod(bases[:0:-1])[::-1], 1)  # mixed radix: cell numbers → one key
        keys = cells @ radix
        order = np.argsort(keys, kind="stable")
        buckets, starts, counts = np.unique(keys[order], return_index=True, return_counts=True)
        for first, second in _cell_pairs(buckets, starts, counts, radix):
            i, j = order[first], order[second]
            near = np.all(np.abs(coordinates[i] - coordinates[j]) <= widths, axis=1)
            i, j = i[near], j[near]
            distance = _distances(_take(features, i), _take(features, j), limit)
            keep = distance <= limit
            found.append((np.minimum(i, j)[keep], np.maximum(i, j)[keep], distance[keep]))
            total += int(keep.sum())
            if total >= max_pairs:
                return joined_pairs(found, max_pairs) + (True,)
    return joined_pairs(found, max_pairs) + (False,)


def _cell_pairs(buckets: np.ndarray, starts: np.ndarray, counts: np.ndarray, radix: np.ndarray
                ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Batches of position pairs (in sorted order): within each cell, and with each neighbouring cell
    whose key is larger (so each pair of cells once)."""
    yield from within_buckets(starts[counts > 1], counts[counts > 1])
    for step in np.array(list(itertools.product((-1, 0, 1), repeat=len(radix)))) @ radix:
        if step <= 0:
            continue
        other = np.minimum(np.searchsorted(buckets, buckets + step), len(buckets) - 1)
        mine = np.nonzero(buckets[other] == buckets + step)[0]
        yield from across_buckets(starts[mine], counts[mine], starts[other[mine]], counts[other[mine]])


def _take(features: tuple[np.ndarray, np.ndarray], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return features[0][rows], features[1][rows]

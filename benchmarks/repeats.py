"""Repeated, interleaved runs of a suite's contenders, and their medians.

On a shared 2-core host the speed drifts by 15–30 % within minutes (docs/example-gen.md), more
than ExampleGen's margin over the loops. One run per contender, one after the other, lets that
drift decide a target. So a suite runs `--repeats` rounds and rotates the contenders' order each
round (a b c, b c a, c a b): every contender takes every position, and a slow minute hits one
round of each. A target then compares contenders *within* a round, and takes the median of those
ratios; a table shows each contender's median run.

>>> rotations(["a", "b", "c"], 4)
[['a', 'b', 'c'], ['b', 'c', 'a'], ['c', 'a', 'b'], ['a', 'b', 'c']]
>>> runs = [{"contender": "c", "rows": 1, "round": r, "total_s": t} for r, t in enumerate([3.0, 1.0, 2.0])]
>>> median_run(runs)["total_s"], median_run(runs)["totals"]
(2.0, [3.0, 1.0, 2.0])
>>> paired_ratios(runs, [dict(r, contender="b", total_s=2.0) for r in runs], "total_s")
[1.5, 0.5, 1.0]
>>> median([1.5, 0.5, 1.0]), median([1.5, 0.5, 1.0, 0.9])
(1.0, 0.95)
>>> middle([3, 1, 4, 2], key=float), middle([3, 1, 4, 2], key=float, upper=True)
(2, 3)
"""
from __future__ import annotations

import statistics
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")
Run = dict[str, Any]


def rotations(items: Sequence[T], repeats: int) -> list[list[T]]:
    """The order of each round: the items rotated by one more place each time."""
    n = len(items)
    return [list(items[k % n:]) + list(items[:k % n]) for k in range(repeats)] if n else []


def median(values: Sequence[float]) -> float:
    """The median of per-round ratios; with an even count the mean of the two middle ones, which
    favours neither side of a target (the lower one would favour the contender under test)."""
    return statistics.median(values)


def middle(items: Sequence[T], key: Callable[[T], float], upper: bool = False) -> T:
    """The item whose key is the median: a measured item, never a mean of two. With an even count,
    the lower of the two middle ones, or the upper with `upper` (where the lower would favour the
    contender under test)."""
    ordered = sorted(items, key=key)  # stable: equal keys keep their given order
    return ordered[len(ordered) // 2 if upper else (len(ordered) - 1) // 2]


def median_run(runs: Sequence[Run]) -> Run:
    """The run whose total time is the (lower) median, with every round's total (round order) under "totals"."""
    ordered = sorted(runs, key=lambda r: r.get("round", 0))
    return {**middle(ordered, key=lambda r: r["total_s"]), "totals": [r["total_s"] for r in ordered]}


def median_runs(runs: Sequence[Run], keys: Sequence[str]) -> list[Run]:
    """One median run per group of `keys` (e.g. contender, rows), groups in first-seen order.

    The median is over a group's successful runs; a group whose every run failed shows a failed one.
    """
    groups: dict[tuple[Any, ...], list[Run]] = {}
    for run in runs:
        groups.setdefault(tuple(run[k] for k in keys), []).append(run)
    return [median_run([r for r in group if r.get("ok", True)] or group) for group in groups.values()]


def paired_ratios(runs: Sequence[Run], against: Sequence[Run], key: str) -> list[float]:
    """`key` of each run ÷ that of the run in `against` from the same round, in round order."""
    by_round = {r.get("round", 0): r for r in against}
    paired = sorted((r for r in runs if r.get("round", 0) in by_round), key=lambda r: r.get("round", 0))
    return [r[key] / by_round[r.get("round", 0)][key] for r in paired]

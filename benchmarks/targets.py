"""The issues' targets for ExampleGen on 2 cores, checked against a benchmark's runs.

Totals are what a user waits for: process start to exit, imports included (issue 33). The
steady-state rates (records / (end of work − first record)) stay as reference lines.

28×28 PNGs (`example_gen_targets`, issues 1 and 33):

- total time at the smallest size ≤ (a)'s, the single-process loop (50k rows in `make bench`);
- total time at the largest size ≤ (b)'s, the 2-process pool (200k rows);
- peak memory at the largest size within 50 MB of that at the smallest (summed RSS, and its
  anonymous part), on the benchmark's index that repeats 2,000 files (many exact copies).

Photos (`photo_targets`, issues 14 and 33), per storage kind (each run carries "storage"):
- total time ≤ (b)'s, the 2-process loop, at every size (2k and 20k rows);
- peak memory flat from the smallest to the largest size, as above.

With repeated rounds (`repeats`), a time target is the median of the per-round ratios (each
contender against the one run in the same round); the memory and reference lines use each
contender's median run.

>>> runs = [{"contender": "a", "rows": 10, "ok": True, "total_s": 2.0},
...         {"contender": "b", "rows": 10, "ok": True, "steady_records_per_s": 100.0, "total_s": 1.5},
...         {"contender": "c", "rows": 10, "ok": True, "steady_records_per_s": 90.0, "total_s": 1.8}]
>>> [(t["target"], t["met"]) for t in example_gen_targets(runs)]
[('(reference) c steady / (b) steady at 10 rows', None), ('c total ≤ (a) total at 10 rows', True), \
('c total ≤ (b) total at 10 rows', False)]
>>> [(t["target"], t["met"]) for t in photo_targets([dict(r, storage="raw") for r in runs])]
[('[raw] (reference) c steady / (b) steady at 10 rows', None), ('[raw] c total ≤ (b) total at 10 rows', False)]
"""
from __future__ import annotations

from typing import Any

from .repeats import median, median_run, paired_ratios

RSS_GROWTH_MB = 50.0


def _all(runs: list[dict[str, Any]], contender: str, rows: int) -> list[dict[str, Any]]:
    return [r for r in runs if r["contender"] == contender and r["rows"] == rows and r["ok"]]


def _find(runs: list[dict[str, Any]], contender: str, rows: int) -> dict[str, Any] | None:
    """The contender's median run at `rows` (its only run without repeats), or None."""
    found = _all(runs, contender, rows)
    return median_run(found) if found else None


def _target(text: str, measured: str, met: bool | None) -> dict[str, Any]:
    return {"target": text, "measured": measured, "met": met}


def _steady(runs: list[dict[str, Any]], label: str, rows: int, unit: str = "rec/s") -> list[dict[str, Any]]:
    """Reference lines: the steady rate and the encode phase's, against (b)'s steady rate."""
    c, b = _find(runs, label, rows), _find(runs, "b", rows)
    if not (c and b and c.get("steady_records_per_s") and b.get("steady_records_per_s")):
        return []
    ratio = c["steady_records_per_s"] / b["steady_records_per_s"]
    out = [_target(f"(reference) {label} steady / (b) steady at {rows:,} rows",
                   f"{ratio:.2f} ({c['steady_records_per_s']:,.0f} vs {b['steady_records_per_s']:,.0f} {unit})", None)]
    if c.get("encode_records_per_s"):  # the encode phase without shards/statistics/schema
        encode = c["encode_records_per_s"] / b["steady_records_per_s"]
        out.append(_target(f"(reference) {label} encode phase / (b) steady at {rows:,} rows",
                           f"{encode:.2f} ({c['encode_records_per_s']:,.0f} {unit})", None))
    return out


def _total(runs: list[dict[str, Any]], label: str, rows: int, against: str = "a") -> list[dict[str, Any]]:
    """The median of the per-round ratios of total times; one ratio without repeats."""
    ratios = paired_ratios(_all(runs, label, rows), _all(runs, against, rows), "total_s")
    if not ratios:
        return []
    c, a = _find(runs, label, rows), _find(runs, against, rows)
    ratio = median(ratios)
    rounds = f"; median of {len(ratios)} rounds: {', '.join(f'{x:.2f}' for x in ratios)}" if len(ratios) > 1 else ""
    return [_target(f"{label} total ≤ ({against}) total at {rows:,} rows",
                    f"{c['total_s']:.1f} s vs {a['total_s']:.1f} s ({ratio:.2f}×{rounds})", ratio <= 1.0)]


def _memory(runs: list[dict[str, Any]], label: str, small: int, large: int) -> list[dict[str, Any]]:
    lo, hi = _find(runs, label, small), _find(runs, label, large)
    if small == large or not (lo and hi):
        return []
    out = []
    for key, name in (("peak_rss_mb", "RSS"), ("peak_anon_mb", "anonymous RSS")):
        growth = hi[key] - lo[key]
        out.append(_target(f"{label} peak {name} at {large:,} − at {small:,} rows ≤ {RSS_GROWTH_MB:.0f} MB",
                           f"{growth:+.0f} MB ({lo[key]:,.0f} → {hi[key]:,.0f})", growth <= RSS_GROWTH_MB))
    return out


def example_gen_targets(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per target and ExampleGen variant; `met` is None for reference lines."""
    sizes = sorted({r["rows"] for r in runs})
    labels = list(dict.fromkeys(r["contender"] for r in runs if r["contender"].startswith("c")))
    targets: list[dict[str, Any]] = []
    for label in labels:
        for rows in sizes:
            targets += _steady(runs, label, rows)
        if sizes:
            targets += _total(runs, label, sizes[0], against="a")
            targets += _total(runs, label, sizes[-1], against="b")
            targets += _memory(runs, label, sizes[0], sizes[-1])
    return targets


def photo_targets(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ExampleGen (c) against the 2-process loop (b), per storage kind; the target names the kind."""
    sizes = sorted({r["rows"] for r in runs})
    targets: list[dict[str, Any]] = []
    for storage in dict.fromkeys(r["storage"] for r in runs):
        same = [r for r in runs if r["storage"] == storage]
        found: list[dict[str, Any]] = []
        for rows in sizes:
            found += _steady(same, "c", rows, "img/s")
        for rows in sizes:
            found += _total(same, "c", rows, against="b")
        if sizes:
            found += _memory(same, "c", sizes[0], sizes[-1])
        targets += [dict(t, target=f"[{storage}] {t['target']}") for t in found]
    return targets

"""The issue's targets for ExampleGen on 2 cores, checked against a benchmark's runs.

- steady-state records/s ≥ 0.85 × that of (b), the 2-process pool (both measured the same way:
  records / (end of work − first record));
- total time at the largest size ≤ (a)'s, the single-process loop, imports included;
- peak memory at the largest size within 50 MB of that at the smallest (summed RSS, and its anonymous part).

>>> runs = [{"contender": "b", "rows": 10, "ok": True, "steady_records_per_s": 100.0},
...         {"contender": "c", "rows": 10, "ok": True, "steady_records_per_s": 90.0}]
>>> [t["met"] for t in example_gen_targets(runs)]
[True]
"""
from __future__ import annotations

from typing import Any

STEADY_RATIO = 0.85
RSS_GROWTH_MB = 50.0


def _find(runs: list[dict[str, Any]], contender: str, rows: int) -> dict[str, Any] | None:
    return next((r for r in runs if r["contender"] == contender and r["rows"] == rows and r["ok"]), None)


def _target(text: str, measured: str, met: bool | None) -> dict[str, Any]:
    return {"target": text, "measured": measured, "met": met}


def _steady(runs: list[dict[str, Any]], label: str, rows: int) -> list[dict[str, Any]]:
    c, b = _find(runs, label, rows), _find(runs, "b", rows)
    if not (c and b and c.get("steady_records_per_s") and b.get("steady_records_per_s")):
        return []
    ratio = c["steady_records_per_s"] / b["steady_records_per_s"]
    out = [_target(f"{label} steady ≥ {STEADY_RATIO} × (b) steady at {rows:,} rows",
                   f"{ratio:.2f} ({c['steady_records_per_s']:,.0f} vs {b['steady_records_per_s']:,.0f} rec/s)",
                   ratio >= STEADY_RATIO)]
    if c.get("encode_records_per_s"):  # reference only: the encode phase without shards/statistics/schema
        encode = c["encode_records_per_s"] / b["steady_records_per_s"]
        out.append(_target(f"(reference) {label} encode phase / (b) steady at {rows:,} rows",
                           f"{encode:.2f} ({c['encode_records_per_s']:,.0f} rec/s)", None))
    return out


def _total(runs: list[dict[str, Any]], label: str, rows: int) -> list[dict[str, Any]]:
    c, a = _find(runs, label, rows), _find(runs, "a", rows)
    if not (c and a):
        return []
    return [_target(f"{label} total ≤ (a) total at {rows:,} rows",
                    f"{c['total_s']:.1f} s vs {a['total_s']:.1f} s ({c['total_s'] / a['total_s']:.2f}×)",
                    c["total_s"] <= a["total_s"])]


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
            targets += _total(runs, label, sizes[-1])
            targets += _memory(runs, label, sizes[0], sizes[-1])
    return targets

"""Repeated rounds: targets compare contenders within a round and take the median of the ratios."""
from __future__ import annotations

import pytest

from benchmarks.repeats import median_runs
from benchmarks.targets import example_gen_targets

pytestmark = pytest.mark.unit


def _run(contender: str, rows: int, round_: int, total: float, ok: bool = True) -> dict:
    return {"contender": contender, "rows": rows, "round": round_, "total_s": total, "ok": ok,
            "peak_rss_mb": 100.0, "peak_anon_mb": 50.0}


def test_a_slow_round_does_not_decide_a_time_target():
    # round 1 ran on a slow minute: c's slowest total beats b's fastest nowhere, yet c wins 2 rounds of 3
    runs = [_run("b", 10, 0, 10.0), _run("c", 10, 0, 9.5),
            _run("c", 10, 1, 16.0), _run("b", 10, 1, 15.0),
            _run("b", 10, 2, 11.0), _run("c", 10, 2, 10.5)]
    (target,) = [t for t in example_gen_targets(runs) if t["target"] == "c total ≤ (b) total at 10 rows"]
    assert target["met"] is True
    assert "(0.95×; median of 3 rounds: 0.95, 1.07, 0.95)" in target["measured"]
    assert target["measured"].startswith("10.5 s vs 11.0 s")  # each contender's median run


def test_losing_most_rounds_misses_the_target():
    runs = [_run("b", 10, r, 10.0) for r in range(3)] + [_run("c", 10, r, t) for r, t in enumerate((9.0, 10.5, 10.2))]
    (target,) = [t for t in example_gen_targets(runs) if "(b) total" in t["target"]]
    assert target["met"] is False and "1.02×" in target["measured"]


def test_the_median_run_is_a_measured_run_and_a_failed_group_stays_visible():
    runs = [_run("c", 10, 0, 3.0), _run("c", 10, 1, 1.0), _run("c", 10, 2, 99.0, ok=False),
            _run("b", 10, 0, 5.0, ok=False)]
    c, b = median_runs(runs, ("rows", "contender"))
    assert (c["round"], c["total_s"], c["totals"]) == (1, 1.0, [3.0, 1.0])  # lower median of the ok runs
    assert b["ok"] is False  # every run of b failed: the table still shows it


def test_the_end_to_end_suite_reports_its_median_round_and_never_the_kinder_of_two() -> None:
    from benchmarks.photos_e2e import wall_ratio
    from benchmarks.repeats import middle

    def rounds(*walls: float) -> list[dict]:
        return [{"shardflow": {"wall_s": w}, "handwritten": {"wall_s": 10.0}} for w in walls]

    # as photos_e2e_suite.run picks its round
    assert middle(rounds(30.0, 10.0, 20.0), key=wall_ratio, upper=True)["shardflow"]["wall_s"] == 20.0
    assert middle(rounds(10.0, 30.0), key=wall_ratio, upper=True)["shardflow"]["wall_s"] == 30.0  # the higher ratio

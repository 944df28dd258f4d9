"""The end-to-end photos suite at a tiny size: both contenders run, every step is measured, the ratios are checked."""
from __future__ import annotations

import json
from pathlib import Path

from benchmarks import run_all
from benchmarks.photos_e2e import TARGETS

STEPS = ("example-gen", "validate", "transform", "train", "evaluate", "push")


def test_e2e_suite_measures_every_step_of_both_contenders(tmp_path: Path) -> None:
    code = run_all.main(["--only", "photos_e2e", "--e2e-rows", "60", "--e2e-epochs", "1",
                         "--e2e-resize", "32x32", "--work", str(tmp_path)])
    result = json.loads((tmp_path / "photos_e2e.json").read_text())
    assert code == (1 if result["failed"] else 0)  # a missed target fails `make bench`
    assert result["sizes"] == [60] and set(result["comparison"]["met"]) == set(TARGETS)
    for rows in ("60",):  # one size: two would only repeat both contenders' runs
        run, keras = result["results"][rows]["shardflow"], result["results"][rows]["handwritten"]
        for step in STEPS:
            figures = run["steps"][step]
            assert figures["wall_s"] > 0 and figures["peak_rss_mb"] > 100, (rows, step, figures)
        assert run["steps"]["example-gen"]["disk_mb"] > 0 and run["steps"]["transform"]["disk_mb"] > 0
        assert 0.0 <= keras["accuracy"] <= 1.0 and keras["peak_rss_mb"] > 100 and keras["disk_mb"] > 0
        check = result["comparison"]["per_size"][rows]
        assert check["wall_ratio"] == run["wall_s"] / keras["wall_s"]
        # the script's fit beyond its epochs (iterator deletion), taken off its wall for the second ratio
        assert 0.0 <= keras["stall_s"] < keras["wall_s"]
        assert check["unstalled_wall_ratio"] == run["wall_s"] / (keras["wall_s"] - keras["stall_s"])
        assert check["transform_disk_ratio"] <= TARGETS["transform_disk_ratio"]  # compact Transform, even tiny
    assert (tmp_path / "photos-60" / "train.csv").read_text().count("\n") == 1 + 48  # header + 80 % of 60

"""The benchmark suites `make bench` runs, and the size notation their flags take: a leaf module.

A suite is a module `benchmarks.<name>_suite` with `NAME`, `add_arguments(parser)`,
`run(args, sizes, work) -> dict` (JSON-able; key "failed" when something went wrong) and
`markdown(result) -> str`, listed in `SUITES`. Suites are imported when asked for (`load_suites`),
so a suite may import `parse_size` from here without a cycle.

>>> parse_size("200k"), parse_size("1.5m"), parse_size("5_000")
(200000, 1500000, 5000)
"""
from __future__ import annotations

import argparse
import importlib
import re
from types import ModuleType

SUITES = ("example_gen", "transform", "trainer", "evaluator", "photos", "photos_e2e", "rerun_cache",
          "near_duplicates", "predict", "scoring_memory", "warm_runner", "gate",
          "label_issues", "box_label_issues", "resume", "data_service", "serving", "tracking", "detection",
          "detection_yolo", "reader_s3")
MODULES = {"predict": "predict_bench"}  # suites whose module is not benchmarks.<name>_suite
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kKmM]?)$")


def parse_size(text: str) -> int:
    """`5000`, `200_000`, `200k`, `1M`, `1.5m` → a row count."""
    match = _SIZE.match(text.replace("_", "").strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a row count: {text!r} (e.g. 5000, 200k, 1M)")
    number, unit = float(match.group(1)), match.group(2).lower()
    rows = int(number * {"": 1, "k": 1_000, "m": 1_000_000}[unit])
    if rows < 1:
        raise argparse.ArgumentTypeError(f"row count must be >= 1, got {text!r}")
    return rows


def load_suites(names: tuple[str, ...] = SUITES) -> list[ModuleType]:
    return [importlib.import_module(f"benchmarks.{MODULES.get(name, name + '_suite')}") for name in names]

"""`make bench`'s end-to-end photos suite: `shardflow run` against the hand-written Keras route (`photos_e2e`).

    python -m benchmarks.run_all --only photos_e2e --e2e-rows 5k 20k --e2e-epochs 3
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import photos_e2e
from .suites import parse_size

NAME = "photos_e2e"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("photos_e2e")
    group.add_argument("--e2e-rows", nargs="+", type=parse_size, default=[5_000, 20_000],
                       help="photo counts (its own sizes, default 5k 20k)")
    group.add_argument("--e2e-epochs", type=int, default=3)
    group.add_argument("--e2e-resize", default="224x224")


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    results = {}
    for rows in sorted(args.e2e_rows):
        root = photos_e2e.make_data(work, rows)
        results[rows] = {
            "shardflow": photos_e2e.shardflow_run(root, work / f"e2e-run-{rows}", args.e2e_epochs, args.e2e_resize),
            "handwritten": photos_e2e.handwritten(root, work / f"e2e-keras-{rows}", args.e2e_epochs, args.e2e_resize)}
    comparison = photos_e2e.compare(results, args.e2e_epochs)
    return {"sizes": sorted(args.e2e_rows), "epochs": args.e2e_epochs, "results": results, "comparison": comparison,
            "failed": not all(comparison["met"].values())}


def markdown(result: dict[str, Any]) -> str:
    return photos_e2e.markdown(result)

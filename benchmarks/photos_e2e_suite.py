"""`make bench`'s end-to-end photos suite: `shardflow run` against the hand-written Keras route (`photos_e2e`).

With `--repeats N`, N rounds per size, the two contenders' order swapped each round
(`repeats.rotations`): the round whose wall ratio is the median is the one reported and checked,
and every round's ratio is kept (training on 2 cores moves a contender's wall by up to 45 % between
runs of the same code).

    python -m benchmarks.run_all --only photos_e2e --e2e-rows 5k 20k --e2e-epochs 3
    python -m benchmarks.run_all --only photos_e2e --e2e-rows 1k 3k --e2e-train-args=--mixed-precision
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import photos_e2e
from .repeats import middle, rotations
from .suites import parse_size

NAME = "photos_e2e"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("photos_e2e")
    group.add_argument("--e2e-rows", nargs="+", type=parse_size, default=[5_000, 20_000],
                       help="photo counts (its own sizes, default 5k 20k)")
    group.add_argument("--e2e-epochs", type=int, default=3)
    group.add_argument("--e2e-resize", default="224x224")
    group.add_argument("--e2e-train-args", default="",
                       help="more flags for shardflow's train step, e.g. '--mixed-precision' (default none)")


def _round(root: Path, work: Path, rows: int, order: list[str], round_: int, args: argparse.Namespace) -> dict[str, Any]:
    """Both contenders once, in `order`; each round writes its own outputs."""
    suffix = f"-r{round_}" if round_ else ""
    runs = {"shardflow": lambda: photos_e2e.shardflow_run(root, work / f"e2e-run-{rows}{suffix}", args.e2e_epochs,
                                                          args.e2e_resize, getattr(args, "e2e_train_args", "")),
            "handwritten": lambda: photos_e2e.handwritten(root, work / f"e2e-keras-{rows}{suffix}", args.e2e_epochs,
                                                          args.e2e_resize)}
    pair = {who: runs[who]() for who in order}
    return {"shardflow": pair["shardflow"], "handwritten": pair["handwritten"]}


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    results, rounds, unstalled = {}, {}, {}
    for rows in sorted(args.e2e_rows):
        root = photos_e2e.make_data(work, rows)
        pairs = [_round(root, work, rows, order, round_, args)
                 for round_, order in enumerate(rotations(["shardflow", "handwritten"], getattr(args, "repeats", 1)))]
        # the median round; with an even count the one with the higher ratio: never in shardflow's favour
        results[rows] = middle(pairs, key=photos_e2e.wall_ratio, upper=True)
        rounds[rows] = [photos_e2e.wall_ratio(pair) for pair in pairs]
        unstalled[rows] = [r for r in map(photos_e2e.unstalled_wall_ratio, pairs) if r is not None]
    comparison = photos_e2e.compare(results, args.e2e_epochs)
    return {"sizes": sorted(args.e2e_rows), "epochs": args.e2e_epochs, "train_args": getattr(args, "e2e_train_args", ""),
            "results": results, "comparison": comparison,
            "round_wall_ratios": rounds, "round_unstalled_ratios": unstalled, "failed": not all(comparison["met"].values())}


def markdown(result: dict[str, Any]) -> str:
    return photos_e2e.markdown(result)

"""`make bench`'s near-duplicate suite: hash recall and false pairs, hashing cost, search time (`near_duplicates`).

    python -m benchmarks.run_all --only near_duplicates --nd-originals 300 --nd-hashes 100k 1M
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from shardflow.example_gen.config import DEFAULT_NEAR_DUPLICATE_DISTANCE

from . import near_duplicates
from .suites import parse_size

NAME = "near_duplicates"
TARGET_RECALL, TARGET_FALSE_RATE = 0.95, 0.001


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("near_duplicates")
    group.add_argument("--nd-originals", type=int, default=300, help="distinct originals per kind (default 300)")
    group.add_argument("--nd-hashes", nargs="+", type=parse_size, default=[100_000, 1_000_000],
                       help="hash counts the search is timed on (default 100k 1M)")


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    distance = DEFAULT_NEAR_DUPLICATE_DISTANCE
    result = near_duplicates.measure(args.nd_originals, sorted(args.nd_hashes), distance)
    chosen = result["quality"]["by_distance"][str(distance)]
    met = {"recall": chosen["recall"] >= TARGET_RECALL, "false_pair_rate": chosen["false_pair_rate"] <= TARGET_FALSE_RATE,
           "search_finds_planted": all(r["planted_found"] == r["planted"] for r in result["search"])}
    return {**result, "sizes": sorted(args.nd_hashes), "distance": distance, "met": met, "failed": not all(met.values())}


def markdown(result: dict[str, Any]) -> str:
    return near_duplicates.markdown(result, result["distance"]) + f"\n\ntargets met: {result['met']}"

"""`make bench`'s near-duplicate suite: hash recall and false pairs, hashing cost, search time, and
ExampleGen's list of pairs checked against brute force (`near_duplicates`).

    python -m benchmarks.run_all --only near_duplicates --nd-originals 300 --nd-hashes 100k 1M --nd-listed 100
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from shardflow.example_gen.config import DEFAULT_NEAR_DUPLICATE_DISTANCE

from . import near_duplicates, near_duplicates_listing
from .suites import parse_size

NAME = "near_duplicates"
TARGET_RECALL, TARGET_FALSE_RATE, TARGET_FLAGGED_SHARE = 0.95, 0.001, 0.01


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("near_duplicates")
    group.add_argument("--nd-originals", type=int, default=300, help="distinct originals per kind (default 300)")
    group.add_argument("--nd-hashes", nargs="+", type=parse_size, default=[100_000, 1_000_000],
                       help="hash counts the search is timed on (default 100k 1M)")
    group.add_argument("--nd-listed", type=int, default=100,
                       help="originals per kind ingested by ExampleGen to check its list of pairs (default 100; 0: skip)")


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    distance = DEFAULT_NEAR_DUPLICATE_DISTANCE
    result = near_duplicates.measure(args.nd_originals, sorted(args.nd_hashes), distance)
    chosen = result["quality"]["by_distance"][str(distance)]
    met = {"recall": chosen["recall"] >= TARGET_RECALL, "false_pair_rate": chosen["false_pair_rate"] <= TARGET_FALSE_RATE,
           "flagged_share": chosen["flagged_share"] <= TARGET_FLAGGED_SHARE,
           "search_finds_planted": all(r["planted_found"] == r["planted"] for r in result["search"])}
    if args.nd_listed:
        listed = result["listing"] = near_duplicates_listing.listing(args.nd_listed, work, distance)
        met["every_flagged_pair_listed"] = listed["missing"] == listed["extra"] == 0 and listed["listed"] == listed["count"]
        met["listed_recall"] = listed["recall"] >= TARGET_RECALL
    return {**result, "sizes": sorted(args.nd_hashes), "distance": distance, "met": met, "failed": not all(met.values())}


def markdown(result: dict[str, Any]) -> str:
    text = near_duplicates.markdown(result, result["distance"])
    listed = result.get("listing")
    if listed:
        text += (f"\n\nThrough ExampleGen ({listed['train']} train images; eval: {listed['copies']} altered copies and "
                 f"{listed['fresh']} fresh distinct images, 128×128 PNG, {listed['example_gen_seconds']} s): "
                 f"{listed['listed']:,} pairs listed in near_duplicates.jsonl for a count of {listed['count']:,}; "
                 f"{listed['flagged']:,} flagged by brute force over the same files, {listed['missing']} of them not "
                 f"listed, {listed['extra']} listed but not flagged; copies listed (recall) {listed['recall']:.3f}; "
                 f"fresh eval images flagged {listed['fresh_flagged_share']:.2%}")
    return text + f"\n\ntargets met: {result['met']}"

"""`make bench`'s near-duplicate suite: hash recall and false pairs, hashing cost, search time, and
ExampleGen's list of pairs checked against brute force (`near_duplicates`); issue 46's set through
`shardflow example-gen` (`near_duplicates_ingest`).

    python -m benchmarks.run_all --only near_duplicates --nd-originals 300 --nd-hashes 100k 1M --nd-listed 100
    python -m benchmarks.run_all --only near_duplicates --nd-timings keep    # rates only, on a busy machine

`--nd-timings keep` measures the rates (recall, false pairs, the list against brute force) and copies
the timings (hash cost, search) from the published result, saying from which run. The search is timed
as ExampleGen searches: two hashes an image (dct and centre) at the distance.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from shardflow.example_gen.config import DEFAULT_NEAR_DUPLICATE_DISTANCE

from . import near_duplicates, near_duplicates_ingest, near_duplicates_listing
from .docs_page import RESULTS
from .suites import parse_size

NAME = "near_duplicates"
TARGET_RECALL, TARGET_FALSE_RATE, TARGET_FLAGGED_SHARE = 0.95, 0.001, 0.01


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("near_duplicates")
    group.add_argument("--nd-originals", type=int, default=300, help="distinct originals per kind (default 300)")
    group.add_argument("--nd-hashes", nargs="+", type=parse_size, default=[100_000, 1_000_000],
                       help="image counts the search is timed on, two hashes each (default 100k 1M)")
    group.add_argument("--nd-listed", type=int, default=100,
                       help="originals per kind ingested by ExampleGen to check its list of pairs (default 100; 0: skip)")
    group.add_argument("--nd-timings", choices=("measure", "keep"), default="measure",
                       help="keep: copy hash cost and search times from the published result instead of timing them")
    group.add_argument("--nd-ingest-seeds", type=int, nargs="*", default=[46, 47, 48],
                       help="issue 46's set through shardflow example-gen, one per seed (default 46 47 48; none: skip)")


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    distance = DEFAULT_NEAR_DUPLICATE_DISTANCE
    if args.nd_timings == "keep":
        result = {"quality": near_duplicates.quality(args.nd_originals), **_kept_timings()}
    else:
        result = near_duplicates.measure(args.nd_originals, sorted(args.nd_hashes), distance)
    chosen = result["quality"]["by_distance"][str(distance)]
    met = {"recall": chosen["recall"] >= TARGET_RECALL, "false_pair_rate": chosen["false_pair_rate"] <= TARGET_FALSE_RATE,
           "flagged_share": chosen["flagged_share"] <= TARGET_FLAGGED_SHARE,
           "search_finds_planted": all(r["planted_found"] == r["planted"] for r in result["search"])}
    if args.nd_listed:
        listed = result["listing"] = near_duplicates_listing.listing(args.nd_listed, work, distance)
        if args.nd_timings == "keep":
            listed["example_gen_seconds"] = None  # a timing too
        met["every_flagged_pair_listed"] = listed["missing"] == listed["extra"] == 0 and listed["listed"] == listed["count"]
        met["listed_recall"] = listed["recall"] >= TARGET_RECALL
    if args.nd_ingest_seeds:
        ingested = result["ingest"] = [near_duplicates_ingest.measure(work / "near_duplicates_ingest", seed)
                                       for seed in args.nd_ingest_seeds]
        met["ingest_recall"] = sum(r["found"] for r in ingested) >= TARGET_RECALL * sum(r["copies"] for r in ingested)
    sizes = [row["hashes"] for row in result["search"]]
    return {**result, "sizes": sizes, "distance": distance, "met": met, "failed": not all(met.values())}


def _kept_timings() -> dict[str, Any]:
    """The published result's hash cost and search times, and which run measured them."""
    published = json.loads((RESULTS / f"{NAME}.json").read_text())
    kept = {key: published[key] for key in ("hash_cost", "search")}
    origin = published.get("timings_kept_from") or {key: published["run"][key] for key in ("date", "command")}
    return {**kept, "timings_kept_from": origin}


def _seconds(value: float | None) -> str:
    return "not timed" if value is None else f"{value} s"


def markdown(result: dict[str, Any]) -> str:
    text = near_duplicates.markdown(result, result["distance"])
    listed = result.get("listing")
    if listed:
        text += (f"\n\nThrough ExampleGen ({listed['train']} train images; eval: {listed['copies']} altered copies and "
                 f"{listed['fresh']} fresh distinct images, 128×128 PNG, {_seconds(listed['example_gen_seconds'])}): "
                 f"{listed['listed']:,} pairs listed in near_duplicates.jsonl for a count of {listed['count']:,}; "
                 f"{listed['flagged']:,} flagged by brute force over the same files, {listed['missing']} of them not "
                 f"listed, {listed['extra']} listed but not flagged; copies listed (recall) {listed['recall']:.3f}; "
                 f"fresh eval images flagged {listed['fresh_flagged_share']:.2%}")
    ingested = result.get("ingest")
    if ingested:
        found, copies = sum(r["found"] for r in ingested), sum(r["copies"] for r in ingested)
        flagged, fresh = sum(len(r["fresh_flagged"]) for r in ingested), sum(r["fresh"] for r in ingested)
        text += (f"\n\nIssue 46's set through `shardflow example-gen --resize 128x128` (seeds "
                 f"{', '.join(str(r['seed']) for r in ingested)}; each 200 train photo tiles, drawings on gradients "
                 f"and flat colours, 100 altered copies, 150 fresh distinct images): copies listed {found}/{copies}, "
                 f"fresh images flagged {flagged}/{fresh}")
    kept = result.get("timings_kept_from")
    if kept:
        text += (f"\n\nTimings not measured in this run (a busy machine): hash cost and search times are those of "
                 f"{kept['date']} (`{kept['command']}`), the hash cost on the hash of that date.")
    return text + f"\n\ntargets met: {result['met']}"

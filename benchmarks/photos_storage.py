"""Raw or JPEG storage for photos: bytes on disk against CPU to decode, read with shardflow's reader.

    storage_figures({"jpeg": Path("out-jpeg"), "raw": Path("out-raw")})   # what the photos suite calls
    python -m benchmarks.photos_storage --examples jpeg=OUT1 --examples raw=OUT2

Each output is ExampleGen's, of the same photos and rows, split "train". For each: bytes per example
(the manifest's shard sizes), and `build_stream(..., deterministic=False)` drained in turns
(`trainer_bench.time_datasets`): examples/s and the process's CPU µs per example. The shards are
read from the page cache after the warm-up pass: a disk or network slower than that adds
bytes/example ÷ bandwidth, which is where raw storage loses.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from shardflow.core.manifest import read_manifest

from .photos_reader import shardflow_reader
from .trainer_bench import time_datasets

ROUNDS = 3


def _bytes_per_example(examples: Path) -> float:
    split = read_manifest(examples).splits["train"]
    return sum(s.bytes for s in split.shards) / split.num_examples


def storage_figures(outputs: dict[str, Path], rounds: int = ROUNDS) -> dict[str, Any]:
    """Per storage kind: bytes/example, examples/s and CPU µs/example of shardflow's reader."""
    timed = time_datasets({kind: shardflow_reader(path, encoding=None) for kind, path in outputs.items()}, rounds)
    return {kind: {"bytes_per_example": round(_bytes_per_example(path)),
                   "examples_per_s": round(timed[kind]["median_per_s"]),
                   "cpu_us_per_example": round(timed[kind]["median_cpu_us_per_example"], 1)}
            for kind, path in outputs.items()}


def markdown(result: dict[str, Any]) -> str:
    lines = ["| storage | bytes/example | reader examples/s | reader CPU µs/example | MB/s to keep up |",
             "|---|---:|---:|---:|---:|"]
    for kind, figures in result.items():
        needed = figures["bytes_per_example"] * figures["examples_per_s"] / 1e6
        lines.append(f"| {kind} | {figures['bytes_per_example']:,} | {figures['examples_per_s']:,} | "
                     f"{figures['cpu_us_per_example']:,.0f} | {needed:,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.photos_storage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", action="append", required=True, metavar="KIND=DIR",
                        help="an ExampleGen output and its storage kind, e.g. jpeg=out1 (repeat)")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    outputs = {kind: Path(path) for kind, path in (item.split("=", 1) for item in args.examples)}
    print(markdown(storage_figures(outputs, args.rounds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

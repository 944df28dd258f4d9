"""`make bench`'s rerun suite: the first `shardflow run` on photos, the identical rerun, an edited row (`rerun_cache`).

    python -m benchmarks.run_all --only rerun_cache --rerun-rows 5k --rerun-epochs 3
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import rerun_cache
from .suites import parse_size

NAME = "rerun_cache"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("rerun_cache")
    group.add_argument("--rerun-rows", type=parse_size, default=5_000, help="photo count (its own size, default 5k)")
    group.add_argument("--rerun-epochs", type=int, default=3)


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    result = rerun_cache.measure(args.rerun_rows, args.rerun_epochs, work)
    return {**result, "failed": not all(result["met"].values())}


def markdown(result: dict[str, Any]) -> str:
    return rerun_cache.markdown(result)

"""`make bench`'s warm-runner suite: `shardflow run` warm against `--isolated` on the digits (`warm_runner`).

    python -m benchmarks.run_all --only warm_runner --warm-epochs 10
    python -m benchmarks.run_all --only warm_runner --warm-epochs 3 --repeats 3   # median of 3 rounds
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import warm_runner

NAME = "warm_runner"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("warm_runner")
    group.add_argument("--warm-epochs", type=int, default=10, help="epochs of the digits pipeline (make run's: 10)")


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    result = warm_runner.measure(args.warm_epochs, work, args.repeats)
    return {**result, "failed": not all(result["met"].values())}


def markdown(result: dict[str, Any]) -> str:
    return warm_runner.markdown(result)

"""`make bench`'s label-issue suite (`label_issues`): shardflow's lists against cleanlab's, on flipped photo labels.

    python -m benchmarks.run_all --only label_issues --li-train 6k --li-eval 5k --li-epochs 12

What it runs and why: label_issues_bench.py.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import label_issues_bench as bench
from .suites import parse_size

NAME = "label_issues"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("label_issues")
    group.add_argument("--li-train", type=parse_size, default=6_000, help="train photos (default 6k)")
    group.add_argument("--li-eval", type=parse_size, default=5_000, help="eval photos (default 5k)")
    group.add_argument("--li-epochs", type=int, default=12, help="training epochs (default 12)")
    group.add_argument("--li-folds", type=int, default=3, help="find-label-issues --folds (default 3)")


def run(args: argparse.Namespace, sizes: list[int] | None = None, work: Path | None = None) -> dict[str, Any]:
    work = Path(work or "bench_out")
    work.mkdir(parents=True, exist_ok=True)
    data = bench.prepare(work, args.li_train, args.li_eval)
    train_args = ["--epochs", str(args.li_epochs), "--batch-size", "64"]
    evaluated = bench.eval_split(data, work, train_args)
    trained = bench.train_split(data, work, train_args, args.li_folds)
    targets = bench.targets(evaluated, trained, args.li_eval)
    return {"benchmark": NAME, "train": args.li_train, "eval": args.li_eval, "epochs": args.li_epochs,
            "folds": args.li_folds, "flip_share": bench.FLIP_SHARE, "eval_split": evaluated,
            "train_split": trained, "targets": targets, "failed": not all(t["met"] for t in targets)}


def markdown(result: dict[str, Any]) -> str:
    return bench.markdown(result)

"""`make bench`'s box label-issue suite (`box_label_issues`): find-label-issues on boxes against cleanlab's
object_detection, on planted faults in the demo shapes.

    python -m benchmarks.run_all --only box_label_issues --bli-images 1000 --bli-faults 10 --bli-epochs 10

What it runs and why: box_label_issues_bench.py. Target (issue 65): recall >= 0.8 at precision >= 0.5 on the
issues the command lists.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import box_label_issues_bench as bench
from .suites import parse_size

NAME = "box_label_issues"
MIN_RECALL, MIN_PRECISION = 0.8, 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("box_label_issues")
    group.add_argument("--bli-images", type=parse_size, default=1_000, help="demo box images, 80 %% train (default 1k)")
    group.add_argument("--bli-faults", type=int, default=10, help="faults of each kind planted (default 10)")
    group.add_argument("--bli-side", type=int, default=bench.SIDE,
                       help=f"ExampleGen's --resize side for the fold models (default {bench.SIDE}, the demo's own)")
    group.add_argument("--bli-epochs", type=int, default=bench.EPOCHS,
                       help=f"the fold models' epochs (default {bench.EPOCHS})")


def run(args: argparse.Namespace, sizes: list[int] | None = None, work: Path | None = None) -> dict[str, Any]:
    work = Path(work or "bench_out")
    work.mkdir(parents=True, exist_ok=True)
    data = bench.prepare(work, args.bli_images, args.bli_faults, args.bli_side)
    found = bench.find(data, work, args.bli_epochs)
    same = bench.same_detections(found, data)
    listed = found["listed"]
    met = listed["recall"] >= MIN_RECALL and listed["precision"] >= MIN_PRECISION
    summary = found["summary"]
    return {"benchmark": NAME, "images": args.bli_images, "faults": len(data["faults"]), "epochs": args.bli_epochs,
            "side": args.bli_side,
            "folds": bench.FOLDS, "seconds": found["seconds"], "cpu_seconds": found["cpu_seconds"],
            "fold_box_recall": [f["held_out_box_recall"] for f in summary["fold_runs"]],
            "issues_by_kind": summary["issues_by_kind"], "listed": listed, "top": found["top"],
            "recall_by_kind": found["recall_by_kind"], "same_detections": same,
            "targets": [{"target": f"recall >= {MIN_RECALL} at precision >= {MIN_PRECISION}, the listed issues",
                         "measured": f"{listed['recall']:.3f} at {listed['precision']:.3f}", "met": met}],
            "failed": not met}


def markdown(result: dict[str, Any]) -> str:
    listed = result["listed"]
    lines = [f"{result['images']:,} demo box images (80 % train) at {result.get('side', 64)} px, {result['faults']} planted faults, "
             f"`find-label-issues --folds {result['folds']} --epochs {result['epochs']}`: {result['seconds']:.0f} s wall, "
             f"{result['cpu_seconds']:.0f} CPU-seconds; fold models' held-out box recall "
             f"{', '.join(f'{r:.3f}' for r in result['fold_box_recall'])}.", "",
             "| list | issues | finding a fault | precision | recall |", "|---|---|---|---|---|",
             f"| label_issues.jsonl | {listed['considered']} | {listed['hits']} | {listed['precision']:.3f} | "
             f"{listed['recall']:.3f} |"]
    lines += [f"| its top {n} | {s['considered']} | {s['hits']} | {s['precision']:.3f} | {s['recall']:.3f} |"
              for n, s in result["top"].items()]
    lines += ["", f"Recall by kind: {result['recall_by_kind']}; issues by kind: {result['issues_by_kind']}.", "",
              "By image, on the same out-of-fold detections:", "",
              "| scorer | images listed | faulted among them | precision | recall | seconds |", "|---|---|---|---|---|---|"]
    for name, s in result["same_detections"].items():
        if isinstance(s, str):
            lines.append(f"| {name} | {s} | | | | |")
        else:
            seconds = f"{s['seconds']:.3f}" if "seconds" in s else ""
            lines.append(f"| {name} | {s['images']} | {s['hits']} | {s['precision']:.3f} | {s['recall']:.3f} | {seconds} |")
    lines += ["", *(f"- {t['target']}: {t['measured']} ({'met' if t['met'] else 'NOT met'})" for t in result["targets"])]
    return "\n".join(lines)

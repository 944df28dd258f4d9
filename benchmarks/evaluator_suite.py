"""Evaluator benchmark: examples/s of `shardflow evaluate` vs Keras `predict` on the same examples in memory.

    python -m benchmarks.run_all --only evaluator                        # 20k 28×28 examples
    python -m benchmarks.run_all --only evaluator --evaluator-rows 5k 50k --evaluator-batch-size 1024

Per size, an ExampleGen output whose "eval" split holds all the rows is made once and kept
(`<work>/evaluator/examples-<rows>`, not measured), from the same 28×28 PNG files as the other
benchmarks. One monitored child process (`benchmarks.evaluator_bench`) then measures the Evaluator
and `model.predict` side by side on a LeNet, alternating, best of `--evaluator-repeats` each.
Target: Evaluator examples/s ≥ 0.9 × predict's, both over the same examples at the same batch
size; the Evaluator reads, parses and decodes the shards itself, predict gets decoded float
tensors. Reported for the Evaluator: its scoring phase (streaming the split through the model and
counting, which the target is about) and its whole run (model load, metrics, plot and files too).

The suite interface for `run_all`: `NAME`, `add_arguments`, `run`, `markdown`.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from .data import ensure_examples
from .monitor import Watch, child_env, run_monitored
from .transform_bench import parse_rows

NAME = "evaluator"
DEFAULT_ROWS = "20000"
TARGET_RATIO = 0.9


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("evaluator")
    group.add_argument("--evaluator-rows", nargs="+", type=parse_rows,
                       help=f"examples to evaluate (env BENCH_EVALUATOR_ROWS, default {DEFAULT_ROWS!r})")
    group.add_argument("--evaluator-batch-size", type=int, default=512, help="batch size of both (default 512)")
    group.add_argument("--evaluator-repeats", type=int, default=3, help="alternating runs of each (default 3)")


def run_one(rows: int, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    examples = ensure_examples(work, NAME, rows, split="eval")
    out = work / NAME / f"out-{rows}"
    cmd = [sys.executable, "-m", "benchmarks.evaluator_bench", "--examples", str(examples), "--out", str(out),
           "--batch-size", str(args.evaluator_batch_size), "--repeats", str(args.evaluator_repeats)]
    print(f"[{NAME}] {rows:,} examples ...", file=sys.stderr, flush=True)
    m = run_monitored(cmd, work / "logs" / f"{NAME}-{rows}", Watch(), child_env())
    report = m.report
    ok = m.returncode == 0 and report.get("examples") == rows
    figures: dict[str, Any] = {"rows": rows, "returncode": m.returncode, "ok": ok, "process_s": m.wall_s,
                               "peak_rss_mb": m.peak_rss_mb, "peak_anon_mb": m.peak_anon_mb,
                               "load_before": m.load_before, **report}
    if not ok:
        print(f"[{NAME}] {rows:,} examples FAILED (rc={m.returncode}); see {work / 'logs'}", file=sys.stderr)
    return figures


def run(args: argparse.Namespace, sizes: list[int] | None = None, work: Path | None = None) -> dict[str, Any]:
    """Every Evaluator size (`--evaluator-rows`, else BENCH_EVALUATOR_ROWS, else 20k); run_all's sizes are not used."""
    work = (work or Path("bench_out")).resolve()
    rows = args.evaluator_rows or [parse_rows(s) for s in os.environ.get("BENCH_EVALUATOR_ROWS", DEFAULT_ROWS).split()]
    runs = [run_one(n, work, args) for n in sorted(set(rows))]
    targets = [{"target": f"Evaluator scoring ex/s ≥ {TARGET_RATIO} × predict ex/s at {r['rows']:,} "
                          f"(median of paired runs)",
                "measured": f"{r['paired_ratio_median']:.2f}", "met": r["paired_ratio_median"] >= TARGET_RATIO}
               for r in runs if r["ok"]]
    return {
        "benchmark": NAME, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "sizes": sorted(set(rows)),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "runs": runs, "targets": targets, "failed": not all(r["ok"] for r in runs),
        "notes": ("scoring = the Evaluator's pass over the split (read shards, parse, decode, serving signature, "
                  "confusion matrix and log loss); whole run = EvaluatorConfig → outputs written (model load, "
                  "metrics, plot included); predict = model.predict on decoded float32 arrays in memory; same LeNet "
                  "and batch size, alternating; ex/s = best (median) of the repeats; first = each side's first "
                  "run in the process; ratio = median over back-to-back pairs of scoring / predict; CPU ratio = "
                  "predict's CPU seconds / the whole Evaluator run's (all threads)"),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = ["| examples | batch | Evaluator scoring ex/s | Evaluator whole run ex/s | predict ex/s | first run: "
             "Evaluator / predict ex/s | ratio | ratio (whole run) | CPU ratio (whole run) | accuracy (Evaluator / predict) | peak RSS MB |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in result["runs"]:
        if not r["ok"]:
            lines.append(f"| {r['rows']:,} | **FAILED** (rc={r['returncode']}) | | | | | | | | | |")
            continue
        accuracy = r["accuracy"]
        lines.append(
            f"| {r['rows']:,} | {r['batch_size']} "
            f"| {r['evaluator_scoring_per_s']:,.0f} ({r['median_evaluator_scoring_per_s']:,.0f}) "
            f"| {r['evaluator_total_per_s']:,.0f} ({r['median_evaluator_total_per_s']:,.0f}) "
            f"| {r['predict_per_s']:,.0f} ({r['median_predict_per_s']:,.0f}) "
            f"| {r['first_evaluator_scoring_per_s']:,.0f} / {r['first_predict_per_s']:,.0f} "
            f"| {r['paired_ratio_median']:.2f} | {r['paired_ratio_whole_run_median']:.2f} "
            f"| {r['cpu_ratio_whole_run_median']:.2f} "
            f"| {accuracy['evaluator']:.4f} / {accuracy['predict']:.4f} | {r['peak_rss_mb']:,.0f} |")
    lines += ["", "| target | measured | met |", "|---|---:|:---:|"]
    lines += [f"| {t['target']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |" for t in result["targets"]]
    return "\n".join(lines + ["", "_" + result["notes"] + "_"])

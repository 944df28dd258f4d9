"""End to end on photos: `shardflow run` against the hand-written Keras route, side by side, in one run.

    python -m benchmarks.photos_e2e --rows 5000 20000 --epochs 3      # figures → <work>/photos_e2e.json

Data: N distinct JPEG crops of real photographs (`testkit.photo_data`, 300–500 px), label = number % 2,
the first 80 % in train.csv, the rest in eval.csv. Contenders, one after the other:

- (a) `shardflow run … --example-gen-args "--resize 224x224 --channels rgb --storage jpeg"
  --train-args "--epochs E"` (LeNet, batch 64), threshold accuracy>=0 so that it pushes;
- (b) `benchmarks/handwritten_keras.py`: tf.data over the JPEG files, the same LeNet, epochs, batch.

Measured: wall per step (the run's logs/steps.json) and in all; peak RSS of the whole process tree
(sampled every 0.2 s: the driver, the step worker and the step's processes together), per step
from the start and seconds each step's record holds (logs/steps.json); disk of each step's
outputs. Peak PSS beside peak RSS (every `Watch.smaps_interval` s): the tree's RSS counts the pages a forked
step shares with its warm worker, and each process's TensorFlow libraries, once per process; PSS counts a
shared page once in all. Targets (issue 55): wall ≤ 1.0× (b) at 3 epochs below 3,000 photos, ≤ 0.8× from
3,000, ≤ 0.7× from 10 epochs; peak RSS ≤ 1.3× (b) and flat from the smallest to the largest N (within +15 %);
Transform's output ≤ 1.5× ExampleGen's.

Beside wall (a)/(b): (a) against (b) less (b)'s stall, its `fit` beyond its epochs. That is the deletion of each
epoch's iterator, which TensorFlow 2.16's tf.data autotuning model often holds up until its next round (the
script as a user writes it; docs/trainer.md): it moved (b)'s 3 epochs on 3,000 photos between ~60 and ~100 s.
shardflow's stream runs without that model, so the second ratio compares both without the stall.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from testkit.photo_data import ensure_photos, photo_name

from .monitor import Watch, child_env, run_monitored

TARGETS = {"wall_ratio": 1.0, "rss_ratio": 1.3, "rss_growth": 1.15, "transform_disk_ratio": 1.5}
# Issue 55: at 3 epochs no slower than the hand-written route on 1,000 photos, 0.8x from 3,000 and 0.7x from 10
# epochs (the shards decoded once pay more the more they are read).
WALL_RATIO_FROM_3000_ROWS, WALL_RATIO_FROM_10_EPOCHS = 0.8, 0.7


def wall_target(rows: int, epochs: int) -> float:
    """The wall ratio (a)/(b) issue 55 asks for at this size and number of epochs."""
    if epochs >= 10:
        return WALL_RATIO_FROM_10_EPOCHS
    return WALL_RATIO_FROM_3000_ROWS if rows >= 3000 else TARGETS["wall_ratio"]


# PSS once a second (~10 ms of kernel CPU per TensorFlow process a read: about 2 % of a core for a run's 4-5).
WATCH = Watch(smaps_interval=1.0)


def make_data(work: Path, rows: int) -> Path:
    root = ensure_photos(work / f"photos-{rows}", count=rows)
    cut = int(rows * 0.8)
    for name, numbers in (("train", range(cut)), ("eval", range(cut, rows))):
        with open(root / f"{name}.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["image", "label"])
            writer.writerows((photo_name(n), n % 2) for n in numbers)
    return root


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def _step_records(run_root: Path, started_at: float) -> dict[str, tuple[float, float, float]]:
    """Each step that ran, in the order they began: (seconds, and when it began and ended in seconds after the
    run's start), from the run's logs/steps.json (milliseconds: a step that takes 0.04 s prints as 0.0 s)."""
    steps = json.loads((run_root / "logs" / "steps.json").read_text())
    ran = sorted(((name, step) for name, step in steps.items() if step["state"] == "ok"), key=lambda s: s[1]["started"])
    return {name: (step["seconds"], step["started"] - started_at, step["started"] - started_at + step["seconds"])
            for name, step in ran}


def shardflow_run(root: Path, out: Path, epochs: int, resize: str, train_args: str = "") -> dict[str, Any]:
    """`shardflow run` on the photos; `train_args`: more flags for its train step (none: the defaults)."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "shardflow", "run", "--index", f"train={root / 'train.csv'}",
               "--index", f"eval={root / 'eval.csv'}", "--data-root", str(root), "--output", str(out),
               "--example-gen-args", f"--resize {resize} --channels rgb --storage jpeg",
               "--train-args", f"--epochs {epochs} --batch-size 64 {train_args}".strip(), "--threshold", "accuracy>=0"]
    measured = run_monitored(command, out.parent / f"{out.name}-log", WATCH, env=child_env())
    if measured.returncode:
        raise RuntimeError(f"shardflow run failed (exit {measured.returncode}); see {out.parent / out.name}-log.err")
    run_root = next((out / "pipeline_root").iterdir())
    steps = {}
    for name, (wall, low, high) in _step_records(run_root, measured.started_at).items():
        rss = [point[2] for point in measured.timeline if low - 1 <= point[0] <= high + 1]
        steps[name] = {"wall_s": wall, "peak_rss_mb": max(rss, default=0.0), "disk_mb": _du(run_root / name) / 1e6}
    return {"wall_s": measured.wall_s, "cpu_s": measured.cpu_s, "peak_rss_mb": measured.peak_rss_mb,
            "peak_pss_mb": measured.peak_pss_mb, "load_before": measured.load_before, "steps": steps,
            "disk_mb": _du(out) / 1e6}


def handwritten(root: Path, out: Path, epochs: int, resize: str) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "benchmarks.handwritten_keras", "--train", str(root / "train.csv"),
               "--eval", str(root / "eval.csv"), "--data-root", str(root), "--output", str(out),
               "--epochs", str(epochs), "--size", resize]
    measured = run_monitored(command, out.parent / f"{out.name}-log", WATCH, env=child_env())
    if measured.returncode:
        raise RuntimeError(f"the hand-written route failed (exit {measured.returncode})")
    report = measured.report
    # Its fit beyond its epochs: deleting each epoch's iterator, which TensorFlow 2.16's autotuning model can
    # hold up for seconds (handwritten_keras.py); shardflow's stream has no such stall.
    stall = max(report["fit_s"] - report["epochs_s"], 0.0) if "fit_s" in report else None
    return {"wall_s": measured.wall_s, "cpu_s": measured.cpu_s, "peak_rss_mb": measured.peak_rss_mb,
            "peak_pss_mb": measured.peak_pss_mb, "load_before": measured.load_before,
            "accuracy": report.get("accuracy"), "disk_mb": _du(out) / 1e6, "stall_s": stall}


def wall_ratio(pair: dict[str, Any]) -> float:
    """shardflow's wall time ÷ the hand-written route's, for one size (and round)."""
    return pair["shardflow"]["wall_s"] / pair["handwritten"]["wall_s"]


def unstalled_wall_ratio(pair: dict[str, Any]) -> float | None:
    """shardflow's wall ÷ the hand-written route's less its iterator-deletion stall (`stall_s`): the script as it
    would run without TensorFlow 2.16's stall, the harder comparison for shardflow."""
    b = pair["handwritten"]
    return pair["shardflow"]["wall_s"] / (b["wall_s"] - b["stall_s"]) if b.get("stall_s") is not None else None


def _cpu_ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """CPU seconds (a)/(b): what the work cost, less moved than wall by other users of the machine."""
    return a["cpu_s"] / b["cpu_s"] if a.get("cpu_s") and b.get("cpu_s") else None  # older results: no CPU


def _pss_ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Peak PSS (a)/(b): the bytes each holds, a page shared by several processes counted once."""
    return a["peak_pss_mb"] / b["peak_pss_mb"] if a.get("peak_pss_mb") and b.get("peak_pss_mb") else None


def compare(results: dict[int, dict[str, Any]], epochs: int) -> dict[str, Any]:
    """Ratios per size and whether each target is met."""
    targets = {**TARGETS, "wall_ratio": {str(rows): wall_target(int(rows), epochs) for rows in results}}
    checks: dict[str, Any] = {}
    for rows, pair in results.items():
        a, b = pair["shardflow"], pair["handwritten"]
        transform = a["steps"]["transform"]["disk_mb"] / a["steps"]["example-gen"]["disk_mb"]
        checks[str(rows)] = {"wall_ratio": wall_ratio(pair), "unstalled_wall_ratio": unstalled_wall_ratio(pair),
                             "stall_s": b.get("stall_s"), "cpu_ratio": _cpu_ratio(a, b),
                             "rss_ratio": a["peak_rss_mb"] / b["peak_rss_mb"], "pss_ratio": _pss_ratio(a, b),
                             "transform_disk_ratio": transform}
    sizes = sorted(results)
    growth = results[sizes[-1]]["shardflow"]["peak_rss_mb"] / results[sizes[0]]["shardflow"]["peak_rss_mb"]
    met = {name: all(c[name] <= targets[name] for c in checks.values()) for name in ("rss_ratio", "transform_disk_ratio")}
    met["wall_ratio"] = all(c["wall_ratio"] <= targets["wall_ratio"][rows] for rows, c in checks.items())
    met["rss_growth"] = growth <= targets["rss_growth"]
    return {"per_size": checks, "rss_growth": growth, "targets": targets, "met": met}


def _rounds_line(title: str, by_size: dict[str, list[float]] | None) -> list[str]:
    """`title`: each size's per-round ratios; nothing with a single round."""
    rounds = {rows: ratios for rows, ratios in (by_size or {}).items() if len(ratios) > 1}
    if not rounds:
        return []
    return ["", f"{title}: " + "; ".join(f"{int(rows):,} rows {', '.join(f'{r:.2f}×' for r in ratios)}"
                                         for rows, ratios in rounds.items())]


def markdown(result: dict[str, Any]) -> str:
    extra = f", shardflow's train step with `{result['train_args']}`" if result.get("train_args") else ""
    lines = [f"Photos end to end, {result['epochs']} epochs{extra}, load before each contender: "
             + ", ".join(f"{r['shardflow']['load_before']:.1f}/{r['handwritten']['load_before']:.1f}"
                         for r in result["results"].values()), "",
             "| rows | step | wall s | peak RSS MB (tree) | disk MB |", "|---:|---|---:|---:|---:|"]
    for rows, pair in result["results"].items():
        for name, step in pair["shardflow"]["steps"].items():
            lines.append(f"| {int(rows):,} | {name} | {step['wall_s']:.1f} | {step['peak_rss_mb']:,.0f} | "
                         f"{step['disk_mb']:,.1f} |")
        for who in ("shardflow", "handwritten"):
            whole = pair[who]
            lines.append(f"| {int(rows):,} | **{who} (all)** | {whole['wall_s']:.1f} | {whole['peak_rss_mb']:,.0f} | "
                         f"{whole['disk_mb']:,.1f} |")
    lines += ["", "| rows | wall (a)/(b) | wall (a)/(b less its stall) | (b)'s stall s | CPU (a)/(b) "
              "| peak RSS (a)/(b) | peak PSS (a)/(b) | Transform / ExampleGen disk |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for rows, check in result["comparison"]["per_size"].items():
        cpu, pss, unstalled = (f"{check[key]:.2f}×" if check.get(key) else "–"
                               for key in ("cpu_ratio", "pss_ratio", "unstalled_wall_ratio"))
        stall = "–" if check.get("stall_s") is None else f"{check['stall_s']:.1f}"
        lines.append(f"| {int(rows):,} | {check['wall_ratio']:.2f}× | {unstalled} | {stall} | {cpu} | "
                     f"{check['rss_ratio']:.2f}× | {pss} | {check['transform_disk_ratio']:.2f}× |")
    comparison = result["comparison"]
    lines += _rounds_line("Wall (a)/(b) in each round (the median round is the one above)",
                          result.get("round_wall_ratios"))
    lines += _rounds_line("Wall (a)/(b less its stall) in each round", result.get("round_unstalled_ratios"))
    lines += ["", f"Peak RSS growth from the smallest to the largest size: {comparison['rss_growth']:.2f}×. "
              "Targets met: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in comparison["met"].items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.photos_e2e", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[5_000, 20_000])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--resize", default="224x224")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("BENCH_WORK", "bench_out")))
    args = parser.parse_args(argv)
    results = {}
    for rows in args.rows:
        root = make_data(args.work, rows)
        results[rows] = {"shardflow": shardflow_run(root, args.work / f"e2e-run-{rows}", args.epochs, args.resize),
                         "handwritten": handwritten(root, args.work / f"e2e-keras-{rows}", args.epochs, args.resize)}
    result = {"epochs": args.epochs, "results": results, "comparison": compare(results, args.epochs)}
    (args.work / "photos_e2e.json").write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

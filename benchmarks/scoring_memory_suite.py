"""Scoring memory: peak RSS of `shardflow evaluate` and `shardflow predict` on masks, against the Trainer's.

    python -m benchmarks.run_all --only scoring_memory                              # 100 and 1,000 at 256 px, 100 at 512
    python -m benchmarks.run_all --only scoring_memory --scoring-eval 100 300 --scoring-large 0   # a quick run

Data (`testkit.mask_data`): square crops of scikit-learn's sample photos with 4-class PNG masks, ingested as
users do (`--channels rgb --storage image=jpeg --storage mask=png`): `--scoring-train` train masks
and, per eval size, an ExampleGen output with those train masks and N eval masks. A U-Net is
trained once per image size (`shardflow train --epochs 1`, batch 64: the Trainer's defaults) on the
first output; its peak RSS is the reference (at 512 px with `--batch-size 8`: a batch of 64 would need
~18 GB to train). Then, each in its own monitored process (peak RSS of
the process tree, Beam's workers included):

- `shardflow evaluate` (batch sized by the default `--memory-mb`) at every eval size;
- `shardflow predict --examples … --split eval` (defaults) at every eval size;
- at the smallest 256-px size, `shardflow evaluate --batch-size 512 --memory-mb 1000000`: the old
  fixed batch of 512, side by side (at 100 masks it holds all 100).

Targets (issue: scoring memory in bytes): evaluate and predict peak RSS grow ≤ 50 MB from the
smallest to the largest 256-px eval size, and stay ≤ 2× the Trainer's peak on the same model.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from testkit.mask_data import NUM_CLASSES, ensure_masks

from .monitor import Watch, child_env, run_monitored
from .suites import parse_size

NAME = "scoring_memory"
GROWTH_MB, TRAINER_RATIO = 50, 2.0
INGEST = ["--channels", "rgb", "--storage", "image=jpeg", "--storage", "mask=png"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scoring_memory")
    group.add_argument("--scoring-eval", nargs="+", type=parse_size, default=[100, 1_000],
                       help="eval masks of 256 px (default 100 1k)")
    group.add_argument("--scoring-large", type=parse_size, default=100, help="eval masks of 512 px (0: none; default 100)")
    group.add_argument("--scoring-train", type=parse_size, default=200, help="train masks per size (default 200)")


def _shardflow(args: list[str], log: Path) -> dict[str, Any]:
    measured = run_monitored([sys.executable, "-m", "shardflow", *args], log, Watch(), env=child_env())
    if measured.returncode != 0:
        raise RuntimeError(f"shardflow {args[0]} failed (exit {measured.returncode}); see {log}.err")
    return {"wall_s": round(measured.wall_s, 1), "peak_rss_mb": round(measured.peak_rss_mb),
            "processes": measured.max_processes, "load_before": measured.load_before}


def _indexes(root: Path, index: Path, train: int, evals: list[int]) -> tuple[Path, dict[int, Path]]:
    """train.csv (the first `train` rows) and eval-N.csv (the next N rows) beside the full index."""
    with open(index, newline="") as stream:
        header, *rows = list(csv.reader(stream))

    def write(path: Path, chosen: list[list[str]]) -> Path:
        with open(path, "w", newline="") as out:
            csv.writer(out).writerows([header, *chosen])
        return path

    return (write(root / "train.csv", rows[:train]),
            {n: write(root / f"eval-{n}.csv", rows[train:train + n]) for n in evals})


def _size_run(work: Path, size: int, train: int, evals: list[int], naive: bool) -> dict[str, Any]:
    root = work / NAME / f"masks-{size}"
    index = ensure_masks(root, train + max(evals), size)
    train_csv, eval_csvs = _indexes(root, index, train, evals)
    logs = work / "logs" / NAME
    examples = {}
    for n, eval_csv in eval_csvs.items():
        examples[n] = root / f"examples-{n}"
        if not (examples[n] / "manifest.json").is_file():
            _shardflow(["example-gen", "--index", f"train={train_csv}", "--index", f"eval={eval_csv}",
                        "--data-root", str(root), "--output", str(examples[n]), *INGEST], logs / f"eg-{size}-{n}")
    model_out = root / "train"
    print(f"[{NAME}] {size} px: training a U-Net on {train} masks ...", file=sys.stderr, flush=True)
    batch = "64" if size <= 256 else "8"
    trainer = _shardflow(["train", "--examples", str(examples[min(evals)]), "--output", str(model_out),
                          "--epochs", "1", "--num-classes", str(NUM_CLASSES), "--batch-size", batch],
                         logs / f"train-{size}")
    trainer["batch_size"] = int(batch)
    model = str(model_out / "model")
    rows = []
    for n in evals:
        print(f"[{NAME}] {size} px: evaluate and predict on {n} masks ...", file=sys.stderr, flush=True)
        evaluate = _shardflow(["evaluate", "--model", model, "--examples", str(examples[n]),
                               "--output", str(root / f"eval-out-{n}")], logs / f"evaluate-{size}-{n}")
        metrics = json.loads((root / f"eval-out-{n}" / "metrics.json").read_text())
        predict = _shardflow(["predict", "--model", model, "--examples", str(examples[n]), "--split", "eval",
                              "--output", str(root / f"predict-out-{n}")], logs / f"predict-{size}-{n}")
        rows.append({"eval_masks": n, "evaluate": {**evaluate, "batching": metrics["batching"],
                                                   "mean_iou": metrics["overall"]["mean_iou"]},
                     "predict": predict})
    result: dict[str, Any] = {"size": size, "train_masks": train, "trainer": trainer, "rows": rows}
    if naive:
        n = min(evals)
        old = _shardflow(["evaluate", "--model", model, "--examples", str(examples[n]), "--output",
                          str(root / "eval-out-old"), "--batch-size", "512", "--memory-mb", "1000000"],
                         logs / f"evaluate-old-{size}-{n}")
        result["old_fixed_batch"] = {"eval_masks": n, "batch_size": 512, **old}
    return result


def _targets(result: dict[str, Any]) -> dict[str, bool]:
    met: dict[str, bool] = {}
    for run in result["runs"]:
        trainer = run["trainer"]["peak_rss_mb"]
        for step in ("evaluate", "predict"):
            peaks = [row[step]["peak_rss_mb"] for row in run["rows"]]
            met[f"{step} {run['size']} px ≤ {TRAINER_RATIO:g}× trainer"] = max(peaks) <= TRAINER_RATIO * trainer
            if run["size"] == 256 and len(peaks) > 1:
                met[f"{step} growth ≤ {GROWTH_MB} MB"] = peaks[-1] - peaks[0] <= GROWTH_MB
    return met


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    evals = sorted(args.scoring_eval)
    runs = [_size_run(work, 256, args.scoring_train, evals, naive=True)]
    if args.scoring_large:
        runs.append(_size_run(work, 512, args.scoring_train, [args.scoring_large], naive=False))
    result: dict[str, Any] = {"runs": runs}
    result["met"] = _targets(result)
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = ["| size | eval masks | step | batch (rule) | MB an example | peak RSS MB | × trainer | wall s |",
             "|---:|---:|---|---|---:|---:|---:|---:|"]
    for run in result["runs"]:
        trainer = run["trainer"]["peak_rss_mb"]
        lines.append(f"| {run['size']} | {run['train_masks']} train | train (batch {run['trainer']['batch_size']}) | | | "
                     f"{trainer:,} | 1.00 | "
                     f"{run['trainer']['wall_s']} |")
        for row in run["rows"]:
            batching = row["evaluate"]["batching"]
            cost = batching["example_bytes"] / (1 << 20) if batching["example_bytes"] else None
            for step in ("evaluate", "predict"):
                figures = row[step]
                batch = f"{batching['batch_size']} ({batching['rule']})" if step == "evaluate" else "sized per worker"
                lines.append(f"| {run['size']} | {row['eval_masks']:,} | {step} | {batch} | "
                             f"{'' if cost is None or step != 'evaluate' else f'{cost:.1f}'} | "
                             f"{figures['peak_rss_mb']:,} | {figures['peak_rss_mb'] / trainer:.2f} | {figures['wall_s']} |")
        old = run.get("old_fixed_batch")
        if old:
            lines.append(f"| {run['size']} | {old['eval_masks']:,} | evaluate, old fixed batch 512 | all {old['eval_masks']} | | "
                         f"{old['peak_rss_mb']:,} | {old['peak_rss_mb'] / trainer:.2f} | {old['wall_s']} |")
    met = result.get("met", {})
    lines += ["", "Targets: " + "; ".join(f"{name}: {'met' if ok else 'MISSED'}" for name, ok in met.items())]
    return "\n".join(lines)

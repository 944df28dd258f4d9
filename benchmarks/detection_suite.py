"""Object detection: a whole `shardflow run` on the demo boxes, and what boxes cost against labels alone.

    python -m benchmarks.run_all --only detection                         # 2,000 images; eval memory at 100 and 1k
    python -m benchmarks.run_all --only detection --detection-images 600 --detection-eval 100 300   # a quick run
    python -m benchmarks.run_all --only detection --detection-parts ingest --repeats 5   # boxes against labels alone

Data: `demo_boxes.write_boxes` (shapes of three classes on 96-px crops of scikit-learn's sample photos, 0-5
objects an image, the AutoML CSV layout), the same images also listed in a labels-only index (`path,label`:
the image's first box's class, or `none`), so both sides read, decode and write the same JPEGs.

- **run**: `shardflow run` on the train index and a quarter as many eval images, `--threshold "ap50>=0.7"`, the Trainer's defaults; wall, CPU
  and peak RSS of the whole tree, the Evaluator's AP figures and whether the model was pushed.
- **ingest**: `shardflow example-gen` on the box index against the labels-only index: rows per second, `--repeats`
  rounds with the two sides' order alternated; the target takes the median of the per-round ratios, the table
  each side's median run.
- **train**: `shardflow train` for `--detection-epochs` on each output (the detector against the default
  classifier, on the same images): the steady training rate (`input_report.json`, epochs after the first).
- **eval memory**: `shardflow evaluate` of the run's model on an ExampleGen output of N eval images, for each
  `--detection-eval` N: peak RSS of the tree.

`--detection-parts` runs some of these only (train needs ingest's outputs, eval memory the run's model).

Targets (issue 54): AP50 >= 0.7 and the run within 300 s of wall on this machine; evaluation's peak RSS flat
(at most 50 MB apart) over the eval sizes that fill a batch: the Evaluator's batch holds what `--memory-mb`
allows (1 GB by default: 512 of these examples, whose activations are 1.4 MB each), so a split smaller than
one batch needs less. Issue 65: ExampleGen's rows/s on the boxes at least 0.9x those on the labels alone.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from .monitor import Watch, child_env, run_monitored
from .repeats import median, middle, rotations
from .suites import parse_size

NAME = "detection"
AP50_TARGET, RUN_SECONDS, GROWTH_MB, INGEST_RATIO = 0.7, 300.0, 50, 0.9
PARTS = ("run", "ingest", "train", "eval")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("detection")
    group.add_argument("--detection-images", type=parse_size, default=2_000,
                       help="demo box images to train on (default 2k; a quarter as many more are the run's eval)")
    group.add_argument("--detection-eval", nargs="+", type=parse_size, default=[100, 1_000, 2_000],
                       help="eval images for the memory figure (default 100 1k 2k)")
    group.add_argument("--detection-epochs", type=int, default=3, help="epochs of the training-speed runs (default 3)")
    group.add_argument("--detection-parts", nargs="+", choices=PARTS, default=list(PARTS),
                       help="the parts to run (default all; eval needs run)")


def _shardflow(args: list[str], log: Path) -> dict[str, Any]:
    measured = run_monitored([sys.executable, "-m", "shardflow", *args], log, Watch(), env=child_env())
    if measured.returncode != 0:
        raise RuntimeError(f"shardflow {args[0]} failed (exit {measured.returncode}); see {log}.err")
    return {"wall_s": round(measured.wall_s, 1), "cpu_s": round(measured.cpu_s, 1),
            "peak_rss_mb": round(measured.peak_rss_mb), "load_before": measured.load_before}


def _data(root: Path, images: int, evals: list[int]) -> dict[str, Path]:
    """The demo boxes, their labels-only twin, and eval-N.csv box indexes of the first N eval images."""
    from shardflow.demo_boxes import write_boxes

    held_out = max(max(evals), images // 4)
    if not (root / "train.csv").is_file():
        write_boxes(root, count=images + held_out, eval_fraction=held_out / (images + held_out))
    indexes = {"train": root / "train.csv", "eval": root / "eval.csv"}
    for split in ("train", "eval"):
        with open(indexes[split], newline="") as stream:
            rows = list(csv.reader(stream))
        first: dict[str, str] = {}
        for row in rows:
            first.setdefault(row[0], row[1] or "none")
        with open(root / f"{split}-labels.csv", "w", newline="") as out:
            csv.writer(out).writerows([["image", "label"], *first.items()])
        indexes[f"{split}-labels"] = root / f"{split}-labels.csv"
        if split == "eval":
            for n in (*evals, images // 4):
                kept = set(list(first)[:n])
                with open(root / f"eval-{n}.csv", "w", newline="") as out:
                    csv.writer(out).writerows(row for row in rows if row[0] in kept)
                indexes[f"eval-{n}"] = root / f"eval-{n}.csv"
    return indexes


def _examples_per_second(output: Path) -> float | None:
    """The Trainer's steady training rate (input_report.json: the epochs after the first, which traces)."""
    report = output / "input_report.json"
    return json.loads(report.read_text()).get("training_examples_per_second") if report.is_file() else None


def _run_figures(root: Path, indexes: dict[str, Path], images: int, logs: Path) -> dict[str, Any]:
    out = root / "run"
    held_out = indexes[f"eval-{images // 4}"]
    figures = _shardflow(["run", "--index", f"train={indexes['train']}", "--index", f"eval={held_out}",
                          "--data-root", str(root), "--output", str(out), "--threshold",
                          f"ap50>={AP50_TARGET}"], logs / "run")
    run_root = next((out / "pipeline_root").iterdir())
    metrics = json.loads(next(run_root.glob("evaluate*/**/metrics.json")).read_text())
    overall = metrics.get("overall", metrics)
    figures.update({name: overall.get(name) for name in ("ap", "ap50", "ap75", "ar100")})
    figures["model"] = str(next(run_root.glob("train*/**/model/saved_model.pb")).parent)
    figures["pushed"] = (out / "serving" / "CURRENT.json").is_file()
    return figures


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    del sizes
    parts, evals = set(args.detection_parts), sorted(args.detection_eval)
    if "eval" in parts and "run" not in parts:
        raise SystemExit("--detection-parts eval needs run: eval memory is measured on the run's model")
    root, logs = work / NAME / "boxes", work / "logs" / NAME
    indexes = _data(root, args.detection_images, evals)
    result: dict[str, Any] = {"images": args.detection_images, "parts": [p for p in PARTS if p in parts]}
    if "run" in parts:
        print(f"[{NAME}] shardflow run on {args.detection_images:,} box images ...", file=sys.stderr, flush=True)
        result["pipeline_run"] = _run_figures(root, indexes, args.detection_images, logs)
    if "ingest" in parts or "train" in parts and not all((root / f"examples-{k}" / "manifest.json").is_file()
                                                         for k in ("boxes", "labels")):
        result["ingest"] = _ingest(root, indexes, logs, max(args.repeats, 1))
    if "train" in parts:
        result["train"] = {}
        for kind in ("boxes", "labels"):
            trained = root / f"train-{kind}"
            result["train"][kind] = _shardflow(["train", "--examples", str(root / f"examples-{kind}"), "--output",
                                                str(trained), "--epochs", str(args.detection_epochs)],
                                               logs / f"train-{kind}")
            result["train"][kind]["examples_per_s"] = _examples_per_second(trained)
    if "eval" in parts:
        result["eval_memory"] = _eval_memory(root, indexes, evals, result["pipeline_run"]["model"], logs)
    result["met"] = _targets(result)
    result["failed"] = not all(result["met"].values())
    return result


def _ingest(root: Path, indexes: dict[str, Path], logs: Path, repeats: int) -> dict[str, Any]:
    """ExampleGen on the boxes and on the labels alone, `repeats` rounds in alternating order: each side's median
    run (rows/s), every round's figures, and the median of the per-round ratios (boxes / labels rows/s)."""
    rounds: list[dict[str, dict[str, Any]]] = []
    for number, order in enumerate(rotations(["boxes", "labels"], repeats)):
        figures = {}
        for kind in order:
            suffix, output = "" if kind == "boxes" else "-labels", root / f"examples-{kind}"
            figures[kind] = _shardflow(["example-gen", "--index", f"train={indexes['train' + suffix]}", "--index",
                                        f"eval={indexes['eval' + suffix]}", "--data-root", str(root), "--output",
                                        str(output)], logs / f"example-gen-{kind}-{number}")
            figures[kind]["rows_per_s"] = round(_rows(output) / figures[kind]["wall_s"], 1)
        rounds.append(figures)
    ratios = [r["boxes"]["rows_per_s"] / r["labels"]["rows_per_s"] for r in rounds]
    return {**{kind: middle([r[kind] for r in rounds], key=lambda f: f["rows_per_s"]) for kind in ("boxes", "labels")},
            "ratio": round(median(ratios), 3), "ratios": [round(r, 3) for r in ratios], "rounds": rounds}


def _ingest_ratio(ingest: dict[str, Any]) -> float:
    """The median of the rounds' ratios (a result of one round before --repeats counted: its two runs)."""
    return ingest.get("ratio", ingest["boxes"]["rows_per_s"] / ingest["labels"]["rows_per_s"])


def _rows(output: Path) -> int:
    return sum(info["num_examples"] for info in json.loads((output / "manifest.json").read_text())["splits"].values())


def _eval_memory(root: Path, indexes: dict[str, Path], evals: list[int], model: str, logs: Path) -> list[dict]:
    rows = []
    for n in evals:
        examples = root / f"examples-eval-{n}"
        if not (examples / "manifest.json").is_file():
            _shardflow(["example-gen", "--index", f"train={indexes['train']}", "--index", f"eval={indexes[f'eval-{n}']}",
                        "--data-root", str(root), "--output", str(examples)], logs / f"example-gen-eval-{n}")
        figures = _shardflow(["evaluate", "--model", model, "--examples", str(examples), "--output",
                              str(root / f"evaluate-{n}")], logs / f"evaluate-{n}")
        batching = json.loads((root / f"evaluate-{n}" / "metrics.json").read_text())["batching"]
        rows.append({"eval_images": n, "batch_size": batching["batch_size"], **figures})
    return rows


def _targets(result: dict[str, Any]) -> dict[str, bool]:
    """The targets of the parts that ran."""
    met = {}
    if "pipeline_run" in result:
        run_figures = result["pipeline_run"]
        met[f"AP50 >= {AP50_TARGET}"] = (run_figures["ap50"] or 0.0) >= AP50_TARGET
        met[f"run <= {RUN_SECONDS:g} s"] = run_figures["wall_s"] <= RUN_SECONDS
    if "ingest" in result:
        met[f"ExampleGen rows/s on boxes >= {INGEST_RATIO}x labels only"] = (
            _ingest_ratio(result["ingest"]) >= INGEST_RATIO)
    if "eval_memory" in result:
        # Bounded in bytes: a batch holds what --memory-mb allows (512 of these examples), so the peak grows until
        # the split fills one batch, then stays: compared between the sizes whose batches are full.
        full = [row["peak_rss_mb"] for row in result["eval_memory"] if row["eval_images"] > row["batch_size"]]
        met[f"evaluate's peak RSS grows <= {GROWTH_MB} MB once a batch is full"] = (
            len(full) < 2 or max(full) - min(full) <= GROWTH_MB)
    return met


def markdown(result: dict[str, Any]) -> str:
    """The parts that ran (a result published before `--detection-parts` has them all)."""
    lines: list[str] = []
    if "pipeline_run" in result:
        run_figures = result["pipeline_run"]
        images = result["images"]
        lines += [f"`shardflow run` on {images:,} demo box images (and {images // 4:,} eval images): "
                  f"{run_figures['wall_s']} s wall, {run_figures['cpu_s']} CPU-s, "
                  f"peak RSS {run_figures['peak_rss_mb']:,} MB; "
                  + ", ".join(f"{label} {run_figures[name]:.3f}" for label, name in
                              (("AP", "ap"), ("AP50", "ap50"), ("AP75", "ap75"), ("AR@100", "ar100")))
                  + f"; pushed: {run_figures['pushed']}.", ""]
    if "ingest" in result or "train" in result:
        lines += ["| step | boxes | labels only | boxes / labels |", "|---|---:|---:|---:|"]
    if "ingest" in result:
        ingest = result["ingest"]
        ratio = _ingest_ratio(ingest)
        rounds = f" (median of {len(ingest['ratios'])} rounds' ratios)" if len(ingest.get("ratios", ())) > 1 else ""
        lines.append(f"| ExampleGen rows/s (CPU-s) | {ingest['boxes']['rows_per_s']} ({ingest['boxes']['cpu_s']}) | "
                     f"{ingest['labels']['rows_per_s']} ({ingest['labels']['cpu_s']}) | {ratio:.2f}×{rounds} |")
    if "train" in result:
        speeds = [result["train"][kind]["examples_per_s"] for kind in ("boxes", "labels")]
        ratio_text = f"{speeds[0] / speeds[1]:.2f}×" if all(speeds) else "–"
        lines.append(f"| Trainer examples/s (the detector against the default classifier) | {speeds[0]} | "
                     f"{speeds[1]} | {ratio_text} |")
    if "eval_memory" in result:
        lines += ["", "| eval images | batch (by --memory-mb) | evaluate peak RSS MB | wall s |",
                  "|---:|---:|---:|---:|"]
        lines += [f"| {row['eval_images']:,} | {row['batch_size']} | {row['peak_rss_mb']:,} | {row['wall_s']} |"
                  for row in result["eval_memory"]]
    lines += ["", "Targets: " + "; ".join(f"{name}: {'met' if ok else 'MISSED'}" for name, ok in result["met"].items())]
    return "\n".join(lines)

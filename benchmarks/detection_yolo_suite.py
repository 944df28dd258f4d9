"""Object detection against Ultralytics YOLOv8n (issue 67): the same images and boxes, one COCO evaluator.

    python -m benchmarks.run_all --only detection_yolo                                  # 1,500 + 900 train images
    python -m benchmarks.run_all --only detection_yolo --dy-images 300 --dy-epochs 3 --dy-sf-epochs 1 3  # quick

Two sets from `demo_boxes.write_boxes`: **demo** (96-px shapes on photos, 3 classes; `--dy-images` train and
`--dy-eval` eval images, YOLO at imgsz 96) and **mixed** (64-200 px, any aspect, a fifth EXIF-turned; by default
3/5 as many, eval a quarter of train; shardflow ingests it with `--resize 128x128 --channels rgb`, letterboxed,
YOLO at imgsz 128). The mixed set's YOLO epochs default to 5/6 of `--dy-epochs` (30 → 25).

- **shardflow**: `shardflow example-gen` once, then for each `--dy-sf-epochs` E `shardflow train --epochs E`
  (the Trainer's defaults and `--dy-train-args`) and `shardflow evaluate`: its Evaluator's figures. E = 10 is what
  `shardflow run` trains by default (pipelines/steps.py). Each E is its own run: a finished schedule each.
- **YOLO** (benchmarks/yolo_contender.py in .venv-yolo, `make yolo-setup`; it imports no shardflow, shardflow's
  environment no torch): `YOLO("yolov8n.yaml")` from scratch on the set exported to its layout (yolo_data.py),
  `--dy-epochs` epochs; after each epoch its CPU seconds and its EMA checkpoint; each checkpoint's predictions on
  the eval images, scored here by core/detection_metrics against the eval CSV's boxes as ExampleGen reads them
  (yolo_data.py): the curve is one run's epochs, the last point its result.

CPU seconds are user + system of the training process tree (`run_monitored`); wall beside them; "other CPU" is
the cores other processes used while the contender trained (`OtherCpu`), steal the hypervisor's share.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

from .detection_yolo_runs import SHARDFLOW_RUN_EPOCHS, run_set
from .suites import parse_size

NAME = "detection_yolo"
SETS = ("demo", "mixed")
TABLE = ("ap", "ap50", "ap75", "ap_small", "ap_medium", "ap_large")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("detection_yolo")
    group.add_argument("--dy-images", type=parse_size, default=1_500, help="demo set train images (default 1.5k)")
    group.add_argument("--dy-eval", type=parse_size, help="demo set eval images (default a fifth of --dy-images)")
    group.add_argument("--dy-mixed-images", type=parse_size, help="mixed set train images (default 3/5 of --dy-images)")
    group.add_argument("--dy-mixed-eval", type=parse_size,
                       help="mixed set eval images (default a quarter of its train images)")
    group.add_argument("--dy-epochs", type=int, default=30, help="YOLO epochs on the demo set (default 30)")
    group.add_argument("--dy-mixed-epochs", type=int, help="YOLO epochs on the mixed set (default 5/6 of --dy-epochs)")
    group.add_argument("--dy-sf-epochs", type=int, nargs="+", default=[3, SHARDFLOW_RUN_EPOCHS, 20],
                       help=f"shardflow train runs, one per epoch count (default 3 {SHARDFLOW_RUN_EPOCHS} 20)")
    group.add_argument("--dy-train-args", default="", help="more `shardflow train` flags, for every run")
    group.add_argument("--dy-sets", nargs="+", choices=SETS, default=list(SETS), help="which sets (default both)")
    group.add_argument("--dy-yolo-python", type=Path, default=Path(".venv-yolo/bin/python"),
                       help="the YOLO environment's python (make yolo-setup)")


def plans(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Each set's sizes, YOLO epochs and image size, from the flags and their derived defaults."""
    mixed_train = args.dy_mixed_images or max(1, args.dy_images * 3 // 5)
    return {"demo": {"train": args.dy_images, "eval": args.dy_eval or max(1, args.dy_images // 5),
                     "yolo_epochs": args.dy_epochs, "imgsz": 96, "mixed": False},
            "mixed": {"train": mixed_train, "eval": args.dy_mixed_eval or max(1, mixed_train // 4),
                      "yolo_epochs": args.dy_mixed_epochs or max(1, round(args.dy_epochs * 5 / 6)), "imgsz": 128,
                      "mixed": True}}


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    del sizes
    chosen = {name: plan for name, plan in plans(args).items() if name in args.dy_sets}
    result: dict[str, Any] = {"sets": {}, "failed": False, "sizes": [plan["train"] for plan in chosen.values()],
                              "source": source_state()}
    python = args.dy_yolo_python.absolute() if args.dy_yolo_python.exists() else None  # not resolve(): the venv's link
    if python is None:
        return {**result, "failed": f"no YOLO environment at {args.dy_yolo_python}: run `make yolo-setup`"}
    for name, plan in chosen.items():
        print(f"[{NAME}] {name}: {plan}", file=sys.stderr, flush=True)
        try:
            result["sets"][name] = {"plan": plan, **run_set(work / NAME / name, plan, sorted(set(args.dy_sf_epochs)),
                                                            args.dy_train_args.split(), python)}
            result["sets"][name].update(equal_cpu(name, result["sets"][name]))
        except Exception as err:  # one set's failure is recorded; the other set still runs
            traceback.print_exc()
            result["sets"][name] = {"plan": plan, "error": f"{type(err).__name__}: {err}"}
            result["failed"] = True
    return result


def equal_cpu(name: str, figures: dict[str, Any]) -> dict[str, Any]:
    """Issue 67's targets on one set: shardflow's headline run against YOLO's curve at the same training CPU
    seconds (linear between its epochs). YOLO's run must reach that CPU: a curve that ends before it is not met,
    as nothing says what YOLO would score there.

    >>> curve = [{"cpu_s": 100.0, "scores": {"ap": 0.4, "ap50": 0.6}}, {"cpu_s": 200.0, "scores": {"ap": 0.6, "ap50": 0.8}}]
    >>> found = equal_cpu("demo", {"shardflow": {"headline": {"cpu_s": 150.0, "scores": {"ap": 0.55, "ap50": 0.7}}},
    ...                            "yolo": {"curve": curve}})
    >>> found["yolo_at_equal_cpu"], found["met"]
    ({'cpu_s': 150.0, 'ap': 0.5, 'ap50': 0.7}, {'demo: AP ≥ YOLOv8n at equal CPU': True, 'demo: AP50 ≥ YOLOv8n at equal CPU': True})
    """
    base = figures["shardflow"]["headline"]
    cpu, curve = base["cpu_s"], figures["yolo"]["curve"]
    after = next((n for n, point in enumerate(curve) if point["cpu_s"] >= cpu), None)
    at: dict[str, Any] = {"cpu_s": cpu}
    for metric in ("ap", "ap50"):
        if after is None:
            at[metric] = None
            continue
        high = curve[after]
        low = curve[after - 1] if after else {"cpu_s": 0.0, "scores": {metric: 0.0}}
        share = (cpu - low["cpu_s"]) / (high["cpu_s"] - low["cpu_s"])
        at[metric] = round(low["scores"][metric] + share * (high["scores"][metric] - low["scores"][metric]), 4)
    met = {f"{name}: {label} ≥ YOLOv8n at equal CPU": at[metric] is not None and base["scores"][metric] >= at[metric]
           for metric, label in (("ap", "AP"), ("ap50", "AP50"))}
    return {"yolo_at_equal_cpu": at, "met": met}


def source_state() -> dict[str, Any]:
    """The commit measured and the components/ files that differed from it when the suite started."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        found = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        return found.stdout.strip() if found.returncode == 0 else ""

    changed = git("diff", "--name-only", "HEAD", "--", "components").split()
    return {"commit": git("rev-parse", "HEAD"), "changed": changed}


def _figure(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _row(label: str, run: dict[str, Any]) -> str:
    scores = run["scores"]
    return (f"| {label} | " + " | ".join(_figure(scores.get(name)) for name in TABLE)
            + f" | {run['cpu_s']:,.0f} | {run['wall_s']:,.0f} | {run.get('other_cpu', 0):.2f} |")


def _pixels(checked: dict[str, dict[str, Any]]) -> str:
    """The EXIF check's sentence: YOLO's loaded pixels against the upright image, per orientation."""
    if not checked:
        return ""
    return "; its loaded pixels differ from the upright image's by " + ", ".join(
        f"{found['upright']} levels (EXIF orientation {found['orientation']}, {path})"
        for path, found in checked.items())


def _set_table(name: str, figures: dict[str, Any]) -> list[str]:
    plan = figures["plan"]
    lines = [f"### {name}: {plan['train']:,} train and {plan['eval']:,} eval images", ""]
    if "error" in figures:
        return lines + [f"Failed: {figures['error']}"]
    lines += ["| contender | AP | AP50 | AP75 | AP small | AP medium | AP large | train CPU-s | train wall s | "
              "other CPU (cores) |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for run in figures["shardflow"]["runs"]:
        lines.append(_row(f"shardflow train --epochs {run['epochs']}", run))
    yolo = figures["yolo"]
    lines.append(_row(f"YOLOv8n, epochs={plan['yolo_epochs']}, imgsz={plan['imgsz']}", yolo))
    base = figures["shardflow"]["headline"]
    if base["scores"].get("ap") and base["cpu_s"]:
        lines += ["", f"YOLO / shardflow ({base['epochs']} epochs): "
                  f"AP {yolo['scores']['ap'] / base['scores']['ap']:.2f}×, "
                  f"AP50 {yolo['scores']['ap50'] / base['scores']['ap50']:.2f}×, training CPU "
                  f"{yolo['cpu_s'] / base['cpu_s']:.1f}×, wall {yolo['wall_s'] / base['wall_s']:.1f}×."]
    at = figures.get("yolo_at_equal_cpu")
    if at:
        reached = f"AP {_figure(at['ap'])}, AP50 {_figure(at['ap50'])}" if at["ap"] is not None else "not reached"
        lines += ["", f"YOLOv8n at shardflow's {at['cpu_s']:,.0f} training CPU-s (its curve, linear between "
                  f"epochs): {reached}; shardflow {_figure(base['scores']['ap'])} and {_figure(base['scores']['ap50'])}."]
    lines += ["", f"shardflow's ExampleGen: {figures['shardflow']['example_gen']['cpu_s']:,.0f} CPU-s "
              f"({figures['shardflow']['example_gen']['wall_s']:,.0f} s wall); its eval truth "
              f"{figures['truth']['evaluator']} against the CSV's {figures['truth']['csv']} (images, boxes); YOLO "
              f"predicted on {figures['yolo']['upright_checked']} eval images, {figures['yolo']['upright_mismatches']} "
              "of them at another size than the upright image" + _pixels(yolo.get("upright_pixels") or {}) + ".", "",
              "AP against training CPU seconds (the curve):", "", "| contender | epochs | CPU-s | AP | AP50 |",
              "|---|---:|---:|---:|---:|"]
    points = [("shardflow", run["epochs"], run["cpu_s"], run["scores"]) for run in figures["shardflow"]["runs"]]
    points += [("YOLOv8n", point["epoch"], point["cpu_s"], point["scores"]) for point in shown(yolo["curve"])]
    lines += [f"| {who} | {epochs} | {cpu:,.0f} | {_figure(s.get('ap'))} | {_figure(s.get('ap50'))} |"
              for who, epochs, cpu, s in points]
    return lines


def shown(curve: list[dict[str, Any]], rows: int = 10) -> list[dict[str, Any]]:
    """About `rows` points of a long curve: the first three epochs, then evenly spaced, and the last.

    >>> [point["epoch"] for point in shown([{"epoch": n} for n in range(1, 31)])]
    [1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
    """
    step = max(1, len(curve) // rows)
    return [point for number, point in enumerate(curve, 1)
            if number <= 3 or number % step == 0 or number == len(curve)]


def markdown(result: dict[str, Any]) -> str:
    if isinstance(result.get("failed"), str):
        return f"Not measured: {result['failed']}"
    lines = ["Scores: shardflow's COCO evaluator (core/detection_metrics.py, pycocotools-equal) for both, on the "
             "same eval images and boxes. CPU-s: user + system of the training process tree (the YOLO curve's: of "
             "its process at each epoch's end, its validation included); other CPU: cores used by other processes "
             "while the contender trained. YOLO's result is its last epoch's EMA weights."]
    source = result.get("source") or {}
    if source.get("changed"):
        lines.append(f"Measured on {source['commit'][:10]} with uncommitted changes to {', '.join(source['changed'])}.")
    for name, figures in result["sets"].items():
        lines += [""] + _set_table(name, figures)
    return "\n".join(lines)

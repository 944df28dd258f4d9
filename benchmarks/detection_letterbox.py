"""Issue 65's measurements on photos of any size and aspect: letterbox against stretch, NMS on against off.

    python -m benchmarks.detection_letterbox --work /tmp/lb --images 1125 --epochs 25
    python -m benchmarks.detection_letterbox --work /tmp/lb --images 1125 --epochs 8 --modes letterbox \
        --train-args "--batch-size 32 --learning-rate 0.002"

Data: `demo_boxes.write_boxes(mixed=True)` (64-200 px a side, aspect 1/3-3, objects 8 px to 40 % of the short
side, a fifth gray, a fifth EXIF-turned; 80 % train, 20 % eval). For each `--box-resize` mode: `shardflow
example-gen --resize 128x128 --channels rgb --storage png --box-resize MODE`, `shardflow train --epochs N` (the
Trainer's other defaults, the same for both), `shardflow evaluate` of its model (class-aware NMS at the export's
default IoU) and of the same weights exported again with `--nms-iou 0` (`reexport`: no retraining). Each
step's wall and CPU seconds (the process tree's), and the machine's steal over the step, go to results.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .machine import cpu_stat, steal_between
from .monitor import Watch, child_env, run_monitored

SIZE = "128x128"


def _shardflow(args: list[str], log: Path) -> dict[str, Any]:
    before = cpu_stat()
    measured = run_monitored([sys.executable, "-m", "shardflow", *args], log, Watch(), env=child_env())
    if measured.returncode != 0:
        raise RuntimeError(f"shardflow {args[0]} failed (exit {measured.returncode}); see {log}.err")
    return {"wall_s": round(measured.wall_s, 1), "cpu_s": round(measured.cpu_s, 1),
            "steal_pct": round(100 * steal_between(before, cpu_stat()), 1), "command": "shardflow " + " ".join(args)}


def _scores(evaluation: Path) -> dict[str, float]:
    metrics = json.loads((evaluation / "metrics.json").read_text())
    values = metrics["overall"]
    scores = {name: round(float(values[name]), 4) for name in ("ap50", "ap", "ap75") if name in values}
    interval = ((metrics.get("intervals") or {}).get("candidate") or {}).get("ap50")
    return {**scores, "ap50_95ci": [round(float(v), 4) for v in interval] if interval and None not in interval else None}


def reexport(examples: str, model_dir: str, out: str, nms_iou: float) -> None:
    """`model_dir`'s weights exported again (same task, same graph) with another NMS setting, to `out`/model."""
    from shardflow.core.model_info import read_model_info
    from shardflow.trainer.cli import add_arguments, config_from_args
    from shardflow.trainer.export import export_model
    from shardflow.trainer.features import RawToModel
    from shardflow.trainer.model_builder import build_model
    from shardflow.trainer.task import resolve_task

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = config_from_args(parser.parse_args(["--examples", examples, "--output", out, "--steps", "1",
                                                 "--warm-start", model_dir]), [])
    task = resolve_task(config.input)
    model = build_model(task, config)
    export_model(model, RawToModel(task, None), task, read_model_info(model_dir), f"{out}/model", True, nms_iou)


def run_mode(work: Path, data: Path, mode: str, epochs: int, train_args: list[str]) -> dict[str, Any]:
    logs = work / "logs"
    examples, trained = work / f"examples-{mode}", work / f"train-{mode}"
    figures = {"example_gen": None if (examples / "manifest.json").exists() else _shardflow(  # made by an earlier run
        ["example-gen", "--index", f"train={data / 'train.csv'}", "--index", f"eval={data / 'eval.csv'}",
         "--data-root", str(data), "--output", str(examples), "--resize", SIZE, "--channels", "rgb",
         "--storage", "png", "--box-resize", mode, "--near-duplicates", "off"], logs / f"eg-{mode}")}
    figures["train"] = _shardflow(["train", "--examples", str(examples), "--output", str(trained),
                                   "--epochs", str(epochs), *train_args], logs / f"train-{mode}")
    figures["evaluate_nms"] = _shardflow(["evaluate", "--model", str(trained / "model"), "--examples",
                                          str(examples), "--output", str(work / f"eval-{mode}")], logs / f"ev-{mode}")
    figures["nms"] = _scores(work / f"eval-{mode}")
    reexport(str(examples), str(trained / "model"), str(work / f"nonms-{mode}"), 0.0)
    _shardflow(["evaluate", "--model", str(work / f"nonms-{mode}" / "model"), "--examples", str(examples),
                "--output", str(work / f"eval-nonms-{mode}")], logs / f"ev-nonms-{mode}")
    figures["no_nms"] = _scores(work / f"eval-nonms-{mode}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--images", type=int, default=1125)
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--modes", nargs="+", default=["letterbox", "stretch"])
    parser.add_argument("--train-args", default="", help="more `shardflow train` flags, the same for every mode")
    args = parser.parse_args(argv)
    from shardflow.demo_boxes import write_boxes

    data = args.work / "data"
    if not (data / "eval.csv").exists():
        write_boxes(data, count=args.images, mixed=True)
    results_file = args.work / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    for mode in args.modes:
        results[f"{mode}-{args.epochs}"] = run_mode(args.work, data, mode, args.epochs, args.train_args.split())
        results_file.write_text(json.dumps(results, indent=1))
        print(mode, json.dumps(results[f"{mode}-{args.epochs}"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

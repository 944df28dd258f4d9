"""The detection_yolo suite's runs on one set: its data, shardflow's train-and-evaluate runs, YOLO's run, its curve.

Each run starts from an empty output folder (nothing reused from an earlier suite run but the generated images).
The YOLO side is two subprocesses of .venv-yolo's python (`-P`: benchmarks/ is not put on its path), with
PYTHONPATH removed, YOLO_OFFLINE=1 and Ultralytics' settings in the work folder, so it can import no shardflow.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .detection_letterbox import _shardflow as shardflow_step
from .machine import OtherCpu, cpu_stat, steal_between
from .monitor import Watch, run_monitored
from .yolo_data import METRICS, TruthImage, class_names, export_yolo, load_predictions, read_truth, score_predictions

SHARDFLOW_RUN_EPOCHS = 10  # what `shardflow run` trains by default (pipelines/steps.py: the train step's options)
CONTENDER = Path(__file__).with_name("yolo_contender.py")
MIXED_INGEST = ("--resize", "128x128", "--channels", "rgb")  # letterboxed: --box-resize's default


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def ensure_data(root: Path, plan: dict[str, Any]) -> Path:
    """The set's images and CSVs (made once per size: the folder's name holds it)."""
    from shardflow.demo_boxes import write_boxes

    data = root / f"data-{plan['train']}-{plan['eval']}"
    if not (data / "eval.csv").is_file():
        total = plan["train"] + plan["eval"]
        write_boxes(data, count=total, eval_fraction=plan["eval"] / total, mixed=plan["mixed"])
    return data


def shardflow_runs(root: Path, data: Path, plan: dict[str, Any], epochs: list[int], train_args: list[str]) -> dict:
    """ExampleGen once; per epoch count a `shardflow train` (watched: CPU, wall, other processes) and its evaluation."""
    logs, examples = root / "logs", _fresh(root / "examples")
    ingest = shardflow_step(["example-gen", "--index", f"train={data / 'train.csv'}", "--index",
                             f"eval={data / 'eval.csv'}", "--data-root", str(data), "--output", str(examples),
                             *(MIXED_INGEST if plan["mixed"] else ())], logs / "example-gen")
    runs = []
    for count in epochs:
        trained, evaluated = _fresh(root / f"train-{count}"), _fresh(root / f"evaluate-{count}")
        with OtherCpu() as others:
            train = shardflow_step(["train", "--examples", str(examples), "--output", str(trained), "--epochs",
                                    str(count), *train_args], logs / f"train-{count}")
        evaluate = shardflow_step(["evaluate", "--model", str(trained / "model"), "--examples", str(examples),
                                   "--output", str(evaluated)], logs / f"evaluate-{count}")
        metrics = json.loads((evaluated / "metrics.json").read_text())
        runs.append({"epochs": count, **train, "other_cpu": others.mean, "evaluate": evaluate,
                     "scores": {name: metrics["overall"].get(name) for name in METRICS},
                     "truth": evaluator_truth(metrics)})
    headline = next((run for run in runs if run["epochs"] == SHARDFLOW_RUN_EPOCHS), runs[-1])
    return {"example_gen": ingest, "runs": runs, "headline": headline}


def evaluator_truth(metrics: dict[str, Any]) -> list[int | None]:
    """(images, true boxes) the Evaluator scored, as its metrics.json records them."""
    return [metrics.get("num_examples"), metrics.get("num_boxes")]


def yolo_env(root: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env.update(YOLO_OFFLINE="1", YOLO_CONFIG_DIR=str((root / "yolo_config").resolve()))
    return env


def _contender(python: Path, args: list[str], log: Path, env: dict[str, str]) -> dict[str, Any]:
    before = cpu_stat()
    with OtherCpu() as others:
        measured = run_monitored([str(python), "-P", str(CONTENDER), *args], log, Watch(), env=env)
    if measured.returncode != 0:
        raise RuntimeError(f"yolo_contender {args[0]} failed (exit {measured.returncode}); see {log}.err")
    return {"cpu_s": round(measured.cpu_s, 1), "wall_s": round(measured.wall_s, 1), "other_cpu": others.mean,
            "steal_pct": round(100 * steal_between(before, cpu_stat()), 1),
            "peak_rss_mb": round(measured.peak_rss_mb)}


def yolo_run(root: Path, data: Path, plan: dict[str, Any], truth: list[TruthImage], names: list[str],
             python: Path) -> dict[str, Any]:
    """Export, train (one checkpoint an epoch), predict with every checkpoint, score each: the curve."""
    logs, env, out = root / "logs", yolo_env(root), _fresh(root / "yolo")
    exported = export_yolo(data / "train.csv", data / "eval.csv", data, _fresh(root / "yolo_data"))
    size = str(plan["imgsz"])
    train = _contender(python, ["train", "--data", exported["data_yaml"], "--epochs", str(plan["yolo_epochs"]),
                                "--imgsz", size, "--out", str(out)], logs / "yolo-train", env)
    epochs = [json.loads(line) for line in (out / "epochs.jsonl").read_text().splitlines()]
    images = out / "eval_images.json"
    images.write_text(json.dumps([[image.path, str((data / image.path).resolve())] for image in truth]))
    turned = turned_images(data, truth)
    predict = _contender(python, ["predict", "--weights", *(str(out / "epochs" / f"e{p['epoch']}.pt") for p in epochs),
                                  "--images", str(images), "--imgsz", size, "--out", str(out / "predictions"),
                                  *(["--dump", *turned] if turned else [])], logs / "yolo-predict", env)
    predictions = {point["epoch"]: load_predictions(out / "predictions" / f"e{point['epoch']}.json")
                   for point in epochs}
    curve = [{**point, "scores": score_predictions(truth, predictions[point["epoch"]], len(names))} for point in epochs]
    last = predictions[epochs[-1]["epoch"]]["images"]
    mismatched = [image.path for image in truth if last[image.path]["shape"] != [image.height, image.width]]
    return {**train, "command": f"yolo_contender.py train --epochs {plan['yolo_epochs']} --imgsz {size}",
            "scores": curve[-1]["scores"], "curve": curve, "predict": predict, "exported": exported["counts"],
            "upright_checked": len(truth), "upright_mismatches": len(mismatched), "mismatched": mismatched[:5],
            "upright_pixels": upright_pixels(data, turned, out / "predictions")}


def turned_images(data: Path, truth: list[TruthImage]) -> list[str]:
    """The first eval image of each EXIF orientation other than 1: the ones whose pixels are compared."""
    from PIL import Image

    first: dict[int, str] = {}
    for image in truth:
        with Image.open(data / image.path) as opened:
            orientation = opened.getexif().get(0x0112, 1)
        if orientation != 1:
            first.setdefault(orientation, image.path)
    return [first[key] for key in sorted(first)]


def upright_pixels(data: Path, turned: list[str], predictions: Path) -> dict[str, dict[str, Any]]:
    """Per turned image: mean absolute difference (levels) of the pixels YOLO loaded from Pillow's upright image
    (ImageOps.exif_transpose, what ExampleGen decodes) and from the file's stored pixels (None when the shapes
    differ): near 0 against the upright one is the check."""
    from PIL import Image, ImageOps

    found = {}
    for path in turned:
        loaded = np.load(predictions / "dumps" / (path.replace("/", "__") + ".npy"))[..., ::-1]  # BGR → RGB
        with Image.open(data / path) as opened:
            orientation = opened.getexif().get(0x0112, 1)
            stored = np.asarray(opened.convert("RGB"), np.float64)
            upright = np.asarray(ImageOps.exif_transpose(opened).convert("RGB"), np.float64)
        found[path] = {"orientation": orientation, "upright": _mean_diff(loaded, upright),
                       "stored": _mean_diff(loaded, stored)}
    return found


def _mean_diff(a: np.ndarray, b: np.ndarray) -> float | None:
    return round(float(np.abs(a.astype(np.float64) - b).mean()), 2) if a.shape == b.shape else None


def run_set(root: Path, plan: dict[str, Any], epochs: list[int], train_args: list[str], python: Path) -> dict:
    data = ensure_data(root, plan)
    names = class_names(data / "train.csv", data / "eval.csv")
    truth = read_truth(data / "eval.csv", data, names)
    csv_truth = [len(truth), sum(len(image.classes) for image in truth)]
    shardflow = shardflow_runs(root, data, plan, epochs, train_args)
    yolo = yolo_run(root, data, plan, truth, names, python)
    return {"data": str(data), "classes": names, "shardflow": shardflow, "yolo": yolo,
            "truth": {"csv": csv_truth, "evaluator": shardflow["headline"]["truth"]}}

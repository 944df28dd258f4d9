"""Ultralytics YOLOv8n, the detection_yolo suite's contender: run in .venv-yolo (`make yolo-setup`), never in
shardflow's environment, and it imports neither shardflow nor TensorFlow.

    .venv-yolo/bin/python benchmarks/yolo_contender.py train --data D/data.yaml --epochs 30 --imgsz 96 --out W
    .venv-yolo/bin/python benchmarks/yolo_contender.py predict --weights W/epochs/e1.pt ... --images I.json \
        --imgsz 96 --out P

train: `YOLO("yolov8n.yaml")`, built from its yaml with random weights (nothing downloaded), trained on the CPU with
Ultralytics' defaults but for what the machine needs (no AMP, no plots, no sync, one process: workers=0).
At each epoch's end (after its validation and its checkpoint) a callback appends to W/epochs.jsonl the
process's CPU seconds (user + system, all its threads) and wall seconds so far, and keeps that epoch's
checkpoint (the EMA weights Ultralytics saves as last.pt) as W/epochs/e<N>.pt, copied after the reading.

predict: each weights file on each image of I.json (`[[key, file], ...]`), at COCO's settings (conf 0.001,
at most 100 boxes, Ultralytics' NMS IoU 0.7): P/<weights stem>.json holds per key the boxes as normalised
(ymin, xmin, ymax, xmax) on the image Ultralytics loaded (OpenCV turns it upright by its EXIF orientation),
that image's (height, width), scores and 0-based class ids. `--dump KEY ...`: those images' pixels as loaded
(P/dumps/<key with / as __>.npy, BGR), for the suite's check that they are the upright ones.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_VERBOSE", "False")


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def train(args: argparse.Namespace) -> None:
    from ultralytics import YOLO, settings

    settings.update({"sync": False})
    out, started = Path(args.out), time.time()
    (out / "epochs").mkdir(parents=True, exist_ok=True)
    log = open(out / "epochs.jsonl", "w")

    def on_fit_epoch_end(trainer) -> None:
        cpu, wall = _cpu_seconds(), time.time() - started
        number = trainer.epoch + 1
        if number > trainer.epochs:  # final_eval's call, after the last epoch: no new weights
            return
        log.write(json.dumps({"epoch": number, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}) + "\n")
        log.flush()
        shutil.copyfile(trainer.last, out / "epochs" / f"e{number}.pt")

    model = YOLO("yolov8n.yaml")
    model.add_callback("on_fit_epoch_end", on_fit_epoch_end)
    model.train(data=args.data, epochs=args.epochs, imgsz=args.imgsz, device="cpu", workers=0, amp=False,
                plots=False, project=str(out.resolve()), name="run", exist_ok=True, seed=args.seed, verbose=False)
    log.close()
    print(json.dumps({"epochs": args.epochs, "cpu_s": round(_cpu_seconds(), 2),
                      "wall_s": round(time.time() - started, 2)}), flush=True)


def predict(args: argparse.Namespace) -> None:
    from ultralytics import YOLO

    images = json.loads(Path(args.images).read_text())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for weights in args.weights:
        model, found = YOLO(weights), {}
        if args.dump and weights == args.weights[-1]:
            _dump(model, images, set(args.dump), args.imgsz, out / "dumps")
        for key, file in images:
            (result,) = model.predict(file, imgsz=args.imgsz, conf=0.001, iou=0.7, max_det=100, device="cpu",
                                      verbose=False)
            height, width = result.orig_shape
            boxes = result.boxes
            found[key] = {"shape": [int(height), int(width)],
                          "boxes": [[y0 / height, x0 / width, y1 / height, x1 / width]
                                    for x0, y0, x1, y1 in boxes.xyxy.tolist()],
                          "scores": boxes.conf.tolist(), "classes": [int(c) for c in boxes.cls.tolist()]}
        (out / f"{Path(weights).stem}.json").write_text(json.dumps({"weights": str(weights), "images": found}))
    print(json.dumps({"predicted": len(args.weights), "images": len(images)}), flush=True)


def _dump(model, images: list[list[str]], keys: set[str], imgsz: int, out: Path) -> None:
    """The pixels (BGR, as loaded) of the images named by `keys`: what the EXIF check compares."""
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    for key, file in images:
        if key in keys:
            (result,) = model.predict(file, imgsz=imgsz, device="cpu", verbose=False)
            np.save(out / (key.replace("/", "__") + ".npy"), result.orig_img)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    trains = commands.add_parser("train")
    trains.add_argument("--data", required=True)
    trains.add_argument("--epochs", type=int, required=True)
    trains.add_argument("--imgsz", type=int, required=True)
    trains.add_argument("--out", required=True)
    trains.add_argument("--seed", type=int, default=0)
    predicts = commands.add_parser("predict")
    predicts.add_argument("--weights", nargs="+", required=True)
    predicts.add_argument("--images", required=True)
    predicts.add_argument("--imgsz", type=int, required=True)
    predicts.add_argument("--out", required=True)
    predicts.add_argument("--dump", nargs="*", default=[], help="keys whose loaded pixels go to OUT/dumps/*.npy")
    args = parser.parse_args(argv)
    (train if args.command == "train" else predict)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

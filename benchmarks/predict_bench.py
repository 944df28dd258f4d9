"""Batch prediction on photos: `shardflow predict` against hand-written loops over the same files, side by side.

    python -m benchmarks.run_all --only predict --predict-rows 5k 50k     # figures → <work>/predict.json
    python -m benchmarks.predict_bench --rows 5k 20k                      # the same, standalone

Data: the photo set of the other benchmarks (`testkit.photo_data`: 2,000 distinct JPEG crops of real
photographs, 300–500 px), indexes of N rows repeating it. The model: `shardflow train --model lenet`
for a few steps on ExampleGen's `--resize 224x224 --channels rgb --storage jpeg` examples of 400 of
the photos (its weights do not matter to the speed; its exported signatures are the real ones).

Contenders, one after the other, each in its own process (wall time includes its imports):
- (a) `shardflow predict --model M --index index-N.csv --data-root photos --output O
  --direct_running_mode=multi_processing` (defaults otherwise; the mode pinned, see RUNNING_MODE);
- (b) `loop-examples`: one process reads each file, prepares it as ingest does (Pillow decode,
  RGB, resize 224x224, JPEG — ExampleGen's own `decode_image`/`encode_image`), builds the
  tf.Example, and calls `serving_default` on batches of 64;
- (c) `loop-image`: one process reads each file and calls `serving_image` (the decode, EXIF,
  resize in the TensorFlow graph) on batches of 64 file contents.
Measured: rows/s (N / wall), peak RSS of the process tree (`monitor`). Targets: (a) ≥ 1.0x the
rows/s of (b); (a)'s peak RSS flat from the smallest N to the largest (within +15 %).
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from testkit.photo_data import ensure_photo_index, ensure_photos

from .monitor import Watch, child_env, run_monitored
from .suites import parse_size

NAME = "predict"
TRAIN_ROWS = 400
BATCH = 64
TARGETS = {"rate_ratio": 1.0, "rss_growth": 1.15}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("predict")
    group.add_argument("--predict-rows", nargs="+", type=parse_size, default=[5_000, 50_000],
                       help="prediction index sizes (its own sizes, default 5k 50k)")


def _shardflow(args: list[str], log: Path) -> dict[str, Any]:
    measured = run_monitored([sys.executable, "-m", "shardflow", *args], log, Watch(), env=child_env())
    if measured.returncode != 0:
        raise RuntimeError(f"shardflow {args[0]} failed (exit {measured.returncode}); see {log}.err")
    return {"wall_s": round(measured.wall_s, 2), "peak_rss_mb": round(measured.peak_rss_mb),
            "load_before": measured.load_before}


def ensure_model(work: Path) -> tuple[Path, Path]:
    """The photos and a trained model (idempotent)."""
    photos = ensure_photos(work / "photos")
    model = work / "predict-train" / "model"
    if not (model / "shardflow_model.json").is_file():
        index = ensure_photo_index(photos, TRAIN_ROWS)
        examples = work / "predict-examples"
        _shardflow(["example-gen", "--index", str(index), "--data-root", str(photos), "--output", str(examples),
                    "--resize", "224x224", "--channels", "rgb", "--storage", "jpeg"], work / "logs" / "predict-eg")
        _shardflow(["train", "--examples", str(examples), "--output", str(model.parent), "--model", "lenet",
                    "--steps", "4", "--batch-size", "32"],
                   work / "logs" / "predict-train")
    return photos, model


# Left to itself the local runner picks threads for a small job and worker processes (each with TensorFlow
# and the model) for a large one: pinned, the peak RSS compares sizes, not modes.
RUNNING_MODE = "multi_processing"


def predict(photos: Path, model: Path, index: Path, out: Path, log: Path) -> dict[str, Any]:
    measured = _shardflow(["predict", "--model", str(model), "--index", str(index), "--data-root", str(photos),
                           "--output", str(out), f"--direct_running_mode={RUNNING_MODE}"], log)
    summary = json.loads((out / "predict.json").read_text())
    return {**measured, "rows": summary["rows"], "predicted": summary["predicted"], "rejected": summary["rejected"],
            "runner": summary["runner"], "inner_rows_per_s": summary["rows_per_second"],
            "classes": _classes_digest(out)}


def _classes_digest(out: Path) -> str:
    """A digest of the predicted class ids in row order: the loop's when every row got the served model's class."""
    rows = []
    for part in (out / "predictions").glob("part-*.csv"):
        with open(part, newline="") as stream:
            rows += [(int(row["row"]), int(row["class_id"])) for row in csv.DictReader(stream)]
    return _digest([class_id for _, class_id in sorted(rows)])


def _digest(class_ids: list[int]) -> str:
    return hashlib.sha256(",".join(map(str, class_ids)).encode()).hexdigest()[:16]


def loop(photos: Path, model: Path, index: Path, log: Path, mode: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.predict_bench", "--loop", mode, "--model", str(model),
           "--index", str(index), "--data-root", str(photos)]
    measured = run_monitored(cmd, log, Watch(), env=child_env())
    if measured.returncode != 0:
        raise RuntimeError(f"loop {mode} failed (exit {measured.returncode}); see {log}.err")
    return {"wall_s": round(measured.wall_s, 2), "peak_rss_mb": round(measured.peak_rss_mb),
            "load_before": measured.load_before, **measured.report}


def _batches(index: Path, data_root: Path):
    """Lists of (file bytes) of BATCH rows, in index order."""
    with open(index, newline="") as stream:
        rows = csv.reader(stream)
        next(rows)
        batch: list[bytes] = []
        for row in rows:
            batch.append((data_root / row[0]).read_bytes())
            if len(batch) == BATCH:
                yield batch
                batch = []
        if batch:
            yield batch


def run_loop(mode: str, model_dir: Path, index: Path, data_root: Path) -> dict[str, Any]:
    """The hand-written loop; prints one JSON line (rows, seconds after imports)."""
    import tensorflow as tf

    from shardflow.core.example_proto import encode_example
    from shardflow.core.manifest import read_manifest
    from shardflow.core.model_info import read_model_info
    from shardflow.example_gen.images import ImageRules, decode_image, encode_image

    info = read_model_info(str(model_dir))
    name = info.extra["input"]
    ops = read_manifest(info.extra["raw_examples"]).extra["ingest_ops"][name]
    rules = ImageRules(89_478_485, ops["channels"], tuple(ops["resize"]))
    loaded = tf.saved_model.load(str(model_dir))
    started, rows, classes = time.time(), 0, []
    for batch in _batches(index, data_root):
        if mode == "examples":
            records = [encode_example({name: [encode_image(decode_image(data, rules), ops["storage"])]})
                       for data in batch]
            outputs = loaded.signatures["serving_default"](examples=tf.constant(records))
        else:
            outputs = loaded.signatures["serving_image"](images=tf.constant(batch))
        classes += [int(c) for c in outputs["class_ids"].numpy()]  # uses the result
        rows += len(batch)
    result = {"rows": rows, "loop_seconds": round(time.time() - started, 2), "classes": _digest(classes),
              "class_counts": {str(c): classes.count(c) for c in sorted(set(classes))}}
    print(json.dumps(result), flush=True)
    return result


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    del sizes  # its own sizes: --predict-rows
    photos, model = ensure_model(work)
    results: dict[int, dict[str, Any]] = {}
    for rows in sorted(args.predict_rows):
        index = ensure_photo_index(photos, rows)
        results[rows] = {
            "shardflow": predict(photos, model, index, work / f"predict-out-{rows}", work / "logs" / f"predict-{rows}"),
            "loop_examples": loop(photos, model, index, work / "logs" / f"loop-examples-{rows}", "examples"),
            "loop_image": loop(photos, model, index, work / "logs" / f"loop-image-{rows}", "image")}
        for entry in results[rows].values():
            entry["rows_per_s"] = round(rows / entry["wall_s"], 1)
    comparison = compare(results)
    return {"sizes": sorted(args.predict_rows), "results": results, "comparison": comparison,
            "failed": not all(comparison["met"].values())}


def compare(results: dict[int, dict[str, Any]]) -> dict[str, Any]:
    sizes = sorted(results)
    ratios = {n: round(r["shardflow"]["rows_per_s"] / r["loop_examples"]["rows_per_s"], 2) for n, r in results.items()}
    image = {n: round(r["shardflow"]["rows_per_s"] / r["loop_image"]["rows_per_s"], 2) for n, r in results.items()}
    rss = [results[n]["shardflow"]["peak_rss_mb"] for n in sizes]
    growth = round(rss[-1] / rss[0], 3)
    # every row predicted or rejected, and the same classes as the served model called directly
    accounted = all(r["shardflow"]["predicted"] + r["shardflow"]["rejected"] == int(n) for n, r in results.items())
    same = all(r["shardflow"]["classes"] == r["loop_examples"]["classes"] for r in results.values())
    return {"rate_ratio_vs_loop_examples": ratios, "rate_ratio_vs_loop_image": image, "rss_growth": growth,
            "met": {"rate_ratio": min(ratios.values()) >= TARGETS["rate_ratio"],
                    "rss_growth": growth <= TARGETS["rss_growth"], "every_row_accounted": accounted,
                    "same_classes_as_serving_default": same}}


def markdown(result: dict[str, Any]) -> str:
    lines = ["| rows | contender | wall s | rows/s | peak RSS MB | load before |", "|---|---|---|---|---|---|"]
    for rows, entries in sorted(result["results"].items(), key=lambda item: int(item[0])):
        for name, entry in entries.items():
            lines.append(f"| {int(rows):,} | {name} | {entry['wall_s']} | {entry['rows_per_s']:,} | "
                         f"{entry['peak_rss_mb']:,} | {entry['load_before']:.1f} |")
    comparison = result["comparison"]
    lines += ["", f"shardflow predict / loop-examples rows/s: {comparison['rate_ratio_vs_loop_examples']} "
              f"(target ≥ {TARGETS['rate_ratio']}); / loop-image: {comparison['rate_ratio_vs_loop_image']}",
              f"peak RSS growth smallest → largest: {comparison['rss_growth']} (target ≤ {TARGETS['rss_growth']})",
              "every row predicted or rejected: " + str(comparison["met"].get("every_row_accounted"))
              + "; the class of every row equal to the serving_default loop's: "
              + str(comparison["met"].get("same_classes_as_serving_default")),
              f"met: {comparison['met']}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.predict_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", type=parse_size, default=[5_000, 50_000])
    parser.add_argument("--work", type=Path, default=Path("bench_out"))
    parser.add_argument("--loop", choices=("examples", "image"), help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--index", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.loop:
        run_loop(args.loop, args.model, args.index, args.data_root)
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    result = run(argparse.Namespace(predict_rows=args.rows), [], args.work)
    (args.work / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

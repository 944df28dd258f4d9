"""Training/serving skew on photos: Pillow at ingest against the served model's graph on the original files.

    python -m benchmarks.serving_skew --run bench_out/e2e-run-5000 --eval bench_out/photos-5000/eval.csv \
        --data-root bench_out/photos-5000

For every eval row: the pixels ExampleGen stored (its Pillow path, before JPEG storage) against the
pixels the served model's graph makes of the original file (`core.serving_image`): mean, p99 and
max absolute difference in levels. Then classes: `serving_default` on the stored eval examples
(what the Evaluator scores) against `serving_image` on the original files: agreement and accuracy.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import IMAGE_INPUT, IMAGE_SIGNATURE, SERVING_INPUT, SERVING_SIGNATURE
from shardflow.core.reader import shard_files
from shardflow.core.serving_image import canonical_pixels
from shardflow.example_gen.config import DEFAULT_MAX_PIXELS
from shardflow.example_gen.images import ImageRules, decode

BATCH = 64


def pixel_skew(files: list[bytes], ops: dict, shape: tuple[int, int, int]) -> dict[str, float]:
    rules = ImageRules(DEFAULT_MAX_PIXELS, channels=ops["channels"], resize=tuple(ops["resize"]),
                       exif_transpose=ops["exif_orientation"] == "applied")
    errors = []
    for data in files:
        ingest = decode(data, rules).astype(np.int32)
        served = canonical_pixels(tf.constant(data), shape, exif=rules.exif_transpose).numpy().astype(np.int32)
        errors.append(np.abs(ingest - served).ravel())
    every = np.concatenate(errors)
    return {"images": len(files), "mean": float(every.mean()), "p99": float(np.percentile(every, 99)),
            "max": int(every.max()), "share_equal": float((every == 0).mean())}


def _classes(signature: object, name: str, inputs: list[bytes]) -> np.ndarray:
    return np.concatenate([signature(**{name: tf.constant(inputs[i:i + BATCH])})["class_ids"].numpy()
                           for i in range(0, len(inputs), BATCH)])


def class_skew(run: Path, examples: Path, files: list[bytes], labels: np.ndarray) -> dict[str, float]:
    model_dir = json.loads((run / "serving" / "CURRENT.json").read_text())["model"]
    model = tf.saved_model.load(model_dir)
    records = [r.numpy() for r in tf.data.TFRecordDataset(shard_files(examples, read_manifest(examples), "eval"))]
    stored = _classes(model.signatures[SERVING_SIGNATURE], SERVING_INPUT, records)
    original = _classes(model.signatures[IMAGE_SIGNATURE], IMAGE_INPUT, files)
    return {"agreement": float((stored == original).mean()), "accuracy_stored": float((stored == labels).mean()),
            "accuracy_original_files": float((original == labels).mean())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving_skew", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a `shardflow run` output (serving/, pipeline_root/)")
    parser.add_argument("--eval", type=Path, required=True, help="the eval CSV (columns image,label)")
    parser.add_argument("--data-root", type=Path, required=True)
    args = parser.parse_args(argv)
    with open(args.eval, newline="") as handle:
        rows = list(csv.DictReader(handle))
    files = [(args.data_root / row["image"]).read_bytes() for row in rows]
    labels = np.array([int(row["label"]) for row in rows])
    examples = next(args.run.glob("pipeline_root/*/example-gen/examples"))
    manifest = read_manifest(examples)
    ops = manifest.extra["ingest_ops"]["image"]
    result = {"pixels": pixel_skew(files, ops, tuple(manifest.features["image"].shape)),
              "classes": class_skew(args.run, examples, files, labels)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

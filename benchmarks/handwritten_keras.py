"""The hand-written Keras route a user would write instead of shardflow: the photos benchmark's contender (b).

tf.data over the JPEG files (shuffled paths → read_file → decode_jpeg → resize 224 → /255, parallel
map, batch, prefetch), shardflow's own LeNet (same model, Adam 1e-3, batch 64), `--epochs` epochs,
evaluate on the eval CSV, save a SavedModel. Prints one JSON line: accuracy, seconds, model bytes.

    python -m benchmarks.handwritten_keras --train train.csv --eval eval.csv --data-root photos --output model
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import tensorflow as tf
import tf_keras as keras

from shardflow.trainer.models import lenet

BATCH = 64


def _dataset(index: Path, root: Path, training: bool, size: tuple[int, int]) -> tf.data.Dataset:
    with open(index, newline="") as handle:
        rows = list(csv.DictReader(handle))
    paths = tf.constant([str(root / row["image"]) for row in rows])
    labels = tf.constant([int(row["label"]) for row in rows], tf.int64)
    dataset = tf.data.Dataset.from_tensor_slices((paths, labels))
    if training:
        dataset = dataset.shuffle(len(rows), reshuffle_each_iteration=True)

    def load(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        pixels = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.image.resize(pixels, size) / 255.0, label

    return dataset.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH).prefetch(tf.data.AUTOTUNE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    for flag in ("--train", "--eval", "--data-root", "--output"):
        parser.add_argument(flag, type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--size", default="224x224", help="HxW the photos are resized to")
    args = parser.parse_args(argv)
    size = tuple(int(side) for side in args.size.split("x"))
    started = time.perf_counter()
    model = lenet("image", (*size, 3), 2)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    model.fit(_dataset(args.train, args.data_root, True, size), epochs=args.epochs, verbose=0)
    _, accuracy = model.evaluate(_dataset(args.eval, args.data_root, False, size), verbose=0)
    model.save(str(args.output), save_format="tf")
    size = sum(p.stat().st_size for p in args.output.rglob("*") if p.is_file())
    print(json.dumps({"accuracy": accuracy, "seconds": time.perf_counter() - started, "model_bytes": size}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

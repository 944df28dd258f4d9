"""The hand-written Keras route a user would write instead of shardflow: the photos benchmark's contender (b).

tf.data over the JPEG files (shuffled paths → read_file → decode_jpeg → resize 224 → /255, parallel
map, batch, prefetch), shardflow's own LeNet (same model, Adam 1e-3, batch 64), `--epochs` epochs,
evaluate on the eval CSV, save a SavedModel. Prints one JSON line: accuracy, seconds, model bytes, and
`fit_s` (Keras' `fit`) beside `epochs_s` (its epochs, from each one's begin to its end): the rest of `fit`
(0.2 s without the stall) is mostly the deletion of each epoch's iterator. `--autotune-model off` turns
tf.data's autotuning model off, as shardflow's stream does: with TensorFlow 2.16's, that deletion often
waits for the model's next round (docs/trainer.md), which moved this script's 3 epochs on 3,000 photos
between ~60 and ~100 s.

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


class _EpochClock(keras.callbacks.Callback):
    """Seconds spent inside epochs (begin to end), summed."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds, self._began = 0.0, 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._began = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.seconds += time.perf_counter() - self._began


def _dataset(index: Path, root: Path, training: bool, size: tuple[int, int], autotune: bool) -> tf.data.Dataset:
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

    options = tf.data.Options()
    options.autotune.enabled = autotune
    dataset = dataset.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH).prefetch(tf.data.AUTOTUNE)
    return dataset.with_options(options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    for flag in ("--train", "--eval", "--data-root", "--output"):
        parser.add_argument(flag, type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--size", default="224x224", help="HxW the photos are resized to")
    parser.add_argument("--autotune-model", choices=("on", "off"), default="on",
                        help="tf.data's autotuning model (off: as shardflow's stream)")
    args = parser.parse_args(argv)
    size = tuple(int(side) for side in args.size.split("x"))
    started = time.perf_counter()
    model = lenet("image", (*size, 3), 2)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    autotune, clock = args.autotune_model == "on", _EpochClock()
    fit_started = time.perf_counter()
    model.fit(_dataset(args.train, args.data_root, True, size, autotune), epochs=args.epochs, verbose=0,
              callbacks=[clock])
    fit_s = time.perf_counter() - fit_started
    _, accuracy = model.evaluate(_dataset(args.eval, args.data_root, False, size, autotune), verbose=0)
    model.save(str(args.output), save_format="tf")
    size = sum(p.stat().st_size for p in args.output.rglob("*") if p.is_file())
    print(json.dumps({"accuracy": accuracy, "seconds": time.perf_counter() - started, "model_bytes": size,
                      "fit_s": round(fit_s, 3), "epochs_s": round(clock.seconds, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The Trainer benchmark's child process: ingest once, time the readers, time LeNet training.

    python -m benchmarks.trainer_bench ingest --index I --data-root D --output OUT
    python -m benchmarks.trainer_bench readers --examples OUT --index I --data-root D -c a -c c -c d --passes 5
    python -m benchmarks.trainer_bench train --examples OUT --index I --data-root D -c c -c e --epochs 7

`readers`: every contender (see `trainer_readers`) is built, drained once as warm-up (tracing, file
cache, autotuning), then drained `--passes` times, the contenders taking turns pass by pass (every
other round in reverse order) so that the load of a shared machine falls on all of them alike. A
pass is one epoch over the split, pulled inside a `tf.function` (as Keras' train step pulls it);
rate = examples / pass seconds; CPU = the process's CPU seconds (all threads) during the pass.

`train`: LeNet (`shardflow.trainer.models.lenet`, Adam, sparse categorical cross-entropy) fed by
(c) shardflow's reader + cast, or (e) in-memory float32 tensors
`from_tensor_slices((x, y)).batch` (no shuffle: the fastest feed there is). Same initial weights;
one warm-up epoch each, then `--epochs` timed epochs, taking turns epoch by epoch; rate = examples
/ epoch seconds (first step to end of epoch).

The last stdout line is a JSON report (the suite reads it).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import tensorflow as tf
import tf_keras as keras

from .data import read_index
from .trainer_readers import AUTOTUNE, READERS, ReaderData, drain, load_pixels, reader_c

SEED = 0


def ingest(index: str, data_root: str, output: str, num_shards: int | None) -> dict[str, Any]:
    """ExampleGen in-process (in-memory FnApiRunner), raw storage, every row in split "train"."""
    from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

    config = ExampleGenConfig(indexes=(IndexSpec(index, "train"),), data_root=data_root, output=output,
                              storage=(("*", "raw"),), num_shards=num_shards,
                              beam_args=("--direct_running_mode=in_memory",), progress_seconds=3600.0)
    started = time.perf_counter()
    manifest = run(config, echo=lambda text: print(text, file=sys.stderr))
    split = manifest.splits["train"]
    return {"examples": split.num_examples, "shards": len(split.shards), "rejected": manifest.extra["rejected"],
            "bytes": sum(s.bytes for s in split.shards), "seconds": time.perf_counter() - started}


def _summary(seconds: list[float], examples: int, cpu_seconds: list[float] | None = None) -> dict[str, Any]:
    rates = [examples / s for s in seconds]
    out = {"examples": examples, "pass_seconds": seconds, "median_per_s": statistics.median(rates),
           "best_per_s": max(rates), "worst_per_s": min(rates)}
    if cpu_seconds:  # CPU of the whole process (all threads): the cost, less sensitive to other users
        out["cpu_seconds"] = cpu_seconds
        out["median_cpu_us_per_example"] = statistics.median(cpu_seconds) / examples * 1e6
    return out


def _turns(contenders: list[str], round_no: int) -> list[str]:
    """Every other round in reverse, so that no contender always follows the same one."""
    return list(contenders) if round_no % 2 == 0 else list(reversed(contenders))


def time_readers(data: ReaderData, contenders: list[str], passes: int) -> dict[str, Any]:
    return time_datasets({name: READERS[name](data) for name in contenders}, passes)


def time_datasets(datasets: dict[str, tf.data.Dataset], passes: int) -> dict[str, Any]:
    """Each dataset drained once (warm-up), then `passes` rounds taking turns; per-contender `_summary`."""
    contenders = list(datasets)
    counts: dict[str, int] = {}
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    for name, dataset in datasets.items():  # warm-up pass, not timed
        counts[name] = int(drain(dataset))
    for round_no in range(passes):
        for name in _turns(contenders, round_no):
            dataset = datasets[name]
            cpu_started, started = time.process_time(), time.perf_counter()
            seen = int(drain(dataset))
            seconds[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - cpu_started)
            if seen != counts[name]:
                raise RuntimeError(f"reader {name}: {seen} examples in a pass, {counts[name]} in the warm-up")
    return {name: _summary(seconds[name], counts[name], cpu[name]) for name in contenders}


class EpochTimer(keras.callbacks.Callback):
    """Wall and process CPU seconds of each epoch, from its start to its end."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []
        self.cpu_seconds: list[float] = []
        self._started = self._cpu_started = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._started, self._cpu_started = time.perf_counter(), time.process_time()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.seconds.append(time.perf_counter() - self._started)
        self.cpu_seconds.append(time.process_time() - self._cpu_started)


def _lenet() -> keras.Model:
    from shardflow.trainer.models import lenet

    keras.utils.set_random_seed(SEED)  # the same initial weights for every contender
    model = lenet(input_name="x", image_shape=(28, 28, 1), num_classes=10)
    model.compile(optimizer=keras.optimizers.Adam(), loss=keras.losses.SparseCategoricalCrossentropy(),
                  metrics=["accuracy"])
    return model


def _training_feeds(data: ReaderData, contenders: list[str]) -> dict[str, tf.data.Dataset]:
    feeds = {}
    for name in contenders:
        if name == "c":
            feeds[name] = reader_c(data)
        elif name == "e":
            images, labels = load_pixels(data)
            floats = images.astype("float32") / 255.0
            feeds[name] = tf.data.Dataset.from_tensor_slices((floats, labels)).batch(data.batch_size).prefetch(AUTOTUNE)
        else:
            raise ValueError(f"training contender must be c or e, got {name!r}")
    return feeds


def time_training(data: ReaderData, contenders: list[str], epochs: int, examples: int) -> dict[str, Any]:
    feeds = _training_feeds(data, contenders)
    models = {name: _lenet() for name in contenders}
    timers = {name: EpochTimer() for name in contenders}
    for name in contenders:  # warm-up epoch: tracing, autotuning
        models[name].fit(feeds[name], epochs=1, verbose=0)
    for round_no in range(epochs):
        for name in _turns(contenders, round_no):
            models[name].fit(feeds[name], epochs=1, verbose=0, callbacks=[timers[name]])
    out = {}
    for name in contenders:
        history = models[name].history.history
        figures = _summary(timers[name].seconds, examples, timers[name].cpu_seconds)
        out[name] = {**figures, "final_loss": history["loss"][-1], "final_accuracy": history["accuracy"][-1]}
    return out


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", required=True, help="ExampleGen output directory")
    parser.add_argument("--index", required=True)
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--shuffle-buffer", type=int, default=10_000)
    parser.add_argument("-c", "--contender", action="append", required=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.trainer_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    eg = commands.add_parser("ingest")
    eg.add_argument("--index", required=True)
    eg.add_argument("--data-root", required=True)
    eg.add_argument("--output", required=True)
    eg.add_argument("--num-shards", type=int)
    readers = commands.add_parser("readers")
    _add_data_arguments(readers)
    readers.add_argument("--passes", type=int, default=5)
    train = commands.add_parser("train")
    _add_data_arguments(train)
    train.add_argument("--epochs", type=int, default=7)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "ingest":
        report = ingest(args.index, args.data_root, args.output, args.num_shards)
    else:
        data = ReaderData(args.examples, args.data_root, args.index, args.batch_size, args.shuffle_buffer)
        unknown = [c for c in args.contender if c not in READERS]
        if unknown:
            raise SystemExit(f"unknown contenders {unknown}; known: {sorted(READERS)}")
        if args.command == "readers":
            report = time_readers(data, args.contender, args.passes)
        else:
            examples = len(read_index(Path(args.index)))
            report = time_training(data, args.contender, args.epochs, examples)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

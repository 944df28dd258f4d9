"""Resume cost: the time a resumed training stream takes to its first batch, against a fresh start's.

    python -m benchmarks.run_all --only resume                       # 20k 224-px JPEG photos
    python -m benchmarks.run_all --only resume --resume-rows 5k --resume-repeats 5

ExampleGen writes `rows` 224-px JPEG photos (the photo benchmarks' set); the Trainer's own training
stream (LeNet's input, `--augment flip,crop`: the fused crop at decode, batches of 64, the default
128 MB shuffle budget) is built at position 0 (a fresh run) and at 10 % and 90 % of the first pass
(a run resumed there), and timed from building to its first batch. Rounds alternate the three, and
each figure is the median of the rounds. Also reported per position: what `stream_start` says is
read before the first resumed record (records and bytes).

The alternative the issue asks to weigh, tf.data's own iterator checkpoint
(`tf.train.Checkpoint(iterator=...)`), is measured on the same stream at 10 %: the size of the
checkpoint and the seconds to write and to restore it (it stores the shuffle window's records).

Target (issue 43): at 10 % and 90 %, time to the first batch ≤ the fresh start's + 2 s, and not
growing with the position.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from .photos_bench import photo_examples
from .suites import parse_size

NAME = "resume"
BATCH = 64
FRACTIONS = (0.0, 0.1, 0.9)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("resume")
    group.add_argument("--resume-rows", type=parse_size, default=20_000, help="photos in the split (default 20k)")
    group.add_argument("--resume-repeats", type=int, default=3, help="rounds (default 3)")


def _training_stream(examples: Path, step: int) -> Any:
    from shardflow.trainer.config import InputOptions
    from shardflow.trainer.features import RawToModel
    from shardflow.trainer.input_pipeline import build_streams
    from shardflow.trainer.task import resolve_task

    inputs = InputOptions(examples=str(examples), label="y", eval_split=None, batch_size=BATCH,
                          augment=("flip", "crop"), deterministic=True)
    task = resolve_task(inputs)
    return build_streams(task, inputs, BATCH, 1, RawToModel(task, None)), task


def _first_batch_seconds(examples: Path, step: int) -> float:
    started = time.perf_counter()
    streams, _ = _training_stream(examples, step)
    next(iter(streams.train_from(step)))
    return time.perf_counter() - started


def _iterator_checkpoint(examples: Path, step: int, work: Path) -> dict[str, float]:
    """tf.data's own iterator checkpoint of the same stream after `step` batches: bytes, save and restore s."""
    import tensorflow as tf

    streams, _ = _training_stream(examples, 0)
    iterator = iter(streams.train_from(0))
    for _ in range(step):
        next(iterator)
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    started = time.perf_counter()
    path = checkpoint.write(str(work / "iterator-ckpt" / "ckpt"))
    saved = time.perf_counter() - started
    size = sum(f.stat().st_size for f in (work / "iterator-ckpt").iterdir())
    fresh = iter(_training_stream(examples, 0)[0].train_from(0))
    started = time.perf_counter()
    tf.train.Checkpoint(iterator=fresh).read(path).assert_consumed()
    next(fresh)
    return {"bytes": size, "save_s": round(saved, 2), "restore_to_first_batch_s": round(time.perf_counter() - started, 2)}


def run(args: argparse.Namespace, sizes: Any, work: Path) -> dict[str, Any]:
    del sizes
    examples = photo_examples(work, args.resume_rows, "resume")
    streams, task = _training_stream(examples, 0)
    steps = [int(streams.steps_per_epoch * f) for f in FRACTIONS]
    seconds: dict[int, list[float]] = {step: [] for step in steps}
    for round_ in range(args.resume_repeats):
        for step in steps[round_ % len(steps):] + steps[:round_ % len(steps)]:  # each position in each place
            seconds[step].append(_first_batch_seconds(examples, step))
    from shardflow.core.reader import record_bytes

    per_record = record_bytes(task.train_manifest, "train")
    positions = []
    for fraction, step in zip(FRACTIONS, steps):
        start = streams.start_of(step).point
        positions.append({"fraction": fraction, "step": step, "median_s": round(statistics.median(seconds[step]), 2),
                          "rounds_s": [round(s, 2) for s in seconds[step]],
                          "records_read_first": start.read_before_first,
                          "bytes_read_first": int(start.read_before_first * per_record)})
    fresh = positions[0]["median_s"]
    iterator = _iterator_checkpoint(examples, steps[1], work)
    return {"rows": args.resume_rows, "batch": BATCH, "steps_per_epoch": streams.steps_per_epoch,
            "window": streams.start_of(0).window, "positions": positions, "iterator_checkpoint": iterator,
            "cpus": os.cpu_count(),
            "met": {f"{p['fraction']:.0%} ≤ fresh + 2 s": p["median_s"] <= fresh + 2 for p in positions[1:]}}


def markdown(result: dict[str, Any]) -> str:
    if "failed" in result:
        return f"failed: {result['failed']}"
    lines = [f"{result['rows']:,} 224-px JPEG photos, batches of {result['batch']}, {result['steps_per_epoch']} "
             f"steps an epoch, shuffle window {result['window']:,} records.", "",
             "| start | step | to the first batch (median) | rounds | read before the first record |",
             "|---|---:|---:|---|---:|"]
    for p in result["positions"]:
        lines.append(f"| {'fresh' if not p['fraction'] else format(p['fraction'], '.0%') + ' of the epoch'} "
                     f"| {p['step']} | {p['median_s']} s | {p['rounds_s']} | {p['records_read_first']:,} records, "
                     f"{p['bytes_read_first']:,} bytes |")
    it = result["iterator_checkpoint"]
    lines += ["", f"tf.data's iterator checkpoint of the same stream at 10 %: {it['bytes']:,} bytes, written in "
                  f"{it['save_s']} s, restored to the first batch in {it['restore_to_first_batch_s']} s.", "",
              "Targets: " + ", ".join(f"{k}: {'met' if v else 'missed'}" for k, v in result["met"].items())]
    return "\n".join(lines)

"""`make bench`'s reader_s3 suite: the exact order read from s3:// (moto on loopback) against a local disk.

    python -m benchmarks.run_all --only reader_s3                       # 3,000 photos, 8 shards, 3 rounds
    python -m benchmarks.run_all --only reader_s3 --s3-rows 1000 --s3-rounds 5

ExampleGen writes `--s3-rows` of the benchmark photos (`testkit.photo_data`, 224×224 RGB JPEG, `--s3-shards` shards)
to the local disk once; `storage.copy_tree` uploads them to a fresh bucket of a moto S3 server on loopback
(`s3_loopback`). Each of two streams is built on both copies, in the exact order exact resume relies on
(`build_stream(..., deterministic=True)`, image and label decoded, batches of 128):

- `exact`: one pass in the shards' order (evaluation, scoring);
- `trainer`: the Trainer's training order, `repeat=True` with its default shuffle budget and a seed
  (`core/stream_read.repeated_read`: each pass's shards one after another), TRAINER_EPOCHS epochs from one
  iterator, as a fit of that many epochs reads them: its first shuffle window is filled before the first
  batch, later ones while the one before is decoded.

`trainer_bench.time_datasets` drains each contender once (warm-up), then `--s3-rounds` times taking turns
(every other round reversed), so local and s3 passes alternate. Rate = examples / pass seconds (median);
CPU µs/example = this process's CPU (all threads) during a pass. moto's own CPU is counted apart (a real
store's serving costs this machine nothing): the server's CPU seconds over the whole timing ÷ examples read
from it. Target: s3 within 10 % of local (ratio of median rates ≥ 0.9) for both streams.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from testkit.photo_data import ensure_photo_index, ensure_photos

from .photos_bench import eg_options
from .suites import parse_size

NAME = "reader_s3"
BATCH_SIZE = 128
SEED = 0
TRAINER_EPOCHS = 3  # photos_e2e's
TARGET_RATIO = 0.9  # s3 examples/s ÷ local examples/s


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reader_s3")
    group.add_argument("--s3-rows", type=parse_size, default=3_000, help="photos written (default 3000)")
    group.add_argument("--s3-shards", type=int, default=8, help="ExampleGen's shards (default 8)")
    group.add_argument("--s3-rounds", type=int, default=3, help="timed passes per contender (default 3)")


def local_examples(work: Path, rows: int, shards: int) -> Path:
    """ExampleGen's 224-px JPEG output of `rows` benchmark photos in `shards` shards, written once."""
    from shardflow.example_gen import ExampleGenConfig, IndexSpec
    from shardflow.example_gen import run as example_gen

    out = work / f"reader-s3-{rows}-{shards}" / "examples"
    if not (out / "manifest.json").is_file():
        root = ensure_photos(work / "photos")
        example_gen(ExampleGenConfig(indexes=(IndexSpec(str(ensure_photo_index(root, rows)), "train"),),
                                     data_root=str(root), output=str(out), num_shards=shards, **eg_options("jpeg")),
                    echo=lambda _: None)
    return out


def exact_streams(examples: str) -> dict[str, Any]:
    """The two exact-order streams over `examples` (a local folder or an s3:// prefix), split "train"."""
    from shardflow.core.input_stream import StreamOptions, build_stream
    from shardflow.core.manifest import read_manifest
    from shardflow.trainer.config import DEFAULT_SHUFFLE_MB

    split = read_manifest(examples).splits["train"]
    features = ("x", "y")
    one_pass = StreamOptions(batch_size=BATCH_SIZE, deterministic=True, features=features)
    training = StreamOptions(batch_size=BATCH_SIZE, deterministic=True, features=features, repeat=True, seed=SEED,
                             shuffle_mb=DEFAULT_SHUFFLE_MB)
    epoch = math.ceil(split.num_examples / BATCH_SIZE)
    return {"exact": build_stream(examples, "train", one_pass),
            "trainer": build_stream(examples, "train", training).take(TRAINER_EPOCHS * epoch)}


def measure(local: Path, remote: str, rounds: int, moto_pid: int) -> dict[str, Any]:
    """Every contender's figures (`time_datasets`), moto's CPU per example read from it, and the ratios."""
    import psutil

    from .trainer_bench import time_datasets

    datasets = {f"{kind} {where}": stream for where, root in (("local", str(local)), ("s3", remote))
                for kind, stream in exact_streams(root).items()}
    server = psutil.Process(moto_pid)
    before = sum(server.cpu_times()[:2])
    figures = time_datasets(datasets, rounds)
    moto_cpu = sum(server.cpu_times()[:2]) - before
    from_s3 = sum(f["examples"] * (rounds + 1) for name, f in figures.items() if name.endswith(" s3"))
    ratios = {}
    for kind in ("exact", "trainer"):
        on_s3, on_disk = figures[f"{kind} s3"], figures[f"{kind} local"]
        ratios[kind] = {"rate": on_s3["median_per_s"] / on_disk["median_per_s"],
                        "cpu_per_example": on_s3["median_cpu_us_per_example"] / on_disk["median_cpu_us_per_example"]}
    return {"contenders": figures, "ratios": ratios, "moto_cpu_us_per_example": moto_cpu / from_s3 * 1e6}


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    del sizes
    from shardflow.core import storage
    from shardflow.core.exit_guard import install_exit_guard
    from shardflow.core.manifest import read_manifest

    from .s3_loopback import new_bucket, start_moto, stop_moto

    # run_all is the process's entry point, and this suite the one that loads tensorflow-io's s3:// plugin, which
    # aborts in interpreter teardown: without the guard `make bench` would exit 134 after a good run.
    install_exit_guard()
    work = work.resolve()
    local = local_examples(work, args.s3_rows, args.s3_shards)
    split = read_manifest(str(local)).splits["train"]
    server, _ = start_moto(work)
    try:
        remote = new_bucket() + "/examples"
        storage.copy_tree(str(local), remote, last=("manifest.json",))
        figures = measure(local, remote, args.s3_rounds, server.pid)
    finally:
        stop_moto(server)
    met = {f"{kind}: s3 ≥ {TARGET_RATIO}× local": ratio["rate"] >= TARGET_RATIO
           for kind, ratio in figures["ratios"].items()}
    return {"benchmark": NAME, "sizes": [split.num_examples], "shards": len(split.shards),
            "bytes": sum(s.bytes for s in split.shards), "batch_size": BATCH_SIZE, "rounds": args.s3_rounds,
            **figures, "met": met, "failed": False}


def markdown(result: dict[str, Any]) -> str:
    megabytes = result["bytes"] / 1e6
    lines = [f"{result['sizes'][0]:,} examples of 224×224 JPEG in {result['shards']} shards ({megabytes:,.0f} MB), "
             f"batch {result['batch_size']}, median of {result['rounds']} rounds; moto's own CPU: "
             f"{result['moto_cpu_us_per_example']:,.0f} µs per example read from it", "",
             "| stream | examples/s | CPU µs/example |", "|---|---:|---:|"]
    for name, figures in result["contenders"].items():
        lines.append(f"| {name} | {figures['median_per_s']:,.0f} | {figures['median_cpu_us_per_example']:,.0f} |")
    lines += ["", "| s3 / local | rate | CPU per example |", "|---|---:|---:|"]
    for kind, ratio in result["ratios"].items():
        lines.append(f"| {kind} | {ratio['rate']:.2f}× | {ratio['cpu_per_example']:.2f}× |")
    lines += ["", *(f"- {target}: {'met' if met else 'NOT met'}" for target, met in result["met"].items())]
    return "\n".join(lines)

"""Reading a finite tf.data dataset of ExampleGen batches back into numpy, for tests."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf


def collect(dataset: tf.data.Dataset) -> dict[str, np.ndarray]:
    """All batches of a finite dataset, concatenated per feature."""
    batches = [{k: v.numpy() for k, v in batch.items()} for batch in dataset]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def budget_for(output_dir: object, records: int, split: str = "train") -> float:
    """The shuffle budget in MB (`StreamOptions.shuffle_mb`) whose window holds `records` records of `split`."""
    from shardflow.core.manifest import read_manifest
    from shardflow.core.reader import record_bytes

    return (math.ceil(records * record_bytes(read_manifest(output_dir), split)) + 0.5) / 1_000_000


def numbered_examples(root: Path, count: int, seed: int, **options: Any) -> Path:
    """ExampleGen output (`root`/out) of `count` train rows of 4x4 grey PNGs, `rid` each row's number (0-based);
    `options`: more ExampleGenConfig fields (the shard count)."""
    from helpers_images import random_pixels, write_csv, write_png
    from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

    rng, lines = np.random.default_rng(seed), []
    for i in range(count):
        write_png(root / f"img/{i}.png", random_pixels(rng, (4, 4, 1)))
        lines.append([f"img/{i}.png", str(i)])
    write_csv(root / "train.csv", ["img", "rid"], lines)
    out = root / "out"
    run(ExampleGenConfig(indexes=(IndexSpec(str(root / "train.csv"), "train"),), data_root=str(root),
                         output=str(out), **options), echo=lambda _: None)
    return out

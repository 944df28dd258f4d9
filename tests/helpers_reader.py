"""Reading a finite tf.data dataset of ExampleGen batches back into numpy, for tests."""
from __future__ import annotations

import math

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

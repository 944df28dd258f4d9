"""Reading a finite tf.data dataset of ExampleGen batches back into numpy, for tests."""
from __future__ import annotations

import numpy as np
import tensorflow as tf


def collect(dataset: tf.data.Dataset) -> dict[str, np.ndarray]:
    """All batches of a finite dataset, concatenated per feature."""
    batches = [{k: v.numpy() for k, v in batch.items()} for batch in dataset]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}

"""Reading Transform's output back as the Trainer sees it, for tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow_transform as tft

from shardflow.core.manifest import read_manifest
from shardflow.core.input_stream import StreamOptions, build_stream


def read_transformed(directory: Path, split: str) -> dict[str, np.ndarray]:
    """Every example of the split: images kept as stored bytes (`applied_at_read`) go through the graph."""
    manifest = read_manifest(directory)
    at_read = manifest.extra["applied_at_read"]
    graph = tft.TFTransformOutput(str(Path(directory) / "transform_graph"))
    batches = []
    options = StreamOptions(batch_size=64, decode=[n for n in manifest.features if n not in at_read])
    for batch in build_stream(directory, split, options):
        applied = graph.transform_raw_features({name: batch[name] for name in at_read}) if at_read else {}
        batches.append({name: (applied[name] if name in at_read else value).numpy() for name, value in batch.items()})
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}

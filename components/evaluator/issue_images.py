"""The pixels of a few scored examples, fetched again by position for the label-issue contact sheet.

Scoring keeps no pixels, and which examples the sheet shows is known only at the end, so the top
issues' records are read again: only the shards holding them (their counts are in the manifest),
seeking past the records between (`core.tfrecord.records_numbered`: on an object store a ranged
read, so the split is not downloaded again; a GZIP shard is decompressed up to its last wanted
record), through `storage` (local, s3://, gs://).

>>> import tempfile, os
>>> from ..core.tfrecord import frame
>>> shard = os.path.join(tempfile.mkdtemp(), "s.tfrecord")
>>> _ = open(shard, "wb").write(b"".join(frame(bytes([i])) for i in range(3)))
>>> records_at([shard, shard], [3, 3], "", [4, 0])
{0: b'\\x00', 4: b'\\x01'}
"""
from __future__ import annotations

import gzip
from typing import Sequence

import numpy as np

from ..core import storage
from ..core.manifest import FeatureSpec, Manifest
from ..core.pixel_codec import decode_pixels
from ..core.tfrecord import records_numbered


def records_at(files: Sequence[str], counts: Sequence[int], compression: str, positions: Sequence[int]
               ) -> dict[int, bytes]:
    """Serialized records by position in the split (the shards `files`, holding `counts` records each)."""
    wanted, found, first = sorted(set(int(p) for p in positions)), {}, 0
    for path, count in zip(files, counts):
        inside = [p - first for p in wanted if first <= p < first + count]
        if inside:
            with storage.open_read(path) as raw:
                stream = gzip.GzipFile(fileobj=raw) if compression == "GZIP" else raw
                found.update({first + n: record for n, record in records_numbered(stream, inside, path).items()})
        first += count
    return found


def _pixels(example: object, spec: FeatureSpec) -> np.ndarray:
    payload = example.features.feature[spec.name].bytes_list.value[0]  # type: ignore[attr-defined]
    return decode_pixels(payload, spec.encoding, spec.dtype, tuple(spec.shape))


def panels(manifest: Manifest, files: Sequence[str], split: str, positions: Sequence[int], mask: str | None
           ) -> list[tuple[np.ndarray | None, np.ndarray | None]]:
    """(image, mask) pixels of each position: the examples' first image feature (None without one) and,
    for masks, the given mask [H, W]."""
    from tensorflow.core.example import example_pb2  # the evaluator imports TensorFlow anyway

    image = next((f for f in manifest.features.values() if f.role == "image"), None)
    counts = [s.num_examples for s in manifest.splits[split].shards]
    records = records_at(files, counts, manifest.compression, positions)
    shown = []
    for position in positions:
        example = example_pb2.Example.FromString(records[int(position)])
        pixels = _pixels(example, image) if image is not None else None
        given = _pixels(example, manifest.features[mask])[..., 0] if mask is not None else None
        shown.append((pixels, given))
    return shown

"""A split of a shardflow output directory as the manifest describes it: what the input stream reads and decodes.

Everything comes from `manifest.json`: which shard files make a split (in order, each checked for its
recorded size: `shard_files`), whether they are GZIP-compressed, each feature's dtype, shape and
storage (raw bytes, PNG, JPEG or a plain value: `feature_spec`), the mean size of a stored record
(`record_bytes`, from which a shuffle budget in bytes becomes a window of records: `shuffle_window`),
and whether an image is large enough to decode one record per call (`decodes_per_record`).
`decode_batch` decodes a parsed batch (serving, Transform, the Trainer's export).

The stream itself (read → shuffle → ... → prefetch) is built in one place, `core.input_stream`;
`core.image_decode` holds the decoders.
"""
from __future__ import annotations

import math
import os

import tensorflow as tf

from . import storage
from .errors import ConfigError
from .image_decode import CODED, TF_DTYPES, decode_many
from .manifest import Manifest, MissingShardError, ShardMismatchError

# Bytes per value of each stored dtype (a raw pixel's uncompressed size).
_ITEM_BYTES = {"uint8": 1, "uint16": 2, "int64": 8, "float32": 4, "string": 1}
# PNG/JPEG images of at least this many pixels (H x W) are decoded one record per map call. Measured
# (loaded 2-core machine): 224x224 JPEG per chunk 0.6-0.95x a per-record reader (cores idle while one
# call decodes 256 images); 28x28 PNG per record +15 % CPU per example (tf.data's ~6 us per record
# beside a ~35 us decode). The threshold lies between the two measured sizes.
PER_RECORD_PIXELS = 128 * 128


def feature_spec(manifest: Manifest, features: list[str] | None = None
                 ) -> dict[str, tf.io.FixedLenFeature | tf.io.RaggedFeature]:
    """The `tf.io.parse_example` spec: image/mask files are string scalars, values are scalars of their type,
    and a list of any length (shape [-1]: a detection example's boxes, core/box_schema.py) is a ragged row
    (after `unbatch` one record's dense list), which a model step pads to a fixed size."""
    spec = {}
    for name in _selected(manifest, features):
        feature = manifest.features[name]
        dtype = tf.string if feature.is_file else TF_DTYPES[feature.dtype]
        if list(feature.shape) == [-1]:
            spec[name] = tf.io.RaggedFeature(dtype, row_splits_dtype=tf.int64)
        else:
            spec[name] = tf.io.FixedLenFeature([], dtype)
    return spec


def decode_batch(parsed: dict[str, tf.Tensor], manifest: Manifest) -> dict[str, tf.Tensor]:
    """Decodes a batch of parsed features: files → [B, H, W, C] pixels of their dtype, values unchanged."""
    return {name: decode_many(tensor, manifest.features[name]) if manifest.features[name].is_file else tensor
            for name, tensor in parsed.items()}


def decodes_per_record(manifest: Manifest) -> bool:
    """True when a feature is a large PNG/JPEG image: one image per kernel, best spread over cores record by record."""
    return any(f.is_file and f.encoding in CODED and f.shape[0] * f.shape[1] >= PER_RECORD_PIXELS
               for f in manifest.features.values())


def shard_files(output_dir: str | os.PathLike, manifest: Manifest, split: str) -> list[str]:
    """The split's shard locations in manifest order, checked against the manifest.

    Each listed shard must exist with the recorded size, and the split's folders must hold no
    `data-*` shard the manifest does not list (a mixed or partly overwritten output). Works on
    local paths and URIs (one size request per shard and one listing per folder on object stores).
    """
    _check_split(manifest, split)
    output_dir = os.fspath(output_dir)
    info = manifest.splits[split]
    paths = manifest.shard_paths(output_dir, split)
    if sum(s.num_examples for s in info.shards) != info.num_examples:
        raise ShardMismatchError(f"manifest of {output_dir}: split {split!r} lists {info.num_examples} examples, "
                         f"its shards {sum(s.num_examples for s in info.shards)}")
    for path, shard in zip(paths, info.shards):
        try:
            found = storage.size(path)
        except FileNotFoundError:
            raise MissingShardError(f"shard file {path} listed in the manifest of {output_dir} is missing") from None
        if found != shard.bytes:
            # A shard replaced or truncated after the run: its records no longer match the manifest.
            raise ShardMismatchError(f"shard file {path} has {found} bytes, the manifest says {shard.bytes} "
                                     "(replaced or truncated since ExampleGen wrote it)")
    _check_no_unlisted(output_dir, paths)
    return paths


def _check_no_unlisted(output_dir: str, paths: list[str]) -> None:
    """ShardMismatchError when a folder of the split holds `data-*` shards the manifest does not list."""
    folders: dict[str, set[str]] = {}
    for path in paths:
        folders.setdefault(storage.parent(path), set()).add(storage.basename(path))
    for folder, listed in folders.items():
        present = {name for name in storage.list_names(folder) if name.startswith("data-")}
        unlisted = sorted(present - listed)
        if unlisted:
            raise ShardMismatchError(f"{folder} has {len(present)} shard files, the manifest of {output_dir} lists "
                             f"{len(listed)}: not listed {unlisted[:5]} (a mixed or partly overwritten output)")


def record_bytes(manifest: Manifest, split: str) -> float:
    """Mean bytes a serialized record of `split` holds in memory (what a shuffle buffer stores per example).

    The shards' bytes per example; for GZIP shards at least each raw pixel feature's uncompressed size
    (PNG/JPEG payloads do not shrink under GZIP, raw pixels do).
    """
    _check_split(manifest, split)
    info = manifest.splits[split]
    stored = sum(s.bytes for s in info.shards) / max(1, info.num_examples)
    if manifest.compression == "GZIP":
        raw = sum(math.prod(f.shape) * _ITEM_BYTES[f.dtype] for f in manifest.features.values()
                  if f.is_file and f.encoding == "raw")
        stored = max(stored, raw)
    return max(1.0, stored)


def shuffle_window(manifest: Manifest, split: str, shuffle_bytes: int) -> int:
    """Records per shuffle window for a budget of `shuffle_bytes` serialized bytes (0: no shuffle).

    >>> from shardflow.core.manifest import ShardInfo, SplitInfo
    >>> m = Manifest({}, {"t": SplitInfo(100, [ShardInfo("Split-t/a", 100, 2_000_000)])}, "")
    >>> shuffle_window(m, "t", 64 << 20), shuffle_window(m, "t", 1), shuffle_window(m, "t", 0)
    (3355, 1, 0)
    """
    if shuffle_bytes <= 0:
        return 0
    return max(1, int(shuffle_bytes // record_bytes(manifest, split)))


def _selected(manifest: Manifest, features: list[str] | None) -> list[str]:
    if features is None:
        return list(manifest.features)
    if isinstance(features, str) or not features:
        raise ConfigError(f"features must be a non-empty list of feature names, got {features!r}")
    unknown = [name for name in features if name not in manifest.features]
    if unknown:
        raise ConfigError(f"features {unknown} are not in the manifest (has {sorted(manifest.features)})")
    return list(dict.fromkeys(features))


def _check_split(manifest: Manifest, split: str) -> None:
    if split not in manifest.splits:
        raise ConfigError(f"split {split!r} is not in the manifest (has {sorted(manifest.splits)})")


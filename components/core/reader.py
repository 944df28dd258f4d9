"""Reading a shardflow output directory as a `tf.data.Dataset` of decoded features.

Everything comes from `manifest.json`: which shard files make a split (in order), whether they are
GZIP-compressed, and each feature's dtype, shape and storage (raw bytes, PNG, JPEG or a plain
value). Records move between tf.data steps in chunks and are parsed a whole chunk at a time, so the
per-record cost stays in TensorFlow kernels. Raw pixels and small PNG/JPEG images are decoded per
chunk too; large PNG/JPEG images (photos) one record per call of a parallel map, so that every core
decodes (`core.image_decode` holds the decoders; `core.record_stream` the read step: shards → chunks of
serialized records, window shuffle, fold selection). These three are the only core modules that import
TensorFlow.

Usage (Transform, Trainer and Evaluator read ExampleGen's output this way):

    from shardflow.core.reader import make_dataset

    train = make_dataset("out", "train", batch_size=64, shuffle_bytes=128 << 20, seed=0, repeat=True)
    for batch in train.take(1):
        batch["x"]  # uint8 tensor [64, 28, 28, 1], bit for bit the source PNG's pixels
        batch["y"]  # int64 tensor [64]

With `deterministic=True` (the default) and no shuffle budget, examples come in exactly the order
of the shards in the manifest (ExampleGen keeps CSV row order within a named split). With a
shuffle budget of B bytes, the shard order is shuffled, several shards are read at once, and each
run of W consecutive *serialized* records is permuted as a whole, W = B / the split's mean record
size (`shuffle_window`). Records are decoded after the shuffle, as ImageNet input pipelines do:
the shuffle holds compact stored bytes, and its memory does not depend on the data set's size.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Collection

import tensorflow as tf

from . import storage
from .cloud_env import enable_tensorflow_filesystems
from .image_decode import CODED, TF_DTYPES, decode_many, decode_one
from .errors import ConfigError
from .folds import FoldSelection
from .manifest import Manifest, MissingShardError, ShardMismatchError, read_manifest
# The read step's names, used here and by the benchmarks through this module.
from .record_stream import PARALLEL_FILES, READ_CHUNK, as_written, record_chunks, window_shuffled  # noqa: F401

# Bytes per value of each stored dtype (a raw pixel's uncompressed size).
_ITEM_BYTES = {"uint8": 1, "uint16": 2, "int64": 8, "float32": 4, "string": 1}
# PNG/JPEG images of at least this many pixels (H x W) are decoded one record per map call. Measured
# (loaded 2-core machine): 224x224 JPEG per chunk 0.6-0.95x a per-record reader (cores idle while one
# call decodes 256 images); 28x28 PNG per record +15 % CPU per example (tf.data's ~6 us per record
# beside a ~35 us decode). The threshold lies between the two measured sizes.
PER_RECORD_PIXELS = 128 * 128


def feature_spec(manifest: Manifest, features: list[str] | None = None) -> dict[str, tf.io.FixedLenFeature]:
    """The `tf.io.parse_example` spec: image/mask files are string scalars, values are scalars of their type."""
    spec = {}
    for name in _selected(manifest, features):
        feature = manifest.features[name]
        dtype = tf.string if feature.is_file else TF_DTYPES[feature.dtype]
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


def count_examples(manifest: Manifest, split: str, folds: FoldSelection | None = None) -> int:
    """Examples in `split` (of its `folds` only, when given), as the manifest records them."""
    _check_split(manifest, split)
    total = manifest.splits[split].num_examples
    return total if folds is None else folds.size(total)


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


def make_dataset(output_dir: str | os.PathLike, split: str, *, batch_size: int, shuffle_bytes: int = 0,
                 seed: int | None = None, deterministic: bool = True, drop_remainder: bool = False,
                 repeat: bool = False, features: list[str] | None = None, decode: bool | Collection[str] = True,
                 per_example: Callable[[dict[str, tf.Tensor]], Any] | None = None,
                 folds: FoldSelection | None = None) -> tf.data.Dataset:
    """Batches of decoded features (dicts of tensors) of `split` in `output_dir`.

    The stream's order, here and nowhere else: shards → serialized records → shuffle window of
    serialized records (`shuffle_bytes` of them: memory is counted in bytes, never in examples) →
    repeat → parse → decode → `per_example` → batch → prefetch. Decoded pixels never wait in a
    buffer: they exist only between their decode and the batch that takes them.

    `deterministic=True` with `shuffle_bytes=0` reads the shards one after another (exact shard
    order); with a shuffle budget the order is random but repeatable for a given `seed`, and every
    epoch (of `repeat`, or a new pass over the dataset) comes in a new order.
    `deterministic=False` lets TensorFlow read several shards at once in any order. `features`
    keeps only the named features (less to parse and decode). `decode`: True decodes every file
    feature, False none (files stay their stored bytes: what a tf.Transform graph takes as input),
    or the names of the features to decode. `per_example` runs on each parsed, decoded record in a
    parallel map before batching; it may return any structure. `folds` keeps only the examples
    of those folds (`core.folds`: by position in the split, chosen as the shards are read, before
    any shuffle; `count_examples(..., folds)` counts them). Raises `IncompleteOutputError` when
    the directory has no manifest and FileNotFoundError when a listed shard is missing.
    """
    _check_positive("batch_size", batch_size)
    if isinstance(shuffle_bytes, bool) or not isinstance(shuffle_bytes, int) or shuffle_bytes < 0:
        raise ConfigError(f"shuffle_bytes must be an integer >= 0, got {shuffle_bytes!r}")
    output_dir = os.fspath(output_dir)
    manifest = read_manifest(output_dir)
    files = shard_files(output_dir, manifest, split)
    enable_tensorflow_filesystems(files)  # before TensorFlow opens an s3:// shard
    spec = feature_spec(manifest, features)
    names = [n for n in spec if manifest.features[n].is_file and (decode is True or (decode and n in decode))]
    decoded = Manifest({n: manifest.features[n] for n in names}, manifest.splits, manifest.compression)

    window = shuffle_window(manifest, split, shuffle_bytes)
    records = record_chunks(files, manifest.compression, window, seed, deterministic, folds=folds,
                            shard_sizes=[shard.num_examples for shard in manifest.splits[split].shards])
    if window:
        records = window_shuffled(records, window, seed)
    if repeat:
        records = records.repeat()
    parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": deterministic}
    if per_example is not None or decodes_per_record(decoded):
        # Large PNG/JPEG: a chunk is parsed at once, then each image is decoded in its own call of
        # a parallel map (see PER_RECORD_PIXELS).
        finish = per_example or (lambda record: record)
        parsed = records.map(as_written(lambda chunk: tf.io.parse_example(chunk, spec)), **parallel).unbatch()
        examples = parsed.map(as_written(lambda record: finish(_decoded(record, decoded, decode_one))), **parallel)
        batched = examples.batch(batch_size, drop_remainder=drop_remainder)
    else:
        chunks = records.map(as_written(lambda chunk: _decoded(tf.io.parse_example(chunk, spec), decoded, decode_many)),
                             **parallel)  # chunks parsed in parallel while the next ones are read
        batched = chunks.rebatch(batch_size, drop_remainder=drop_remainder)
    return batched.prefetch(tf.data.AUTOTUNE)


def _decoded(parsed: dict[str, tf.Tensor], decoded: Manifest, decoder: Callable) -> dict[str, tf.Tensor]:
    return {name: decoder(tensor, decoded.features[name]) if name in decoded.features else tensor
            for name, tensor in parsed.items()}


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


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")

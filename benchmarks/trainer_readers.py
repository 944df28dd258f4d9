"""The input pipelines the Trainer benchmark compares, each yielding (float32 images or raw bytes, labels).

    data = ReaderData(examples="out", data_root="data", index="data/index-20000.csv", batch_size=128,
                      shuffle_buffer=10_000)
    dataset = READERS["c"](data)                     # shardflow's reader + the Trainer's cast to [0, 1]
    examples = int(drain(dataset))                   # one pass (epoch), pulled inside a tf.function

Contenders (the issue's letters):
(a) `from_generator` over the PNG files, PIL decode per file every epoch, scaled to [0, 1] in Python
    (the seed tutorials);
(b) the best per-file tf.data reader: shuffled paths → `read_file` + `decode_png` + cast (AUTOTUNE),
    batch, prefetch;
(c) `shardflow.core.input_stream.build_stream(..., deterministic=False)` + cast to float32 / 255;
(d) the TFRecord ceiling: `TFRecordDataset` over the same shards, batch, no parsing (`d1` reads the
    shards one after another, `d` reads several at once when there are several);
(e) in memory: `from_tensor_slices(uint8 array).batch`;
(r) the previous shardflow reader, kept for reference: records one by one through interleave →
    shuffle buffer → batch, then parse + decode + cast per batch.
Diagnostics (where (c)'s time goes): `c_rd` = (c)'s read step alone (record chunks re-cut to the
batch size, no parsing), `c_u8` = (c) without the cast.

Why (c) reads chunks: in (r) every record passes one by one through `interleave`, `shuffle` and
`batch`, which costs tf.data ~1–2 µs per record and per step, all on the one thread that feeds the
batches. (c) moves records in chunks (`TFRecordDataset(path).batch(READ_CHUNK)`), parses and
decodes each chunk in a parallel map, after permuting whole windows of `shuffle_buffer` serialized
records: the per-record work left is the read itself; the rest are vectorized kernels.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import tensorflow as tf
from PIL import Image

from shardflow.core.manifest import Manifest, read_manifest
from shardflow.core.input_stream import PARALLEL_FILES, StreamOptions, build_stream, record_chunks
from shardflow.core.reader import decode_batch, feature_spec, record_bytes, shard_files

from .data import read_index

AUTOTUNE = tf.data.AUTOTUNE


@dataclass(frozen=True)
class ReaderData:
    examples: str  # ExampleGen output directory (split "train")
    data_root: str  # the PNG files
    index: str  # CSV x,y naming them, one row per example
    batch_size: int
    shuffle_buffer: int
    image: str = "x"
    label: str = "y"


def to_unit_float(images: tf.Tensor) -> tf.Tensor:
    """The Trainer's scaling of uint8 pixels when no Transform ran: float32 in [0, 1]."""
    return tf.cast(images, tf.float32) / 255.0


def _paths_and_labels(data: ReaderData) -> tuple[list[str], np.ndarray]:
    rows = read_index(Path(data.index))
    return [str(Path(data.data_root) / path) for path, _ in rows], np.asarray([y for _, y in rows], np.int64)


def reader_a(data: ReaderData) -> tf.data.Dataset:
    """The seed tutorials: a Python generator opens and decodes every PNG with PIL, every epoch."""
    paths, labels = _paths_and_labels(data)

    def generate() -> Iterator[tuple[np.ndarray, np.int64]]:
        for path, label in zip(paths, labels):
            with Image.open(path) as image:
                pixels = np.asarray(image, dtype=np.uint8)[..., None]
            yield pixels.astype(np.float32) / 255.0, label

    signature = (tf.TensorSpec([28, 28, 1], tf.float32), tf.TensorSpec([], tf.int64))
    return tf.data.Dataset.from_generator(generate, output_signature=signature).batch(data.batch_size)


def reader_b(data: ReaderData) -> tf.data.Dataset:
    """Per-file tf.data at its best: parallel `read_file` + `decode_png`, batch, prefetch."""
    paths, labels = _paths_and_labels(data)

    def load(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return to_unit_float(tf.io.decode_png(tf.io.read_file(path), channels=1)), label

    dataset = tf.data.Dataset.from_tensor_slices((paths, labels)).shuffle(len(paths))
    dataset = dataset.map(load, num_parallel_calls=AUTOTUNE, deterministic=False)
    return dataset.batch(data.batch_size).prefetch(AUTOTUNE)


def _cast_pair(data: ReaderData) -> Callable[[dict[str, tf.Tensor]], tuple[tf.Tensor, tf.Tensor]]:
    return lambda batch: (to_unit_float(batch[data.image]), batch[data.label])


def reader_c(data: ReaderData) -> tf.data.Dataset:
    """shardflow's reader as the Trainer uses it, then the cast in a parallel map."""
    return reader_c_uint8(data).map(_cast_pair(data), num_parallel_calls=AUTOTUNE, deterministic=False)


def _files(data: ReaderData) -> tuple[list[str], str]:
    manifest = read_manifest(data.examples)
    return shard_files(data.examples, manifest, "train"), manifest.compression


def reader_d(data: ReaderData) -> tf.data.Dataset:
    """Serialized records only, batched: no parsing, no decoding. Several shards are read at once."""
    files, compression = _files(data)
    reads = min(PARALLEL_FILES, len(files)) if len(files) > 1 else None
    return tf.data.TFRecordDataset(files, compression, num_parallel_reads=reads).batch(data.batch_size)


def reader_d1(data: ReaderData) -> tf.data.Dataset:
    """The same, shards one after another."""
    files, compression = _files(data)
    return tf.data.TFRecordDataset(files, compression).batch(data.batch_size)


def load_pixels(data: ReaderData) -> tuple[np.ndarray, np.ndarray]:
    """Every example's pixels as one uint8 array [N, 28, 28, 1] (decoded once), and the labels."""
    paths, labels = _paths_and_labels(data)
    decoded: dict[str, np.ndarray] = {}  # the index repeats files: decode each once
    for path in paths:
        if path not in decoded:
            with Image.open(path) as image:
                decoded[path] = np.asarray(image, dtype=np.uint8)[..., None]
    return np.stack([decoded[p] for p in paths]), labels


def reader_e(data: ReaderData) -> tf.data.Dataset:
    """All pixels in memory as one uint8 array, batched (no cast: the in-memory ceiling)."""
    return tf.data.Dataset.from_tensor_slices(load_pixels(data)).batch(data.batch_size)


def reader_r(data: ReaderData) -> tf.data.Dataset:
    """(r): the previous reader's record-by-record steps, then parse + decode + cast per batch."""
    manifest = read_manifest(data.examples)
    spec = feature_spec(manifest, [data.image, data.label])
    subset = Manifest({name: manifest.features[name] for name in spec}, manifest.splits, manifest.compression)
    files, compression = _files(data)
    names = tf.data.Dataset.from_tensor_slices(tf.constant(files, dtype=tf.string))
    cycle = max(1, min(PARALLEL_FILES, len(files)))
    parallel = {"num_parallel_calls": AUTOTUNE, "deterministic": False} if cycle > 1 else {}
    records = names.shuffle(len(files)).interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=compression),
        cycle_length=cycle, block_length=1, **parallel)
    batches = records.shuffle(data.shuffle_buffer).batch(data.batch_size)
    decoded = batches.map(lambda r: decode_batch(tf.io.parse_example(r, spec), subset),
                          num_parallel_calls=AUTOTUNE, deterministic=False)
    return decoded.map(_cast_pair(data), num_parallel_calls=AUTOTUNE, deterministic=False).prefetch(AUTOTUNE)


def reader_c_uint8(data: ReaderData) -> tf.data.Dataset:
    """Diagnostic: (c) without the cast."""
    options = StreamOptions(batch_size=data.batch_size, shuffle_mb=_budget_mb(data), deterministic=False)
    return build_stream(data.examples, "train", options)


def _budget_mb(data: ReaderData) -> float:
    """shardflow's shuffle budget in MB for the same number of records the other readers shuffle."""
    return int(data.shuffle_buffer * record_bytes(read_manifest(data.examples), "train")) / 1_000_000


def reader_c_read(data: ReaderData) -> tf.data.Dataset:
    """Diagnostic: (c)'s read step alone, bytes only: chunks of records re-cut to the batch size."""
    files, compression = _files(data)
    return record_chunks(files, compression, data.shuffle_buffer, None, deterministic=False).rebatch(data.batch_size)


READERS: dict[str, Callable[[ReaderData], tf.data.Dataset]] = {
    "a": reader_a, "b": reader_b, "c": reader_c, "d": reader_d, "d1": reader_d1, "e": reader_e, "r": reader_r,
    "c_rd": reader_c_read, "c_u8": reader_c_uint8,
}


@tf.function
def drain(dataset: tf.data.Dataset) -> tf.Tensor:
    """Pulls every batch inside the graph (as Keras' train step does); returns the examples seen."""
    seen = tf.constant(0, tf.int64)
    for element in dataset:
        seen += tf.cast(tf.shape(tf.nest.flatten(element)[0])[0], tf.int64)
    return seen

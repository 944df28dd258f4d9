"""The reader's first steps: shard files → chunks of serialized records, window-shuffled, optionally one fold's.

`make_dataset` (core/reader.py) is the one entry point; this module is its read step (the benchmark
times `record_chunks` alone). Records move in chunks of up to READ_CHUNK serialized records.

A fold selection (`core.folds.FoldSelection`) keeps only the records whose position in the split
(shard offset + record number, from the manifest's per-shard counts) is in the selected folds.
Positions are attached to each shard's chunks as they are read, before any shuffle, so a shuffled,
interleaved stream yields exactly the same examples as one read in order.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from .folds import FoldSelection

# Files read at once when order does not have to be the shards' order.
PARALLEL_FILES = 4
# Serialized records per chunk read from a shard, then parsed and decoded together: tf.data's own
# cost per element and step (~1-2 us here) is paid per chunk, not per record.
READ_CHUNK = 256
# Chunks shuffled (at most) before the window shuffle.
CHUNK_SHUFFLE = 8


def as_written(function: Callable) -> Callable:
    """`function` for a tf.data map, traced as written: autograph does not rewrite it first.

    tf.data runs autograph over every map function and, recursively, over all it calls: the trainer's
    preprocessing and the tf.Transform layer's Keras call (~1,000 functions converted per Trainer run).
    Ours branch only on Python values (tensor branches are tf.cond), so nothing needs converting; a
    `python -m cProfile` of a digits Trainer run (10 epochs) put ~2/3 of its time in the conversion.
    """
    return tf.autograph.experimental.do_not_convert(function)


def record_chunks(files: list[str], compression: str, window: int, seed: int | None, deterministic: bool, *,
                  folds: FoldSelection | None = None, shard_sizes: Sequence[int] = ()) -> tf.data.Dataset:
    """Serialized records in chunks of up to READ_CHUNK (`make_dataset`'s read step; the benchmark times it alone).

    One shard after another when order matters; with a shuffle window of `window` records the shard
    order is shuffled, several shards are read at once, and up to CHUNK_SHUFFLE chunks (never more
    records than the window) are shuffled. The file names stay the pipeline's only source dataset,
    so multi-worker FILE auto-sharding can split them between workers. `folds` keeps only the
    selected folds' records; it needs `shard_sizes`, each file's record count (the manifest's).
    """
    if folds is not None:
        names, read = _fold_reading(files, compression, folds, shard_sizes)
    else:
        names = tf.data.Dataset.from_tensor_slices(tf.constant(files, dtype=tf.string))
        read = lambda path: tf.data.TFRecordDataset(path, compression).batch(READ_CHUNK)  # noqa: E731
    if window and len(files) > 1:
        names = names.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    in_order = deterministic and not window
    if folds is None and (in_order or len(files) == 1):
        # One stream of records, chunked outside the reader: a `batch` inside the function of a
        # flat_map/interleave costs ~1 us more per record here.
        chunks = tf.data.TFRecordDataset(names, compression).batch(READ_CHUNK)
    elif in_order or len(files) == 1:
        chunks = names.flat_map(read)  # each shard's positions start at its own offset
    else:
        chunks = names.interleave(read, cycle_length=min(PARALLEL_FILES, len(files)), block_length=1,
                                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    if window // READ_CHUNK >= 2:
        # A few chunks reshuffled every epoch, so that windows do not always hold the same chunks.
        chunks = chunks.shuffle(min(CHUNK_SHUFFLE, window // READ_CHUNK), seed=seed, reshuffle_each_iteration=True)
    return chunks


def _fold_reading(files: list[str], compression: str, folds: FoldSelection,
                  shard_sizes: Sequence[int]) -> tuple[tf.data.Dataset, Callable[..., tf.data.Dataset]]:
    """(file, first position) names and a reader of one shard's chunks that keeps the selected folds' records."""
    if len(shard_sizes) != len(files):
        raise ValueError(f"a fold selection needs each shard's record count: {len(files)} files, "
                         f"{len(shard_sizes)} counts")
    starts = np.concatenate([[0], np.cumsum(shard_sizes, dtype=np.int64)[:-1]]).astype(np.int64)
    keep = tf.constant(folds.mask(int(sum(shard_sizes))))
    names = tf.data.Dataset.from_tensor_slices((tf.constant(files, dtype=tf.string), tf.constant(starts)))

    def kept(number: tf.Tensor, chunk: tf.Tensor, start: tf.Tensor) -> tf.Tensor:
        positions = start + number * READ_CHUNK + tf.range(tf.shape(chunk, out_type=tf.int64)[0])
        return tf.boolean_mask(chunk, tf.gather(keep, positions))

    def read(path: tf.Tensor, start: tf.Tensor) -> tf.data.Dataset:
        chunks = tf.data.TFRecordDataset(path, compression).batch(READ_CHUNK).enumerate()
        selected = chunks.map(as_written(lambda number, chunk: kept(number, chunk, start)))
        return selected.filter(lambda chunk: tf.size(chunk) > 0)

    return names, read


def window_shuffled(chunks: tf.data.Dataset, window: int, seed: int | None) -> tf.data.Dataset:
    """Each run of `window` consecutive serialized records permuted as a whole, by a new permutation every time.

    Serialized records are the compact form (a JPEG photo ~20 KB, not 150 KB of pixels), and a
    permutation of a whole window costs one gather instead of tf.data's per-record shuffle steps.
    The map is sequential and one permuted window is prefetched: at most the window being filled,
    the one being permuted and its copy, and the one being decoded are in memory. The seeds come from
    a `tf.random.Generator`: its state outlives an iteration (a second pass gets new permutations)
    and is set by `seed`; drawn in that sequential step, so the stream order, not thread timing,
    decides who gets which. A generator, unlike a second source dataset, keeps FILE auto-sharding possible.
    """
    generator = (tf.random.Generator.from_seed(seed) if seed is not None
                 else tf.random.Generator.from_non_deterministic_state())

    def permuted(records: tf.Tensor) -> tf.Tensor:
        order = tf.random.experimental.stateless_shuffle(tf.range(tf.shape(records)[0]),
                                                         seed=generator.make_seeds(1)[:, 0])
        return tf.gather(records, order)

    # The next window is read and permuted while this one is decoded (a stall at every window otherwise).
    return chunks.rebatch(window).map(as_written(permuted)).prefetch(1).rebatch(READ_CHUNK)

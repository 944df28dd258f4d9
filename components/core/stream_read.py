"""The records a stream reads, in chunks: one pass in the shards' order, or the repeated training order.

The read and shuffle stages of `input_stream.build_stream` come from here; it is the one module that
opens TFRecord files for a stream or shuffles records (a rule of tests/architecture).

- `record_chunks`: one pass (evaluation, scoring, labels): the shards' order, or several shards at
  once with a window shuffle (`window_shuffled`) when order does not matter.
- `plan_repeated`, `repeated_read`, `repeated_shuffle`: the training stream's canonical, seekable order
  (core/stream_position.py): pass p reads its shards in an order seeded by (seed, p), one after
  another; each window of W records is permuted by a seed of its global window number. Any position of the endless sequence can be
  started at by skipping whole shards, reading past part of one, and replaying at most one window.

    start = plan_repeated(sizes, window=4096, seed=0, start=12_800)   # step 200 of 64
    chunks = repeated_shuffle(repeated_read(files, "", start), start)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from .folds import FoldSelection
from .stream_position import ResumePoint, resume_point, shard_offsets, window_sizes
from .uri import is_remote

PARALLEL_FILES = 4  # files read at once when order does not have to be the shards' order
# Serialized records per chunk read from a shard, parsed and decoded together: tf.data's own cost per
# element and step (~1-2 us here) is paid per chunk, not per record.
READ_CHUNK = 256
CHUNK_SHUFFLE = 8  # chunks shuffled (at most) before the window shuffle
# Shards an in-order read from an object store fetches at once, each in a thread of its own, ahead of the one
# handed on (`in_order`). On 224-px JPEG shards from moto on loopback the exact order read one shard after
# another ran at 0.58x a local disk's rate: each request's wait came between decodes (benchmarks/reader_s3_suite).
READ_AHEAD_FILES = 4
WHOLE_SHARD = 1 << 62  # an interleave block no shard reaches: every chunk of a shard before the next shard's


def as_written(function: Callable) -> Callable:
    """`function` for a tf.data map, traced as written: autograph does not rewrite it first.

    tf.data runs autograph over every map function and all it calls (the tf.Transform layer's Keras
    call: ~1,000 functions converted per Trainer run, ~2/3 of a short digits run's time). Ours branch
    only on Python values, so nothing needs converting.
    """
    return tf.autograph.experimental.do_not_convert(function)


def record_chunks(files: list[str], compression: str, window: int, seed: int | None, deterministic: bool, *,
                  folds: FoldSelection | None = None, shard_sizes: Sequence[int] = ()) -> tf.data.Dataset:
    """The read stage: serialized records in chunks of up to READ_CHUNK (the benchmark times it alone).

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
    ordered = deterministic and not window
    if folds is None and (ordered or len(files) == 1) and not (files and is_remote(files[0])):
        # One stream of records, chunked outside the reader: a `batch` inside the function of a
        # flat_map/interleave costs ~1 us more per record here.
        chunks = tf.data.TFRecordDataset(names, compression).batch(READ_CHUNK, name="read")
    elif ordered or len(files) == 1:
        chunks = in_order(names, read, files)  # each shard's positions start at its own offset
    else:
        chunks = names.interleave(read, cycle_length=min(PARALLEL_FILES, len(files)), block_length=1,
                                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic, name="read")
    if window // READ_CHUNK >= 2:
        # A few chunks reshuffled every epoch, so that windows do not always hold the same chunks.
        chunks = chunks.shuffle(min(CHUNK_SHUFFLE, window // READ_CHUNK), seed=seed, reshuffle_each_iteration=True,
                                name="shuffle")
    return chunks


def in_order(shards: tf.data.Dataset, read: Callable[..., tf.data.Dataset], files: Sequence[str]) -> tf.data.Dataset:
    """`read(*shard)`'s chunks for each element of `shards`, one shard after another: the read stage of an order.

    From an object store READ_AHEAD_FILES shards are read at once, each by a thread of its own into a buffer of
    one chunk, while the earlier one is handed on: a store's latency is paid beside the decoding, not between.
    The order stays the shards' concatenation, a pure function of `shards`: a deterministic interleave hands on
    `block_length` elements of each shard in turn, and no shard has WHOLE_SHARD chunks. (The public `interleave`
    cannot be used: it sizes each shard's buffer from the block length, i.e. whole shards.) A local disk keeps
    the plain sequential read: no threads, nothing buffered.
    """
    if not (files and is_remote(files[0])):
        return shards.flat_map(read, name="read")
    # TensorFlow's own class behind `interleave`, whose buffers can be set (TF is pinned: requirements/); imported
    # here, so that only a read from an object store depends on it.
    from tensorflow.python.data.ops.interleave_op import _ParallelInterleaveDataset

    return _ParallelInterleaveDataset(shards, read, cycle_length=READ_AHEAD_FILES, block_length=WHOLE_SHARD,
                                      num_parallel_calls=READ_AHEAD_FILES, buffer_output_elements=1,
                                      prefetch_input_elements=0, deterministic=True, name="read")


def _fold_reading(files: list[str], compression: str, folds: FoldSelection,
                  shard_sizes: Sequence[int]) -> tuple[tf.data.Dataset, Callable[..., tf.data.Dataset]]:
    """(file, first position) names and a reader of one shard's chunks that keeps the selected folds' records.

    Positions (shard offset + record number) are attached as each shard is read, before any
    shuffle, so a shuffled, interleaved stream yields exactly the examples of one read in order.
    """
    if len(shard_sizes) != len(files):
        raise ValueError(f"a fold selection needs each shard's record count: {len(files)} files, "
                         f"{len(shard_sizes)} counts")
    starts = shard_offsets(shard_sizes)
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
    """The shuffle stage: each run of `window` consecutive serialized records permuted as a whole.

    A permutation of a whole window costs one gather instead of tf.data's per-record shuffle steps.
    The map is sequential and one permuted window is prefetched (the next window is read and permuted
    while this one is decoded): at most the window being filled, the one being permuted and its copy,
    and the one being decoded are in memory. The seeds come from a `tf.random.Generator` set by
    `seed`, drawn in that sequential step (the stream order, not thread timing, decides who gets
    which); its state outlives an iteration, so a second pass gets new permutations.
    """
    generator = (tf.random.Generator.from_seed(seed) if seed is not None
                 else tf.random.Generator.from_non_deterministic_state())

    def permuted(records: tf.Tensor) -> tf.Tensor:
        order = tf.random.experimental.stateless_shuffle(tf.range(tf.shape(records)[0]),
                                                         seed=generator.make_seeds(1)[:, 0])
        return tf.gather(records, order)

    return chunks.rebatch(window).map(as_written(permuted)).prefetch(1).rebatch(READ_CHUNK, name="shuffle")


@dataclass(frozen=True)
class RepeatedStart:
    """Where the repeated order starts reading for a position: computed before any file is opened."""

    point: ResumePoint
    window: int  # records permuted together (0: none)
    window_sizes: list[int]  # the windows of one pass
    seed: int
    order: np.ndarray  # the starting pass's shard order
    first_skip: int  # records of the first shard's file read past (fold-filtered ones included)
    mask: np.ndarray | None  # the kept positions of the split (folds), else None
    starts: np.ndarray  # each shard's first position in the split


def plan_repeated(shard_sizes: Sequence[int], *, window: int, seed: int, start: int = 0,
                  folds: FoldSelection | None = None) -> RepeatedStart:
    """Where `repeated_read` starts for record `start` of the endless order (positions count kept records)."""
    mask = folds.mask(int(sum(shard_sizes))) if folds is not None else None
    starts = shard_offsets(shard_sizes)
    kept = [int(mask[s:s + n].sum()) if mask is not None else int(n) for s, n in zip(starts, shard_sizes)]
    window = min(window, sum(kept))
    pass_index = start // sum(kept) if sum(kept) else 0
    order = _shard_order(len(shard_sizes), seed, pass_index, bool(window)).numpy()
    point = resume_point(start, [kept[i] for i in order], window)
    shard, skip = int(order[point.shard_rank]), point.skip_in_shard
    if mask is not None:  # kept records to pass → records of the file to pass
        skip = int(np.flatnonzero(mask[starts[shard]:starts[shard] + shard_sizes[shard]])[skip])
    sizes = window_sizes(sum(kept), window) if window else []
    return RepeatedStart(point, window, sizes, seed, order, skip, mask, starts)


def repeated_read(files: list[str], compression: str, start: RepeatedStart, with_ids: bool = False) -> tf.data.Dataset:
    """The read stage of the endless order: pass after pass, each pass's shards one after another.

    `with_ids`: each chunk is (ids int64 [n, 2] = (shard index, record number in the shard), records).
    """
    point, shuffled = start.point, bool(start.window)
    later = tf.data.Dataset.range(point.pass_index + 1, 1 << 62).flat_map(
        lambda p: tf.data.Dataset.from_tensor_slices((_shard_order(len(files), start.seed, p, shuffled),
                                                      tf.zeros([len(files)], tf.int64))))
    remaining = start.order[point.shard_rank:].astype(np.int64)
    skips = np.array([start.first_skip] + [0] * (len(remaining) - 1), np.int64)
    schedule = tf.data.Dataset.from_tensor_slices((remaining, skips)).concatenate(later)
    return in_order(schedule, _shard_reader(files, compression, start.mask, start.starts, with_ids), files)


def _shard_order(count: int, seed: int, pass_index: Any, shuffled: bool) -> tf.Tensor:
    """int64 [count]: the shard indexes in pass `pass_index`'s read order (the same in eager and graph mode)."""
    shards = tf.range(count, dtype=tf.int64)
    if not shuffled:
        return shards
    pair = tf.stack([tf.constant(seed, tf.int64), tf.cast(pass_index, tf.int64)])
    return tf.random.experimental.stateless_shuffle(shards, seed=pair)


def _shard_reader(files: list[str], compression: str, mask: np.ndarray | None, starts: np.ndarray,
                  with_ids: bool) -> Callable[[tf.Tensor, tf.Tensor], tf.data.Dataset]:
    """Reads one shard from record `skip` on, in chunks; numbers, fold-filters and ids them when needed."""
    names = tf.constant(files, dtype=tf.string)
    keep = tf.constant(mask) if mask is not None else None
    first = tf.constant(starts, tf.int64)

    def read(shard: tf.Tensor, skip: tf.Tensor) -> tf.data.Dataset:
        chunks = tf.data.TFRecordDataset(tf.gather(names, shard), compression).skip(skip).batch(READ_CHUNK)
        if keep is None and not with_ids:
            return chunks

        def numbered(index: tf.Tensor, chunk: tf.Tensor) -> Any:
            numbers = skip + index * READ_CHUNK + tf.range(tf.shape(chunk, out_type=tf.int64)[0])
            if keep is not None:
                kept = tf.gather(keep, first[shard] + numbers)
                chunk, numbers = tf.boolean_mask(chunk, kept), tf.boolean_mask(numbers, kept)
            ids = tf.stack([tf.fill(tf.shape(numbers), shard), numbers], axis=1)
            return (ids, chunk) if with_ids else chunk

        selected = chunks.enumerate().map(as_written(numbered))
        return selected.filter(lambda *element: tf.size(element[-1]) > 0) if keep is not None else selected

    return read


def repeated_shuffle(chunks: tf.data.Dataset, start: RepeatedStart) -> tf.data.Dataset:
    """The shuffle stage of the endless order: each window permuted by (seed, its global window number), the
    first one cut at the position.

    Windows are consecutive runs of the read order with the sizes a pass's windows have (`sizes`,
    cycled from the resumed window on), so a window never spans two passes.
    """
    point, sizes, seed = start.point, start.window_sizes, start.seed
    if not start.window:
        return chunks
    index = point.window_index
    first_window = point.pass_index * len(sizes) + index
    rotated = tf.constant(sizes[index:] + sizes[:index], tf.int64)
    drop = tf.constant(point.drop_in_window, tf.int32)

    def permuted(number: tf.Tensor, window: Any) -> Any:
        count = tf.shape(tf.nest.flatten(window)[0])[0]
        pair = tf.stack([tf.constant(seed, tf.int64), number])
        order = tf.random.experimental.stateless_shuffle(tf.range(count), seed=pair)
        order = order[tf.where(number == first_window, drop, 0):]  # the resumed window: from the position on
        return tf.nest.map_structure(lambda records: tf.gather(records, order), window)

    windows = chunks.rebatch(rotated).enumerate(start=first_window)
    return windows.map(as_written(permuted)).prefetch(1).rebatch(READ_CHUNK, name="shuffle")

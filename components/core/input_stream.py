"""The one builder of every tf.data stream over an output directory: training, evaluation, scoring, labels.

`build_stream(output_dir, split, options)` runs these stages, in this order and nowhere else:

    read → shuffle → repeat → parse → decode → transform → batch → augment → sample weights → prefetch

- read: the split's shard files (checked against the manifest: `reader.shard_files`) → chunks of up
  to READ_CHUNK serialized records, one shard after another, or several at once when order does not
  matter; `folds` keeps only those folds' records, chosen by position as the shards are read.
- shuffle: runs of W serialized records permuted as a whole, W = `shuffle_mb` / the split's mean
  record size (`reader.shuffle_window`): memory is counted in bytes of stored records, never in
  decoded examples, and does not depend on the data set's size.
- repeat: every epoch again, in a new order.
- parse, decode, transform: one parallel map. Per chunk when the images are small (tf.data's
  per-call cost matters for 28x28 images), per record when a PNG/JPEG image is large
  (`reader.decodes_per_record`: every core decodes another image). Decode includes the fused JPEG
  crop (`DecodeCrop`: only the crop window is decoded). Transform is the caller's `model_step`
  (the Trainer's tf.Transform graph and scaling, the Evaluator's label ids); it is written for a
  batch and given each record as a batch of one on the per-record path.
- batch: `batch_size` examples.
- augment: the caller's `augment(inputs, targets, batch_index)`, on whole batches. It comes after
  the batch, not before: its ops are vectorized over a batch (one projective warp for 64 images
  instead of 64 calls of a map) and draw their randomness per (seed, batch index). The crop, the one
  augmentation that saves decoding work, runs earlier, fused into decode.
- sample weights: `class_weights[target]` per example (per pixel for masks), and the model's input
  named (`input_name`): the elements Keras' `fit` takes, ({name: inputs}, targets[, weights]).
- prefetch: once, at the end (the shuffle's read-ahead of one window is its own), with FILE
  auto-sharding, so multi-worker training splits the files between workers.

Each stage is a function in STAGES and names the last tf.data transformation it adds after itself
(parse, decode and transform fused in one map: `parse__decode__transform`), so a test reads the
order back from the built dataset. The builder takes only `StreamOptions` and the
callables it applies: it imports nothing of a component.

    from shardflow.core.input_stream import StreamOptions, build_stream

    train = build_stream("out", "train", StreamOptions(batch_size=64, shuffle_mb=128, seed=0, repeat=True))
    for batch in train.take(1):
        batch["x"]  # uint8 tensor [64, 28, 28, 1], bit for bit the source PNG's pixels
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from .cloud_env import enable_tensorflow_filesystems
from .errors import ConfigError
from .folds import FoldSelection
from .image_decode import decode_crop_resize, decode_many, decode_one
from .manifest import Manifest, read_manifest
from .reader import decodes_per_record, feature_spec, shard_files, shuffle_window
from .stream_options import DecodeCrop, StreamOptions

__all__ = ["DecodeCrop", "StreamOptions", "build_stream", "STAGES", "SERIALIZED", "as_written"]

PARALLEL_FILES = 4  # files read at once when order does not have to be the shards' order
# Serialized records per chunk read from a shard, parsed and decoded together: tf.data's own cost per
# element and step (~1-2 us here) is paid per chunk, not per record.
READ_CHUNK = 256
CHUNK_SHUFFLE = 8  # chunks shuffled (at most) before the window shuffle
SERIALIZED = "serialized"  # the key of each record's stored bytes when `keep_serialized`


def as_written(function: Callable) -> Callable:
    """`function` for a tf.data map, traced as written: autograph does not rewrite it first.

    tf.data runs autograph over every map function and all it calls (the tf.Transform layer's Keras
    call: ~1,000 functions converted per Trainer run, ~2/3 of a short digits run's time). Ours branch
    only on Python values, so nothing needs converting.
    """
    return tf.autograph.experimental.do_not_convert(function)


@dataclass
class _Flow:
    """The dataset so far, and the element functions of parse/decode/transform waiting to run in one map
    (the next stage that transforms the dataset runs them first: `_flushed`)."""

    dataset: tf.data.Dataset
    pending: list[tuple[str, Callable]] = field(default_factory=list)


@dataclass(frozen=True)
class _Plan:
    options: StreamOptions
    manifest: Manifest
    split: str
    files: list[str]
    spec: dict[str, tf.io.FixedLenFeature]
    decoded: Manifest  # the features the decode stage turns into pixels
    per_record: bool
    model_step: Callable[[Any], Any] | None
    augment: Callable[[Any, Any, tf.Tensor], tuple[Any, Any]] | None
    crop: DecodeCrop | None


def build_stream(output_dir: str | os.PathLike, split: str, options: StreamOptions, *,
                 model_step: Callable[[Any], Any] | None = None,
                 augment: Callable[[Any, Any, tf.Tensor], tuple[Any, Any]] | None = None,
                 crop: DecodeCrop | None = None) -> tf.data.Dataset:
    """Batches of `split` in `output_dir` through every stage of STAGES (the module's docstring).

    Without `model_step` an element is a dict of the selected features (files decoded as `decode`
    says; SERIALIZED holds each record's bytes when `keep_serialized`). `augment`, `class_weights`
    and `input_name` take the model step's (inputs, targets) pairs. Raises `IncompleteOutputError`
    when the directory has no manifest, ConfigError for a split or feature it does not have.
    """
    if not isinstance(options, StreamOptions):
        raise ConfigError(f"options must be a StreamOptions, got {options!r}")
    plan = _plan(os.fspath(output_dir), split, options, model_step, augment, crop)
    flow = _Flow(tf.data.Dataset.range(0))  # replaced by the read stage
    for _, stage in STAGES:
        flow = stage(flow, plan)
    return flow.dataset


def _plan(output_dir: str, split: str, options: StreamOptions, model_step: Callable | None,
          augment: Callable | None, crop: DecodeCrop | None) -> _Plan:
    manifest = read_manifest(output_dir)
    files = shard_files(output_dir, manifest, split)
    enable_tensorflow_filesystems(files)  # before TensorFlow opens an s3:// shard
    spec = feature_spec(manifest, list(options.features) if options.features is not None else None)
    decode = options.decode
    names = [n for n in spec if manifest.features[n].is_file and (decode is True or (decode and n in decode))]
    decoded = Manifest({n: manifest.features[n] for n in names}, manifest.splits, manifest.compression)
    # With a model step, a large image it decodes itself counts as much as one decoded here.
    judged = Manifest({n: manifest.features[n] for n in spec}, {}, "") if model_step else decoded
    if crop is not None and crop.feature not in decoded.features:
        raise ConfigError(f"the fused crop's feature {crop.feature!r} is not a decoded image of the stream")
    per_record = crop is not None or decodes_per_record(judged)
    return _Plan(options, manifest, split, files, spec, decoded, per_record, model_step, augment, crop)


def _read(flow: _Flow, plan: _Plan) -> _Flow:
    options, window = plan.options, _window(plan)
    sizes = [shard.num_examples for shard in plan.manifest.splits[plan.split].shards]
    chunks = record_chunks(plan.files, plan.manifest.compression, window, options.seed, options.deterministic,
                           folds=options.folds, shard_sizes=sizes)
    return _Flow(chunks)


def _shuffle(flow: _Flow, plan: _Plan) -> _Flow:
    window = _window(plan)
    if not window:
        return flow
    return _Flow(window_shuffled(_flushed(flow, plan), window, plan.options.seed))


def _repeat(flow: _Flow, plan: _Plan) -> _Flow:
    return _Flow(_flushed(flow, plan).repeat(name="repeat")) if plan.options.repeat else flow


def _parse(flow: _Flow, plan: _Plan) -> _Flow:
    spec, keep = plan.spec, plan.options.keep_serialized

    def parse(chunk: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(chunk, spec)
        return {**parsed, SERIALIZED: chunk} if keep else parsed

    if not plan.per_record:
        return _Flow(flow.dataset, flow.pending + [("parse", parse)])
    # A chunk is parsed at once, then each record decoded in its own call of a parallel map.
    records = _flushed(flow, plan).map(as_written(parse), name="parse", **_parallel(plan)).unbatch()
    return _Flow(records.enumerate() if plan.crop is not None else records)


def _decode(flow: _Flow, plan: _Plan) -> _Flow:
    decoded, crop = plan.decoded, plan.crop
    decoder = decode_one if plan.per_record else decode_many

    def decode(record: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {name: decoder(value, decoded.features[name]) if name in decoded.features else value
                for name, value in record.items()}

    if crop is None:
        return _Flow(flow.dataset, flow.pending + [("decode", decode)])
    height, width, channels = decoded.features[crop.feature].shape
    batch = plan.options.batch_size

    def decode_cropped(position: tf.Tensor, record: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        window = crop.window(position // batch, position % batch)
        pixels = decode_crop_resize(record[crop.feature], window, [height, width], channels)  # float32, 0-255
        return {**decode({n: v for n, v in record.items() if n != crop.feature}), crop.feature: pixels}

    return _Flow(flow.dataset, flow.pending + [("decode", decode_cropped)])


def _transform(flow: _Flow, plan: _Plan) -> _Flow:
    step = plan.model_step
    if step is None:
        return flow
    if not plan.per_record:
        return _Flow(flow.dataset, flow.pending + [("transform", step)])

    def one_record(record: Any) -> Any:  # the step takes batches: a batch of one
        batched = step(tf.nest.map_structure(lambda value: value[tf.newaxis], record))
        return tf.nest.map_structure(lambda value: value[0], batched)

    return _Flow(flow.dataset, flow.pending + [("transform", one_record)])


def _flushed(flow: _Flow, plan: _Plan) -> tf.data.Dataset:
    """The dataset with the pending element functions run, in their order, in one parallel map."""
    if not flow.pending:
        return flow.dataset
    names, functions = [n for n, _ in flow.pending], [f for _, f in flow.pending]

    def run(*element: Any) -> Any:
        value = functions[0](*element)
        for function in functions[1:]:
            value = function(value)
        return value

    return flow.dataset.map(as_written(run), name="__".join(names), **_parallel(plan))


def _batch(flow: _Flow, plan: _Plan) -> _Flow:
    dataset, options = _flushed(flow, plan), plan.options
    if plan.per_record:
        return _Flow(dataset.batch(options.batch_size, drop_remainder=options.drop_remainder, name="batch"))
    return _Flow(dataset.rebatch(options.batch_size, drop_remainder=options.drop_remainder, name="batch"))


def _augment(flow: _Flow, plan: _Plan) -> _Flow:
    augment = plan.augment
    if augment is None:
        return flow

    def augmented(index: tf.Tensor, pair: tuple[Any, Any]) -> tuple[Any, Any]:
        return augment(pair[0], pair[1], index)

    # In stream order (the default), as the batch indices that seed it.
    batches = _flushed(flow, plan).enumerate()
    return _Flow(batches.map(as_written(augmented), num_parallel_calls=tf.data.AUTOTUNE, name="augment"))


def _sample_weights(flow: _Flow, plan: _Plan) -> _Flow:
    weights, name = plan.options.class_weights, plan.options.input_name
    if weights is None and name is None:
        return flow
    table = tf.constant(weights, tf.float32) if weights is not None else None

    def for_fit(inputs: Any, targets: tf.Tensor) -> tuple[Any, ...]:
        named = {name: inputs} if name is not None else inputs
        return (named, targets) if table is None else (named, targets, tf.gather(table, targets))

    return _Flow(_flushed(flow, plan).map(as_written(for_fit), name="sample_weights"))


def _prefetch(flow: _Flow, plan: _Plan) -> _Flow:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    return _Flow(_flushed(flow, plan).with_options(options).prefetch(tf.data.AUTOTUNE, name="prefetch"))


def _window(plan: _Plan) -> int:
    return shuffle_window(plan.manifest, plan.split, plan.options.shuffle_bytes)


def _parallel(plan: _Plan) -> dict[str, Any]:
    return {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": plan.options.deterministic}


STAGES: tuple[tuple[str, Callable[[_Flow, _Plan], _Flow]], ...] = (
    ("read", _read), ("shuffle", _shuffle), ("repeat", _repeat), ("parse", _parse), ("decode", _decode),
    ("transform", _transform), ("batch", _batch), ("augment", _augment), ("sample_weights", _sample_weights),
    ("prefetch", _prefetch))


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
    in_order = deterministic and not window
    if folds is None and (in_order or len(files) == 1):
        # One stream of records, chunked outside the reader: a `batch` inside the function of a
        # flat_map/interleave costs ~1 us more per record here.
        chunks = tf.data.TFRecordDataset(names, compression).batch(READ_CHUNK, name="read")
    elif in_order or len(files) == 1:
        chunks = names.flat_map(read, name="read")  # each shard's positions start at its own offset
    else:
        chunks = names.interleave(read, cycle_length=min(PARALLEL_FILES, len(files)), block_length=1,
                                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic, name="read")
    if window // READ_CHUNK >= 2:
        # A few chunks reshuffled every epoch, so that windows do not always hold the same chunks.
        chunks = chunks.shuffle(min(CHUNK_SHUFFLE, window // READ_CHUNK), seed=seed, reshuffle_each_iteration=True,
                                name="shuffle")
    return chunks


def _fold_reading(files: list[str], compression: str, folds: FoldSelection,
                  shard_sizes: Sequence[int]) -> tuple[tf.data.Dataset, Callable[..., tf.data.Dataset]]:
    """(file, first position) names and a reader of one shard's chunks that keeps the selected folds' records.

    Positions (shard offset + record number) are attached as each shard is read, before any
    shuffle, so a shuffled, interleaved stream yields exactly the examples of one read in order.
    """
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

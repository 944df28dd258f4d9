"""The one builder of every tf.data stream over an output directory: training, evaluation, scoring, labels.

`build_stream(output_dir, split, options)` runs these stages, in this order and nowhere else:

    read → shuffle → slice → record order → parse → decode → transform → batch → augment → sample weights → prefetch

- read: the split's shard files (checked against the manifest: `reader.shard_files`) → chunks of up
  to READ_CHUNK serialized records, one shard after another, or several at once when order does not
  matter; `folds` keeps only those folds' records, chosen by position as the shards are read. A
  repeated (training) stream reads pass after pass, each pass's shards in an order seeded by
  (seed, pass), from its `start` position on (core/stream_read.py, core/stream_position.py).
- shuffle: runs of W serialized records permuted as a whole, W = `shuffle_mb` / the split's mean
  record size (`reader.shuffle_window`): memory is counted in bytes of stored records, never in
  decoded examples, and does not depend on the data set's size. A repeated stream's windows are
  seeded by their number, so any position can be started at again: the endless order is a pure
  function of the seed and the split.
- slice: with `worker_slice`, this worker's part of every global batch (every worker reads the
  records' bytes; each parses and decodes only its part), so the global batches do not depend on
  the number of workers.
- record order: the caller's `record_order(positions, ids)`, told which records (shard, number)
  come at which positions of the endless order; off (absent from the graph) by default.
- parse, decode, transform: one parallel map. Per chunk when the images are small (tf.data's
  per-call cost matters for 28x28 images), per record when a PNG/JPEG image is large
  (`reader.decodes_per_record`: every core decodes another image). Decode includes the fused JPEG
  crop (`DecodeCrop`: only the crop window is decoded). Transform is the caller's `model_step`
  (the Trainer's tf.Transform graph and scaling, the Evaluator's label ids); it is written for a
  batch and given each record as a batch of one on the per-record path.
- batch: `batch_size` examples.
- augment: the caller's `augment(inputs, targets, index, rows)` on whole batches, after the batch (one
  projective warp for 64 images instead of 64 calls of a map); `index`, `rows`: the global batch and
  its examples' rows there (`Plan.places`, the fused crop's key too). The crop, the one augmentation
  that saves decoding work, runs earlier, fused into decode.
- sample weights: `class_weights[target]` per example (per pixel for masks), and the model's input
  named (`input_name`): the elements Keras' `fit` takes, ({name: inputs}, targets[, weights]).
- prefetch: once, at the end (the shuffle's read-ahead of one window is its own). A stream handed to
  tf.distribute whole keeps FILE auto-sharding; the Trainer gives each worker its slice instead.
  tf.data's autotuning model thread is off (`AUTOTUNE_MODEL`: deleting an iterator waited for it).

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
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from .cloud_env import enable_tensorflow_filesystems
from .errors import ConfigError
from .manifest import Manifest, read_manifest
from .reader import decodes_per_record, feature_spec, shard_files, shuffle_window
from .service_job import served_dataset
from .stream_elements import SERIALIZED, Flow, Plan, decode_stage, flushed, parse_stage, transform_stage
from .stream_options import DecodeCrop, StreamOptions
from .stream_read import (PARALLEL_FILES, READ_CHUNK, RepeatedStart, as_written, plan_repeated, record_chunks,
                          repeated_read, repeated_shuffle, window_shuffled)

__all__ = ["DecodeCrop", "StreamOptions", "build_stream", "stream_start", "STAGES", "SERIALIZED", "as_written",
           "record_chunks", "PARALLEL_FILES", "READ_CHUNK"]

def build_stream(output_dir: str | os.PathLike, split: str, options: StreamOptions, *,
                 model_step: Callable[[Any], Any] | None = None,
                 augment: Callable[[Any, Any, tf.Tensor], tuple[Any, Any]] | None = None,
                 crop: DecodeCrop | None = None,
                 record_order: Callable[[np.ndarray, np.ndarray], Any] | None = None) -> tf.data.Dataset:
    """Batches of `split` in `output_dir` through every stage of STAGES (the module's docstring).

    Without `model_step` an element is a dict of the selected features (files decoded as `decode`
    says; SERIALIZED holds each record's bytes when `keep_serialized`). `augment`, `class_weights`
    and `input_name` take the model step's (inputs, targets) pairs. Raises `IncompleteOutputError`
    when the directory has no manifest, ConfigError for a split or feature it does not have.
    `record_order(positions, ids)` (repeated streams) is called with each chunk's positions in the
    endless order and its records' (shard index, record number) before they are parsed.
    """
    if not isinstance(options, StreamOptions):
        raise ConfigError(f"options must be a StreamOptions, got {options!r}")
    if record_order is not None and not options.repeat:
        raise ConfigError("record_order applies to a repeated (training) stream")
    plan = _plan(os.fspath(output_dir), split, options, model_step, augment, crop, record_order)
    if augment is not None and plan.start % plan.global_batch:  # so that each batch lies in one global batch
        raise ConfigError(f"an augmented stream starts at a global batch's first record, not at {plan.start}")
    if options.service is not None:
        return served_dataset(plan, STAGES)
    flow = Flow(tf.data.Dataset.range(0))  # replaced by the read stage
    for _, stage in STAGES:
        flow = stage(flow, plan)
    return flow.dataset


def stream_start(output_dir: str | os.PathLike, split: str, options: StreamOptions) -> RepeatedStart:
    """Where a repeated stream with these options starts reading (its resume point), without reading."""
    return _plan(os.fspath(output_dir), split, options, None, None, None, None).repeated


def _plan(output_dir: str, split: str, options: StreamOptions, model_step: Callable | None,
          augment: Callable | None, crop: DecodeCrop | None, record_order: Callable | None) -> Plan:
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
    repeated = None
    if options.repeat:
        sizes = [shard.num_examples for shard in manifest.splits[split].shards]
        # A repeated stream's order must be found again to be resumed: an unseeded one draws its seed once.
        seed = options.seed if options.seed is not None else int(np.random.default_rng().integers(1 << 31))
        window = shuffle_window(manifest, split, options.shuffle_bytes)
        repeated = plan_repeated(sizes, window=window, seed=seed, start=options.start, folds=options.folds)
    return Plan(options, manifest, split, files, spec, decoded, per_record, model_step, augment, crop, repeated,
                 record_order)


def _read(flow: Flow, plan: Plan) -> Flow:
    options, compression = plan.options, plan.manifest.compression
    if plan.repeated is not None:
        return Flow(repeated_read(plan.files, compression, plan.repeated, with_ids=plan.record_order is not None))
    return Flow(record_chunks(plan.files, compression, _window(plan), options.seed, options.deterministic,
                               folds=options.folds, shard_sizes=plan.shard_sizes))


def _shuffle(flow: Flow, plan: Plan) -> Flow:
    if plan.repeated is not None:
        return Flow(repeated_shuffle(flushed(flow, plan), plan.repeated))
    window = _window(plan)
    if not window:
        return flow
    return Flow(window_shuffled(flushed(flow, plan), window, plan.options.seed))


def _slice(flow: Flow, plan: Plan) -> Flow:
    cut = plan.options.worker_slice
    if cut is None:
        return flow

    def part(*element: tf.Tensor) -> Any:
        parts = tuple(value[cut.first:cut.first + cut.count] for value in element)
        return parts if len(parts) > 1 else parts[0]

    global_batches = flushed(flow, plan).rebatch(cut.global_batch)
    return Flow(global_batches.map(as_written(part), name="slice"))


def _record_order(flow: Flow, plan: Plan) -> Flow:
    tap = plan.record_order
    if tap is None:
        return flow

    def recorded(count: tf.Tensor, element: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        ids, records = element
        size = tf.shape(records, out_type=tf.int64)[0]
        positions = plan.global_positions(count + tf.range(size))
        done = tf.numpy_function(tap, [positions, ids], tf.int64, stateful=True)
        with tf.control_dependencies([done]):
            return count + size, tf.identity(records)

    return Flow(flushed(flow, plan).scan(tf.constant(0, tf.int64), recorded, name="record_order"))


def _batch(flow: Flow, plan: Plan) -> Flow:
    dataset, options = flushed(flow, plan), plan.options
    if plan.per_record:
        return Flow(dataset.batch(options.batch_size, drop_remainder=options.drop_remainder, name="batch"))
    return Flow(dataset.rebatch(options.batch_size, drop_remainder=options.drop_remainder, name="batch"))


def _augment(flow: Flow, plan: Plan) -> Flow:
    augment = plan.augment
    if augment is None:
        return flow

    size = plan.options.batch_size

    def augmented(number: tf.Tensor, pair: tuple[Any, Any]) -> tuple[Any, Any]:
        # Keyed on each example's place, as the fused crop is: a worker's slice draws its own rows of the global
        # batch, and a run resumed on another number of workers gives each example the draws it had.
        index, rows = plan.places(number * size + tf.range(tf.shape(tf.nest.flatten(pair[0])[0], tf.int64)[0]))
        return augment(pair[0], pair[1], index[0], rows)  # one global batch: build_stream checks the start

    batches = flushed(flow, plan).enumerate()  # batch numbers in stream order, as the positions are counted
    return Flow(batches.map(as_written(augmented), num_parallel_calls=tf.data.AUTOTUNE, name="augment"))


def _sample_weights(flow: Flow, plan: Plan) -> Flow:
    weights, name = plan.options.class_weights, plan.options.input_name
    if weights is None and name is None:
        return flow
    table = tf.constant(weights, tf.float32) if weights is not None else None

    def for_fit(inputs: Any, targets: tf.Tensor) -> tuple[Any, ...]:
        named = {name: inputs} if name is not None else inputs
        return (named, targets) if table is None else (named, targets, tf.gather(table, targets))

    return Flow(flushed(flow, plan).map(as_written(for_fit), name="sample_weights"))


# tf.data's autotuning model thread (TensorFlow 2.16): deleting an iterator joins it, and it often sleeps through
# the cancellation until its next optimization round, whose period doubles up to 60 s. Deleting a stream that was
# read for 12 s waited 8.5 s in 2 of 3 tries (`Dataset.range(...).map(AUTOTUNE).prefetch(AUTOTUNE)`, 2 cores);
# inside `fit` it is the 7-16 s that the end of training sometimes stood idle (every thread asleep). Without the
# model, each AUTOTUNE stage keeps tf.data's starting parallelism (16, within the cores) and prefetch still sizes
# its buffer: the photo reader's rate was the same (docs/trainer.md).
AUTOTUNE_MODEL = False


def _prefetch(flow: Flow, plan: Plan) -> Flow:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    options.autotune.enabled = AUTOTUNE_MODEL
    return Flow(flushed(flow, plan).with_options(options).prefetch(tf.data.AUTOTUNE, name="prefetch"))


def _window(plan: Plan) -> int:
    return shuffle_window(plan.manifest, plan.split, plan.options.shuffle_bytes)


STAGES: tuple[tuple[str, Callable[[Flow, Plan], Flow]], ...] = (
    ("read", _read), ("shuffle", _shuffle), ("slice", _slice), ("record_order", _record_order), ("parse", parse_stage),
    ("decode", decode_stage),
    ("transform", transform_stage), ("batch", _batch), ("augment", _augment), ("sample_weights", _sample_weights),
    ("prefetch", _prefetch))

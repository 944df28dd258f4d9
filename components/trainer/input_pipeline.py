"""The tf.data streams the Trainer fits on: read → shuffle serialized → decode → transform graph → augment → batch.

The reading, shuffling, parsing and decoding are `shardflow.core.reader.make_dataset`'s (`_stream`
is the one place that says the whole order). Memory is bounded by the shuffle budget in bytes of
serialized records (`--shuffle-buffer-mb`) and the prefetch depth, never by the dataset size. The
training stream repeats, so an epoch is a step count (ceil(examples / global batch)) and every
training batch is full; the eval stream is one pass that keeps its last partial batch.

Training with the `crop` augmentation on a JPEG image feature (no transform graph, classification)
decodes only each example's crop window (`tf.image.decode_and_crop_jpeg`, as ImageNet input
pipelines do) instead of decoding the whole image and warping it; see `fused_crop_applies`.

    streams = build_streams(task, config, global_batch=64, num_workers=1, tft_layer=None)
    model.fit(streams.train, steps_per_epoch=streams.steps_per_epoch, validation_data=streams.eval)
"""
from __future__ import annotations

import contextlib
import gzip
import math
from dataclasses import dataclass
from typing import Iterator

import tensorflow as tf

from ..core.errors import ShardflowError
from ..core import storage
from ..core.image_decode import decode_crop_resize
from ..core.manifest import Manifest
from ..core.reader import as_written, count_examples, decodes_per_record, make_dataset, shard_files
from ..core.tfrecord import CorruptRecordError, iter_records
from .augment import augment_batch, crop_windows
from .config import TrainerConfig
from .features import RawToModel
from .task import TrainingTask


class CorruptShardError(ShardflowError, RuntimeError):
    """A shard failed its CRC or ended mid-record; training stops rather than skip it."""


class TooFewShardsError(ShardflowError, ValueError):
    """Multi-worker FILE sharding needs at least one shard file per worker."""


@dataclass(frozen=True)
class Streams:
    train: tf.data.Dataset
    eval: tf.data.Dataset | None
    steps_per_epoch: int
    train_examples: int
    eval_examples: int
    train_files: list[str]
    eval_files: list[str]
    probe: tf.data.Dataset  # the training stream without its shuffle window: what the input probe times


def build_streams(task: TrainingTask, config: TrainerConfig, global_batch: int, num_workers: int,
                  to_model: RawToModel) -> Streams:
    train_files = check_enough_shards(task, config.train_split, num_workers)
    train_examples = count_examples(task.train_manifest, config.train_split, config.train_folds)
    train = _stream(task, config, config.train_split, global_batch, to_model, training=True)
    eval_stream, eval_files, eval_examples = None, [], 0
    if config.eval_split is not None:
        eval_files = checked_files(task, config.eval_split)
        eval_examples = task.train_manifest.splits[config.eval_split].num_examples
        eval_stream = _stream(task, config, config.eval_split, global_batch, to_model, training=False)
    steps = max(1, math.ceil(train_examples / global_batch))
    # The same reading, decoding and model-side steps, with no window of records held in memory: a
    # probe of the shuffled stream would time batches cut from a window already read.
    probe = _stream(task, config, config.train_split, global_batch, to_model, training=True, shuffle=False)
    return Streams(train, eval_stream, steps, train_examples, eval_examples, train_files, eval_files, probe)


def check_enough_shards(task: TrainingTask, split: str, num_workers: int) -> list[str]:
    """The split's checked shard files; TooFewShardsError when workers would be left without a file."""
    files = checked_files(task, split)
    if num_workers > 1 and len(files) < num_workers:
        raise TooFewShardsError(
            f"{len(files)} {split} shard(s) in {task.train_dir} for {num_workers} workers: FILE sharding gives "
            f"each worker whole files; rerun ExampleGen/Transform with --min-shards {num_workers} (or more)")
    return files


def checked_files(task: TrainingTask, split: str) -> list[str]:
    """The split's shards; an error when a file is missing, resized, or not listed in the manifest."""
    return shard_files(task.train_dir, task.train_manifest, split)


def _stream(task: TrainingTask, config: TrainerConfig, split: str, batch: int, to_model: RawToModel,
            training: bool, shuffle: bool = True) -> tf.data.Dataset:
    """The whole order: read → shuffle serialized → decode → transform graph → augment → batch → prefetch.

    Up to the batch it is `make_dataset`'s: the model-side step (`to_model`) runs per record in its
    parallel map when the images are large PNG/JPEG (each core decodes and transforms other
    images), per batch otherwise (tf.data's per-call cost matters for 28x28 images).
    """
    augmenting = training and config.augment and not config.augment_on_device
    fused = augmenting and fused_crop_applies(task, config, to_model)
    reading = {"batch_size": batch, "features": [task.input_name, task.target], "repeat": training,
               "shuffle_bytes": config.shuffle_bytes if training and shuffle else 0, "seed": config.seed,
               "deterministic": config.deterministic or not training,
               "folds": config.train_folds if split == config.train_split else None}
    if fused:
        dataset = _fused_crop(make_dataset(task.train_dir, split, decode=False, **reading), task, config, to_model, batch)
    elif per_record_model_step(task):
        dataset = make_dataset(task.train_dir, split, decode=to_model.reader_decodes,
                               per_example=to_model.training_example, **reading)
    else:
        dataset = make_dataset(task.train_dir, split, decode=to_model.reader_decodes, **reading)
        dataset = dataset.map(as_written(to_model.training_pair), num_parallel_calls=tf.data.AUTOTUNE)
    if augmenting and not fused:
        dataset = _augmented(dataset, config, masks=task.kind == "segmentation")
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def per_record_model_step(task: TrainingTask) -> bool:
    """True when a large PNG/JPEG image is decoded in the model-side step or by the reader."""
    manifest = task.train_manifest
    stored = Manifest({n: manifest.features[n] for n in (task.input_name, task.target)}, {}, "")
    return decodes_per_record(stored)


def _augmented(dataset: tf.data.Dataset, config: TrainerConfig, masks: bool) -> tf.data.Dataset:
    ops, seed = config.augment, config.seed

    def augment(index: tf.Tensor, pair: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        images, target = pair
        images, moved = augment_batch(images, target if masks else None, ops, tf.stack([tf.constant(seed, tf.int64), index]))
        return images, moved if masks else target

    return dataset.enumerate().map(as_written(augment), num_parallel_calls=tf.data.AUTOTUNE)


def fused_crop_applies(task: TrainingTask, config: TrainerConfig, to_model: RawToModel) -> bool:
    """Crop at decode time: `crop` asked for on a JPEG input decoded here (no transform graph, no masks to move)."""
    return ("crop" in config.augment and not config.augment_on_device and not task.materialized
            and to_model.tft_layer is None and task.kind == "classification"
            and task.raw_input_spec.encoding == "jpeg")


def _fused_crop(dataset: tf.data.Dataset, task: TrainingTask, config: TrainerConfig, to_model: RawToModel,
                batch: int) -> tf.data.Dataset:
    """Parsed batches → (augmented float32 images in [0, 1], class ids), decoding only each crop window.

    The windows are `crop_windows`' (the `crop` op's draws for each batch's seed), so the seeding
    rule is the unfused path's: randomness from (seed, batch index). Each window is decoded in its
    own call of a parallel map (a sequential `map_fn` over the batch left a core idle); the
    training stream repeats, so its batches are full and re-batching restores them exactly.
    """
    name, ops = task.input_name, config.augment
    height, width, channels = task.raw_input_spec.shape
    parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": config.deterministic}

    def with_windows(index: tf.Tensor, parsed: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        count = tf.shape(parsed[name])[0]
        seed = tf.stack([tf.constant(config.seed, tf.int64), index])
        return {"blob": parsed[name], "window": crop_windows(ops, seed, count, height, width),
                "target": to_model.target(parsed), "index": tf.fill([count], index)}

    def cropped(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        image = decode_crop_resize(example["blob"], example["window"], [height, width], channels) / 255.0  # uint8
        return {"image": image, "target": example["target"], "index": example["index"]}

    def augmented(examples: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        seed = tf.stack([tf.constant(config.seed, tf.int64), examples["index"][0]])
        images, _ = augment_batch(examples["image"], None, ops, seed, cropped=True)
        return images, examples["target"]

    records = dataset.enumerate().map(as_written(with_windows), **parallel).unbatch().map(as_written(cropped), **parallel)
    return records.batch(batch, drop_remainder=True).map(as_written(augmented), **parallel)


@contextlib.contextmanager
def corrupt_shards_named(files: list[str], compression: str) -> Iterator[None]:
    """Turns TensorFlow's DataLossError (which does not say which file) into a CorruptShardError that does."""
    try:
        yield
    except tf.errors.DataLossError as err:
        raise CorruptShardError(f"{locate_corruption(files, compression)} "
                                f"(TensorFlow: {err.message.splitlines()[0]})") from None


def locate_corruption(files: list[str], compression: str) -> str:
    """Reads the shards with CRC checks (only after TensorFlow reported data loss) and names the bad one."""
    for path in files:
        try:
            with storage.open_read(path) as raw:
                stream = gzip.GzipFile(fileobj=raw, mode="rb") if compression == "GZIP" else raw
                for _ in iter_records(stream, source=path):
                    pass
        except (CorruptRecordError, EOFError, OSError) as err:
            return f"corrupt shard {path}: {err}"
    return "a shard failed to read but none fails a CRC check now (was one rewritten during training?)"

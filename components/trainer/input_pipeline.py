"""The Trainer's streams: its options handed to `core.input_stream.build_stream`, which owns the order.

The training stream repeats, so an epoch is a step count (ceil(examples / global batch)) and every
training batch is full; the eval stream is one pass that keeps its last partial batch. The Trainer
gives the stream builder its options (`StreamOptions`, from the config's input options) and what it
applies: the model step (`RawToModel.training_pair`: the tf.Transform graph or the scaling), the
augmentation of a batch and, for `crop` on a JPEG input, the fused crop's windows. Memory is
bounded by the shuffle budget in bytes of serialized records (`--shuffle-buffer-mb`) and the
prefetch depth, never by the dataset size.

Training with the `crop` augmentation on a JPEG image feature (no transform graph, classification)
decodes only each example's crop window (`tf.image.decode_and_crop_jpeg`, as ImageNet input
pipelines do) instead of decoding the whole image and warping it; see `fused_crop_applies`.

    streams = build_streams(task, config.input, global_batch=64, num_workers=1, to_model=RawToModel(task, None))
    model.fit(streams.train, steps_per_epoch=streams.steps_per_epoch, validation_data=streams.eval)

A detection task's streams (training, evaluation and probe alike) end their batch stage with the CenterNet
targets on the model's heat-map `grid` (box_stream.DetectionBatches), after the box-aware ops in training.
"""
from __future__ import annotations

import contextlib
import gzip
import math
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow as tf

from ..core.box_schema import DETECTION_TASK
from ..core.errors import ConfigError, ShardflowError
from ..core import storage
from ..core.input_stream import DecodeCrop, StreamOptions, build_stream, stream_start
from ..core.stream_read import RepeatedStart
from ..core.reader import shard_files
from ..core.stream_options import ServiceJob, ServiceLog
from ..core.stream_position import WorkerSlice
from ..core.tfrecord import CorruptRecordError, iter_records
from .augment import Rows, augment_batch, crop_windows
from .box_stream import DetectionBatches
from .class_weights import task_class_weights
from .config import InputOptions
from .features import RawToModel
from .task import TrainingTask


class CorruptShardError(ShardflowError, RuntimeError):
    """A shard failed its CRC or ended mid-record; training stops rather than skip it."""


class TooFewShardsError(ShardflowError, ValueError):
    """Multi-worker FILE sharding needs at least one shard file per worker."""


@dataclass(frozen=True)
class Streams:
    """Elements are what Keras' fit takes: ({input name: images}, class ids[, sample weights]).

    `train_from(step)`: the training stream from optimizer step `step` on (the endless order's position
    step × global batch), for this worker (a distributed dataset of every worker's slice under
    MultiWorkerMirroredStrategy); `train` is its first step's.
    """

    train_from: Callable[[int], Any]
    eval: tf.data.Dataset | None
    steps_per_epoch: int
    train_examples: int
    eval_examples: int
    train_files: list[str]
    eval_files: list[str]
    probe: tf.data.Dataset  # the training stream without its shuffle window: what the input probe times
    global_batch: int
    start_of: Callable[[int], RepeatedStart]  # where train_from(step) starts reading
    service_log: ServiceLog | None = None  # with --data-service: what the service did, over every phase

    @property
    def train(self) -> Any:
        return self.train_from(0)


def build_streams(task: TrainingTask, inputs: InputOptions, global_batch: int, num_workers: int,
                  to_model: RawToModel, strategy: tf.distribute.Strategy | None = None,
                  record_order: Callable[[np.ndarray, np.ndarray], Any] | None = None,
                  echo: Callable[[str], None] = print, grid: tuple[int, int] | None = None) -> Streams:
    """The streams of a run whose steps take `global_batch` examples; `strategy` with `num_workers` > 1
    distributes the training stream as each worker's slice of every global batch. `grid`: a detector's
    heat-map (rows, columns), which a detection task's targets are made for."""
    if task.kind == DETECTION_TASK and grid is None:
        raise ConfigError("a detection task's streams need the detector's grid")
    train_files = checked_files(task, inputs.train_split)
    if inputs.eval_split is not None:
        check_enough_shards(task, inputs.eval_split, num_workers)
    train_examples = train_example_count(task, inputs)
    weights = task_class_weights(inputs.class_weight, task, inputs.train_split)
    log = ServiceLog(echo=lambda line: echo(f"train: {line}")) if inputs.data_service else None

    def train_from(step: int) -> Any:
        def stream(batch: int, cut: WorkerSlice | None) -> tf.data.Dataset:
            return _stream(task, inputs, inputs.train_split, batch, to_model, training=True, weights=weights,
                           start=step * global_batch, worker_slice=cut, global_batch=global_batch,
                           record_order=record_order, service_log=log, grid=grid)

        if num_workers == 1 or strategy is None:
            return stream(global_batch, None)
        return strategy.distribute_datasets_from_function(lambda context: stream(
            context.get_per_replica_batch_size(global_batch),
            WorkerSlice.for_worker(global_batch, context.num_input_pipelines, context.input_pipeline_id)))

    eval_stream, eval_files, eval_examples = None, [], 0
    if inputs.eval_split is not None:
        eval_files = checked_files(task, inputs.eval_split)
        eval_examples = task.train_manifest.splits[inputs.eval_split].num_examples
        eval_stream = _stream(task, inputs, inputs.eval_split, global_batch, to_model, training=False, grid=grid)
    steps = max(1, math.ceil(train_examples / global_batch))
    # The same reading, decoding and model-side steps, with no window of records held in memory: a
    # probe of the shuffled stream would time batches cut from a window already read.
    probe = _stream(task, inputs, inputs.train_split, global_batch, to_model, training=True, shuffle=False,
                    weights=weights, grid=grid)
    def start_of(step: int) -> RepeatedStart:
        options = StreamOptions(batch_size=global_batch, shuffle_mb=inputs.shuffle_buffer_mb, seed=inputs.seed,
                                repeat=True, folds=inputs.train_folds, start=step * global_batch)
        return stream_start(task.train_dir, inputs.train_split, options)

    return Streams(train_from, eval_stream, steps, train_examples, eval_examples, train_files, eval_files, probe,
                   global_batch, start_of, log)


def train_example_count(task: TrainingTask, inputs: InputOptions) -> int:
    """The examples of one pass of the training stream (the selected folds' only)."""
    total = task.train_manifest.splits[inputs.train_split].num_examples
    return total if inputs.train_folds is None else inputs.train_folds.size(total)


def check_enough_shards(task: TrainingTask, split: str, num_workers: int) -> list[str]:
    """The split's checked shard files; TooFewShardsError when workers would be left without a file.

    Applies to the eval split, which Keras distributes by files; the training stream gives every
    worker its slice of each global batch, whatever the number of shards."""
    files = checked_files(task, split)
    if num_workers > 1 and len(files) < num_workers:
        raise TooFewShardsError(
            f"{len(files)} {split} shard(s) in {task.train_dir} for {num_workers} workers: FILE sharding gives "
            f"each worker whole files; rerun ExampleGen/Transform with --min-shards {num_workers} (or more)")
    return files


def checked_files(task: TrainingTask, split: str) -> list[str]:
    """The split's shards; an error when a file is missing, resized, or not listed in the manifest."""
    return shard_files(task.train_dir, task.train_manifest, split)


def _service_job(inputs: InputOptions, start: int, log: ServiceLog | None) -> ServiceJob | None:
    """A job of its own for each training stream built (a resumed run's starts elsewhere: a new job)."""
    if inputs.data_service is None or log is None:
        return None
    return ServiceJob(dispatcher=inputs.data_service, name=f"shardflow-train-{uuid.uuid4().hex[:12]}-{start}",
                      log=log)


def _stream(task: TrainingTask, inputs: InputOptions, split: str, batch: int, to_model: RawToModel,
            training: bool, shuffle: bool = True, weights: list[float] | None = None, start: int = 0,
            worker_slice: WorkerSlice | None = None, global_batch: int | None = None,
            record_order: Callable | None = None, service_log: ServiceLog | None = None,
            grid: tuple[int, int] | None = None) -> tf.data.Dataset:
    """One of the Trainer's streams: its options, its model step, its augmentation (training only).

    `batch` is this stream's (a replica's); `global_batch` a step's, which the crop windows are drawn for."""
    augmenting = training and bool(inputs.augment) and not inputs.augment_on_device
    fused = augmenting and fused_crop_applies(task, inputs, to_model)
    options = StreamOptions(
        batch_size=batch, shuffle_mb=inputs.shuffle_buffer_mb if training and shuffle else 0.0, seed=inputs.seed,
        deterministic=inputs.deterministic or not training, repeat=training, drop_remainder=training,
        features=task.stream_features, decode=tuple(to_model.reader_decodes),
        folds=inputs.train_folds if split == inputs.train_split else None,
        class_weights=tuple(weights) if training and weights is not None else None, input_name=task.input_name,
        start=start, worker_slice=worker_slice, service=_service_job(inputs, start, service_log))
    augment = _augmentation(inputs, task.kind == "segmentation", fused, global_batch or batch) if augmenting else None
    if task.kind == DETECTION_TASK and grid is not None:  # targets in every stream, the ops in training only
        augment = DetectionBatches(grid, task.num_classes, inputs.augment if augmenting else (), inputs.seed,
                                   global_batch or batch)
    crop = DecodeCrop(task.input_name, _crop_windows(task, inputs, global_batch or batch)) if fused else None
    return build_stream(task.train_dir, split, options, model_step=to_model.training_pair, augment=augment, crop=crop,
                        record_order=record_order if training and shuffle else None)


def _augmentation(inputs: InputOptions, masks: bool, cropped: bool, global_batch: int) -> Callable:
    """The augment stage's function: a batch's ops, each example's draws its row's of (seed, global batch index)'s."""
    ops, seed = inputs.augment, inputs.seed

    def augment(images: tf.Tensor, target: tf.Tensor, index: tf.Tensor,
                rows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        moved = target if masks else None
        images, moved = augment_batch(images, moved, ops, tf.stack([tf.constant(seed, tf.int64), index]),
                                      cropped=cropped, rows=Rows(rows, global_batch))
        return images, moved if masks else target

    return augment


def _crop_windows(task: TrainingTask, inputs: InputOptions, batch: int) -> Callable:
    """The fused crop's window of the example at row `position` of global batch `index`: `crop_windows`' draws for
    that batch's seed, so the seeding rule is the unfused path's (row `position` of (seed, index)'s draws)."""
    height, width, _ = task.raw_input_spec.shape
    ops, seed = inputs.augment, inputs.seed

    def window(index: tf.Tensor, position: tf.Tensor) -> tf.Tensor:
        return crop_windows(ops, tf.stack([tf.constant(seed, tf.int64), index]), batch, height, width)[position]

    return window


def fused_crop_applies(task: TrainingTask, inputs: InputOptions, to_model: RawToModel) -> bool:
    """Crop at decode time: `crop` asked for on a JPEG input decoded here (no transform graph, no masks to move)."""
    return ("crop" in inputs.augment and not inputs.augment_on_device and not task.materialized
            and to_model.tft_layer is None and task.kind == "classification"
            and task.raw_input_spec.encoding == "jpeg")


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

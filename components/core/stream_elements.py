"""The stream's shared state and its per-element stages (parse, decode, transform): what core/input_stream.py's
builder threads through its STAGES. The element stages do not map the dataset themselves: each adds its
function to `Flow.pending`, and the next stage that transforms the dataset runs them all in one parallel map
(`flushed`), per chunk of records or per record (`Plan.per_record`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from .image_decode import decode_crop_resize, decode_many, decode_one
from .manifest import Manifest
from .stream_options import DecodeCrop, StreamOptions
from .stream_position import global_positions
from .stream_read import RepeatedStart, as_written

SERIALIZED = "serialized"  # the key of each record's stored bytes when `keep_serialized`


@dataclass
class Flow:
    """The dataset so far, and the element functions of parse/decode/transform waiting to run in one map
    (the next stage that transforms the dataset runs them first: `flushed`)."""

    dataset: tf.data.Dataset
    pending: list[tuple[str, Callable]] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
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
    repeated: RepeatedStart | None  # where a repeated stream's reading starts
    record_order: Callable[[np.ndarray, np.ndarray], Any] | None
    # On a service worker, the position of the one global batch being made (a tensor): options.start's stand-in.
    batch_start: Any = None

    @property
    def start(self) -> Any:
        """The position in the endless order where this stream's (or this one batch's) records begin."""
        return self.options.start if self.batch_start is None else self.batch_start

    @property
    def shard_sizes(self) -> list[int]:
        """The split's records per shard, in the manifest's order."""
        return [shard.num_examples for shard in self.manifest.splits[self.split].shards]

    @property
    def global_batch(self) -> int:
        """The examples of one step of all the stream's consumers (this stream's batch without a slice)."""
        cut = self.options.worker_slice
        return cut.global_batch if cut is not None else self.options.batch_size

    def global_positions(self, local: tf.Tensor) -> tf.Tensor:
        """int64 positions in the endless order of this stream's records number `local` (0, 1, ...)."""
        return global_positions(self.start, self.options.worker_slice, local)

    def places(self, local: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(global batch index, row in it) of this stream's records number `local`: what every random draw is keyed
        on (the fused crop's window, the augmentation), the same whichever worker or resume point reads the record."""
        position = self.global_positions(local)
        return position // self.global_batch, position % self.global_batch


def parse_stage(flow: Flow, plan: Plan) -> Flow:
    spec, keep = plan.spec, plan.options.keep_serialized

    def parse(chunk: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(chunk, spec)
        return {**parsed, SERIALIZED: chunk} if keep else parsed

    if not plan.per_record:
        return Flow(flow.dataset, flow.pending + [("parse", parse)])
    # A chunk is parsed at once, then each record decoded in its own call of a parallel map.
    records = flushed(flow, plan).map(as_written(parse), name="parse", **parallel(plan)).unbatch()
    return Flow(records.enumerate() if plan.crop is not None else records)


def decode_stage(flow: Flow, plan: Plan) -> Flow:
    decoded, crop = plan.decoded, plan.crop
    decoder = decode_one if plan.per_record else decode_many

    def decode(record: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {name: decoder(value, decoded.features[name]) if name in decoded.features else value
                for name, value in record.items()}

    if crop is None:
        return Flow(flow.dataset, flow.pending + [("decode", decode)])
    height, width, channels = decoded.features[crop.feature].shape

    def decode_cropped(local: tf.Tensor, record: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        window = crop.window(*plan.places(local))  # the same window whatever the worker or the resume point
        pixels = decode_crop_resize(record[crop.feature], window, [height, width], channels)  # float32, 0-255
        return {**decode({n: v for n, v in record.items() if n != crop.feature}), crop.feature: pixels}

    return Flow(flow.dataset, flow.pending + [("decode", decode_cropped)])


def transform_stage(flow: Flow, plan: Plan) -> Flow:
    step = plan.model_step
    if step is None:
        return flow
    if not plan.per_record:
        return Flow(flow.dataset, flow.pending + [("transform", step)])

    def one_record(record: Any) -> Any:  # the step takes batches: a batch of one
        batched = step(tf.nest.map_structure(lambda value: value[tf.newaxis], record))
        return tf.nest.map_structure(lambda value: value[0], batched)

    return Flow(flow.dataset, flow.pending + [("transform", one_record)])


def flushed(flow: Flow, plan: Plan) -> tf.data.Dataset:
    """The dataset with the pending element functions run, in their order, in one parallel map."""
    if not flow.pending:
        return flow.dataset
    names, functions = [n for n, _ in flow.pending], [f for _, f in flow.pending]

    def run(*element: Any) -> Any:
        value = functions[0](*element)
        for function in functions[1:]:
            value = function(value)
        return value

    return flow.dataset.map(as_written(run), name="__".join(names), **parallel(plan))


def parallel(plan: Plan) -> dict[str, Any]:
    return {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": plan.options.deterministic}

"""The input stream with its per-batch work on the tf.data service's workers (`--data-service`).

`build_stream` (core/input_stream.py) hands a plan whose options name a service job here, with its
STAGES: the stages up to the shuffle run in every worker on serialized records (cheap: every worker
reads the bytes, as a worker slice does); each global batch's parse..sample weights on one worker
(a static sharding: worker k of N makes the global batches k, k+N, ...). core/served_stream.py puts
what comes back in the local stream's order, through a worker's death or restart.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable

import tensorflow as tf

from .errors import ConfigError
from .served_stream import LocalMaker, delivered, ordered_batches
from .stream_elements import Flow, Plan, flushed
from .stream_read import plan_repeated

Stages = tuple[tuple[str, Callable[[Flow, Plan], Flow]], ...]

_READ_STAGES, _PREFETCH = ("read", "shuffle"), "prefetch"
# Batches travel as the model takes them, uncompressed: augmented float32 pixels hardly compress, and tf.data's
# default ("AUTO": snappy on the worker, undone here) cost this process 0.548 ms of CPU an example against 0.304
# without, for the same rate through one worker (340 vs 347 ex/s; make bench, data_service, quiet machine).
TRANSFER_COMPRESSION = None
# Batches a worker makes ahead of the round asked for: without it a worker starts a batch only when asked,
# and the Trainer waited: a pinned LeNet trained at 164.7 ex/s through one worker, 193.6 with 2 ahead (its
# own core 99 % busy). Costs 2 batches of the worker's memory (2 × 19 MB for 32 224-px float32 photos).
WORKER_READ_AHEAD = 2
_PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}  # tf.py_function, tf.numpy_function


def served_dataset(plan: Plan, stages: Stages) -> tf.data.Dataset:
    """The stream with its per-batch work on the service's workers (a static sharding: worker k of N makes the
    global batches k, k+N, ...), read here round-robin and put back in order by core/served_stream.py: the
    local stream's batches, in its order, through a worker's death or restart."""
    if plan.record_order is not None:
        raise ConfigError("a record order cannot be written from the tf.data service's workers")
    job, first = plan.options.service, plan.options.start // plan.global_batch

    def one_batch(index: tf.Tensor, records: tf.Tensor) -> tf.data.Dataset:
        batch_plan = dataclasses.replace(plan, batch_start=index * plan.global_batch)
        one = Flow(tf.data.Dataset.from_tensors(records))
        for name, stage in stages:
            if name not in _READ_STAGES and name != _PREFETCH:
                one = stage(one, batch_plan)
        return flushed(one, batch_plan).map(lambda *batch: (index, batch))

    jobs = itertools.count()  # a job's name is never used twice: a second job at one batch is a new job

    def serve(index: int) -> tf.data.Dataset:
        hint = tf.data.experimental.SHARD_HINT
        mine = _serialized_batches(plan, index, stages).shard(hint, hint)
        # N, the number of workers, sent with each batch (served_stream judges lateness in rounds of N): the
        # dispatcher rewrites every hinted shard, so worker k's numbers here are k, k+N, ...
        workers = tf.data.Dataset.range(1 << 62).shard(hint, hint).take(2).batch(2).map(lambda two: two[1] - two[0])
        with_workers = tf.data.Dataset.zip((mine.flat_map(one_batch), workers.repeat()))
        endless = with_workers.map(lambda pair, n: (pair[0], n, pair[1])).prefetch(WORKER_READ_AHEAD).repeat()
        return endless.apply(tf.data.experimental.service.distribute(  # round-robin reads need an endless stream
            tf.data.experimental.service.ShardingPolicy.HINT, job.dispatcher,
            job_name=f"{job.name}-{index}-{next(jobs)}", consumer_index=0, num_consumers=1,
            compression=TRANSFER_COMPRESSION))

    def made_here(index: tf.Tensor, records: tf.Tensor) -> Any:
        return next(iter(one_batch(index, records)))[1]

    per_batch = _serialized_batches(plan, first, stages).flat_map(one_batch)
    refuse_python(per_batch)
    signature = per_batch.element_spec[1]
    maker = LocalMaker(lambda index: _serialized_batches(plan, index, stages), made_here)

    def batches() -> Any:
        ordered = ordered_batches(serve, maker, first, job.log, job.stall_seconds)
        for batch in delivered(ordered, job.log, plan.global_batch):
            yield batch if len(batch) > 1 else batch[0]

    served = tf.data.Dataset.from_generator(batches, output_signature=signature if len(signature) > 1
                                            else signature[0])
    return dict(stages)[_PREFETCH](Flow(served), plan).dataset


def refuse_python(dataset: tf.data.Dataset) -> None:
    """A Python function in the workers' part of the stream would fail on a worker, which has no Python
    callback of this process's ("Could not find callback"): refused here, before any job, in one line."""
    graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())  # noqa: SLF001 (no public API)
    nodes = [*graph.node, *(node for function in graph.library.function for node in function.node_def)]
    python = sorted({node.name.split("/")[0] for node in nodes if node.op in _PYTHON_OPS})
    if python:
        raise ConfigError(f"the training stream calls Python ({', '.join(python)}), which cannot run on a tf.data "
                          "service worker: use TensorFlow ops, or drop --data-service")


def _serialized_batches(plan: Plan, index: int, stages: Stages) -> tf.data.Dataset:
    """(index, serialized records) of each global batch of the endless order from batch `index` on."""
    start = index * plan.global_batch
    there = dataclasses.replace(plan, options=dataclasses.replace(plan.options, start=start), repeated=plan_repeated(
        plan.shard_sizes, window=plan.repeated.window, seed=plan.repeated.seed, start=start, folds=plan.options.folds))
    flow = Flow(tf.data.Dataset.range(0))
    for name, stage in stages:
        if name in _READ_STAGES:
            flow = stage(flow, there)
    return flushed(flow, there).rebatch(plan.global_batch).enumerate(start=index)

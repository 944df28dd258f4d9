"""ExampleGen's default local runner: the chunks on a pool of forked worker processes, one per core.

Beam's FnApiRunner on one machine costs more than the work on most inputs: its multi-process mode
starts fresh interpreters that import Beam (~2.5 s of CPU each, issue 33), its thread mode shares
one GIL, its in-memory mode one core; and switching between them with the size moved time and
memory. Forked workers start in milliseconds with the launcher's modules already imported, so one
mode serves every size. They run the very functions a Beam runner runs (`EncodeChunkFn` per chunk,
`write_shard` per shard) with the same shard plan, so the shards are the same bytes as on any Beam
runner (tests/example_gen/test_local_pool.py, tests/cluster/test_dask_runner.py).

The launcher does no encoding (the statistics process imports TFDV meanwhile:
statistics_process.py). Workers are forked before the launcher starts any thread (forking beside a
thread that holds a lock would deadlock the child) and die with the launcher (`PR_SET_PDEATHSIG` on
Linux): a killed run leaves no worker writing into a later run's staging area.

    result = run_on_pool(chunks, plan, sizing, workers=2, on_started=start_progress_reporter)

Workers take chunks from a counter in shared memory and send their results when none is left, so
the launcher is idle while they encode. A worker's error is raised in the launcher; a worker that
dies (killed, out of memory) fails the run with `WorkerFailed`.
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterator

from ..core import storage
from ..core.shard_writer import ShardSizing, plan_all, write_shard
from .csv_index import Chunk
from .encode_chunks import ChunkResult, EncodeChunkFn, IngestPlan

_PR_SET_PDEATHSIG = 1
ShardJob = tuple[Any, dict[str, int], str, str]  # (ShardPlan, record counts of its parts, out dir, compression)


def describe_pool(workers: int) -> str:
    """The manifest's `runner` for this mode."""
    return f"local process pool (workers={workers})"


class WorkerFailed(RuntimeError):
    """A pool worker raised (its traceback follows) or died (killed, out of memory)."""


def run_on_pool(chunks: list[Chunk], plan: IngestPlan, sizing: ShardSizing, workers: int,
                on_started: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Encodes every chunk and writes every shard on `workers` forked processes (in this one when 1).

    Returns what the Beam pipeline's result file holds: {"chunks": [ChunkResult], "shards": [(split, ShardInfo)]}.
    `on_started` runs in the launcher once the workers exist (the progress reporter's thread).
    Workers take chunks from a shared counter, so the launcher hands out nothing while they encode
    (a ProcessPoolExecutor, tried first, needs a dispatcher thread here).
    """
    if workers <= 1:
        on_started()
        encoder = EncodeChunkFn(plan)
        encoder.setup()
        results = [_encode(encoder, chunk) for chunk in chunks]
        return {"chunks": results, "shards": [_write(job) for job in _shard_jobs(results, plan, sizing)]}
    context = multiprocessing.get_context("fork")
    next_chunk = context.Value("q", 0)
    pipes, processes = [], []
    try:
        with inherited_objects_frozen():
            for _ in range(workers):
                ours, theirs = context.Pipe()
                process = context.Process(target=_worker, args=(theirs, chunks, plan, next_chunk, os.getpid()),
                                          name="example-gen-worker", daemon=True)
                process.start()
                theirs.close()
                pipes.append(ours)
                processes.append(process)
        on_started()
        results = [result for batch in _gather(pipes, processes) for result in batch]
        jobs = _shard_jobs(results, plan, sizing)
        for number, pipe in enumerate(pipes):
            pipe.send(jobs[number::workers])  # shards are of one size: every worker gets as many
        shards = [shard for batch in _gather(pipes, processes) for shard in batch]
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
            process.join()
    return {"chunks": results, "shards": shards}


@contextlib.contextmanager
def inherited_objects_frozen() -> Iterator[None]:
    """Forks inside this block leave the launcher's objects out of the children's garbage collector.

    A process that has run TensorFlow (the warm local runner, a test session) holds TensorFlow
    objects whose finalizers call into its runtime, whose threads do not survive a fork: a worker
    that collected such garbage died of SIGSEGV (tests/cluster, a pytest worker that had trained).
    The garbage is collected here first, where TensorFlow works, and the rest frozen (`gc.freeze`):
    a child never collects what it inherited.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _gather(pipes: list[Connection], processes: list[multiprocessing.Process]) -> list[list[Any]]:
    """One message from every worker: its list of results; raises WorkerFailed for an error or a death."""
    answers: dict[int, list[Any]] = {}
    while len(answers) < len(pipes):
        for pipe in wait([p for n, p in enumerate(pipes) if n not in answers]):
            number = pipes.index(pipe)  # type: ignore[arg-type]
            try:
                kind, payload = pipe.recv()  # type: ignore[union-attr]
            except EOFError:
                processes[number].join(timeout=5)
                raise WorkerFailed(f"an example-gen worker process died (exit code {processes[number].exitcode})")
            if kind == "error":
                error, text = payload
                if isinstance(error, Exception):  # the worker's own error, as a Beam runner would raise it
                    error.add_note(f"raised in an example-gen worker process:\n{text}")
                    raise error
                raise WorkerFailed(f"an example-gen worker failed:\n{text}")
            answers[number] = payload
    return [answers[number] for number in range(len(pipes))]


def die_with_parent() -> None:
    """Linux: the kernel kills this worker when the launcher dies (a SIGKILL leaves no orphan writing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: a worker still ends when its pipe closes
        pass


def _worker(pipe: Connection, chunks: list[Chunk], plan: IngestPlan, next_chunk: Any, parent: int) -> None:
    """A forked worker: chunks from the shared counter until none is left, then the shards it is sent."""
    die_with_parent()
    if os.getppid() != parent:  # the launcher died before the signal was armed
        os._exit(1)
    storage.forget_clients()  # an object-store client's connections must not be shared across fork
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the launcher's to handle: it ends the pool
    try:
        encoder = EncodeChunkFn(plan)
        encoder.setup()
        results = []
        while (number := _take(next_chunk)) < len(chunks):
            results.append(_encode(encoder, chunks[number]))
        pipe.send(("results", results))
        pipe.send(("shards", [_write(job) for job in pipe.recv()]))
    except BaseException as error:  # noqa: BLE001  (reported to the launcher, which raises it)
        try:
            pipe.send(("error", (error, traceback.format_exc())))
        except Exception:  # noqa: BLE001  (an unpicklable error: its text alone)
            pipe.send(("error", (None, traceback.format_exc())))
    finally:
        pipe.close()


def _take(counter: Any) -> int:
    with counter.get_lock():
        number = counter.value
        counter.value += 1
    return number


def _encode(encoder: EncodeChunkFn, chunk: Chunk) -> ChunkResult:
    return next(iter(encoder.process(chunk)))


def _write(job: ShardJob) -> tuple[str, Any]:
    shard, whole_parts, out_dir, compression = job
    return shard.split, write_shard(shard, out_dir, compression, whole_parts)


def _shard_jobs(results: list[ChunkResult], plan: IngestPlan, sizing: ShardSizing) -> list[ShardJob]:
    parts = [(split, part) for result in results for split, part in result.parts.items()]
    return [(shard, whole, plan.publish_root, sizing.compression) for shard, whole in plan_all(parts, sizing)]

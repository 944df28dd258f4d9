"""The tf.data service's batches put back in the local stream's order, whatever a worker does.

Worker k of N makes a job's global batches first+k, first+k+N, ... (a static sharding) and sends each with its
index and N; the client reads the workers round-robin. What TensorFlow 2.16 does (measured with real servers,
SIGKILLed `shardflow data-service` processes, and 8 workers on a busy 2-core machine):
- the client reads the workers in an order of its own, not the shards': up to N-1 later batches come before
  the one due in a normal round;
- a worker whose batch is not ready within 100 ms skips the round and stays a round behind: workers drifted up
  to 10 rounds apart, and one sent nothing for up to 3 rounds while the others sent;
- a dead worker leaves the round-robin: its batches never come; a worker restarted at its address begins its
  shard again from the job's first batch; with every worker gone the client waits forever; a dispatcher
  restarted without its journal fails the job (NotFound).

So, for the batch due:
- it is waited for while its worker keeps sending, up to the buffer's bound (a slow worker is not a dead one);
- its worker silent for SILENT_ROUNDS rounds while the others sent (AHEAD_ROUNDS if it has sent nothing yet in
  this job: workers start unevenly) is taken as gone: its batches are made here (`LocalMaker`: the same records
  through the same stages) as they fall due, until it sends again; a copy that comes after its batch was made
  here is dropped;
- a batch its worker had sent already (a restart), one more than AHEAD_ROUNDS rounds late, or a worker
  AHEAD_ROUNDS rounds behind the batches waiting (the reorder buffer's bound) starts a new job at the batch due,
  where every worker seeks; so does a job that fails after its first batch;
- no batch for `stall_seconds` (every worker gone, a dispatcher down): every batch is made here, and the
  service's are taken again when they come; a job that fails before its first batch leaves every batch here.

So the model sees the local stream's batches, in its order: the weights are the uninterrupted local run's.
`ServiceLog` counts what happened; `delivered` counts lost and repeated examples from the indices handed on.
"""
from __future__ import annotations

import queue
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Iterable, Iterator

import tensorflow as tf
from tensorflow.python.data.util import structure
from tensorflow.python.eager import cancellation, context, execute

from .stream_options import STALL_SECONDS, ServiceLog

# A worker is taken as gone once the others sent this many rounds while it sent nothing: 8 workers on a 2-core
# machine with a CPU hog (input-bound, so workers skip rounds) left one silent for at most 3 rounds.
SILENT_ROUNDS = 6
# The reorder buffer's bound, in rounds of N batches: the same workers drifted up to 10 rounds apart; beyond 16
# a new job puts every worker at the batch due again (a worker that far behind is not helped by waiting).
AHEAD_ROUNDS = 16
READ_AHEAD = 8  # elements a job's reading thread holds for this one (TensorFlow's client buffers its own too)
Served = Callable[[int], Iterable[Any]]  # serve(first): a job's (index, workers, batch) elements from `first` on


class LocalMaker:
    """Batches made here by index, in increasing order: one local read of the serialized records (seeking
    to the first asked for, then reading on), each asked-for batch through `make_batch`."""

    def __init__(self, records_from: Callable[[int], tf.data.Dataset],
                 make_batch: Callable[[tf.Tensor, tf.Tensor], Any]) -> None:
        self._records_from, self._make_batch = records_from, make_batch
        self._records: Iterator | None = None
        self._next = -1

    def batch(self, index: int) -> Any:
        if self._records is None or index < self._next:
            self._records = iter(self._records_from(index))
        for found, records in self._records:
            self._next = int(found) + 1
            if self._next - 1 == index:
                return self._make_batch(found, records)
        raise ValueError(f"the local stream ended before batch {index}")  # an endless stream never does


class JobReader:
    """A job's elements, read by a thread of its own so that a wait for the next one has a bound (TensorFlow's
    iterator has none); `close` cancels a wait inside TensorFlow, so the job's client ends with the thread."""

    def __init__(self, elements: Callable[[], Iterable[Any]]) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=READ_AHEAD)
        self._stop, self._cancel = threading.Event(), cancellation.CancellationManager()
        threading.Thread(target=self._read, args=(elements,), name="served-stream-job", daemon=True).start()

    def _read(self, elements: Callable[[], Iterable[Any]]) -> None:
        try:
            for element in _cancellable(elements(), self._cancel):
                if not self._put(element):
                    return
            self._put(EOFError("the job ended"))  # an endless stream's never does
        except Exception as error:  # noqa: BLE001 (any failure of the job is the reader's to judge)
            self._put(error)

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def next(self, timeout: float) -> Any | None:
        """The next element, None when none came within `timeout` s (0: none waiting); raises the job's error."""
        try:
            item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
        except queue.Empty:
            return None
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._cancel.start_cancel()


def _cancellable(source: Iterable[Any], cancel: cancellation.CancellationManager) -> Iterator[Any]:
    """A dataset's elements, each wait for one cancelled by `cancel` (TensorFlow's iterator runs its op with a
    cancellation manager only this way: a SIGKILLed worker set would hold the thread, and the job, forever);
    any other iterable's (a test's fake job) as they come."""
    if not isinstance(source, tf.data.Dataset):
        yield from source
        return
    iterator = iter(source)
    # noqa: SLF001 below: no public API runs an iterator's op with a cancellation manager
    types, shapes, handle = iterator._flat_output_types, iterator._flat_output_shapes, iterator._iterator_resource
    attrs = ("output_types", types, "output_shapes", shapes)
    while True:
        flat = execute.execute_with_cancellation(b"IteratorGetNext", len(types), [handle], attrs, context.context(),
                                                 cancel)
        yield structure.from_compatible_tensor_list(iterator.element_spec, flat)


@dataclass
class JobOrder:
    """One job's reorder buffer: `waiting` batches by index; each worker's last index and last arrival."""

    expected: int
    first: int
    workers: int = 0
    waiting: dict[int, Any] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    heard: dict[int, int] = field(default_factory=dict)
    arrivals: int = 0
    gone: set[int] = field(default_factory=set)

    def worker(self, index: int) -> int:
        return (index - self.first) % self.workers

    def silent_rounds(self, worker: int) -> float:
        """Rounds the other live workers sent since `worker` last did (since the job started: never)."""
        others = max(1, self.workers - 1 - len(self.gone - {worker}))
        return (self.arrivals - self.heard.get(worker, 0)) / others

    def arrive(self, index: int, batch: Any) -> str:
        """"due" (kept until handed on), "late" (a copy of a batch made here: dropped) or "stale" (its worker went
        back, a restart, or is more than AHEAD_ROUNDS rounds late: a new job)."""
        worker = self.worker(index)
        before = self.last.get(worker)
        self.arrivals += 1
        self.heard[worker] = self.arrivals
        if index < self.expected and ((before is not None and index <= before)
                                      or self.expected - index > AHEAD_ROUNDS * self.workers):
            return "stale"
        self.last[worker] = index
        self.gone.discard(worker)
        if index < self.expected:
            return "late"
        self.waiting[index] = batch
        return "due"

    def behind(self) -> bool:
        """The batch due is AHEAD_ROUNDS rounds behind the furthest one waiting."""
        return max(self.waiting, default=self.expected) - self.expected >= AHEAD_ROUNDS * max(1, self.workers)


def ordered_batches(serve: Served, maker: LocalMaker, first: int, log: ServiceLog,
                    stall_seconds: float = STALL_SECONDS) -> Iterator[tuple[int, Any]]:
    """(index, batch) from batch `first` on, in index order, through every failure of the service."""
    expected = first
    while True:
        log.jobs += 1
        reader = JobReader(lambda start=expected: serve(start))
        try:
            expected = yield from _one_job(reader, maker, JobOrder(expected=expected, first=expected), log,
                                           stall_seconds)
        finally:
            reader.close()  # its thread ends at its next element; TensorFlow drops a job no client reads


def _one_job(reader: JobReader, maker: LocalMaker, order: JobOrder, log: ServiceLog,
             stall_seconds: float) -> Generator[tuple[int, Any], None, int]:
    """One job's batches in order; returns the batch a new job starts at."""
    alone = False  # after a stall, or a job that failed before its first batch: every batch made here
    failed = False  # that job: never read again
    while True:
        waited = time.monotonic()
        try:
            element = None if failed else reader.next(0 if alone else stall_seconds)
        except Exception as error:  # noqa: BLE001 (TensorFlow's errors, the job's end)
            if order.arrivals or alone:
                log.echo(f"data service: the job failed ({_first_line(error)}): a new job starts at batch "
                         f"{order.expected}")
                return order.expected
            log.echo(f"data service: the job failed before its first batch ({_first_line(error)}): this process "
                     f"makes every batch from batch {order.expected} on")
            element, alone, failed = None, True, True
        if element is None and not alone:
            log.stalls, alone = log.stalls + 1, True
            log.echo(f"data service: no batch for {stall_seconds:g} s (every worker gone, or the dispatcher): "
                     f"this process makes the batches from batch {order.expected} on, and takes the service's "
                     "again when they come")
        elif element is not None:
            log.longest_wait = max(log.longest_wait, time.monotonic() - waited)
            alone = False
            restart_at = _arrived(order, element, log)
            if restart_at is not None:
                return restart_at
        if alone and order.expected not in order.waiting:
            order.waiting[order.expected] = maker.batch(order.expected)
            log.made_here += 1
        while order.expected in order.waiting or _made_for_gone(order, maker, log):
            yield order.expected, order.waiting.pop(order.expected)
            order.expected += 1
        if order.behind():
            log.echo(f"data service: batch {order.expected}'s worker runs {AHEAD_ROUNDS} rounds behind the others: "
                     f"a new job starts there, where every worker seeks")
            return order.expected


def _arrived(order: JobOrder, element: Any, log: ServiceLog) -> int | None:
    """Takes one (index, workers, batch) element; the batch a new job starts at when it came from a restart."""
    index, order.workers, batch = int(element[0]), int(element[1]), element[2]
    worker = order.worker(index)
    was_gone = worker in order.gone
    verdict = order.arrive(index, batch)
    if verdict == "stale":
        log.stale += 1
        log.echo(f"data service: batch {index} came after batch {order.expected - 1} was handed on (worker "
                 f"{worker} restarted, or far behind): a new job starts at batch {order.expected}, where every "
                 "worker seeks")
        return order.expected
    log.late, log.served = log.late + (verdict == "late"), log.served + (verdict == "due")
    if was_gone:
        log.echo(f"data service: worker {worker} of {order.workers} sends again (batch {index}): its batches are "
                 "taken from it again")
    return None


def _made_for_gone(order: JobOrder, maker: LocalMaker, log: ServiceLog) -> bool:
    """Makes the batch due here when its worker is gone: silent for SILENT_ROUNDS rounds while others sent, or,
    never heard from in this job, AHEAD_ROUNDS rounds."""
    if not order.workers:
        return False
    worker = order.worker(order.expected)
    heard = worker in order.heard  # if not, since the job started: judged by the buffer's bound (starts differ)
    if worker not in order.gone and (order.silent_rounds(worker) >= SILENT_ROUNDS if heard else order.behind()):
        order.gone.add(worker)
        rounds = SILENT_ROUNDS if heard else AHEAD_ROUNDS
        log.echo(f"data service: worker {worker} of {order.workers} sent nothing for {rounds} rounds while the "
                 f"others sent (gone, or stalled): this process makes its batches from batch {order.expected} on, "
                 "until it sends again")
    if worker not in order.gone:
        return False
    order.waiting[order.expected] = maker.batch(order.expected)
    log.made_here += 1
    return True


def delivered(batches: Iterable[tuple[int, Any]], log: ServiceLog, examples: int) -> Iterator[Any]:
    """The batches of (index, batch) pairs, counting into `log` the examples lost (batches skipped over) and
    repeated (a batch at or before the last one handed on): what reached the model, not what should have."""
    last = None
    for index, batch in batches:
        last = log.delivered(index, last, examples)
        yield batch


def _first_line(error: BaseException) -> str:
    """The error's class and first line, without TensorFlow's `{{function_node ...}}` prefix."""
    text = re.sub(r"^\{\{[^}]*\}\}\s*", "", str(error).strip())
    return f"{type(error).__name__}: {text.splitlines()[0][:300]}" if text else type(error).__name__

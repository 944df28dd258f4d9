"""The tf.data service's batches put back in the local stream's order, whatever a worker does.

Each worker makes every N-th global batch (a static sharding) and the client reads them round-robin, so a
round holds one batch per worker. What TensorFlow 2.16 does when a worker dies (measured with SIGKILLed
`shardflow data-service worker` processes): the round-robin goes on with the workers left, so the dead
worker's batches never come; a worker restarted at its address begins its shard again from the job's
first batch. Neither is allowed to reach the model:

- a batch missing while later ones keep coming (more than twice the run-ahead seen in normal rounds) is
  made here, in this process, from the same records with the same stages (`make_here`): nothing is lost,
  the order is kept; this process works for the missing worker until the job restarts;
- a batch older than the next one due comes from a restarted worker: the job is abandoned and a new one
  starts at the next batch (`serve(first)`), so every worker, the restarted one too, seeks there.

So the model sees the local stream's batches, in its order, through worker deaths and restarts: the
weights are the uninterrupted local run's. `ServiceLog` counts what happened; the Trainer reports it.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import tensorflow as tf

from .stream_options import ServiceLog

# A missing batch is declared lost once this many times the normal run-ahead (and at least GAP_MIN batches)
# wait behind it: a round's batches come in the client's worker order, so in normal rounds fewer than N
# (the workers) wait; a dead worker's turn is skipped, so the waiting grows by N-1 a round.
GAP_FACTOR, GAP_MIN = 2, 4


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


def ordered_batches(serve: Callable[[int], tf.data.Dataset], maker: LocalMaker, first: int,
                    log: ServiceLog) -> Iterator[Any]:
    """The batches from `first` on, in index order: `serve(first)` gives a job's (index, batch) pairs."""
    expected, jobs = first, 0
    while True:
        log.jobs, jobs = log.jobs + 1, jobs + 1
        if jobs > 1:
            log.echo(f"data service: a restarted worker made batches again; a new job starts at batch "
                     f"{expected}")
        job, waiting, normal_lag, lost = iter(serve(expected)), {}, 1, False
        for index, batch in job:
            index = int(index)
            if index < expected:
                log.stale += 1
                break
            log.served += 1
            if index == expected:
                normal_lag = max(normal_lag, len(waiting))
            waiting[index] = batch
            while len(waiting) > max(GAP_MIN, GAP_FACTOR * normal_lag) and expected not in waiting:
                if not lost:
                    log.echo(f"data service: batch {expected} did not come (a worker is gone): this process "
                             f"makes the missing worker's batches until it is back")
                lost = True
                waiting[expected] = maker.batch(expected)
                log.made_here += 1
            while expected in waiting:
                yield waiting.pop(expected)
                expected += 1
        del job  # releases the job: the dispatcher drops it once no client reads it

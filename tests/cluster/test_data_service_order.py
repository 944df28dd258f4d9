"""core/served_stream.py against fake servers that do what TensorFlow 2.16's were measured doing: workers read in
an order of their own, workers rounds behind (skipped rounds), a dead worker, a restarted one, every worker gone,
a job that fails. The batches handed on are always 0, 1, 2, ... in order; batches are made here only for a
worker that is gone, and the log says so only then."""
from __future__ import annotations

import random
import threading
from typing import Any, Iterator

import pytest

from shardflow.core.served_stream import AHEAD_ROUNDS, SILENT_ROUNDS, LocalMaker, delivered, ordered_batches
from shardflow.core.stream_options import ServiceJob, ServiceLog

pytestmark = pytest.mark.unit
released = threading.Event()  # ends the fake jobs that wait "forever", at the end of the module


@pytest.fixture(scope="module", autouse=True)
def _release_waiting_jobs() -> Iterator[None]:
    yield
    released.set()


class Maker(LocalMaker):
    """Batches made here: the index's own value, each call recorded."""

    def __init__(self) -> None:
        self.made: list[int] = []

    def batch(self, index: int) -> Any:
        self.made.append(index)
        return ("made", index)


def rounds(start: int, order: list[int], skipped: set[tuple[int, int]] = frozenset(),
           dead: dict[int, int] | None = None, restart: tuple[int, int] | None = None,
           count: int = 1000) -> Iterator[tuple[int, int, Any]]:
    """A job's elements: each round, each worker in `order` sends its next batch start + k + j N, except in its
    `skipped` (worker, round)s (TensorFlow skips a worker not ready within 100 ms: it falls a round behind), and
    from its `dead` round on; `restart` (worker, round): from that round the worker begins its shard again."""
    workers, dead = len(order), dead or {}
    sent = dict.fromkeys(order, 0)
    for number in range(count):
        for worker in order:
            if (worker, number) in skipped or number >= dead.get(worker, 1 << 30):
                continue
            if restart == (worker, number):
                sent[worker] = 0
            index = start + worker + sent[worker] * workers
            sent[worker] += 1
            yield index, workers, ("served", index)


def drift(workers: int, rng: random.Random, behind: int = AHEAD_ROUNDS - 4) -> set[tuple[int, int]]:
    """Skipped rounds as measured on a busy machine: two workers fall `behind` rounds behind the others over the
    run, never more than 3 rounds in a row (the first round included)."""
    skipped: set[tuple[int, int]] = set()
    for worker in rng.sample(range(workers), min(2, workers)):
        number = 0
        for _ in range(0, behind, 3):
            skipped |= {(worker, number + r) for r in range(rng.randint(1, 3))}
            number += 3 + rng.randrange(1, 8)
    return skipped


def take(serve: Any, count: int, log: ServiceLog, maker: Maker, first: int = 0, stall: float = 30.0) -> list:
    batches = ordered_batches(serve, maker, first, log, stall)
    return [next(batches) for _ in range(count)]


def quiet_log() -> tuple[ServiceLog, list[str]]:
    said: list[str] = []
    return ServiceLog(echo=said.append), said


def test_eight_workers_read_in_a_rotated_order_make_nothing_here() -> None:
    for shift in range(8):
        order = [(worker + shift) % 8 for worker in range(8)]  # shard 0's worker read 1st, ..., 8th
        log, said = quiet_log()
        maker = Maker()
        got = take(lambda start: rounds(start, order), 800, log, maker)
        assert [index for index, _ in got] == list(range(800))
        assert [batch for _, batch in got] == [("served", index) for index in range(800)]
        assert maker.made == [] and said == [] and log.jobs == 1 and log.served >= 800


@pytest.mark.parametrize("workers", [1, 2, 3, 6, 13])
def test_any_worker_count_and_read_order_with_workers_rounds_behind_makes_nothing_here(workers: int) -> None:
    rng = random.Random(workers)
    order, skipped = rng.sample(range(workers), workers), drift(workers, rng)
    log, said = quiet_log()
    maker = Maker()
    got = take(lambda start: rounds(start, order, skipped), 600, log, maker, first=70)
    assert [index for index, _ in got] == list(range(70, 670))
    assert maker.made == [] and said == [] and log.jobs == 1


def test_a_dead_workers_batches_are_made_here_and_no_other() -> None:
    log, said = quiet_log()
    maker = Maker()
    got = take(lambda start: rounds(start, [5, 6, 7, 0, 1, 2, 3, 4], dead={6: 10}), 400, log, maker)
    assert [index for index, _ in got] == list(range(400))
    assert maker.made == list(range(6 + 10 * 8, 400, 8))  # worker 6's, from its 11th on: nothing lost
    assert said == [f"data service: worker 6 of 8 sent nothing for {SILENT_ROUNDS} rounds while the others sent "
                    "(gone, or stalled): this process makes its batches from batch 86 on, until it sends again"]
    assert log.jobs == 1 and log.made_here == len(maker.made)


def test_a_worker_dead_from_the_jobs_start_is_judged_by_the_buffers_bound() -> None:
    log, said = quiet_log()
    maker = Maker()
    got = take(lambda start: rounds(start, [2, 0, 1], dead={0: 0}), 200, log, maker, first=30)
    assert [index for index, _ in got] == list(range(30, 230))
    assert maker.made == list(range(30, 230, 3)) and log.jobs == 1
    assert said == [f"data service: worker 0 of 3 sent nothing for {AHEAD_ROUNDS} rounds while the others sent "
                    "(gone, or stalled): this process makes its batches from batch 30 on, until it sends again"]


def test_a_worker_silent_for_a_while_is_helped_then_taken_again_without_a_new_job() -> None:
    silent = {(2, number) for number in range(2, 4 + SILENT_ROUNDS)}  # then it sends on from where it was
    log, said = quiet_log()
    maker = Maker()
    got = take(lambda start: rounds(start, [0, 1, 2, 3], silent), 300, log, maker)
    assert [index for index, _ in got] == list(range(300))
    # its batches while it was silent, and the one due when it sent again: then its copies come late (dropped)
    assert maker.made and set(maker.made) <= {2 + 4 * number for number in range(2, 5 + SILENT_ROUNDS)}
    assert log.jobs == 1 and log.late >= 1 and log.made_here == len(maker.made)
    assert said[0].startswith("data service: worker 2 of 4 sent nothing") and len(said) == 2
    assert said[1].startswith("data service: worker 2 of 4 sends again (batch 10)")


def test_a_restarted_worker_starts_a_new_job_at_the_batch_due() -> None:
    starts: list[int] = []

    def serve(start: int) -> Iterator:
        starts.append(start)
        return rounds(start, [1, 0, 2], restart=(1, 20) if len(starts) == 1 else None)

    log, said = quiet_log()
    got = take(serve, 300, log, Maker())
    assert [index for index, _ in got] == list(range(300))
    assert log.jobs == 2 and log.stale == 1 and len(starts) == 2 and 55 <= starts[1] <= 63
    assert said == [f"data service: batch 1 came after batch {starts[1] - 1} was handed on (worker 1 restarted, "
                    f"or far behind): a new job starts at batch {starts[1]}, where every worker seeks"]


def test_every_worker_gone_the_batches_are_made_here_after_the_stall_bound() -> None:
    def then_nothing(start: int) -> Iterator:
        yield from rounds(start, [1, 0], count=10)
        released.wait(600)  # TensorFlow's client with no worker left: it waits for one, forever

    log, said = quiet_log()
    maker = Maker()
    got = take(then_nothing, 60, log, maker, stall=0.3)
    assert [index for index, _ in got] == list(range(60))
    assert maker.made == list(range(20, 60)) and log.stalls == 1 and log.jobs == 1
    assert said == ["data service: no batch for 0.3 s (every worker gone, or the dispatcher): this process makes the "
                    "batches from batch 20 on, and takes the service's again when they come"]


def test_a_job_that_fails_is_replaced_or_if_it_never_served_left_to_this_process() -> None:
    def fails_after(start: int) -> Iterator:
        yield from rounds(start, [0, 1], count=5)
        raise RuntimeError("NotFound: Unknown iteration client id 3000\nmore")  # a dispatcher without its journal

    log, said = quiet_log()
    got = take(fails_after, 25, log, Maker())
    assert [index for index, _ in got] == list(range(25)) and log.jobs == 3
    assert said[0] == "data service: the job failed (RuntimeError: NotFound: Unknown iteration client id 3000): a " \
                      "new job starts at batch 10"

    def refused(start: int) -> Iterator:
        raise RuntimeError("FailedPrecondition: static sharding requires the dispatcher to know its workers")
        yield  # a generator

    log, said = quiet_log()
    maker = Maker()
    assert [index for index, _ in take(refused, 30, log, maker)] == list(range(30))
    assert maker.made == list(range(30)) and log.jobs == 1
    assert said == ["data service: the job failed before its first batch (RuntimeError: FailedPrecondition: static "
                    "sharding requires the dispatcher to know its workers): this process makes every batch from "
                    "batch 0 on"]


def test_lost_and_repeated_examples_are_counted_from_the_indices_handed_on() -> None:
    log, _ = quiet_log()
    planted = [(0, "a"), (1, "b"), (3, "d"), (4, "e"), (4, "e"), (2, "c"), (5, "f")]  # 2 skipped, 4 and 2 repeated
    assert list(delivered(iter(planted), log, examples=32)) == ["a", "b", "d", "e", "e", "c", "f"]
    assert (log.examples_lost, log.examples_repeated) == (32, 64)
    clean, _ = quiet_log()
    list(delivered(take(lambda start: rounds(start, [2, 0, 1]), 90, clean, Maker()), clean, examples=32))
    assert clean.as_dict()["examples_lost"] == clean.as_dict()["examples_repeated"] == 0


def test_a_stall_bound_that_cannot_work_is_refused() -> None:
    from shardflow.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^stall_seconds must be a number of seconds > 0, got 0$"):
        ServiceJob(dispatcher="grpc://localhost:5050", name="j", stall_seconds=0)

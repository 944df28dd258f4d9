"""The local pool's workers never collect garbage they inherited from the launcher.

A launcher that has run TensorFlow (the warm runner, a test session) holds objects whose
finalizers call into TensorFlow's runtime, which does not survive a fork: a worker that collected
them died of SIGSEGV. Here a finalizer records the process it runs in: it must run in the launcher.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
from pathlib import Path

from shardflow.example_gen.local_pool import inherited_objects_frozen


class _Recorder:
    """Garbage in a reference cycle whose finalizer appends the pid of the process that runs it."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.cycle = self

    def __del__(self) -> None:
        with open(self.log, "a") as out:
            out.write(f"{os.getpid()}\n")


def _child_collects() -> None:
    gc.collect()  # what a worker's own allocations trigger sooner or later
    os._exit(0)


def _old_garbage(log: Path) -> None:
    """A cycle that survived collections (so it sits in the oldest generation), then was dropped."""
    holder = [_Recorder(log)]
    gc.collect()
    holder.clear()


def _fork_a_collecting_child(frozen: bool) -> None:
    context = multiprocessing.get_context("fork")
    if frozen:
        with inherited_objects_frozen():
            child = context.Process(target=_child_collects)
            child.start()
    else:
        child = context.Process(target=_child_collects)
        child.start()
    child.join()
    assert child.exitcode == 0


def test_garbage_is_finalized_in_the_launcher_not_in_a_worker(tmp_path: Path) -> None:
    log = tmp_path / "finalized.txt"
    _old_garbage(log)
    _fork_a_collecting_child(frozen=True)
    assert log.read_text().split() == [str(os.getpid())]


def test_without_the_freeze_a_worker_would_finalize_it(tmp_path: Path) -> None:
    """The hazard is real: the same fork without the block runs the finalizer in the child."""
    log = tmp_path / "finalized.txt"
    gc.disable()  # the launcher must not collect it first by chance
    try:
        _old_garbage(log)
        _fork_a_collecting_child(frozen=False)
    finally:
        gc.enable()
        gc.collect()
    pids = log.read_text().split()
    assert pids[0] != str(os.getpid()) and len(pids) >= 1

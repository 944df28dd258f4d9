"""The machine to one test while it times something: no test of another pytest-xdist worker runs meanwhile.

A figure compared with one timed at another moment (the Trainer's input probe against its training rate) moves
with whatever the other xdist worker starts or stops in between: measured, a photo run's input-to-training ratio
went from 0.71 to 1.23 across five runs beside two CPU hogs switching on and off every 3 s (the verdict's
threshold is 1.2), and stayed within 0.88-1.10 across ten beside two hogs that ran throughout. Holding the other
worker still is the cause fixed, not the assertion loosened:

- every test runs holding the shared side of a lock all workers of the run see (conftest.py's
  pytest_runtest_protocol, setup and teardown included: module fixtures train too);
- `machine_to_itself()` gives up its own shared side and takes the exclusive one: the other worker's running
  test finishes, and its next one waits; a turnstile keeps that next test from slipping in first.

Without xdist (one process) both are no-ops. flock locks go with the process: a killed worker holds nothing.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

import pytest

_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # set in every worker of an xdist run
_files: dict[str, int] = {}
_folder: list[Path] = []  # the run's temporary folder, which every worker sees (pytest removes old ones)


def _lock(name: str, operation: int) -> None:
    if name not in _files:
        path = _folder[0] / f"quiet-machine-{name}.lock"
        _files[name] = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by subprocesses
    fcntl.flock(_files[name], operation)


@contextlib.contextmanager
def while_testing(config: pytest.Config) -> Iterator[None]:
    """Around each test: the shared side, taken through the turnstile."""
    if _RUN is None:
        yield
        return
    if not _folder:  # a worker's base folder is popen-gwN inside the run's (as shared_fixtures.shared_root)
        _folder.append(config._tmp_path_factory.getbasetemp().parent)  # noqa: SLF001 (pytest's own factory)
    _lock("turnstile", fcntl.LOCK_SH)
    _lock("machine", fcntl.LOCK_SH)
    _lock("turnstile", fcntl.LOCK_UN)
    try:
        yield
    finally:
        _lock("machine", fcntl.LOCK_UN)


@contextlib.contextmanager
def machine_to_itself() -> Iterator[None]:
    """Inside a test (or its fixture): until the block ends, no other worker's test runs."""
    if _RUN is None:
        yield
        return
    _lock("machine", fcntl.LOCK_UN)  # never wait for the exclusive side while holding the shared one
    _lock("turnstile", fcntl.LOCK_EX)
    _lock("machine", fcntl.LOCK_EX)
    try:
        yield
    finally:
        _lock("machine", fcntl.LOCK_UN)
        _lock("turnstile", fcntl.LOCK_UN)
        _lock("machine", fcntl.LOCK_SH)  # back to what the test's protocol holds

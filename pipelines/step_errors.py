"""How a failed pipeline step hands its one-line error to whoever ran it: a small JSON file, no log scraping.

A step (a KFP component's process) runs inside `reported_step()`. A ShardflowError there becomes
one line on stderr, the error's exit code, and, when the runner asked for it through the
environment variable `SHARDFLOW_STEP_ERROR_FILE`, a record `{"message", "exit_code", "bug"}`
in that file. `shardflow run` sets the variable for each step (kfp.local's subprocesses inherit
it) and reads the record back when the step failed; on a cluster the variable is unset and the
line is in the pod's log. Any other exception is a bug: it is recorded too, then re-raised, so
its traceback stays in the step's log.

    with reported_step():
        launchers.train(...)
    read_step_error(path)   # {"message": "shardflow train: error: ...", "exit_code": 1, "bug": false}
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any, Iterator

from ..core import storage
from ..core.cloud_env import install_exit_guard
from ..core.errors import ShardflowError

STEP_ERROR_ENV = "SHARDFLOW_STEP_ERROR_FILE"


@contextlib.contextmanager
def reported_step() -> Iterator[None]:
    """The body of one pipeline step: its process's entry point (so it installs the exit guard)."""
    install_exit_guard()
    try:
        yield
    except ShardflowError as err:
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        _record(line, err.exit_code, bug=False)
        print(line, file=sys.stderr, flush=True)
        sys.exit(err.exit_code)  # through sys.exit, which the exit guard records (a bare SystemExit it would not)
    except Exception as err:  # noqa: BLE001 — a bug: recorded for the run's summary, traceback kept
        _record(f"{type(err).__name__}: {err}".splitlines()[0], 1, bug=True)
        raise


def _record(message: str, exit_code: int, bug: bool) -> None:
    path = os.environ.get(STEP_ERROR_ENV)
    if not path:
        return
    storage.write_json(path, {"message": message, "exit_code": exit_code, "bug": bug}, durable=False)


def read_step_error(path: str | os.PathLike) -> dict[str, Any] | None:
    """The record a failed step left at `path`, or None when it left none (it died before or outside shardflow)."""
    try:
        with open(path) as record:
            return json.load(record)
    except (FileNotFoundError, json.JSONDecodeError):
        return None

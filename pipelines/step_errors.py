"""How a failed pipeline step hands its one-line error to whoever ran it: structured, no log scraping.

A step (a KFP component's process) runs inside `reported_step()`. A ShardflowError there becomes
one line on stderr (the command's own, naming it: the pod's log), the error's exit code, and a record
`{"message", "exit_code", "bug"}` kept in this process: `last_error()`. The record's message is the
reason alone, without the command's "shardflow NAME: error: ": the run names the step once, in the
one line it prints and records ("task train failed: REASON", local_dag.py). The step worker that ran the step (step_worker.py, for `shardflow
run`) reads it after the step and returns it with the result; on a cluster the line is in the
pod's log. Any other exception is a bug: it is recorded too, then re-raised, so its traceback stays
in the step's log.

    with reported_step():
        step_bodies.train(...)
    last_error()   # {"message": "no shards under ...", "exit_code": 1, "bug": False}
"""
from __future__ import annotations

import contextlib
import re
import sys
from typing import Any, Iterator

from ..core.exit_guard import install_exit_guard
from ..core.errors import ShardflowError
from .step_tracking import log_into_task_run

_COMMAND_PREFIX = re.compile(r"^shardflow [\w-]+: (error: )?")  # how a command's own line begins
_recorded: list[dict[str, Any]] = []  # this process's step error, if its step failed


@contextlib.contextmanager
def reported_step() -> Iterator[None]:
    """The body of one pipeline step: its process's entry point (so it installs the exit guard)."""
    install_exit_guard()
    log_into_task_run(last_error)  # on a cluster that records runs in MLflow (MLFLOW_RUN_ID): step_tracking.py
    try:
        yield
    except ShardflowError as err:
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        _record(_COMMAND_PREFIX.sub("", line, count=1), err.exit_code, bug=False)
        print(line, file=sys.stderr, flush=True)
        sys.exit(err.exit_code)  # through sys.exit, which the exit guard records (a bare SystemExit it would not)
    except Exception as err:  # noqa: BLE001 — a bug: recorded for the run's summary, traceback kept
        _record(f"{type(err).__name__}: {err}".splitlines()[0], 1, bug=True)
        raise


def _record(message: str, exit_code: int, bug: bool) -> None:
    _recorded[:] = [{"message": message, "exit_code": exit_code, "bug": bug}]


def last_error() -> dict[str, Any] | None:
    """The error the step run in this process recorded, or None when it recorded none."""
    return dict(_recorded[0]) if _recorded else None

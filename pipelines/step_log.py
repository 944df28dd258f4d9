"""What `shardflow run` prints: one line per step, while each step's full log goes to a file.

kfp.local prints everything a task does to `sys.stdout` (its executor input, the subprocess's
output through `print`, its own logging handler, made on `sys.stdout` for each task). Redirecting
`sys.stdout` around one task therefore captures all of it, without patching kfp: the log goes to
RUN/logs/<task>.log (and to the terminal too with `verbose`), and the reporter prints the line.

    steps = StepLog(echo=print, verbose=False)
    outputs, state = steps.run_task("train", Path("runs/x/pipeline_root/shardflow-..."), run_the_task)
    steps.error("train")   # the failing step's own one-line message (its error record: step_errors.py)
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from .step_errors import STEP_ERROR_ENV, read_step_error
from .steps import BY_NAME

LOGS = "logs"
STEPS_RECORD = "steps.json"  # RUN/logs/steps.json: each step's state, seconds and key figure, as printed


class _Tee:
    """A text stream writing to several streams (the step's log and, with --verbose, the terminal)."""

    def __init__(self, *streams: TextIO) -> None:
        self._streams = streams

    def write(self, text: str) -> int:
        for stream in self._streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self._streams:
            stream.flush()


class StepLog:
    """Runs each task with its output in its log file; prints one line per step; keeps each failure's message."""

    def __init__(self, echo: Callable[[str], None], verbose: bool = False) -> None:
        self.echo, self.verbose = echo, verbose
        self.errors: dict[str, str] = {}
        self.terminal = sys.stdout  # the stream --verbose copies to, as it is before any redirection
        self.steps: dict[str, dict[str, Any]] = {}  # what each step's printed line says, for the run's record

    def run_task(self, task: str, run_dir: Path, call: Callable[[], tuple[dict, Any]]) -> tuple[dict, Any]:
        path = run_dir / LOGS / f"{task}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        record = run_dir / LOGS / f"{task}.error.json"
        started = time.monotonic()
        os.environ[STEP_ERROR_ENV] = str(record)  # the step's subprocess inherits it
        try:
            with open(path, "w") as log, contextlib.redirect_stdout(_Tee(log, self.terminal) if self.verbose else log):
                outputs, state = call()
        finally:
            os.environ.pop(STEP_ERROR_ENV, None)
        seconds = time.monotonic() - started
        failed = getattr(state, "name", str(state)) == "FAILURE"
        if failed:
            self.errors[task] = step_error(record, path)
        figure = f"error: {self.errors[task]}" if failed else key_figure(task, outputs)
        self._report(task, "FAILED" if failed else "ok", seconds, figure)
        return outputs, state

    def cached(self, task: str, outputs: dict) -> None:
        """A step whose outputs were reused: its line, and a log saying from where."""
        self._report(task, "cached", None, key_figure(task, outputs))

    def skipped(self, task: str, why: str) -> None:
        self._report(task, "skipped", None, why)

    def _report(self, task: str, state: str, seconds: float | None, figure: str) -> None:
        self.steps[task] = {"state": state, "seconds": None if seconds is None else round(seconds, 3),
                            "figure": figure}
        self.echo(step_line(task, state, seconds, figure))

    def error(self, task: str) -> str:
        return self.errors.get(task, "")


def step_line(task: str, state: str, seconds: float | None, figure: str) -> str:
    """`example-gen      ok       12.3s  train 1617, eval 180 examples`."""
    took = f"{seconds:6.1f}s" if seconds is not None else " " * 7
    return f"{task:<15} {state:<8} {took}  {figure}".rstrip()


def step_error(record: Path, log: Path) -> str:
    """The failed step's own one-line error, from the record it left; else where to look."""
    found = read_step_error(record)
    if found is None:
        return f"the step failed before shardflow could report why; see {log}"
    if found.get("bug"):
        return f"unexpected error {found['message']} (its traceback: {log})"
    return found["message"]


def key_figure(task: str, outputs: dict) -> str:
    """The one figure a person looks for in the step's outputs ('' when it has none)."""
    step = BY_NAME.get(task)
    try:
        return step.figure(outputs) if step is not None else ""
    except (TypeError, ValueError, KeyError, OSError):  # a figure is a courtesy: never fail the run over it
        return ""

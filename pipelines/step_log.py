"""What `shardflow run` prints: one line per step, while each step's full log goes to a file.

The step worker writes each task's output (its file descriptors 1 and 2: Python, kfp's Executor,
TensorFlow's C++ lines) to RUN/logs/<task>.log; this prints the step's line from the structured
result it returned: ok or FAILED, seconds, and the step's key figure. A failed step's error is said
once, by the run's last line (and its record): RUN/logs/steps.json keeps it under "error".

    steps = StepLog(echo=print)
    steps.finished("train", 20.5, outcome)   # outcome: local_dag.TaskOutcome
    steps.steps["train"]["error"]             # the failing step's own one-line message
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from ..core.run_layout import LOGS
from .local_dag import output_record
from .steps import BY_NAME



class StepLog:
    """One printed line per step, the same in RUN/logs/steps.json; each failed step's own message."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.steps: dict[str, dict[str, Any]] = {}  # what each step's printed line says, for the run's record

    @staticmethod
    def log_path(run_dir: Path, task: str) -> Path:
        path = run_dir / LOGS / f"{task}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def finished(self, task: str, seconds: float, outcome: Any) -> None:
        """A step that ran: its line from its outcome (local_dag.TaskOutcome)."""
        # A failed step's error is said once, by the run's last line (and its record), not on the step's line.
        figure = "" if not outcome.succeeded else key_figure(task, outcome.outputs)
        self._report(task, "ok" if outcome.succeeded else "FAILED", seconds, figure)
        if not outcome.succeeded:
            self.steps[task]["error"] = outcome.error
        self._outputs(task, outcome.outputs)

    def cached(self, task: str, outputs: dict) -> None:
        """A step whose outputs were reused: its line, and a log saying from where."""
        self._report(task, "cached", None, key_figure(task, outputs))
        self._outputs(task, outputs)

    def resumed(self, task: str, source: str) -> None:
        """A step about to run from a killed attempt's backups (local_cache.carry_backups): said before it runs."""
        self.echo(f"{task}: resuming the killed attempt's backups from {source}")

    def skipped(self, task: str, why: str) -> None:
        self._report(task, "skipped", None, why)

    def _outputs(self, task: str, outputs: dict) -> None:
        """What the step produced (URIs and KFP metadata), for the run's record: what `shardflow track` sends."""
        self.steps[task]["outputs"] = {name: output_record(value) for name, value in outputs.items()}

    def _report(self, task: str, state: str, seconds: float | None, figure: str) -> None:
        """`started`: when the step began (epoch seconds), so a monitor's samples can be told apart by step."""
        self.steps[task] = {"state": state, "seconds": None if seconds is None else round(seconds, 3),
                            "figure": figure, "started": round(time.time() - (seconds or 0.0), 3)}
        self.echo(step_line(task, state, seconds, figure))


def step_line(task: str, state: str, seconds: float | None, figure: str) -> str:
    """`example-gen      ok       12.3s  train 1617, eval 180 examples`."""
    took = f"{seconds:6.1f}s" if seconds is not None else " " * 7
    return f"{task:<15} {state:<8} {took}  {figure}".rstrip()


def step_error(result: dict[str, Any], log: Path) -> str:
    """The failed step's own one-line error, from the result its worker returned; else where to look."""
    if not result.get("error"):
        return f"the step failed before shardflow could report why; see {log}"
    if result.get("bug"):
        return f"unexpected error {result['error']} (its traceback: {log})"
    return result["error"]


def key_figure(task: str, outputs: dict) -> str:
    """The one figure a person looks for in the step's outputs ('' when it has none)."""
    step = BY_NAME.get(task)
    try:
        return step.figure(outputs) if step is not None else ""
    except (TypeError, ValueError, KeyError, OSError):  # a figure is a courtesy: never fail the run over it
        return ""

"""What `shardflow run` prints: one line per step, while each step's full log goes to a file.

kfp.local prints everything a task does to `sys.stdout` (its executor input, the subprocess's
output through `print`, its own logging handler, made on `sys.stdout` for each task). Redirecting
`sys.stdout` around one task therefore captures all of it, without patching kfp: the log goes to
RUN/logs/<task>.log (and to the terminal too with `verbose`), and the reporter prints the line.

    steps = StepLog(echo=print, verbose=False)
    outputs, state = steps.run_task("train", Path("runs/x/pipeline_root/shardflow-..."), run_the_task)
    steps.error("train")   # the failing step's own message, read from the end of its log
"""
from __future__ import annotations

import contextlib
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

LOGS = "logs"
# The exception line closing a Python traceback: `pkg.module.StepFailed: shardflow train: error: ...`.
_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?(?P<kind>[A-Z]\w*(?:Error|Exception|Failed|Exit)): (?P<msg>.+)$")


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

    def run_task(self, task: str, run_dir: Path, call: Callable[[], tuple[dict, Any]]) -> tuple[dict, Any]:
        path = run_dir / LOGS / f"{task}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(path, "w") as log, contextlib.redirect_stdout(_Tee(log, self.terminal) if self.verbose else log):
            outputs, state = call()
        seconds = time.monotonic() - started
        failed = getattr(state, "name", str(state)) == "FAILURE"
        if failed:
            self.errors[task] = error_message(path.read_text())
        figure = f"error: {self.errors[task]}" if failed else key_figure(task, outputs)
        self.echo(step_line(task, "FAILED" if failed else "ok", seconds, figure))
        return outputs, state

    def skipped(self, task: str, why: str) -> None:
        self.echo(step_line(task, "skipped", None, why))

    def error(self, task: str) -> str:
        return self.errors.get(task, "")


def step_line(task: str, state: str, seconds: float | None, figure: str) -> str:
    """`example-gen      ok       12.3s  train 1617, eval 180 examples`."""
    took = f"{seconds:6.1f}s" if seconds is not None else " " * 7
    return f"{task:<15} {state:<8} {took}  {figure}".rstrip()


def error_message(log: str) -> str:
    """The step's own error: the exception line of its last traceback, else its last non-empty line."""
    lines = [line for line in log.splitlines() if line.strip()]
    start = max((i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line), default=-1)
    for line in reversed(lines[start + 1:] if start >= 0 else []):
        match = _EXCEPTION.match(line)
        if match:
            return match["msg"].strip() if match["kind"] in ("StepFailed", "RuntimeError") else \
                f"{match['kind']}: {match['msg'].strip()}"
    own = [line.strip() for line in lines if not re.match(r"^\d\d:\d\d:\d\d\.\d+ - |^-+$", line.strip())]
    return own[-1] if own else "(the step printed nothing)"


def _metadata(outputs: dict, name: str) -> dict:
    artifact = outputs.get(name)
    return dict(getattr(artifact, "metadata", None) or {})


def _counts(counts: dict) -> str:
    return ", ".join(f"{split} {int(n)}" for split, n in sorted(counts.items())) + " examples"


def _training(outputs: dict) -> str:
    metrics = _metadata(outputs, "training_metrics")
    shown = [f"{k} {metrics[k]:.3f}" for k in ("loss", "accuracy", "val_loss", "val_accuracy") if k in metrics]
    steps = _metadata(outputs, "model").get("optimizer_steps")
    return ", ".join(shown + ([f"{int(steps)} optimizer steps"] if steps is not None else []))


def _evaluation(outputs: dict) -> str:
    metrics = _metadata(outputs, "metrics")
    shown = [f"{k} {metrics[k]:.3f}" for k in ("accuracy", "pixel_accuracy", "mean_iou") if k in metrics]
    blessed = outputs.get("blessed", metrics.get("blessed"))
    return ", ".join(shown + ([f"blessed: {'yes' if blessed else 'no'}"] if blessed is not None else []))


def _anomalies(outputs: dict) -> str:
    import json

    path = Path(getattr(outputs.get("report"), "path", "") + ".d") / "anomalies.json"
    found = json.loads(path.read_text()).get("num_anomalies") if path.is_file() else None
    return "" if found is None else f"{found} anomalies"


_FIGURES: dict[str, Callable[[dict], str]] = {
    "fingerprint": lambda o: f"data {str(o.get('Output', ''))[:12]}",
    "example-gen": lambda o: _counts(_metadata(o, "examples").get("examples", {}))
    + f", {int(_metadata(o, 'examples').get('rejected', 0))} rejected",
    "validate": _anomalies,
    "transform": lambda o: _counts(_metadata(o, "transformed").get("examples", {})),
    "train": _training,
    "evaluate": _evaluation,
    "push": lambda o: f"served: {o.get('Output', '')}",
    "record-outcome": lambda o: f"record: {o.get('Output', '')}",
}


def key_figure(task: str, outputs: dict) -> str:
    """The one figure a person looks for in the step's outputs ('' when it has none)."""
    try:
        return _FIGURES.get(task, lambda _: "")(outputs)
    except (TypeError, ValueError, KeyError, OSError):  # a figure is a courtesy: never fail the run over it
        return ""

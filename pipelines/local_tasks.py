"""Each container task of a local run: reused from the cache, or handed to the step worker.

`LocalTasks.run` is local_dag.DagWalk's `run_task`. For a task it builds the ExecutorInput the
cluster's driver would (local_executor_io.py), substitutes it for `{{$}}` in the compiled command's
args, and sends command and args to the step worker (local_worker.py), which runs them as the
step's container does: a step whose row is `light` to the light worker when there is one, any other to
the worker with TensorFlow, with what the worker starts ahead for later steps (`standbys_started_by`).
The result comes back as data (exit code, one-line error); the outputs are
read from the executor_output.json kfp's Executor wrote. Cacheable tasks (the IR's caching option, and the
steps only the local cache can key, less `--no-cache`: StepCache.keyed) are looked up first and stored
after success (local_cache.py); while one runs, it is
recorded as an attempt, and a rerun of a killed one resumes from the backups it left.

    tasks = LocalTasks(run_dir, worker, StepLog(print), StepCache(out / "cache"), light=light_worker)
    DagWalk(spec, run_dir.name, tasks.run, tasks.steps.skipped).run(arguments)
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .local_cache import StepCache, link_outputs
from .local_dag import TaskOutcome
from .local_executor_io import executor_input, task_outputs
from .local_worker import StepWorker
from .step_log import StepLog, step_error
from .steps import BY_NAME, imports_ahead_of, standbys_started_by

_EXECUTOR_INPUT = "{{$}}"


class LocalTasks:
    """Runs the container tasks of one run directory (`run_dir`: PIPELINE_ROOT/shardflow-<time>)."""

    def __init__(self, run_dir: Path, worker: StepWorker, steps: StepLog, cache: StepCache | None,
                 light: StepWorker | None = None) -> None:
        self.run_dir, self.worker, self.steps, self.cache, self.light = run_dir, worker, steps, cache, light
        self.ran: list[str] = []  # the tasks run so far, not taken from the cache (what later standbys depend on)

    def run(self, task: str, spec: dict[str, Any], component: dict[str, Any], executor: dict[str, Any],
            arguments: dict[str, Any]) -> TaskOutcome:
        key = None
        if self.cache is not None and self.cache.keyed(task, spec):
            key = self.cache.key(task, component, executor, arguments)
            outputs = self.cache.lookup(task, key)
            if outputs is not None:
                link_outputs(outputs, self.run_dir / task)
                self.steps.cached(task, outputs)
                return TaskOutcome(outputs, True)
        payload = executor_input(component, arguments, str(self.run_dir / task))
        if key is not None:  # a rerun of a killed attempt with the same key resumes from its backups
            produced = {name: a["artifacts"][0]["uri"] for name, a in payload["outputs"]["artifacts"].items()}
            resumed = self.cache.start_attempt(task, key, produced)  # type: ignore[union-attr]
            if resumed is not None:
                self.steps.resumed(task, resumed)
        outcome = self._execute(task, component, executor, payload, arguments)
        if key is not None and outcome.succeeded:
            self.cache.store(task, key, outcome.outputs, self.run_dir / task)  # type: ignore[union-attr]
            self.cache.end_attempt(task, key)  # type: ignore[union-attr]
        return outcome

    def _execute(self, task: str, component: dict, executor: dict, payload: dict, arguments: dict) -> TaskOutcome:
        container = executor["container"]
        args = [json.dumps(payload) if arg == _EXECUTOR_INPUT else arg for arg in container.get("args", [])]
        if any("{{$" in arg for arg in args):
            raise NotImplementedError(f"local run: task {task} has placeholders other than {_EXECUTOR_INPUT}: {args}")
        log = self.steps.log_path(self.run_dir, task)
        started = time.monotonic()
        step = BY_NAME.get(task)
        light = self.light is not None and step is not None and step.runs_light(arguments)
        ahead, standby = imports_ahead_of(task), standbys_started_by(task, self.ran)  # for later steps, meanwhile
        self.ran.append(task)
        request = {"task": task, "command": container["command"], "args": args, "log": str(log),
                   "imports": list(step.imports) if step and not light else [], "standby": standby, "ahead": ahead}
        if light:  # the worker with TensorFlow is idle meanwhile: it prepares the later steps now
            self.worker.prepare(ahead, standby)
            request.update(ahead=[], standby=[])
        result = (self.light if light else self.worker).run(request)  # type: ignore[union-attr]
        succeeded = result["exit_code"] == 0
        outcome = TaskOutcome(task_outputs(component, payload) if succeeded else {}, succeeded,
                              "" if succeeded else step_error(result, log), result["exit_code"])
        self.steps.finished(task, time.monotonic() - started, outcome)
        return outcome

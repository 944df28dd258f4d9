"""The compiled pipeline (KFP v2 IR, as `shardflow compile` writes it) walked on this machine.

This is the part of a KFP backend that decides what runs: the DAG in dependency order, each task's
inputs resolved from its parent DAG and its producers, `dsl.If` conditions, and the exit handler.
It reads the IR as a dict and never imports kfp: how a container task runs is the caller's
`run_task` (local_run.py hands it to a step worker).

- A task with a `triggerPolicy.condition` runs only when the condition holds. Conditions are what
  `dsl.If` compiles to: `inputs.parameter_values['NAME'] <op> LITERAL` with `==`, `!=`, joined by
  `&&`; anything else raises NotImplementedError naming the expression.
- After a failure, the failed DAG runs none of its remaining tasks; a task whose strategy is
  ALL_UPSTREAM_TASKS_COMPLETED (the exit task) still runs, with a `PipelineTaskFinalStatus` input
  saying FAILED, which task failed and its one-line error.
- Loops (`dsl.ParallelFor`), `dsl.OneOf` and DAG outputs raise NotImplementedError: the pipeline
  has none.

    walk = DagWalk(spec, "shardflow-2026-11-26-12-00-00-000000", run_task=my_runner, skipped=lambda task, why: None)
    succeeded = walk.run({"index": [...], "data_root": "/data", ...})
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

_CLAUSE = re.compile(r"^inputs\.parameter_values\['(?P<name>[^']+)'\]\s*(?P<op>==|!=)\s*(?P<literal>.+)$")
_PLACEHOLDER = re.compile(r"\{\{\$\.inputs\.parameters\['(?P<name>[^']+)'\]\}\}")
ALL_COMPLETED = "ALL_UPSTREAM_TASKS_COMPLETED"


@dataclass
class Artifact:
    """An artifact between tasks: what the IR's RuntimeArtifact carries. On a local pipeline root its URI
    is a path, as kfp's Executor reads it (`.path`)."""

    name: str
    uri: str
    schema_title: str
    schema_version: str = "0.0.1"
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return self.uri

    def runtime(self) -> dict[str, Any]:
        """As ExecutorInput's RuntimeArtifact (JSON)."""
        return {"name": self.name, "uri": self.uri, "metadata": self.metadata,
                "type": {"schemaTitle": self.schema_title, "schemaVersion": self.schema_version}}


def output_record(value: Any) -> dict[str, Any]:
    """A task's output (an Artifact or a parameter's value) as JSON: the cache's entries, RUN/logs/steps.json."""
    if hasattr(value, "uri") and hasattr(value, "schema_title"):
        return {"schema_title": value.schema_title, "uri": value.uri, "name": value.name,
                "metadata": dict(value.metadata or {})}
    return {"value": value}


def output_from_record(saved: dict[str, Any]) -> Any:
    if "uri" not in saved:
        return saved["value"]
    return Artifact(name=saved["name"], uri=saved["uri"], schema_title=saved["schema_title"],
                    metadata=saved["metadata"])


@dataclass(frozen=True)
class TaskOutcome:
    """What running one container task gave: its outputs (parameters and Artifacts) and its one-line error."""

    outputs: dict[str, Any]
    succeeded: bool
    error: str = ""
    exit_code: int = 0  # the step's exit status (75: worth a retry, as a push that lost the race)


# (task name, its task spec, its component spec, its executor spec, its resolved arguments) -> the outcome
RunTask = Callable[[str, dict, dict, dict, dict], TaskOutcome]


def condition_holds(expression: str, arguments: dict[str, Any]) -> bool:
    """Evaluates a compiled `dsl.If` condition against the condition task's input parameters.

    >>> condition_holds("inputs.parameter_values['pipelinechannel--x'] == true", {"pipelinechannel--x": True})
    True
    >>> condition_holds("(inputs.parameter_values['a'] != '') && (inputs.parameter_values['b'] == 2)", {"a": "", "b": 2})
    False
    """
    result = True
    for clause in expression.split("&&"):
        text = clause.strip().strip("()").strip()
        match = _CLAUSE.match(text)
        if match is None:
            raise NotImplementedError(f"local run: condition {expression!r} is not of the form "
                                      "inputs.parameter_values['x'] ==/!= literal")
        literal = match["literal"].strip()
        expected = literal[1:-1] if literal[:1] in ("'", '"') else json.loads(literal)
        actual = arguments[match["name"]]
        result &= (actual == expected) if match["op"] == "==" else (actual != expected)
    return result


def task_order(tasks: dict[str, dict]) -> list[str]:
    """The tasks in dependency order; among ready ones, container tasks before sub-DAGs, then by name.

    >>> task_order({"b": {"dependentTasks": ["a"]}, "a": {}, "c": {}})
    ['a', 'c', 'b']
    """
    done: list[str] = []
    waiting = dict(tasks)
    while waiting:
        ready = sorted((name for name, task in waiting.items()
                        if all(up in done for up in task.get("dependentTasks", []))),
                       key=lambda name: (name.startswith(("condition-", "exit-handler-")), name))
        if not ready:
            raise ValueError(f"local run: the tasks {sorted(waiting)} depend on each other")
        done.append(ready[0])
        del waiting[ready[0]]
    return done


class DagWalk:
    """One run of a compiled pipeline: `run_task` executes each container task; `skipped` hears of false conditions."""

    def __init__(self, spec: dict[str, Any], run_name: str, run_task: RunTask,
                 skipped: Callable[[str, str], None]) -> None:
        self.spec, self.run_name, self.run_task, self.skipped = spec, run_name, run_task, skipped
        self.failed_task: str | None = None  # the innermost, first failed task
        self.failed_error = ""
        self.failed_exit_code = 1

    def run(self, arguments: dict[str, Any]) -> bool:
        """Runs the root DAG with the pipeline's arguments; whether every task that ran succeeded."""
        root = self.spec["root"]
        return self._dag(root, _with_defaults(root, arguments))

    def _dag(self, component: dict[str, Any], inputs: dict[str, Any]) -> bool:
        dag = component["dag"]
        if dag.get("outputs"):
            raise NotImplementedError("local run: DAG outputs are not supported")
        produced: dict[str, dict[str, Any]] = {}
        failed = False
        for name in task_order(dag["tasks"]):
            task = dag["tasks"][name]
            if failed and task.get("triggerPolicy", {}).get("strategy") != ALL_COMPLETED:
                continue
            if "iterator" in task or "parameterIterator" in task or "artifactIterator" in task:
                raise NotImplementedError("local run: dsl.ParallelFor is not supported")
            arguments = self._arguments(task, inputs, produced)
            condition = task.get("triggerPolicy", {}).get("condition")
            if condition and not condition_holds(condition, arguments):
                self.skipped(name, "its condition is false")
                continue
            child = self.spec["components"][task["componentRef"]["name"]]
            if "dag" in child:
                succeeded = self._dag(child, _with_defaults(child, arguments))
            else:
                succeeded = self._container(name, task, child, arguments, produced)
            failed = failed or not succeeded
        return not failed

    def _container(self, name: str, task: dict, component: dict, arguments: dict, produced: dict) -> bool:
        executor = self.spec["deploymentSpec"]["executors"][component["executorLabel"]]
        outcome = self.run_task(name, task, component, executor, _with_defaults(component, arguments))
        if not outcome.succeeded:
            if self.failed_task is None:
                self.failed_task, self.failed_error = name, outcome.error
                self.failed_exit_code = outcome.exit_code or 1
            return False
        produced[name] = outcome.outputs
        return True

    def _arguments(self, task: dict, inputs: dict[str, Any], produced: dict[str, dict]) -> dict[str, Any]:
        """The task's inputs: from its parent DAG's inputs, its producers' outputs, constants, or the run's status."""
        spec = task.get("inputs", {})
        arguments: dict[str, Any] = {}
        for name, source in {**spec.get("parameters", {}), **spec.get("artifacts", {})}.items():
            if "componentInputParameter" in source or "componentInputArtifact" in source:
                parent = source.get("componentInputParameter") or source["componentInputArtifact"]
                if parent in inputs:
                    arguments[name] = inputs[parent]
            elif "taskOutputParameter" in source or "taskOutputArtifact" in source:
                output = source.get("taskOutputParameter") or source["taskOutputArtifact"]
                key = output.get("outputParameterKey") or output.get("outputArtifactKey")
                arguments[name] = produced[output["producerTask"]][key]
            elif "taskFinalStatus" in source:
                arguments[name] = self._final_status()
            elif "runtimeValue" in source:
                arguments[name] = source["runtimeValue"]["constant"]
            else:
                raise NotImplementedError(f"local run: input {name} of the form {sorted(source)} is not supported")
        # Constants may name the task's other inputs ("{{$.inputs...}}"), also inside a list or a struct
        # (a step's exposed flags: {"NAME": "{{$.inputs.parameters['pipelinechannel--NAME']}}"}).
        return {name: _substituted(value, arguments) for name, value in arguments.items()}

    def _final_status(self) -> dict[str, Any]:
        """A `PipelineTaskFinalStatus` as the driver hands it to an exit task: the outcome so far."""
        failed = self.failed_task
        message = f"task {failed} failed: {self.failed_error}" if failed and self.failed_error else f"task {failed} failed"
        return {"state": "FAILED" if failed else "SUCCEEDED", "pipelineJobResourceName": self.run_name,
                "pipelineTaskName": failed or "", "error": {"code": 1, "message": message} if failed else {}}


def _substituted(value: Any, arguments: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        return {key: _substituted(item, arguments) for key, item in value.items()}
    if isinstance(value, list):
        return [_substituted(item, arguments) for item in value]
    if not isinstance(value, str) or not _PLACEHOLDER.search(value):
        return value
    whole = _PLACEHOLDER.fullmatch(value)
    if whole:  # the whole constant is one input: keep its type
        return arguments[whole["name"]]
    return _PLACEHOLDER.sub(lambda m: str(arguments[m["name"]]), value)


def _with_defaults(component: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` plus the component's declared defaults for parameters not given."""
    declared = component.get("inputDefinitions", {}).get("parameters", {})
    defaults = {name: spec["defaultValue"] for name, spec in declared.items()
                if name not in arguments and "defaultValue" in spec}
    return {**defaults, **arguments}


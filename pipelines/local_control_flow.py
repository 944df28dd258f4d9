"""`dsl.If` and `dsl.ExitHandler` for kfp.local, so the cluster's pipeline runs unchanged on one machine.

kfp 2.13's local DAG orchestrator refuses any task with a trigger condition and any exit handler
(`NotImplementedError`). shardflow's pipeline needs both: Push runs under `dsl.If(blessed == True)`
and an exit handler records every run's outcome. `enable()` replaces kfp.local's `run_dag` with
this one, which is the same loop plus:

- a task with a condition is run only when the condition holds. Conditions are what `dsl.If`
  compiles to: `inputs.parameter_values['NAME'] <op> LITERAL` with `==`, `!=`, joined by `&&`
  (nested `dsl.If`); anything else raises NotImplementedError naming the expression;
- after a failure, tasks whose trigger strategy is ALL_UPSTREAM_TASKS_COMPLETED (the exit task)
  still run, with a `PipelineTaskFinalStatus` input saying FAILED and which task failed; the DAG
  then reports the failure as before;
- with a `StepLog`, each task's output goes to its log file in the run directory, one line per
  step is printed, and the exit task's status carries the failed step's own error message.

Loops (`dsl.ParallelFor`) and `dsl.OneOf` stay unsupported. Pinned to kfp 2.13 (the lock).

    from shardflow.pipelines import local_control_flow
    local_control_flow.enable(StepLog(echo=print))  # or enable() for kfp.local's own output
    kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root="runs/root")
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kfp.local import dag_orchestrator, importer_handler, io, status, task_dispatcher
from kfp.pipeline_spec import pipeline_spec_pb2

from .local_cache import StepCache, link_outputs
from .step_log import StepLog

_CLAUSE = re.compile(r"^inputs\.parameter_values\['(?P<name>[^']+)'\]\s*(?P<op>==|!=)\s*(?P<literal>.+)$")
_ALL_COMPLETED = pipeline_spec_pb2.PipelineTaskSpec.TriggerPolicy.TriggerStrategy.ALL_UPSTREAM_TASKS_COMPLETED


# kfp.local calls run_dag itself: the run's StepLog and StepCache cannot be arguments.
_steps: StepLog | None = None
_cache: StepCache | None = None


def enable(steps: StepLog | None = None, cache: StepCache | None = None) -> None:
    """Installs the extended orchestrator (idempotent); `steps`: log files and one line per step;
    `cache`: reuse the outputs of cacheable steps whose inputs are unchanged (local_cache.py)."""
    global _steps, _cache
    _steps, _cache = steps, cache
    dag_orchestrator.run_dag = run_dag


def condition_holds(expression: str, arguments: dict[str, Any]) -> bool:
    """Evaluates a compiled `dsl.If` condition against the condition task's input parameters."""
    result = True
    for clause in expression.split("&&"):
        text = clause.strip().strip("()").strip()
        match = _CLAUSE.match(text)
        if match is None:
            raise NotImplementedError(f"local run: condition {expression!r} is not of the form "
                                      "inputs.parameter_values['x'] ==/!= literal")
        actual = arguments[match["name"]]
        expected = _literal(match["literal"].strip())
        result &= (actual == expected) if match["op"] == "==" else (actual != expected)
    return result


def _literal(text: str) -> Any:
    if text[:1] in ("'", '"'):
        return text[1:-1]
    return json.loads(text)


def run_dag(pipeline_resource_name: str, dag_component_spec: pipeline_spec_pb2.ComponentSpec,
            executors: dict, components: dict, dag_arguments: dict[str, Any], pipeline_root: str,
            runner: Any, unique_pipeline_id: str, fail_stack: list[str]) -> tuple[dict, status.Status]:
    """kfp.local's `run_dag` with conditions and exit handlers (same arguments and results)."""
    context = dict(pipeline_resource_name=pipeline_resource_name, executors=executors, components=components,
                   pipeline_root=pipeline_root, runner=runner, unique_pipeline_id=unique_pipeline_id,
                   fail_stack=fail_stack)
    io_store = io.IOStore()
    for key, value in dag_orchestrator.join_user_inputs_and_defaults(
            dag_arguments, dag_component_spec.input_definitions).items():
        io_store.put_parent_input(key, value)
    dag_spec = dag_component_spec.dag
    failed_task: str | None = None
    for task_name in reversed(dag_orchestrator.graph_utils.topological_sort_tasks(dag_spec.tasks)):
        task_spec = dag_spec.tasks[task_name]
        runs_after_failure = task_spec.trigger_policy.strategy == _ALL_COMPLETED
        if failed_task is not None and not runs_after_failure:
            continue
        if task_spec.WhichOneof("iterator"):
            raise NotImplementedError("'dsl.ParallelFor' is not supported by local pipeline execution.")
        arguments = _arguments(task_spec, io_store, pipeline_resource_name, fail_stack[0] if failed_task else None)
        condition = task_spec.trigger_policy.condition
        if condition and not condition_holds(condition, arguments):
            if _steps is not None:
                _steps.skipped(task_name, "its condition is false")
            continue
        outputs, task_status = _run_task(task_name, task_spec, arguments, context)
        if task_status == status.Status.FAILURE:
            if failed_task is None:
                fail_stack.append(task_name)
            failed_task = failed_task or task_name
            continue
        for key, output in outputs.items():
            io_store.put_task_output(task_name, key, output)
    if failed_task is not None:
        return {}, status.Status.FAILURE
    return dag_orchestrator.get_dag_outputs(dag_spec.outputs, io_store), status.Status.SUCCESS


def _arguments(task_spec: pipeline_spec_pb2.PipelineTaskSpec, io_store: io.IOStore, pipeline_name: str,
               failed_task: str | None) -> dict[str, Any]:
    """The task's inputs; a `PipelineTaskFinalStatus` input gets the outcome so far (the innermost failed task)."""
    inputs = pipeline_spec_pb2.TaskInputsSpec()
    inputs.CopyFrom(task_spec.inputs)
    final_status = [name for name, spec in inputs.parameters.items() if spec.HasField("task_final_status")]
    for name in final_status:
        del inputs.parameters[name]
    arguments = dag_orchestrator.make_task_arguments(inputs, io_store)
    for name in final_status:
        arguments[name] = {
            "state": "FAILED" if failed_task else "SUCCEEDED",
            "pipelineJobResourceName": pipeline_name,
            "pipelineTaskName": failed_task or "",
            "error": {"code": 1, "message": _failure_message(failed_task)} if failed_task else {},
        }
    return arguments


def _failure_message(task: str) -> str:
    own = _steps.error(task) if _steps is not None else ""
    return f"task {task} failed: {own}" if own else f"task {task} failed"


def _run_task(task_name: str, task_spec: pipeline_spec_pb2.PipelineTaskSpec, arguments: dict[str, Any],
              context: dict[str, Any]) -> tuple[dict, status.Status]:
    component_spec = context["components"][task_spec.component_ref.name]
    if component_spec.WhichOneof("implementation") == "dag":
        return run_dag(dag_component_spec=component_spec, dag_arguments=arguments, **context)
    executor_spec = context["executors"][component_spec.executor_label]
    common = dict(pipeline_resource_name=context["pipeline_resource_name"],
                  component_name=task_spec.component_ref.name, component_spec=component_spec,
                  executor_spec=executor_spec, arguments=arguments, pipeline_root=context["pipeline_root"],
                  unique_pipeline_id=context["unique_pipeline_id"])
    if executor_spec.WhichOneof("spec") == "importer":
        return importer_handler.run_importer(**common)
    def run() -> tuple[dict, status.Status]:
        return task_dispatcher.run_single_task_implementation(runner=context["runner"], raise_on_error=False,
                                                              block_input_artifact=False, **common)
    run_dir = Path(context["pipeline_root"]) / context["pipeline_resource_name"]
    if _cache is not None and task_spec.caching_options.enable_cache and _cache.enabled_for(task_name):
        return _cached_run(task_name, run_dir, _cache.key(task_name, component_spec, executor_spec, arguments), run)
    if _steps is None:
        return run()
    return _steps.run_task(task_name, run_dir, run)


def _cached_run(task_name: str, run_dir: Path, key: str, run: Any) -> tuple[dict, status.Status]:
    """The outputs of an earlier run with the same key, else the task run (and its outputs recorded)."""
    assert _cache is not None
    outputs = _cache.lookup(task_name, key)
    if outputs is not None:
        link_outputs(outputs, run_dir / task_name)
        if _steps is not None:
            _steps.cached(task_name, outputs)
        return outputs, status.Status.SUCCESS
    outputs, task_status = _steps.run_task(task_name, run_dir, run) if _steps is not None else run()
    if task_status == status.Status.SUCCESS:
        _cache.store(task_name, key, outputs, run_dir / task_name)
    return outputs, task_status

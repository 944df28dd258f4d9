"""A task's ExecutorInput and ExecutorOutput on a local pipeline root: the IR's contract with a container.

A KFP backend hands each container the ExecutorInput JSON (`{{$}}` in its args): input parameter
values, input artifacts, and where to put each output. The component's code (kfp's Executor) writes
`executor_output.json` with its returned parameters and its artifacts' final URIs and metadata.
This builds the first and reads the second, with kfp.local's layout:
`PIPELINE_ROOT/RUN/TASK/OUTPUT_NAME` for each output, `PIPELINE_ROOT/RUN/TASK/executor_output.json`.

    payload = executor_input(component, {"index": [...], "data_root": "/data"}, "root/shardflow-.../fingerprint")
    outputs = task_outputs(component, payload)   # {"Output": "3f1c..."} after the task ran
"""
from __future__ import annotations

import json
import os
from typing import Any

from .local_dag import Artifact

EXECUTOR_OUTPUT = "executor_output.json"
_NUMBERS = {"NUMBER_INTEGER": int, "NUMBER_DOUBLE": float}


def executor_input(component: dict[str, Any], arguments: dict[str, Any], task_root: str) -> dict[str, Any]:
    """The ExecutorInput (JSON) of a task of `component` with its resolved `arguments`, writing under `task_root`."""
    declared = component.get("inputDefinitions", {})
    artifact_names = set(declared.get("artifacts", {}))
    parameters = {name: value for name, value in arguments.items() if name not in artifact_names}
    artifacts = {name: {"artifacts": [arguments[name].runtime()]} for name in artifact_names if name in arguments}
    produced = component.get("outputDefinitions", {})
    return {
        "inputs": {"parameterValues": parameters, "artifacts": artifacts},
        "outputs": {
            "parameters": {name: {"outputFile": os.path.join(task_root, name)} for name in produced.get("parameters", {})},
            "artifacts": {name: {"artifacts": [_new_artifact(name, spec, task_root).runtime()]}
                          for name, spec in produced.get("artifacts", {}).items()},
            "outputFile": os.path.join(task_root, EXECUTOR_OUTPUT),
        },
    }


def _new_artifact(name: str, spec: dict[str, Any], task_root: str) -> Artifact:
    kind = spec["artifactType"]
    return Artifact(name=name, uri=os.path.join(task_root, name), schema_title=kind["schemaTitle"],
                    schema_version=kind.get("schemaVersion", "0.0.1"))


def task_outputs(component: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """The outputs of a finished task: returned parameters (typed as declared) and artifacts with their final
    URIs and metadata, from its executor_output.json and its parameter output files."""
    path = payload["outputs"]["outputFile"]
    written = json.load(open(path)) if os.path.isfile(path) else {}
    produced = component.get("outputDefinitions", {})
    outputs: dict[str, Any] = {}
    for name, spec in produced.get("parameters", {}).items():
        value = written.get("parameterValues", {}).get(name)
        file = payload["outputs"]["parameters"][name]["outputFile"]
        if value is None and os.path.isfile(file):  # an OutputPath parameter: the file holds it
            value = open(file).read()
        cast = _NUMBERS.get(spec.get("parameterType", ""))
        outputs[name] = cast(value) if cast and value is not None else value
    for name, spec in produced.get("artifacts", {}).items():
        declared = payload["outputs"]["artifacts"][name]["artifacts"][0]
        final = (written.get("artifacts", {}).get(name, {}).get("artifacts") or [declared])[0]
        outputs[name] = Artifact(name=name, uri=final.get("uri", declared["uri"]),
                                 schema_title=spec["artifactType"]["schemaTitle"],
                                 schema_version=spec["artifactType"].get("schemaVersion", "0.0.1"),
                                 metadata=dict(final.get("metadata") or {}))
    return outputs

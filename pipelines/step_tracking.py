"""A step on a Kubeflow cluster that records runs in MLflow logs itself into its task's run.

KFP's MLflow integration (kubeflow/pipelines#13441) gives each task container MLFLOW_TRACKING_URI and
MLFLOW_RUN_ID, a nested run of the pipeline run's. With both set, the step's process, when it ends (after
KFP's executor wrote its outputs), logs into that run what `shardflow track` logs for the step locally
(components/tracking: params, metrics, tags, small files). KFP makes and ends the run; a failure to log
is one line in the step's log and never fails the step.

    with reported_step():   # step_errors.py calls log_into_task_run(last_error) first
        step_bodies.train(...)
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

RUN_ID, TRACKING_URI = "MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI"


def log_into_task_run(last_error: Callable[[], dict[str, Any] | None]) -> None:
    """With MLFLOW_RUN_ID and MLFLOW_TRACKING_URI set, logs this step into that run when the process ends;
    `last_error()`: the step's recorded error, if it failed."""
    if os.environ.get(RUN_ID) and os.environ.get(TRACKING_URI):
        atexit.register(_log_step, time.time(), last_error)  # before the exit guard's handler, registered earlier


def _log_step(started: float, last_error: Callable[[], dict[str, Any] | None]) -> None:
    try:
        from ..tracking.mlflow_sink import MlflowSink
        from ..tracking.records import read_executor_output, step_run

        argv = sys.argv
        payload = json.loads(argv[argv.index("--executor_input") + 1])
        task = argv[argv.index("--function_to_execute") + 1].replace("_", "-")  # the function is named like its step
        outputs = read_executor_output(Path(payload["outputs"]["outputFile"]))
        error = last_error()
        entry = {"state": "FAILED" if error else "ok", "started": started, "seconds": time.time() - started,
                 "error": (error or {}).get("message")}
        job = os.environ.get("KFP_RUN_ID") or os.environ.get("KFP_POD_NAME") or "kfp"
        record = step_run(job, task, entry, {task: outputs}, {})
        MlflowSink(os.environ[TRACKING_URI]).log_into(os.environ[RUN_ID], record)
    except Exception as error:  # noqa: BLE001 (a step's outcome never depends on its tracking)
        print(f"tracking: the step was not logged into MLflow run {os.environ.get(RUN_ID)}: "
              f"{type(error).__name__}: {error}".splitlines()[0], file=sys.stderr, flush=True)

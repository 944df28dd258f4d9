"""`shardflow submit --wait`: a KFP run followed to its end, its outcome as shardflow's exit status.

    wait_for_run(client, run_id, timeout=3600)   # 'SUCCEEDED'; RetryableError (75) when its push failed

How a lost push shows in a cluster run: the push step exits 75 (pusher/executor.py: the served model is no
longer the baseline the Evaluator gated against), so its task FAILED and the run FAILED; the step has no output
(its body raised). KFP's API does not carry a step's exit code (its launcher reports the failure), but the
pipeline runs push only after the Evaluator and infra validation blessed the model (pipeline.py's conditions),
so a failed push task is a lost race or a store that failed mid-push (exit 1): both are worth submitting again,
and a new run evaluates its model against the version served now. Any other failed task is exit 1.
"""
from __future__ import annotations

import time
from typing import Any

from ..core.errors import RetryableError, ShardflowError

PUSH_TASK = "push"
FINISHED = {"SUCCEEDED", "FAILED", "SKIPPED", "CANCELED", "ERROR"}
POLL_SECONDS = 10.0


def wait_for_run(client: Any, run_id: str, timeout: float, poll: float | None = None) -> str:
    """The run's final state once it ends: 'SUCCEEDED'; RetryableError when its push task failed, ShardflowError
    for any other end or when `timeout` seconds pass first. The run is read every `poll` seconds."""
    poll = POLL_SECONDS if poll is None else poll
    deadline = time.monotonic() + timeout
    while True:
        run = client.get_run(run_id)
        state = str(run.state or "").upper()
        if state in FINISHED:
            return outcome(run_id, state, failed_tasks(run))
        if time.monotonic() + poll > deadline:
            raise ShardflowError(f"run {run_id} did not finish within {timeout:g} s (state {state or 'unknown'}); "
                                 "it goes on in KFP")
        time.sleep(poll)


def failed_tasks(run: Any) -> list[str]:
    """The display names of the run's failed tasks, in the API's order."""
    details = getattr(run, "run_details", None)
    tasks = getattr(details, "task_details", None) or []
    return [task.display_name for task in tasks if str(task.state or "").upper() == "FAILED" and task.display_name]


def outcome(run_id: str, state: str, failed: list[str]) -> str:
    """`state` when it is SUCCEEDED; else the error its failed tasks call for.

    >>> try:
    ...     outcome("r1", "FAILED", ["push", "shardflow-run"])
    ... except RetryableError as lost:
    ...     print(lost.exit_code, str(lost).split(" (")[0])
    75 run r1 FAILED at its push step: another run pushed first
    """
    if state == "SUCCEEDED":
        return state
    if PUSH_TASK in failed:
        raise RetryableError(f"run {run_id} FAILED at its push step: another run pushed first (or the store failed "
                             "mid-push); submit again to evaluate against the served model")
    steps = ", ".join(name for name in failed if name != "shardflow-run") or "no step named"
    raise ShardflowError(f"run {run_id} ended {state} (failed: {steps})")

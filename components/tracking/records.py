"""A finished pipeline run's files as MLflow holds runs: one parent run, one nested run per step that ran.

The files stay the record; this module only reads them (no MLflow here):
- RUN/logs/steps.json: each step's state (ok, cached, FAILED, skipped), start, seconds, and its outputs
  (URIs and KFP metadata; a run from before outputs were recorded: RUN/<step>/executor_output.json);
- each step's output files: its component record's `options` (params), numbers (step_figures.py), the
  small files a person opens (artifacts);
- the exit handler's record (runs/run-*.json: the run's outcome), RUN/pipeline.yaml (which output feeds
  which step: lineage tags).

    records = read_run(Path("runs/digits/pipeline_root/shardflow-2026-11-28-12-18-29-810638"))
    records.parent.key, [step.name for step in records.steps]   # 'shardflow-...', ['example-gen', ...]
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.run_layout import JOB_NAME, LOGS, STEPS_RECORD
from ..core.source_state import SOURCE_RECORD
from .headline import DataInput, data_inputs, headline_metrics, headline_params, headline_tags
from .step_figures import component_records, step_artifacts, step_metrics, step_params, step_tags

KEY_TAG = "shardflow.key"  # the idempotency key: the job's name, or job/step
JOB_TAG = "shardflow.job"
# MLflow's limits (mlflow/utils/validation.py): a param's value is cut at 6000 characters.
MAX_PARAM_LENGTH = 6000
_STATUS = {"ok": "FINISHED", "cached": "FINISHED", "FAILED": "FAILED", "SUCCEEDED": "FINISHED"}


@dataclass(frozen=True)
class Metric:
    key: str
    value: float
    step: int = 0


@dataclass(frozen=True)
class TrackedRun:
    """One MLflow run as the files say it: `key` finds it again on the server (KEY_TAG)."""

    key: str
    name: str
    status: str  # FINISHED, FAILED
    start_ms: int
    end_ms: int
    params: dict[str, str] = field(default_factory=dict)
    metrics: tuple[Metric, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: tuple[str, ...] = ()  # local files, uploaded as they are
    datasets: tuple[DataInput, ...] = ()  # MLflow dataset inputs (the parent's: the data it read)


@dataclass(frozen=True)
class RunRecords:
    parent: TrackedRun
    steps: tuple[TrackedRun, ...]


def read_run(run_dir: Path, outcome: dict[str, Any] | None = None) -> RunRecords:
    """The run `run_dir` (PIPELINE_ROOT/shardflow-<time>) as a parent and nested runs. FileNotFoundError when it
    has no steps.json (a run killed before its end, or not a run directory)."""
    steps = json.loads((run_dir / LOGS / STEPS_RECORD).read_text())
    job = run_dir.name
    producers = _producers(run_dir / "pipeline.yaml")
    outputs = {task: _outputs(run_dir, task, entry) for task, entry in steps.items()}
    nested = tuple(step_run(job, task, entry, outputs, producers.get(task, {}))
                   for task, entry in sorted(steps.items(), key=lambda item: item[1].get("started") or 0)
                   if entry.get("state") in ("ok", "cached", "FAILED"))
    starts = [run.start_ms for run in nested] or [0]
    ends = [run.end_ms for run in nested] or [0]
    state = (outcome or {}).get("state") or ("FAILED" if any(s.status == "FAILED" for s in nested) else "SUCCEEDED")
    tags = {KEY_TAG: job, JOB_TAG: job, "shardflow.outcome": state, "shardflow.run_dir": str(run_dir)}
    fingerprint = (outputs.get("fingerprint") or {}).get("Output")
    if isinstance(fingerprint, str):
        tags["shardflow.data_fingerprint"] = fingerprint
    if (outcome or {}).get("failed_task"):
        tags["shardflow.failed_step"] = outcome["failed_task"]  # type: ignore[index]
    tags.update(source_tags(run_dir))
    tags.update(headline_tags(outputs))
    parent = TrackedRun(key=job, name=job, status=_STATUS.get(state, "FAILED"), start_ms=min(starts),
                        end_ms=max(ends), tags=tags, params=headline_params(nested),
                        metrics=tuple(Metric(key, value) for key, value in headline_metrics(nested, outputs)
                                      if math.isfinite(value)),
                        datasets=data_inputs(outputs, tags.get("shardflow.data_fingerprint")))
    return RunRecords(parent, nested)


def source_tags(run_dir: Path) -> dict[str, str]:
    """The commit the run was made with, as the run recorded it when it started (core/source_state.py): not
    the sender's checkout, which may be newer. None recorded (an image, a run older than the record): no tag."""
    recorded = run_dir / LOGS / SOURCE_RECORD
    state = json.loads(recorded.read_text()) if recorded.is_file() else {}
    tags = {}
    if state.get("commit"):
        tags["mlflow.source.git.commit"] = str(state["commit"])  # MLflow's own tag: the UI shows it with the run
    if "dirty" in state:
        tags["shardflow.source.dirty"] = str(bool(state["dirty"])).lower()  # uncommitted changes when it ran
    return tags


def pushing_runs(run_dirs: list[Path]) -> dict[str, dict[str, str]]:
    """{served version's URI: {"job", "evaluation"}}: the run whose Push step served it (the first, when a rerun
    of the same model named it again) and the evaluation that blessed it there. A cached Trainer's model was
    trained in an earlier run; its blessing and push are this run's."""
    found: dict[str, dict[str, str]] = {}
    for run_dir in run_dirs:
        steps = json.loads((run_dir / LOGS / STEPS_RECORD).read_text())
        push = steps.get("push") or {}
        if push.get("state") != "ok":
            continue
        outputs = {task: _outputs(run_dir, task, steps[task]) for task in ("push", "evaluate") if task in steps}
        served = (outputs.get("push") or {}).get("Output")
        evaluation = (outputs.get("evaluate") or {}).get("evaluation")
        if isinstance(served, str) and served.rstrip("/") not in found:
            found[served.rstrip("/")] = {"job": run_dir.name, "evaluation": evaluation.get("uri", "")
                                         if isinstance(evaluation, dict) else ""}
    return found


def step_run(job: str, task: str, entry: dict[str, Any], outputs: dict[str, dict[str, Any]],
              inputs: dict[str, tuple[str, str]]) -> TrackedRun:
    mine = outputs.get(task) or {}
    start = float(entry.get("started") or 0.0)
    tags = {KEY_TAG: f"{job}/{task}", JOB_TAG: job, "shardflow.step": task, "shardflow.state": entry["state"]}
    found = component_records(mine)  # read once: params, tags and metrics come from them
    tags.update(step_tags(mine, found))
    for name, value in mine.items():
        if isinstance(value, dict) and "uri" in value:
            tags[f"shardflow.output.{name}"] = value["uri"]
    for name, (producer, key) in inputs.items():
        produced = (outputs.get(producer) or {}).get(key)
        if isinstance(produced, dict) and "uri" in produced:
            tags[f"shardflow.input.{name}"] = produced["uri"]
    if entry["state"] == "cached":
        tags["shardflow.cached_from"] = _job_of(mine) or "unknown"
    if entry.get("error"):
        tags["shardflow.error"] = str(entry["error"])[:MAX_PARAM_LENGTH]
    params = {key: value[:MAX_PARAM_LENGTH] for key, value in step_params(found).items()}
    metrics = tuple(metric for metric in step_metrics(task, mine, found, Metric) if math.isfinite(metric.value))
    return TrackedRun(key=f"{job}/{task}", name=task, status=_STATUS.get(entry["state"], "FAILED"),
                      start_ms=int(start * 1000), end_ms=int((start + float(entry.get("seconds") or 0.0)) * 1000),
                      params=params, metrics=metrics, tags=tags, artifacts=tuple(step_artifacts(mine)))


def _outputs(run_dir: Path, task: str, entry: dict[str, Any]) -> dict[str, Any]:
    """{name: {"uri", "metadata", ...} or {"value"}} as steps.json recorded them, else the step's executor output."""
    if "outputs" in entry:
        return {name: saved if "uri" in saved else saved.get("value") for name, saved in entry["outputs"].items()}
    return read_executor_output(run_dir / task / "executor_output.json")


def read_executor_output(written: Path) -> dict[str, Any]:
    """A step's outputs from the executor_output.json KFP's executor wrote ({} when there is none)."""
    if not written.is_file():
        return {}
    data = json.loads(written.read_text())
    found: dict[str, Any] = dict(data.get("parameterValues") or {})
    for name, listed in (data.get("artifacts") or {}).items():
        for artifact in listed.get("artifacts") or []:
            found[name] = {"uri": artifact.get("uri"), "metadata": artifact.get("metadata") or {}}
    return found


_JOB = re.compile(rf"/({JOB_NAME.pattern})/")  # a path component


def _job_of(outputs: dict[str, Any]) -> str | None:
    """The run that computed a cached step: the job folder in its outputs' URIs."""
    for value in outputs.values():
        match = _JOB.search(value.get("uri") or "") if isinstance(value, dict) else None
        if match:
            return match.group(1)
    return None


def _producers(compiled: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """{task: {input: (producer task, its output)}} from the compiled pipeline's DAG (nested DAGs included)."""
    if not compiled.is_file():
        return {}
    import yaml

    spec = yaml.safe_load(compiled.read_text())
    found: dict[str, dict[str, tuple[str, str]]] = {}
    dags = [spec.get("root", {}).get("dag", {})] + [c.get("dag", {}) for c in spec.get("components", {}).values()]
    for dag in dags:
        for task, body in (dag.get("tasks") or {}).items():
            for name, given in ((body.get("inputs") or {}).get("artifacts") or {}).items():
                source = given.get("taskOutputArtifact")
                if source:
                    found.setdefault(task, {})[name] = (source["producerTask"], source["outputArtifactKey"])
    return found

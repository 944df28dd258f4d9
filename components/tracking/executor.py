"""`run(TrackConfig)`: a `shardflow run` output's finished runs sent to MLflow, its registry made to follow CURRENT.json.

    result = run(TrackConfig(output="runs/digits", tracking_uri="http://127.0.0.1:5000"))
    result["sent"], result["already_sent"], result["registry"]

Idempotent: a run sent whole before is not sent again; one cut off is sent again whole (mlflow_sink.py). So a
run made while the server was down, or before tracking existed, is sent by running this later.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..core.run_layout import LOGS, PIPELINE_NAME, PIPELINE_ROOT, SERVING, STEPS_RECORD, run_outcome
from .config import TrackConfig
from .mlflow_sink import MlflowSink, check_reachable, sink_errors
from .records import pushing_runs, read_run
from .registry import sync_registry


def run(config: TrackConfig, echo: Callable[[str], None] = print) -> dict[str, Any]:
    check_reachable(config.tracking_uri)
    with sink_errors(config.tracking_uri):
        return _send(config, MlflowSink(config.tracking_uri), echo)


def _send(config: TrackConfig, sink: MlflowSink, echo: Callable[[str], None]) -> dict[str, Any]:
    out = Path(config.output)
    experiment = sink.experiment(config.experiment_name)
    sent, already, ids = [], [], {}
    for run_dir in finished_runs(out, config.runs):
        ids[run_dir.name], did = sink.send_run(experiment, read_run(run_dir, run_outcome(out, run_dir.name)))
        (sent if did else already).append(run_dir.name)
    registry = None
    if config.model_name and (out / SERVING).is_dir():
        def run_id_of(job: str) -> str | None:  # a job sent now, or by an earlier send
            return ids.get(job) or next((r.info.run_id for r in sink.find(experiment, job)), None)

        registry = sync_registry(sink, str(out.resolve() / SERVING), config.model_name, config.alias, run_id_of,
                                 pushing_runs(finished_runs(out, ())))
    result = {"tracking_uri": config.tracking_uri, "experiment": config.experiment_name, "experiment_id": experiment,
              "sent": sent, "already_sent": already, "run_ids": ids, "registry": registry}
    echo(describe(result, config.model_name))
    return result


def finished_runs(out: Path, jobs: tuple[str, ...]) -> list[Path]:
    """The run folders of `out` with a steps record (a run killed before its end has none), oldest first."""
    named = [out / PIPELINE_ROOT / job for job in jobs] if jobs else sorted((out / PIPELINE_ROOT).glob(f"{PIPELINE_NAME}-*"))
    return [run_dir for run_dir in named if (run_dir / LOGS / STEPS_RECORD).is_file()]


def describe(result: dict[str, Any], model_name: str) -> str:
    line = (f"track: {len(result['sent'])} run(s) sent to {result['tracking_uri']} (experiment "
            f"{result['experiment']!r}), {len(result['already_sent'])} there already")
    registry = result.get("registry")
    if registry and registry.get("alias"):
        alias, version = registry["alias"]
        line += (f"; registered model {model_name!r}: {len(registry['registered'])} version(s) registered now, "
                 f"{alias!r} on version {version}")
    return line

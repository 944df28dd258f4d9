"""A local run's tracking: the server checked before any step, the finished run sent after its last.

The run's files stay the record: what is sent is what `shardflow track` sends (components/tracking), so a
run whose server went away is sent later by the command its summary prints. Tracking never fails a run.

    tracking = start_tracking(TrackConfig(output="runs/d", tracking_uri="http://127.0.0.1:5000"))  # ConfigError
    summary["tracking"] = send_run(tracking, run_dir)
"""
from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any

from ..tracking import TrackConfig
from ..tracking import run as track
from ..tracking.mlflow_sink import check_reachable, preload


def start_tracking(tracking: TrackConfig | None) -> TrackConfig | None:
    """ConfigError (one line) when the tracking server cannot be reached; MLflow's client imported meanwhile."""
    if tracking is not None:
        check_reachable(tracking.tracking_uri)
        preload()
    return tracking


def send_run(tracking: TrackConfig | None, run_dir: Path) -> dict[str, Any] | None:
    """{"run_id", "experiment", "registry"} of the run sent, or {"not_sent": why, "command": what sends it}."""
    if tracking is None:
        return None
    config = dataclasses.replace(tracking, runs=(run_dir.name,))
    try:
        result = track(config, echo=lambda _: None)
    except Exception as error:  # noqa: BLE001 (the run's outcome stands whatever the tracking server does)
        return {"not_sent": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300],
                "command": track_command(config)}
    return {"run_id": result["run_ids"].get(run_dir.name), "experiment": result["experiment"],
            "tracking_uri": config.tracking_uri, "registry": result["registry"]}


def track_command(config: TrackConfig) -> str:
    words = ["shardflow", "track", "--output", config.output, "--tracking-uri", config.tracking_uri]
    words += [word for job in config.runs for word in ("--run", job)]
    if config.experiment:
        words += ["--experiment", config.experiment]
    if config.registered_model is not None:
        words += ["--registered-model", config.registered_model]
    return shlex.join(words)


def tracking_line(sent: dict[str, Any] | None) -> str | None:
    """The summary's line: where the run is in MLflow, or what was not sent and how to send it."""
    if not sent:
        return None
    if "not_sent" in sent:
        return f"tracking: not sent ({sent['not_sent']}); send it with: {sent['command']}"
    line = f"tracking: run {sent['run_id']} in experiment {sent['experiment']!r} at {sent['tracking_uri']}"
    alias = (sent.get("registry") or {}).get("alias")
    return line + (f"; {alias[0]!r} names model version {alias[1]}" if alias else "")

"""A `shardflow run` output's layout: written by the local runner (pipelines/local_run.py), read by tracking
(components/tracking). A leaf module, so that both name one layout.

    RUN/pipeline_root/shardflow-<time>/       PIPELINE_ROOT: one folder per run, named as JOB_NAME matches
    RUN/pipeline_root/<job>/logs/steps.json   LOGS, STEPS_RECORD: each step's state and outputs
    RUN/runs/run-<time>.json                  RECORDS: the exit handler's record of each run (`run_outcome`)
    RUN/serving/, RUN/spans/                  SERVING, SPAN_STORE

>>> bool(JOB_NAME.fullmatch("shardflow-2026-11-28-12-18-29-810638"))
True
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

PIPELINE_ROOT, SERVING, RECORDS, SPAN_STORE = "pipeline_root", "serving", "runs", "spans"
LOGS, STEPS_RECORD = "logs", "steps.json"
PIPELINE_NAME = "shardflow"  # the compiled pipeline's pipelineInfo.name, and the start of each run's folder
JOB_NAME = re.compile(rf"{PIPELINE_NAME}-\d{{4}}(?:-\d+)+")  # PIPELINE_NAME-YYYY-MM-DD-HH-MM-SS-ffffff


def run_outcome(out: Path, job: str) -> dict[str, Any] | None:
    """The exit handler's record of the run `job` in `out` (the newest, were there several), or None."""
    records = [json.loads(path.read_text())
               for path in sorted((out / RECORDS).glob("run-*.json"), key=lambda p: p.stat().st_mtime)]
    return next((record for record in reversed(records) if record.get("pipeline_job") == job), None)

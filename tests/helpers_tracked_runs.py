"""`shardflow run` of the demo digits into an MLflow store, as the tracking tests run it (tests/cluster/test_tracking.py,
test_tracking_replay.py), and what they read back: a client of the store, a run's steps.json."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
NESTED_STATES = ("ok", "cached", "FAILED")  # a step in one of these states has its nested run


def mlflow_client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    if uri.startswith("file:"):
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 keeps the file store in maintenance mode

    return MlflowClient(uri)


def run_argv(demo: Path, out: Path, uri: str, epochs: int, threshold: str) -> list[str]:
    """The command of a tracked run of `demo`/digits into `out`: `epochs` of training, pushed if `threshold` holds."""
    digits = demo / "digits"
    return [SHARDFLOW, "run", "--index", f"train={digits / 'train.csv'}", "--index", f"eval={digits / 'eval.csv'}",
            "--data-root", str(digits), "--output", str(out), "--train-args", f"--epochs {epochs}",
            "--threshold", threshold, "--tracking-uri", uri]


def run_steps(out: Path, job: str) -> dict[str, dict]:
    """RUN/pipeline_root/<job>/logs/steps.json: each step's state."""
    return json.loads((out / "pipeline_root" / job / "logs" / "steps.json").read_text())

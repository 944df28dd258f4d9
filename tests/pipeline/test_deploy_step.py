"""KServe's deploy as an optional step of the compiled pipeline (pipelines/deploy_step.py): absent by default (the
golden pipeline is unchanged: test_pipeline.py), and with `SHARDFLOW_STEPS=shardflow.pipelines.deploy_step` a task
inside Push's conditions that takes Push's model and runs `shardflow deploy` with `deploy_options`, checked before
anything is compiled."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
IMAGE = "registry.example.com/ml/shardflow@sha256:" + "3f1c5e0a" * 8
OPTIONS = ('deploy_options=["--serving-dir", "/artifacts/serving", "--runtime-version", "2.16.1", '
           '"--kserve-storage-base", "pvc://artifacts/serving", "--canary-percent", "10"]')


def _compile(tmp_path: Path, *params: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SHARDFLOW_STEPS": "shardflow.pipelines.deploy_step"}
    argv = [SHARDFLOW, "compile", "--output", str(tmp_path / "p.yaml"), "--image", IMAGE]
    for param in params:
        argv += ["--param", param]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)


def _tasks(component: dict) -> dict:
    return component.get("dag", {}).get("tasks", {})


def test_the_deploy_step_runs_after_push_inside_its_conditions(tmp_path: Path) -> None:
    done = _compile(tmp_path, OPTIONS)
    assert done.returncode == 0, done.stderr
    ir = yaml.safe_load((tmp_path / "p.yaml").read_text())
    (holder,) = [c for c in ir["components"].values() if "push" in _tasks(c)]
    task = _tasks(holder)["deploy"]  # in the same DAG as push: run only when the model was blessed and pushed
    assert task["dependentTasks"] == ["push"]
    assert task["inputs"]["artifacts"]["input_1"]["taskOutputArtifact"] == {"outputArtifactKey": "pushed",
                                                                             "producerTask": "push"}
    parameters = ir["root"]["inputDefinitions"]["parameters"]
    assert parameters["deploy_options"]["defaultValue"][:2] == ["--serving-dir", "/artifacts/serving"]
    refused = _compile(tmp_path, 'deploy_options=["--serving-dir", "/artifacts/serving", "--runtime-version", '
                                 '"2.16.1", "--canary-percent", "100"]')
    assert refused.returncode == 2 and "canary percent must be an integer from 1 to 99" in refused.stderr

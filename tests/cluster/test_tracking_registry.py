"""The registry and the parent run on a real `mlflow server` on loopback, from run outputs written as the runner
writes them (tests/helpers_tracking.py: exact provenance in seconds, no pipeline run):
- two outputs whose folders share a name share a registered model, but never a model version: each version is
  keyed by its served URI, and the alias names the version of the output that synced last;
- a model refused in one run and blessed and pushed by the next (its Trainer cached) is registered with the
  pushing run's job, verdict and run, linked to an MLflow logged model of that run;
- the parent run, read through MLflow's REST API as the UI reads it (runs/search): the evaluation's metrics, the
  verdict, the served version, the main params, the data as dataset inputs, the commit the run recorded;
- `shardflow track` SIGKILLed before each of its MLflow calls in turn: the next send makes the record whole.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from helpers_tracking import FINGERPRINT, served_model, write_pointer, write_run
from mlflow_server import MlflowServer
from shardflow.tracking import TrackConfig
from shardflow.tracking import run as track
from shardflow.tracking.records import KEY_TAG

pytestmark = pytest.mark.cluster
JOBS = [f"shardflow-2026-12-07-10-00-0{n}-000000" for n in range(4)]
KILLER = Path(__file__).parents[1] / "track_killed.py"


def _track(out: Path, uri: str, name: str) -> dict[str, Any]:
    return track(TrackConfig(output=str(out), tracking_uri=uri, experiment=name, registered_model=name),
                 echo=lambda _: None)


def _rest(uri: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """MLflow's REST API as its UI calls it: POST with a JSON body, or GET."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{uri}/api/2.0/mlflow/{path}", data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _versions(uri: str, name: str) -> dict[str, dict[str, Any]]:
    """{served URI: the model version as the REST API returns it, tags as a dict}."""
    found = _rest(uri, "model-versions/search?" + urllib.parse.urlencode({"filter": f"name = '{name}'"}))
    versions = {}
    for version in found.get("model_versions", []):
        version["tags"] = {t["key"]: t["value"] for t in version.get("tags", [])}
        versions[version["tags"]["shardflow.served_uri"]] = version
    return versions


def _alias(uri: str, name: str, alias: str = "champion") -> str:
    """The served URI of the version `alias` names."""
    got = _rest(uri, f"registered-models/alias?name={name}&alias={alias}")
    return {t["key"]: t["value"] for t in got["model_version"]["tags"]}["shardflow.served_uri"]


def _parents(uri: str, name: str) -> dict[str, dict[str, Any]]:
    """{job: the parent run as runs/search returns it to the runs table}."""
    experiment = _rest(uri, f"experiments/get-by-name?experiment_name={name}")["experiment"]["experiment_id"]
    runs = _rest(uri, "runs/search", {"experiment_ids": [experiment], "max_results": 1000}).get("runs", [])
    parents = {}
    for run in runs:
        tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
        if "mlflow.parentRunId" not in tags:
            parents[tags[KEY_TAG]] = {**run, "tags": tags}
    return parents


def test_two_outputs_with_one_name_keep_their_own_versions(mlflow_server: MlflowServer, tmp_path: Path) -> None:
    uri, name = mlflow_server.endpoint, f"shared-{uuid.uuid4().hex[:8]}"
    first, second = tmp_path / "a" / "digits", tmp_path / "b" / "digits"
    write_run(first, JOBS[0], blessed=True, accuracy=0.8, pushed=1)
    write_run(first, JOBS[1], blessed=True, accuracy=0.9, pushed=2)
    write_pointer(first, {1: JOBS[0], 2: JOBS[1]})
    write_run(second, JOBS[2], blessed=True, accuracy=0.7, pushed=1)
    write_pointer(second, {1: JOBS[2]})
    _track(first, uri, name)
    assert _alias(uri, name) == served_model(first, 2)
    _track(second, uri, name)
    versions = _versions(uri, name)
    served = {served_model(first, 1), served_model(first, 2), served_model(second, 1)}
    assert set(versions) == served and len({v["version"] for v in versions.values()}) == 3
    assert versions[served_model(second, 1)]["tags"]["shardflow.job"] == JOBS[2]
    assert _alias(uri, name) == served_model(second, 1)  # its own version 1, not the first's
    _track(first, uri, name)  # nothing new to register; the alias follows the output that synced
    assert _alias(uri, name) == served_model(first, 2)
    found = _rest(uri, "model-versions/search?" + urllib.parse.urlencode({"filter": f"name = '{name}'"}))
    assert len(found["model_versions"]) == 3  # none registered twice


def test_a_version_is_registered_from_the_run_that_blessed_and_pushed_it(mlflow_server: MlflowServer,
                                                                        tmp_path: Path) -> None:
    """Run 1 trains and is refused; run 2, its Trainer cached, is blessed (a lower threshold) and pushes the model."""
    uri, name, out = mlflow_server.endpoint, f"prov-{uuid.uuid4().hex[:8]}", tmp_path / "digits"
    write_run(out, JOBS[0], blessed=False, accuracy=0.45)
    write_run(out, JOBS[1], blessed=True, accuracy=0.45, pushed=1, trained_in=JOBS[0])
    write_pointer(out, {1: JOBS[0]})  # pushed_from: run 1's training output
    result = _track(out, uri, name)
    (version,) = _versions(uri, name).values()
    tags = version["tags"]
    assert (tags["shardflow.job"], tags["shardflow.blessed"]) == (JOBS[1], "true")
    assert tags["shardflow.verdict"].endswith(f"({JOBS[1]})") and "fails" not in tags["shardflow.verdict"]
    assert version["run_id"] == result["run_ids"][JOBS[1]]
    assert version["source"].startswith("models:/m-")  # the logged model, which MLflow links back to the version
    model = _rest(uri, f"logged-models/{version['source'].removeprefix('models:/')}")["model"]
    assert model["info"]["source_run_id"] == result["run_ids"][JOBS[1]] == version["run_id"]
    linked = {t["key"]: t["value"] for t in model["info"]["tags"]}["mlflow.modelVersions"]
    assert json.loads(linked) == [{"name": name, "version": int(version["version"])}]
    assert model["info"]["status"] == "LOGGED_MODEL_READY"
    assert result["registry"]["alias"] == ("champion", version["version"])


def test_the_parent_run_reads_as_the_runs_table_shows_it(mlflow_server: MlflowServer, tmp_path: Path) -> None:
    uri, name, out = mlflow_server.endpoint, f"table-{uuid.uuid4().hex[:8]}", tmp_path / "digits"
    commit = {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": True}
    write_run(out, JOBS[0], blessed=True, accuracy=0.8, pushed=1, epochs=3, commit=commit)
    write_run(out, JOBS[1], blessed=False, accuracy=0.6)  # older run, no source record
    write_pointer(out, {1: JOBS[0]})
    _track(out, uri, name)
    parents = _parents(uri, name)
    pushed, refused = parents[JOBS[0]], parents[JOBS[1]]
    metrics = {m["key"]: m["value"] for m in pushed["data"]["metrics"]}
    assert metrics == pytest.approx({"accuracy": 0.8, "accuracy.lower": 0.7, "accuracy.upper": 0.85,
                                     "blessed": 1.0, "served_version": 1.0})
    params = {p["key"]: p["value"] for p in pushed["data"]["params"]}
    assert params == {"train.epochs": "3", "train.learning_rate": "0.01", "evaluate.split": "eval",
                      "evaluate.thresholds": '["accuracy>=0.5"]', "data_root": str(out.resolve() / "data"),
                      "split_weights": '[["train", 9], ["eval", 1]]'}  # no run folder: it differs in every run
    assert (pushed["tags"]["shardflow.blessed"], pushed["tags"]["shardflow.served_version"]) == ("true", "1")
    assert (pushed["tags"]["mlflow.source.git.commit"], pushed["tags"]["shardflow.source.dirty"]) == (
        commit["commit"], "true")
    assert "mlflow.source.git.commit" not in refused["tags"]  # not the sender's checkout: nothing recorded
    assert {m["key"]: m["value"] for m in refused["data"]["metrics"]}["blessed"] == 0.0
    assert "served_version" not in {m["key"] for m in refused["data"]["metrics"]}
    inputs = pushed["inputs"]["dataset_inputs"]
    seen = {(i["dataset"]["name"], i["dataset"]["digest"], json.loads(i["dataset"]["source"])["uri"],
             {t["key"]: t["value"] for t in i["tags"]}["mlflow.data.context"]) for i in inputs}
    data = out.resolve() / "data"
    assert seen == {(f"{split}.csv", FINGERPRINT[:36], str(data / f"{split}.csv"), split)
                    for split in ("train", "eval")}
    assert json.loads(inputs[0]["dataset"]["profile"])["fingerprint"] == FINGERPRINT


def _record(uri: str, name: str) -> dict[str, Any]:
    """What the server holds of one send, without ids: the active runs by key, the registry by served URI."""
    runs = {}
    for job, parent in _parents(uri, name).items():
        data = parent["data"]
        runs[job] = (parent["info"]["status"], sorted((m["key"], m["value"]) for m in data.get("metrics", [])),
                     sorted((p["key"], p["value"]) for p in data.get("params", [])),
                     sorted((k, v) for k, v in parent["tags"].items() if k.startswith("shardflow.")),
                     sorted(i["dataset"]["name"] for i in parent.get("inputs", {}).get("dataset_inputs", [])))
    experiment = _rest(uri, f"experiments/get-by-name?experiment_name={name}")["experiment"]["experiment_id"]
    nested = _rest(uri, "runs/search", {"experiment_ids": [experiment], "max_results": 1000}).get("runs", [])
    steps = sorted(({t["key"]: t["value"] for t in r["data"]["tags"]}[KEY_TAG], r["info"]["status"],
                    len(r["data"].get("metrics", []))) for r in nested)
    registry = {served: (v["tags"].get("shardflow.job"), v["tags"].get("shardflow.blessed"), v["source"][:9])
                for served, v in _versions(uri, name).items()}
    return {"runs": runs, "steps": steps, "registry": registry, "alias": _alias(uri, name)}


def test_a_send_sigkilled_before_any_call_is_made_whole_by_the_next(mlflow_server: MlflowServer,
                                                                    tmp_path: Path) -> None:
    """One run of three steps (each MLflow call costs a kill and two sends: about 35 calls)."""
    uri, out = mlflow_server.endpoint, tmp_path / "digits"
    run = write_run(out, JOBS[0], blessed=True, accuracy=0.8, pushed=1)
    steps = json.loads((run / "logs" / "steps.json").read_text())
    (run / "logs" / "steps.json").write_text(json.dumps({k: steps[k] for k in ("example-gen", "evaluate", "push")}))
    write_pointer(out, {1: JOBS[0]})
    result = tmp_path / "killed.json"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    prefix = f"{uuid.uuid4().hex[:8]}-"
    subprocess.run([sys.executable, str(KILLER), str(out), uri, str(result), prefix], check=True, env=env,
                   timeout=1800)
    done = json.loads(result.read_text())
    every = list(range(1, done["calls"] + 1))
    assert done["calls"] > 25 and done["killed"] == every and done["resent"] == every
    reference = _record(uri, f"{prefix}reference")
    assert len(reference["runs"]) == 1 and len(reference["steps"]) == 4 and len(reference["registry"]) == 1
    for kill_at in every:
        assert _record(uri, f"{prefix}killed-{kill_at}") == reference, f"killed before call {kill_at}"

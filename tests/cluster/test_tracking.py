"""Every `shardflow run` in MLflow, every pushed model in its registry: a real `mlflow server` on loopback.

Three runs of the digits into one output (2 epochs; 3 epochs, pushed as version 2; a threshold no model meets):
three parent runs with a nested run per step that ran, the registry following CURRENT.json. A compiled step
given MLFLOW_RUN_ID (KFP's MLflow integration) logs into that run. A server killed mid-run: test_tracking_replay.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers_tracked_runs import NESTED_STATES, SHARDFLOW, mlflow_client, run_argv, run_steps
from mlflow_server import MlflowServer
from shardflow.pipelines.local_dag import Artifact
from shardflow.pipelines.local_executor_io import executor_input
from shardflow.tracking.mlflow_sink import COMPLETE_TAG
from shardflow.tracking.records import KEY_TAG
from shardflow.tracking.registry import VERSION_TAG

pytestmark = pytest.mark.cluster


def _run(demo: Path, out: Path, uri: str, epochs: int, threshold: str = "accuracy>=0.5") -> str:
    done = subprocess.run(run_argv(demo, out, uri, epochs, threshold), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def tracked(demo_data: Path, mlflow_server: MlflowServer, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("tracked") / "digits"
    before, dirty = _head(), _dirty()  # read by git here, not by shardflow: what the runs' tags are checked against
    said = [_run(demo_data, out, mlflow_server.endpoint, 2), _run(demo_data, out, mlflow_server.endpoint, 3),
            _run(demo_data, out, mlflow_server.endpoint, 1, threshold="accuracy>=0.999")]
    jobs = sorted(p.name for p in (out / "pipeline_root").iterdir())
    client = mlflow_client(mlflow_server.endpoint)
    experiment = client.get_experiment_by_name("digits").experiment_id
    dirty = dirty if dirty == _dirty() else None  # the tree changed state meanwhile: no one expected value
    return {"out": out, "said": said, "jobs": jobs, "client": client, "commits": _commits(before, _head()),
            "dirty": dirty,
            "runs": list(client.search_runs([experiment], max_results=1000))}


def _head() -> str:
    """HEAD of the checkout that holds the shardflow that runs (components/), by `git rev-parse`."""
    import shardflow

    return subprocess.run(["git", "-C", str(Path(shardflow.__file__).parent), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _dirty() -> str:
    """Whether that checkout has uncommitted changes to tracked files, as the tag spells it, by `git status`."""
    import shardflow

    changed = subprocess.run(["git", "-C", str(Path(shardflow.__file__).parent), "status", "--porcelain",
                              "--untracked-files=no"], capture_output=True, text=True, check=True).stdout
    return str(bool(changed.strip())).lower()


def _commits(before: str, after: str) -> set[str]:
    """HEAD at the start and every commit made since (other work may commit while the runs run)."""
    made = subprocess.run(["git", "-C", str(Path(__file__).parent), "rev-list", f"{before}..{after}"],
                          capture_output=True, text=True, check=True).stdout.split()
    return {before, *made}


def test_each_run_is_a_parent_run_with_a_nested_run_per_step_that_ran(tracked: dict) -> None:
    runs, jobs = tracked["runs"], tracked["jobs"]
    parents = {r.data.tags[KEY_TAG]: r for r in runs if "mlflow.parentRunId" not in r.data.tags}
    assert sorted(parents) == jobs and len(jobs) == 3
    for job in jobs:
        steps = run_steps(tracked["out"], job)
        nested = {r.data.tags["shardflow.step"]: r for r in runs
                  if r.data.tags.get("mlflow.parentRunId") == parents[job].info.run_id}
        assert set(nested) == {task for task, entry in steps.items() if entry["state"] in NESTED_STATES}
        assert {task: r.data.tags["shardflow.state"] for task, r in nested.items()} == {
            task: steps[task]["state"] for task in nested}
        for task, run in nested.items():
            assert run.info.status == "FINISHED" and run.data.tags[COMPLETE_TAG] == "true"
            if steps[task]["state"] == "cached":  # points at the earlier run that computed it
                assert run.data.tags["shardflow.cached_from"] in jobs[:jobs.index(job)]
        assert parents[job].data.tags["shardflow.outcome"] == "SUCCEEDED"
        assert parents[job].data.tags["mlflow.source.git.commit"] in tracked["commits"]  # a checkout here
        assert parents[job].data.tags["shardflow.source.dirty"] in ({"true", "false"} if tracked["dirty"] is None
                                                                    else {tracked["dirty"]})
    assert f"tracking: run {parents[jobs[0]].info.run_id} in experiment 'digits'" in tracked["said"][0]


def test_train_logs_every_epoch_and_evaluate_the_metrics_of_metrics_json(tracked: dict) -> None:
    client, out, job = tracked["client"], tracked["out"], tracked["jobs"][1]  # 3 epochs
    by_step = {r.data.tags["shardflow.step"]: r for r in tracked["runs"] if r.data.tags.get("shardflow.job") == job
               and "shardflow.step" in r.data.tags}
    history = json.loads((out / "pipeline_root" / job / "train" / "model" / "history.json").read_text())["epochs"]
    for name in ("loss", "accuracy", "val_loss"):
        logged = client.get_metric_history(by_step["train"].info.run_id, name)
        assert [(m.step, m.value) for m in logged] == [(e["epoch"], e[name]) for e in history]
    assert len(history) == 3 and by_step["train"].data.params["epochs"] == "3"
    metrics = json.loads((out / "pipeline_root" / job / "evaluate" / "evaluation" / "metrics.json").read_text())
    logged = by_step["evaluate"].data.metrics
    assert {name: logged[name] for name in metrics["overall"]} == metrics["overall"]
    for name, (low, high) in metrics["intervals"]["candidate"].items():
        assert (logged[f"{name}.lower"], logged[f"{name}.upper"]) == (low, high)
    assert logged["label_issues"] == metrics["label_issues"]["count"]
    assert by_step["evaluate"].data.params["split"] == "eval"
    files = {a.path for a in client.list_artifacts(by_step["evaluate"].info.run_id, "evaluation")}
    assert {"evaluation/metrics.json", "evaluation/blessing.json", "evaluation/confusion_matrix.png"} <= files
    assert "evaluation/canaries.tfrecord" not in files  # large or binary outputs are linked, not uploaded
    assert by_step["evaluate"].data.tags["shardflow.output.evaluation"].endswith("/evaluate/evaluation")
    assert by_step["evaluate"].data.tags["shardflow.input.model"].endswith("/train/model")
    example_gen = by_step["example-gen"].data.metrics  # cached from the first run: still its figures
    assert example_gen["examples.train"] + example_gen["examples.eval"] == 1797 and example_gen["rejected"] == 0


def test_the_registry_follows_current_json_and_a_refused_run_registers_nothing(tracked: dict) -> None:
    client, out, jobs = tracked["client"], tracked["out"], tracked["jobs"]
    pointer = json.loads((out / "serving" / "CURRENT.json").read_text())
    versions = {mv.tags[VERSION_TAG]: mv for mv in client.search_model_versions("name = 'digits'")}
    assert sorted(versions) == sorted(pointer["served_versions"]) == ["1", "2"]
    champion = client.get_model_version_by_alias("digits", "champion")
    assert champion.tags[VERSION_TAG] == str(pointer["version"]) == "2"
    parents = {r.data.tags[KEY_TAG]: r.info.run_id for r in tracked["runs"] if "mlflow.parentRunId" not in r.data.tags}
    for number, job in (("1", jobs[0]), ("2", jobs[1])):
        version = versions[number]
        assert version.tags["shardflow.served_uri"] == pointer["served_versions"][number]["model"]
        assert version.run_id == parents[job] and version.source.startswith("models:/m-")
        logged = client.get_logged_model(version.source.removeprefix("models:/"))  # MLflow 3: the pushing run's
        assert logged.source_run_id == parents[job] and logged.tags["shardflow.served_uri"] == version.tags[
            "shardflow.served_uri"]
        assert version.tags["shardflow.blessed"] == "true" and version.tags["shardflow.job"] == job
    assert versions["2"].tags["shardflow.gated_against"] != "none"  # gated against version 1
    refused = [r for r in tracked["runs"] if r.data.tags.get("shardflow.job") == jobs[2]
               and r.data.tags.get("shardflow.step") == "evaluate"]
    assert refused[0].data.tags["shardflow.blessed"] == "false" and refused[0].data.metrics["blessed"] == 0.0
    assert "'champion' names model version 2" in tracked["said"][2]


def test_the_runs_table_compares_pipeline_runs_through_the_rest_api(tracked: dict,
                                                                    mlflow_server: MlflowServer) -> None:
    """runs/search as MLflow's UI calls it: each parent carries its evaluation's metrics, the verdict, the version
    it served and its main options; its data is in `inputs.dataset_inputs` (the Dataset column)."""
    import urllib.request

    out, jobs, uri = tracked["out"], tracked["jobs"], mlflow_server.endpoint
    experiment = tracked["client"].get_experiment_by_name("digits").experiment_id
    body = {"experiment_ids": [experiment], "filter": "tags.`shardflow.outcome` = 'SUCCEEDED'", "max_results": 100}
    request = urllib.request.Request(f"{uri}/api/2.0/mlflow/runs/search", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        found = json.loads(response.read())["runs"]
    parents = {}
    for run in found:
        tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
        if "mlflow.parentRunId" not in tags:
            parents[tags[KEY_TAG]] = (run, tags)
    assert sorted(parents) == jobs
    for job, served in zip(jobs, (1, 2, None)):  # the third run's model was refused: it served nothing
        run, tags = parents[job]
        metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
        params = {p["key"]: p["value"] for p in run["data"]["params"]}
        run_dir = out / "pipeline_root" / job
        evaluation = json.loads((run_dir / "evaluate" / "evaluation" / "metrics.json").read_text())
        assert {name: metrics[name] for name in evaluation["overall"]} == evaluation["overall"]
        assert metrics["blessed"] == (0.0 if served is None else 1.0) and metrics.get("served_version") == served
        assert tags["shardflow.blessed"] == ("false" if served is None else "true") and tags["shardflow.verdict"]
        training = json.loads((run_dir / "train" / "model" / "training.json").read_text())
        assert params["train.epochs"] == str(training["options"]["epochs"]) == str((2, 3, 1)[jobs.index(job)])
        fingerprint = tags["shardflow.data_fingerprint"]
        inputs = {(i["dataset"]["name"], json.loads(i["dataset"]["source"])["uri"], i["dataset"]["digest"])
                  for i in run["inputs"]["dataset_inputs"]}
        assert {name for name, _, _ in inputs} == {"train.csv", "eval.csv"}
        assert all(digest == fingerprint[:36] and source.endswith(f"/digits/{name}") for name, source, digest in inputs)


def test_a_compiled_step_given_mlflow_run_id_logs_into_that_run(tracked: dict, mlflow_server: MlflowServer,
                                                                tmp_path: Path) -> None:
    """The validate task exactly as its container runs it on a cluster (the compiled command, KFP's executor)."""
    out, job = tracked["out"], tracked["jobs"][0]
    spec = yaml.safe_load((out / "pipeline_root" / job / "pipeline.yaml").read_text())
    container = spec["deploymentSpec"]["executors"]["exec-validate"]["container"]
    examples = Artifact(name="examples", uri=str(out / "pipeline_root" / job / "example-gen" / "examples"),
                        schema_title="system.Dataset")
    payload = executor_input(spec["components"]["comp-validate"], {"examples": examples, "flags": {}, "options": []},
                             str(tmp_path / "validate"))
    client = mlflow_client(mlflow_server.endpoint)
    task_run = client.create_run(client.create_experiment("kfp-tasks"), run_name="validate").info.run_id
    args = [json.dumps(payload) if arg == "{{$}}" else arg for arg in container["args"]]
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_server.endpoint, "MLFLOW_RUN_ID": task_run,
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([*container["command"], *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    logged = client.get_run(task_run).data
    assert logged.metrics["anomalies"] == 0.0 and logged.tags["shardflow.step"] == "validate"
    assert logged.tags["shardflow.output.report"] == str(tmp_path / "validate" / "report")
    assert "report/anomalies.json" in {f.path for f in client.list_artifacts(task_run, "report")}


def test_a_sqlite_store_takes_the_served_path_as_the_source(tracked: dict, tmp_path: Path) -> None:
    """Without a server in between, nothing refuses a local source: the version's source is its serving folder."""
    uri, cwd = f"sqlite:///{tmp_path / 'store' / 'store.db'}", tmp_path / "cwd"
    cwd.mkdir()
    subprocess.run([SHARDFLOW, "track", "--output", str(tracked["out"]), "--tracking-uri", uri], check=True,
                   capture_output=True, timeout=300, cwd=cwd)
    sources = {mv.tags[VERSION_TAG]: mv.source for mv in mlflow_client(uri).search_model_versions("name = 'digits'")}
    pointer = json.loads((tracked["out"] / "serving" / "CURRENT.json").read_text())
    assert sources == {n: pointer["served_versions"][n]["model"] for n in ("1", "2")}
    assert list(cwd.iterdir()) == []  # no mlflow.db, no mlruns/ where the command ran: artifacts beside the store
    assert (tmp_path / "store" / "mlruns" / "digits").is_dir()

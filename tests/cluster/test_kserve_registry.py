"""`shardflow promote` and `rollback --inference-service` with `--tracking-uri`: the registry alias moves with the
pointer, on a real `mlflow server` on loopback (tests/mlflow_server.py) and the loopback Kubernetes API of
test_kserve_deploy.py. After each command the alias (read through MLflow's REST API), CURRENT.json, the
InferenceService's storageUri and `latest` (the next baseline) name one version; a version never registered is
one line and exit 1 (pointer and InferenceService moved, alias not); an unreachable server is exit 2 with nothing
changed.
"""
from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import pytest

from fake_kube_server import FakeKubeServer
from loopback_server import free_port
from mlflow_server import MlflowServer
from shardflow.pusher import resolve_latest
from shardflow.pusher.serving import read_served
from shardflow.tracking.registry import SERVED_URI_TAG, VERSION_TAG, served_location
from test_kserve_deploy import deploy, kube, pointer, push, served, shardflow, uri  # noqa: F401 (kube: fixture)

pytestmark = pytest.mark.cluster


def register(tracking_uri: str, name: str, serving: Path, versions: list[int]) -> None:
    """Each serving version registered and tagged as the registry sync does (registry.py), from a run of its own
    (a tracking server takes a run's URI as a source, not a local folder); the alias on the first, as a sync
    before the canary left it."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    client.create_registered_model(name)
    experiment = client.create_experiment(f"{name}-runs")
    history = read_served(str(serving)).record["served_versions"]
    for number in versions:
        run = client.create_run(experiment).info.run_id
        where = served_location(str(serving), str(number), history[str(number)])
        made = client.create_model_version(name, source=f"runs:/{run}/model", run_id=run,
                                           tags={VERSION_TAG: str(number), SERVED_URI_TAG: where})
        if number == versions[0]:
            client.set_registered_model_alias(name, "champion", made.version)


def champion(tracking_uri: str, name: str) -> tuple[int, str]:
    """(serving version, served URI) of the version `champion` names, read through MLflow's REST API."""
    with urllib.request.urlopen(f"{tracking_uri}/api/2.0/mlflow/registered-models/alias?name={name}&alias=champion",
                                timeout=30) as response:
        tags = {t["key"]: t["value"] for t in json.loads(response.read())["model_version"]["tags"]}
    return int(tags[VERSION_TAG]), tags[SERVED_URI_TAG]


def assert_all_name(serving: Path, kube: FakeKubeServer, tracking_uri: str, name: str, version: int) -> None:
    assert champion(tracking_uri, name) == (version, resolve_latest(str(serving)))  # alias and next baseline
    assert pointer(serving)["version"] == version and "canary" not in pointer(serving)
    assert served(kube) == (uri(serving, version), [])


def test_the_alias_follows_promote_and_rollback(kube: FakeKubeServer, mlflow_server: MlflowServer,
                                                tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tracking, name = mlflow_server.endpoint, f"digits-{uuid.uuid4().hex[:8]}"
    serving = tmp_path / name / "serving"  # --registered-model's default: the folder above serving/, as track's
    push(tmp_path, serving, "a")
    assert deploy(kube, serving) == 0
    push(tmp_path, serving, "b")
    assert deploy(kube, serving, "--canary-percent", "10") == 0
    register(tracking, name, serving, [1, 2])
    assert champion(tracking, name)[0] == 1
    assert shardflow(kube, "promote", "--serving-dir", str(serving), "--tracking-uri", tracking) == 0
    assert_all_name(serving, kube, tracking, name, 2)
    assert shardflow(kube, "rollback", "--serving-dir", str(serving), "--version", "1",
                     "--tracking-uri", tracking) == 0
    assert_all_name(serving, kube, tracking, name, 1)
    # A version never tracked: the pointer and the InferenceService move, the alias cannot (exit 1, one line).
    push(tmp_path, serving, "c")
    assert deploy(kube, serving, "--canary-percent", "10") == 0
    capsys.readouterr()
    assert shardflow(kube, "promote", "--serving-dir", str(serving), "--tracking-uri", tracking) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "version 3" in error and "shardflow track" in error, error
    assert pointer(serving)["version"] == 3 and served(kube) == (uri(serving, 3), [])
    assert champion(tracking, name)[0] == 1


def test_an_unreachable_tracking_server_changes_nothing(kube: FakeKubeServer, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    serving = tmp_path / "digits" / "serving"
    push(tmp_path, serving, "a")
    assert deploy(kube, serving) == 0
    push(tmp_path, serving, "b")
    assert deploy(kube, serving, "--canary-percent", "10") == 0
    before, writes, stored = pointer(serving), len(kube.writes()), served(kube)
    nowhere = f"http://127.0.0.1:{free_port()}"
    capsys.readouterr()
    assert shardflow(kube, "promote", "--serving-dir", str(serving), "--tracking-uri", nowhere) == 2
    assert shardflow(kube, "rollback", "--serving-dir", str(serving), "--version", "1", "--tracking-uri", nowhere) == 2
    assert "cannot be reached" in capsys.readouterr().err
    assert (pointer(serving), len(kube.writes()), served(kube)) == (before, writes, stored)

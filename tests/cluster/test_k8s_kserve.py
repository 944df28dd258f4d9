"""k8s/'s InferenceService: valid against KServe's CRD schema, left as it is by `shardflow deploy` (so applying the
kustomization again and deploying never fight over a field), patchable by the service account the CronJob's runs
use and by nothing more, and the CronJob retrying a run whose push lost the race (exit 75)."""
from __future__ import annotations

import argparse
import copy
import re
from pathlib import Path

import pytest

from shardflow.cli import main
from shardflow.pipelines.submit import add_submit_arguments
from shardflow.pusher import push_model

from fake_kube_server import FakeKubeServer
from k8s_checks import KUSTOMIZATIONS, render
from test_kserve_deploy import model


@pytest.fixture(scope="module", params=KUSTOMIZATIONS)
def rendered(request: pytest.FixtureRequest) -> list[dict]:
    return render(request.param)


def _one(objects: list[dict], kind: str) -> dict:
    (found,) = [obj for obj in objects if obj["kind"] == kind]
    return found


def _leaves(value: object, path: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _leaves(sub, f"{path}.{key}").items()}
    return {path: value}


def test_the_inference_service_is_what_shardflow_deploy_leaves_it(rendered: list[dict], tmp_path: Path) -> None:
    isvc = _one(rendered, "InferenceService")
    assert FakeKubeServer.problems(isvc) == []
    predictor = isvc["spec"]["predictor"]
    assert predictor["model"]["modelFormat"] == {"name": "tensorflow"} and "storageUri" not in predictor["model"]
    serving = tmp_path / "serving"
    push_model(model(tmp_path, "a"), str(serving), gated_against=None)
    with FakeKubeServer() as kube:
        kube.put(isvc)
        meta = isvc["metadata"]
        assert main(["deploy", "--serving-dir", str(serving), "--kube-api", kube.url, "--namespace", meta["namespace"],
                     "--inference-service", meta["name"], "--service-account", predictor["serviceAccountName"],
                     "--runtime-version", predictor["model"]["runtimeVersion"],
                     "--kserve-storage-base", "pvc://artifacts/serving"]) == 0
        deployed = kube.stored[(meta["namespace"], meta["name"])]
    # Every field the manifest declares is as deploy left it: applying the kustomization again changes nothing.
    manifest, after = _leaves(isvc["spec"]), _leaves(deployed["spec"])
    assert {k: after.get(k) for k in manifest} == manifest
    assert deployed["spec"]["predictor"]["model"]["storageUri"] == "pvc://artifacts/serving/1/model"


def test_the_cronjobs_runs_may_patch_the_inference_service_and_nothing_else(rendered: list[dict]) -> None:
    cronjob = _one(rendered, "CronJob")
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    argv = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1]) or m[0], a) for a in container["args"][1:]]
    parser = argparse.ArgumentParser()
    add_submit_arguments(parser)
    args = parser.parse_args(argv)
    service_accounts = {o["metadata"]["name"] for o in rendered if o["kind"] == "ServiceAccount"}
    assert args.service_account in service_accounts and args.wait
    isvc = _one(rendered, "InferenceService")
    assert isvc["spec"]["predictor"]["serviceAccountName"] in service_accounts
    roles = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "Role"}
    granted = set()
    for binding in (o for o in rendered if o["kind"] == "RoleBinding"):
        if any(s["kind"] == "ServiceAccount" and s["name"] == args.service_account for s in binding["subjects"]):
            for rule in roles[binding["roleRef"]["name"]]["rules"]:
                granted |= {(r, name, v) for r in rule["resources"] for name in rule.get("resourceNames") or ["*"]
                            for v in rule["verbs"]}
    name = isvc["metadata"]["name"]
    assert granted == {("inferenceservices", name, "get"), ("inferenceservices", name, "patch")}


def test_the_cronjob_retries_a_run_whose_push_lost_the_race(rendered: list[dict]) -> None:
    job = _one(rendered, "CronJob")["spec"]["jobTemplate"]["spec"]
    actions = {code: rule["action"] for rule in job["podFailurePolicy"]["rules"]
               for code in rule["onExitCodes"]["values"]}
    assert actions == {2: "FailJob", 75: "Count"} and job["backoffLimit"] >= 1
    (container,) = job["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    add_submit_arguments(parser)
    args = parser.parse_args(container["args"][1:])
    assert args.wait and job["activeDeadlineSeconds"] >= 2 * args.timeout  # room for a retry's wait


def test_a_misspelt_field_of_the_inference_service_is_caught(rendered: list[dict]) -> None:
    isvc = copy.deepcopy(_one(rendered, "InferenceService"))
    isvc["spec"]["predictor"]["model"]["storageURI"] = "pvc://artifacts/serving/1/model"
    isvc["spec"]["predictor"]["canaryTrafficPercent"] = "ten"
    problems = FakeKubeServer.problems(isvc)
    assert any("'storageURI' was unexpected" in p for p in problems), problems
    assert any("'ten' is not of type 'integer'" in p for p in problems), problems

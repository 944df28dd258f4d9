"""k8s/base/data-service.yaml: the tf.data service's servers have no authentication, so a NetworkPolicy admits
only the training pods and the servers. Rendered offline as in test_k8s.py, for every kustomization."""
from __future__ import annotations

import copy

import pytest

from k8s_checks import KUSTOMIZATIONS, name_of, render


@pytest.fixture(scope="module", params=KUSTOMIZATIONS)
def rendered(request: pytest.FixtureRequest) -> list[dict]:
    return render(request.param)


def _data_service_problems(objects: list[dict]) -> list[str]:
    """What keeps the tf.data service's unauthenticated gRPC servers from being reached by any pod but the
    training job's: a NetworkPolicy over both servers, admitting only the client label and the servers."""
    servers = {"data-service-dispatcher", "data-service-worker"}
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    covered = {value for p in policies for e in p["spec"]["podSelector"].get("matchExpressions", [])
               for value in e["values"]}
    problems = [] if servers <= covered else [f"no NetworkPolicy selects {sorted(servers - covered)}"]
    for policy in policies:
        if policy["spec"].get("policyTypes") != ["Ingress"]:
            problems.append(f"{name_of(policy)}: not an Ingress policy")
        for rule in policy["spec"].get("ingress", []):
            for peer in rule.get("from", []):
                labels = peer.get("podSelector", {}).get("matchLabels", {})
                expressions = peer.get("podSelector", {}).get("matchExpressions", [])
                if "namespaceSelector" in peer or "ipBlock" in peer or not (labels or expressions):
                    problems.append(f"{name_of(policy)}: admits {peer}")
                elif labels and labels != {"shardflow.io/data-service-client": "true"}:
                    problems.append(f"{name_of(policy)}: admits pods labelled {labels}")
    tfjob = next(o for o in objects if o["kind"] == "TFJob")
    labels = tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["metadata"].get("labels", {})
    if labels.get("shardflow.io/data-service-client") != "true":
        problems.append("the TFJob's pods are not admitted to the data service")
    return problems


def test_only_the_training_pods_reach_the_data_service(rendered: list[dict]) -> None:
    assert _data_service_problems(rendered) == []
    open_policy = copy.deepcopy(rendered)
    for obj in open_policy:
        if obj["kind"] == "NetworkPolicy":
            obj["spec"]["ingress"][0]["from"].append({"namespaceSelector": {}})
    assert _data_service_problems(open_policy)
    unlabelled = copy.deepcopy(rendered)
    next(o for o in unlabelled if o["kind"] == "TFJob")["spec"]["tfReplicaSpecs"]["Worker"]["template"][
        "metadata"]["labels"] = {}
    assert _data_service_problems(unlabelled) == ["the TFJob's pods are not admitted to the data service"]
    without = [o for o in rendered if o["kind"] != "NetworkPolicy"]
    assert _data_service_problems(without)[0].startswith("no NetworkPolicy selects")

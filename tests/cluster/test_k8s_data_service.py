"""k8s/base/data-service.yaml: the tf.data service's servers have no authentication, so a NetworkPolicy admits
only the training pods and the servers. Rendered offline as in test_k8s.py, for every kustomization."""
from __future__ import annotations

import copy
import re

import pytest

from k8s_checks import KUSTOMIZATIONS, name_of, render

from shardflow.data_service.config import worker_addresses


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


def _expanded(container: dict, arg: str) -> str:
    """An argument with the container's $(VAR) references replaced, as the kubelet does."""
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), arg)


def _flag(container: dict, name: str) -> str:
    return next(_expanded(container, a).split("=", 1)[1] for a in container["args"] if a.startswith(f"--{name}="))


def _addressing_problems(objects: list[dict]) -> list[str]:
    """The static sharding's fixed worker list: the dispatcher's must be the StatefulSet's pods, by the
    names the workers advertise, and the served TFJob must reach the dispatcher's Service."""
    kinds = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    workers = next(o for o in objects if o["kind"] == "StatefulSet")
    dispatcher = next(o for o in objects if o["kind"] == "Deployment" and "dispatcher" in o["metadata"]["name"])
    worker = workers["spec"]["template"]["spec"]["containers"][0]
    problems = []
    service = kinds.get(("Service", workers["spec"]["serviceName"]))
    if service is None or service["spec"].get("clusterIP") != "None":
        problems.append(f"no headless Service {workers['spec']['serviceName']!r} names the workers")
    advertised = [_flag(worker, "advertise").replace("$(POD_NAME)", f"{workers['metadata']['name']}-{i}")
                  for i in range(workers["spec"]["replicas"])]
    container = dispatcher["spec"]["template"]["spec"]["containers"][0]
    listed = worker_addresses(int(_flag(container, "workers")), _flag(container, "worker-template"))
    if list(listed) != advertised:
        problems.append(f"the dispatcher lists {list(listed)}, the workers advertise {advertised}")
    dispatcher_service = _flag(worker, "dispatcher").rsplit(":", 1)[0]
    if ("Service", dispatcher_service) not in kinds:
        problems.append(f"the workers' dispatcher {dispatcher_service!r} is no Service")
    for job in (o for o in objects if o["kind"] == "TFJob"):
        trainer = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        if any(a.startswith("--data-service=") for a in trainer["args"]):
            target = _flag(trainer, "data-service").removeprefix("grpc://").rsplit(":", 1)[0]
            if target != dispatcher_service or job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] != 1:
                problems.append(f"{name_of(job)} reads {target!r} with "
                                f"{job['spec']['tfReplicaSpecs']['Worker']['replicas']} workers")
    return problems


def test_the_dispatchers_fixed_workers_are_the_statefulsets_pods(rendered: list[dict]) -> None:
    assert _addressing_problems(rendered) == []
    assert any(o["kind"] == "TFJob" and any(a.startswith("--data-service=") for a in o["spec"]["tfReplicaSpecs"][
        "Worker"]["template"]["spec"]["containers"][0]["args"]) for o in rendered)  # a Trainer is pointed at it
    more = copy.deepcopy(rendered)
    next(o for o in more if o["kind"] == "StatefulSet")["spec"]["replicas"] += 1  # the overlay forgot WORKERS
    assert _addressing_problems(more)[0].startswith("the dispatcher lists")
    renamed = copy.deepcopy(rendered)
    next(o for o in renamed if o["kind"] == "StatefulSet")["spec"]["serviceName"] = "elsewhere"
    assert _addressing_problems(renamed)[0] == "no headless Service 'elsewhere' names the workers"

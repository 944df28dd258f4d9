"""Checks over rendered Kubernetes objects (used by test_k8s.py): Pod Security "restricted",
least-privilege RBAC, the TFJob's and Katib's shape (TF Serving's: k8s_serving_checks.py). Each returns the offenders, so a test can list them all.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

PLACEHOLDER_DIGEST = "sha256:" + "0" * 64
DIGEST_IMAGE = re.compile(r"^[\w.\-/:]+@sha256:[0-9a-f]{64}$")
SECRET_LIKE_ENV = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIALS?)$", re.IGNORECASE)
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
TFJOB_REPLICA_TYPES = {"Chief", "Master", "PS", "Worker", "Evaluator"}
K8S = Path(__file__).resolve().parents[1] / "k8s"
KUSTOMIZATIONS = ["base"] + [f"overlays/{d.name}" for d in sorted((K8S / "overlays").iterdir())
                             if (d / "kustomization.yaml").is_file()]


def render(directory: str) -> list[dict]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed, so `kubectl kustomize` cannot render k8s/")
    done = subprocess.run(["kubectl", "kustomize", str(K8S / directory)], capture_output=True, text=True,
                          check=False, env={**os.environ, "KUBECONFIG": os.devnull}, timeout=120)
    assert done.returncode == 0, f"kubectl kustomize k8s/{directory} failed:\n{done.stderr}"
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


def name_of(obj: dict) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def pod_specs(obj: dict, where: str = "") -> Iterator[tuple[str, dict]]:
    """Every pod spec inside an object of any kind (a dict with a `containers` list), with its path."""
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            yield where, obj
        for key, value in obj.items():
            yield from pod_specs(value, f"{where}.{key}" if where else key)
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from pod_specs(value, f"{where}[{index}]")


def pod_templates(obj: dict) -> list[tuple[str, dict]]:
    """Pod templates (metadata + spec) of workload and custom kinds, as PodTemplate objects."""
    found = []
    for where, spec in pod_specs(obj):
        if obj["kind"] == "Pod" or not where.endswith(".spec"):
            continue
        template = _at(obj, where[: -len(".spec")])
        found.append((f"{name_of(obj)} {where}", {
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"].get("namespace")},
            "template": template}))
    return found


def _at(obj: Any, path: str) -> Any:
    for key in re.findall(r"[^.\[\]]+", path):
        obj = obj[int(key)] if isinstance(obj, list) else obj[key]
    return obj


def containers_of(spec: dict) -> Iterator[tuple[str, dict]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(kind) or []:
            yield f"{kind[:-1]} {container.get('name')}", container


def restricted_offenders(objects: list[dict]) -> list[str]:
    """Every container field short of Pod Security "restricted" and this project's rules, by container."""
    offenders = []
    for obj in objects:
        for where, spec in pod_specs(obj):
            pod = spec.get("securityContext") or {}
            offenders += [f"{name_of(obj)} {where}: {problem}" for problem in _pod_problems(spec)]
            for label, container in containers_of(spec):
                offenders += [f"{name_of(obj)} {where} {label}: {problem}"
                              for problem in _container_problems(container, pod, spec)]
    return offenders


def _pod_problems(spec: dict) -> list[str]:
    problems = [f"{key} is true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    if spec.get("automountServiceAccountToken") is not False:
        problems.append("automountServiceAccountToken is not false (nothing here calls the Kubernetes API)")
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']} is of a type restricted forbids: {sorted(kinds)}")
    return problems


def _container_problems(container: dict, pod: dict, spec: dict) -> list[str]:
    context = container.get("securityContext") or {}
    effective = {**pod, **context}  # container settings win over the pod's
    problems = []
    if effective.get("runAsNonRoot") is not True:
        problems.append("runAsNonRoot is not true")
    if not isinstance(effective.get("runAsUser"), int) or effective["runAsUser"] == 0:
        problems.append(f"runAsUser is not a non-zero UID ({effective.get('runAsUser')!r})")
    if context.get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation is not false")
    if context.get("privileged"):
        problems.append("privileged is true")
    capabilities = context.get("capabilities") or {}
    if "ALL" not in (capabilities.get("drop") or []):
        problems.append("capabilities.drop does not contain ALL")
    if capabilities.get("add"):
        problems.append(f"capabilities.add is {capabilities['add']}")
    if (effective.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        problems.append("seccompProfile.type is not RuntimeDefault")
    if context.get("readOnlyRootFilesystem") is not True:
        problems.append("readOnlyRootFilesystem is not true")
    resources = container.get("resources") or {}
    for part in ("requests", "limits"):
        missing = {"cpu", "memory"} - set(resources.get(part) or {})
        if missing:
            problems.append(f"resources.{part} lacks {sorted(missing)}")
    if not DIGEST_IMAGE.match(container.get("image", "")):
        problems.append(f"image {container.get('image')!r} is not pinned by digest")
    for env in container.get("env") or []:
        if SECRET_LIKE_ENV.search(env["name"]) and "value" in env:
            problems.append(f"env {env['name']} is a literal; use valueFrom.secretKeyRef")
    empty_dirs = {v["name"] for v in spec.get("volumes") or [] if "emptyDir" in v}
    if not any(m["mountPath"] == "/tmp" and m["name"] in empty_dirs for m in container.get("volumeMounts") or []):
        problems.append("no writable emptyDir at /tmp (the root filesystem is read-only)")
    return problems


def rbac_offenders(objects: list[dict]) -> list[str]:
    """Wildcards, privilege-escalating verbs, secrets access and admin bindings in any RBAC object."""
    offenders = []
    for obj in objects:
        if obj["kind"] in ("Role", "ClusterRole"):
            for index, rule in enumerate(obj.get("rules") or []):
                for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                    if any("*" in value for value in rule.get(key) or []):
                        offenders.append(f"{name_of(obj)} rule {index}: wildcard in {key}")
                risky = {"escalate", "bind", "impersonate"} & set(rule.get("verbs") or [])
                if risky:
                    offenders.append(f"{name_of(obj)} rule {index}: verbs {sorted(risky)}")
                if "" in (rule.get("apiGroups") or []) and "secrets" in (rule.get("resources") or []):
                    offenders.append(f"{name_of(obj)} rule {index}: reads secrets")
        if obj["kind"] == "ClusterRoleBinding":
            offenders.append(f"{name_of(obj)}: a cluster-wide binding")
        if obj["kind"] in ("RoleBinding", "ClusterRoleBinding") and obj["roleRef"]["name"] in (
                "cluster-admin", "admin", "edit"):
            offenders.append(f"{name_of(obj)}: binds {obj['roleRef']['name']}")
    return offenders


def tfjob_problems(obj: dict) -> list[str]:
    """The TFJob (kubeflow.org/v1) fields the Training Operator accepts; no schema is bundled for it."""
    problems = [] if obj["apiVersion"] == "kubeflow.org/v1" else [f"apiVersion {obj['apiVersion']}"]
    spec = obj["spec"]
    problems += [f"unknown spec.{k}" for k in set(spec) - {"runPolicy", "successPolicy", "tfReplicaSpecs",
                                                           "enableDynamicWorker"}]
    run_policy = spec.get("runPolicy") or {}
    problems += [f"unknown runPolicy.{k}" for k in set(run_policy) - {
        "cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit", "schedulingPolicy",
        "suspend", "managedBy"}]
    if run_policy.get("cleanPodPolicy", "None") not in ("None", "Running", "All"):
        problems.append(f"cleanPodPolicy {run_policy['cleanPodPolicy']!r}")
    for replica_type, replica in spec["tfReplicaSpecs"].items():
        problems += [f"replica type {replica_type}"] if replica_type not in TFJOB_REPLICA_TYPES else []
        problems += [f"unknown {replica_type}.{k}" for k in set(replica) - {"replicas", "restartPolicy", "template"}]
        if not isinstance(replica.get("replicas"), int) or replica["replicas"] < 1:
            problems.append(f"{replica_type}.replicas {replica.get('replicas')!r}")
        if replica.get("restartPolicy", "Never") not in ("Always", "OnFailure", "Never", "ExitCode"):
            problems.append(f"{replica_type}.restartPolicy {replica['restartPolicy']!r}")
        # The operator writes TF_CONFIG for the container named `tensorflow`, port `tfjob-port`.
        main = [c for c in replica["template"]["spec"]["containers"] if c["name"] == "tensorflow"]
        if not main or not any(p.get("name") == "tfjob-port" for p in main[0].get("ports") or []):
            problems.append(f"{replica_type}: no container `tensorflow` with a port named `tfjob-port`")
    return problems


KATIB_ALGORITHMS = {"random", "grid", "hyperband", "bayesianoptimization", "tpe", "multivariate-tpe", "cmaes",
                    "sobol", "enas", "darts", "pbt"}
KATIB_PARAMETER_TYPES = {"double", "int", "discrete", "categorical"}


def katib_problems(obj: dict) -> list[str]:
    """The Katib Experiment (kubeflow.org/v1beta1) fields Katib accepts; no schema is bundled for it.
    The trial's pod template is validated as a PodTemplate by the caller, like the TFJob's."""
    problems = [] if obj["apiVersion"] == "kubeflow.org/v1beta1" else [f"apiVersion {obj['apiVersion']}"]
    spec = obj["spec"]
    problems += [f"unknown spec.{k}" for k in set(spec) - {
        "objective", "algorithm", "parallelTrialCount", "maxTrialCount", "maxFailedTrialCount", "parameters",
        "metricsCollectorSpec", "trialTemplate", "earlyStopping", "resumePolicy", "nasConfig"}]
    if spec["objective"].get("type") not in ("maximize", "minimize"):
        problems.append(f"objective.type {spec['objective'].get('type')!r}")
    if spec["algorithm"].get("algorithmName") not in KATIB_ALGORITHMS:
        problems.append(f"algorithmName {spec['algorithm'].get('algorithmName')!r}")
    names = {p["name"] for p in spec["parameters"]}
    problems += [f"parameter {p['name']}: type {p.get('parameterType')!r}" for p in spec["parameters"]
                 if p.get("parameterType") not in KATIB_PARAMETER_TYPES]
    template = spec["trialTemplate"]
    problems += [f"trialParameter {t['name']} references unknown parameter {t['reference']}"
                 for t in template["trialParameters"] if t["reference"] not in names]
    containers = [c["name"] for c in template["trialSpec"]["spec"]["template"]["spec"]["containers"]]
    if template.get("primaryContainerName") not in containers:
        problems.append(f"primaryContainerName {template.get('primaryContainerName')!r} not among {containers}")
    return problems


def katib_trial_args(obj: dict) -> list[list[str]]:
    """The trial container's args with every ${trialParameters.X} replaced by each end of its parameter's
    feasible space (the lowest and the highest values Katib may send)."""
    spec = obj["spec"]
    by_name = {p["name"]: p["feasibleSpace"] for p in spec["parameters"]}
    references = {t["name"]: by_name[t["reference"]] for t in spec["trialTemplate"]["trialParameters"]}
    (container,) = [c for c in spec["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"]
                    if c["name"] == spec["trialTemplate"]["primaryContainerName"]]
    filled = []
    for end in (0, -1):
        values = {name: (space["list"][end] if "list" in space else space["min" if end == 0 else "max"])
                  for name, space in references.items()}
        filled.append([re.sub(r"\$\{trialParameters\.(\w+)\}", lambda m: str(values[m[1]]), arg)
                       for arg in container["args"]])
    return filled

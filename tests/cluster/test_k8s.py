"""k8s/: every kustomization renders offline, validates strictly, and meets Pod Security "restricted".

`kubectl kustomize` renders k8s/base and every k8s/overlays/* (no cluster, KUBECONFIG=/dev/null);
each object is validated with kubernetes-validate (strict, Kubernetes 1.30), and the TFJob and the
CronJob's pod templates are validated as `kind: PodTemplate` (no schema for the TFJob itself). The TF
Serving Deployment is checked in test_k8s_serving.py, the Dockerfile in test_image_build.py. The
checks are functions over rendered objects, and test_the_checks_catch_weakened_manifests feeds them
tampered copies to show that they fail when a field is removed.
"""
from __future__ import annotations

import argparse
import copy
import os
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from shardflow.pipelines.compiler import compile_pipeline
from shardflow.pipelines.params import parse_param_args, required_parameters, typed_params
from shardflow.pipelines.schedule import to_kfp_cron
from shardflow.pipelines.submit import add_submit_arguments
from shardflow.trainer import cli as trainer_cli

from k8s_checks import (KUSTOMIZATIONS, PLACEHOLDER_DIGEST, _at, containers_of, katib_problems, katib_trial_args,
                        name_of, pod_specs, pod_templates, rbac_offenders, render, restricted_offenders,
                        tfjob_problems)
from fake_kube_server import FakeKubeServer
from k8s_serving_checks import tf_serving_problems

K8S_VERSION = "1.30.0"
EXAMPLE_IMAGE = "registry.example.com/ml/shardflow@sha256:" + "ab" * 32


@pytest.fixture(scope="module", params=KUSTOMIZATIONS)
def rendered(request: pytest.FixtureRequest) -> list[dict]:
    return render(request.param)


@pytest.fixture(scope="module")
def base() -> list[dict]:
    return render("base")


@pytest.fixture(scope="module")
def pipeline_spec(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The compiled shardflow pipeline's IR: what the CronJob's package will be."""
    path = compile_pipeline(tmp_path_factory.mktemp("ir") / "pipeline.yaml", EXAMPLE_IMAGE)
    return next(yaml.safe_load_all(Path(path).read_text()))


def test_every_kustomization_renders_offline_with_every_part(rendered: list[dict]) -> None:
    kinds = sorted({obj["kind"] for obj in rendered})
    assert kinds == ["ConfigMap", "CronJob", "Deployment", "Experiment", "InferenceService", "Namespace", "NetworkPolicy",
                     "PersistentVolumeClaim", "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount",
                     "StatefulSet", "TFJob"]


def test_every_object_and_pod_template_validates_strictly(rendered: list[dict]) -> None:
    failures = []
    for obj in rendered:
        custom = {"TFJob": tfjob_problems, "Experiment": katib_problems,  # KServe's own CRD schema, trimmed:
                  "InferenceService": FakeKubeServer.problems}.get(obj["kind"])
        checks = [(name_of(obj), obj)] if custom is None else []
        failures += [f"{name_of(obj)}: {p}" for p in (custom(obj) if custom else [])]
        for where, candidate in checks + pod_templates(obj):
            try:
                kubernetes_validate.validate(candidate, K8S_VERSION, strict=True)
            except kubernetes_validate.ValidationError as err:
                failures.append(f"{where}: {err.message} at {list(err.absolute_path)}")
            except kubernetes_validate.SchemaNotFoundError:
                failures.append(f"{where}: kind unknown to Kubernetes {K8S_VERSION} and not checked here")
    assert not failures, "\n".join(failures)
    templates = [where for obj in rendered for where, _ in pod_templates(obj)]
    assert {w.split("/")[0] for w in templates} == {"TFJob", "CronJob", "Experiment", "Deployment", "StatefulSet"}


def test_every_container_meets_the_restricted_profile(rendered: list[dict]) -> None:
    assert sum(1 for obj in rendered for _ in pod_specs(obj)) >= 3  # the CronJob's, the TFJob's, TF Serving's
    offenders = restricted_offenders(rendered)
    assert not offenders, "containers short of the restricted profile:\n" + "\n".join(offenders)


def test_no_role_grants_wildcards_or_more_than_submitting_needs(rendered: list[dict]) -> None:
    assert not rbac_offenders(rendered), "\n".join(rbac_offenders(rendered))
    granted = {(group, resource, verb) for obj in rendered if obj["kind"] == "Role" for rule in obj["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}
    submit_needs = {("pipelines.kubeflow.org", "experiments", v) for v in ("get", "list", "create")} | {
        ("pipelines.kubeflow.org", "runs", "create")}
    deploy_needs = {("serving.kserve.io", "inferenceservices", v) for v in ("get", "patch")}  # test_k8s_kserve.py
    assert granted == submit_needs | deploy_needs


def test_the_checks_catch_weakened_manifests(base: list[dict]) -> None:
    def tampered(change) -> list[dict]:
        objects = copy.deepcopy(base)
        change({obj["kind"]: obj for obj in objects})
        return objects

    tf = "spec.tfReplicaSpecs.Worker.template.spec"
    cron = "spec.jobTemplate.spec.template.spec"
    cases = {
        "capabilities.drop does not contain ALL":
            lambda o: _at(o["TFJob"], f"{tf}.containers[0].securityContext")["capabilities"].pop("drop"),
        "allowPrivilegeEscalation is not false":
            lambda o: _at(o["CronJob"], f"{cron}.containers[0].securityContext").update(allowPrivilegeEscalation=True),
        "runAsUser is not a non-zero UID (0)":
            lambda o: _at(o["TFJob"], f"{tf}.containers[0].securityContext").update(runAsUser=0),
        "readOnlyRootFilesystem is not true":
            lambda o: _at(o["CronJob"], f"{cron}.containers[0].securityContext").pop("readOnlyRootFilesystem"),
        "is not pinned by digest":
            lambda o: _at(o["TFJob"], f"{tf}.containers[0]").update(image="registry.example.com/shardflow:latest"),
        "env KFP_TOKEN is a literal":
            lambda o: _at(o["CronJob"], f"{cron}.containers[0]")["env"].append({"name": "KFP_TOKEN", "value": "x"}),
        "automountServiceAccountToken is not false":
            lambda o: _at(o["TFJob"], tf).pop("automountServiceAccountToken"),
        "initContainer fetch: seccompProfile.type is not RuntimeDefault":
            lambda o: _at(o["TFJob"], tf).update(initContainers=[{"name": "fetch", "image": "busybox"}]) or
            _at(o["TFJob"], tf)["securityContext"].pop("seccompProfile"),
    }
    for expected, change in cases.items():
        offenders = restricted_offenders(tampered(change))
        assert any(expected in offender for offender in offenders), f"{expected!r} not caught: {offenders}"
    assert restricted_offenders(base) == []
    serving = "spec.template.spec.containers[0]"
    serving_cases = {
        "no readinessProbe on the REST model status /v1/models/shardflow":
            lambda o: _at(o["Deployment"], serving).pop("readinessProbe"),
        "unknown flag --model_base":
            lambda o: _at(o["Deployment"], serving)["args"].append("--model_base=/artifacts/serving"),
        "is neither a bucket nor on a mounted volume claim":
            lambda o: _at(o["Deployment"], serving)["volumeMounts"].pop(0),
        "no --model_config_file":  # back to serving the newest version folder, whatever CURRENT.json names
            lambda o: _at(o["Deployment"], serving).update(args=["--port=8500", "--rest_api_port=8501",
                                                                 "--model_name=shardflow",
                                                                 "--model_base_path=/artifacts/serving"]),
        "no Service selects its pods on both the gRPC and the REST port":
            lambda o: o["Service"]["spec"]["ports"].pop(),
    }
    for expected, change in serving_cases.items():
        problems = tf_serving_problems(tampered(change))
        assert any(expected in problem for problem in problems), f"{expected!r} not caught: {problems}"
    assert tf_serving_problems(base) == []
    wildcard = tampered(lambda o: o["Role"]["rules"][0].update(verbs=["*"]))
    assert rbac_offenders(wildcard) == ["Role/pipeline-submitter rule 0: wildcard in verbs"]


def test_every_reference_resolves_inside_the_namespace(rendered: list[dict]) -> None:
    (namespace,) = [obj["metadata"]["name"] for obj in rendered if obj["kind"] == "Namespace"]
    names = {(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]) for obj in rendered}
    dangling = [f"{name_of(o)} outside namespace {namespace}" for o in rendered
                if o["kind"] != "Namespace" and o["metadata"].get("namespace") != namespace]
    for obj in rendered:
        for where, spec in pod_specs(obj):
            wanted = [("ServiceAccount", spec.get("serviceAccountName", "default"))]
            wanted += [("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"])
                       for v in spec.get("volumes") or [] if "persistentVolumeClaim" in v]
            wanted += [("ConfigMap", v["configMap"]["name"]) for v in spec.get("volumes") or [] if "configMap" in v]
            dangling += [f"{name_of(obj)} {where} -> {kind}/{name}" for kind, name in wanted
                         if (kind, namespace, name) not in names]
        if obj["kind"] == "RoleBinding":
            dangling += [f"{name_of(obj)} -> {ref['kind']}/{ref['name']} in {ref.get('namespace', namespace)}"
                         for ref in [obj["roleRef"], *obj["subjects"]]
                         if (ref["kind"], ref.get("namespace", namespace), ref["name"]) not in names]
        if obj["kind"] == "PodDisruptionBudget":  # the Training Operator's labels on the TFJob's pods
            labels = obj["spec"]["selector"]["matchLabels"]
            jobs = [o for o in rendered if o["kind"] == "TFJob"
                    and o["metadata"]["name"] == labels["training.kubeflow.org/job-name"]]
            if not jobs or labels["training.kubeflow.org/replica-type"] not in {
                    t.lower() for t in jobs[0]["spec"]["tfReplicaSpecs"]}:
                dangling.append(f"{name_of(obj)} selects no TFJob's pods: {labels}")
    assert not dangling, "\n".join(dangling)


def test_the_cronjob_submits_the_mounted_pipeline_with_valid_flags(rendered: list[dict]) -> None:
    (cronjob,) = [obj for obj in rendered if obj["kind"] == "CronJob"]
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    assert cronjob["spec"]["startingDeadlineSeconds"] > 0
    assert cronjob["spec"]["successfulJobsHistoryLimit"] >= 1 and cronjob["spec"]["failedJobsHistoryLimit"] >= 1
    to_kfp_cron(cronjob["spec"]["schedule"])  # a valid 5-field cron
    spec = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"][0] == "submit"
    parser = argparse.ArgumentParser()
    add_submit_arguments(parser)
    args = parser.parse_args(container["args"][1:])  # the real CLI accepts the manifest's flags
    assert args.host == "http://ml-pipeline.kubeflow:8888"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    config_map = volumes[mounts[os.path.dirname(args.pipeline_package)]]["configMap"]["name"]
    assert any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == config_map and
               os.path.basename(args.pipeline_package) in o["data"] for o in rendered)
    env = {e["name"]: e.get("value") for e in container["env"]}
    token_volume = volumes[mounts[os.path.dirname(env["KF_PIPELINES_SA_TOKEN_PATH"])]]
    (source,) = token_volume["projected"]["sources"]
    assert source["serviceAccountToken"]["audience"] == "pipelines.kubeflow.org"


def test_the_cronjob_passes_every_pipeline_parameter_without_a_default(rendered: list[dict],
                                                                       pipeline_spec: dict) -> None:
    (cronjob,) = [obj for obj in rendered if obj["kind"] == "CronJob"]
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    add_submit_arguments(parser)
    params = parse_param_args(parser.parse_args(container["args"][1:]).param)
    required = required_parameters(pipeline_spec)
    assert {"index", "data_root", "serving_dir", "run_record_dir"} <= set(required)
    assert set(required) <= set(params), f"the CronJob's runs would be refused: no {set(required) - set(params)}"
    typed = typed_params(pipeline_spec, params)  # what submit sends: names known, values of the declared types
    for spec in typed["index"]:
        assert spec.split("=", 1)[-1].startswith(("/", "s3://", "gs://")), spec
    for name in ("data_root", "serving_dir", "run_record_dir"):  # paths inside the step pods: absolute or URIs
        assert typed[name].startswith(("/", "s3://", "gs://")), f"{name}={typed[name]!r}"


def _tfjob(objects: list[dict], served: bool = False) -> dict:
    """The multi-worker TFJob, or (`served`) the one the tf.data service feeds (tfjob-train-served.yaml)."""
    (tfjob,) = [o for o in objects if o["kind"] == "TFJob" and o["metadata"]["name"].endswith("-served") == served]
    return tfjob


@pytest.mark.parametrize("served", [False, True])
def test_the_tfjobs_run_multi_worker_training_or_one_trainer_on_the_data_service(rendered: list[dict],
                                                                                 served: bool) -> None:
    worker = _tfjob(rendered, served)["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 1 if served else worker["replicas"] >= 2
    (container,) = worker["template"]["spec"]["containers"]
    assert container["args"][0] == "train"
    parser = argparse.ArgumentParser()
    trainer_cli.add_arguments(parser)
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m[1]], a) for a in container["args"][1:]]  # as the kubelet does
    config = trainer_cli.config_from_args(parser.parse_args(args), [])  # validates the options
    assert (config.input.data_service is not None) == served
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts[os.path.dirname(config.export.output)].get("readOnly") is not True, "the model directory is read-only"


def test_the_katib_experiment_runs_the_tuners_search_as_trials_of_shardflow_train(rendered: list[dict]) -> None:
    from shardflow.tuner.space import parse_space

    (experiment,) = [obj for obj in rendered if obj["kind"] == "Experiment"]
    for args in katib_trial_args(experiment):  # both ends of every parameter's feasible space
        assert args[0] == "train"
        parser = argparse.ArgumentParser()
        trainer_cli.add_arguments(parser)
        trainer_cli.config_from_args(parser.parse_args(args[1:]), [])  # the Trainer's own checks of the values
    # The Experiment's parameters are a search space `shardflow tune --space` takes (docs/tuning.md).
    as_space = {"double": "log", "int": "int", "discrete": "choice", "categorical": "choice"}
    entries = []
    for p in experiment["spec"]["parameters"]:
        space = p["feasibleSpace"]
        bounds = ",".join(space["list"]) if "list" in space else f"{space['min']}:{space['max']}"
        entries.append(f"{p['name']}={as_space[p['parameterType']]}:{bounds}")
    assert {d.name for d in parse_space(tuple(entries))} == {"learning_rate", "batch_size"}
    assert experiment["spec"]["objective"]["objectiveMetricName"] == "val_accuracy"
    broken = copy.deepcopy(experiment)
    broken["spec"]["trialTemplate"]["trialParameters"][0]["reference"] = "lr"
    broken["spec"]["algorithm"]["algorithmName"] = "annealing"
    assert katib_problems(broken) == ["algorithmName 'annealing'",
                                      "trialParameter learningRate references unknown parameter lr"]


def test_overlays_pin_the_image_and_change_the_environment(base: list[dict]) -> None:
    base_images = {c["image"] for obj in base for _, s in pod_specs(obj) for _, c in containers_of(s)}
    assert base_images == {f"registry.example.com/shardflow@{PLACEHOLDER_DIGEST}",
                           f"docker.io/tensorflow/serving@{PLACEHOLDER_DIGEST}"}
    for overlay in KUSTOMIZATIONS[1:]:
        objects = render(overlay)
        images = {c["image"] for obj in objects for _, s in pod_specs(obj) for _, c in containers_of(s)}
        assert len(images) == 2 and not any(PLACEHOLDER_DIGEST in i for i in images), f"{overlay} deploys a placeholder"
        assert _namespaces(objects).isdisjoint(_namespaces(base)), f"{overlay} deploys into the base's namespace"
    example = {obj["kind"]: obj for obj in render("overlays/example")}
    original = {obj["kind"]: obj for obj in base}
    example["TFJob"], original["TFJob"] = _tfjob(render("overlays/example")), _tfjob(base)
    assert example["CronJob"]["metadata"]["name"] == "example-" + original["CronJob"]["metadata"]["name"]
    assert example["CronJob"]["spec"]["schedule"] != original["CronJob"]["spec"]["schedule"]
    tf = "spec.tfReplicaSpecs.Worker"
    assert _at(example["TFJob"], f"{tf}.replicas") > _at(original["TFJob"], f"{tf}.replicas")
    assert (_at(example["TFJob"], f"{tf}.template.spec.containers[0].resources")
            != _at(original["TFJob"], f"{tf}.template.spec.containers[0].resources"))


def _namespaces(objects: list[dict]) -> set[str]:
    return {o["metadata"]["namespace"] for o in objects if o["kind"] != "Namespace"}


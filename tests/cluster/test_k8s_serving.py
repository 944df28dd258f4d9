"""k8s/'s TF Serving Deployment serves what the pipeline pushes: its model config is the one the Pusher writes
into the CronJob's `serving_dir`, on the volume the TFJob's trainer writes to, read-only, warm-up on, never all
pods down.
Its flags, ports, readiness probe and model source are checked by `tf_serving_problems` (k8s_checks.py),
which test_k8s.py's tampered copies show failing."""
from __future__ import annotations

import argparse

import pytest

from shardflow.pipelines.params import parse_param_args
from shardflow.pipelines.submit import add_submit_arguments

from k8s_checks import KUSTOMIZATIONS, render
from k8s_serving_checks import tf_serving_containers, tf_serving_flags, tf_serving_problems, tf_serving_source


@pytest.fixture(scope="module", params=KUSTOMIZATIONS)
def rendered(request: pytest.FixtureRequest) -> list[dict]:
    return render(request.param)


def test_tf_serving_serves_the_pipelines_serving_dir_from_the_trainers_volume(rendered: list[dict]) -> None:
    assert tf_serving_problems(rendered) == []
    ((deployment, spec, container),) = tf_serving_containers(rendered)
    flags = tf_serving_flags(container)
    (cronjob,) = [obj for obj in rendered if obj["kind"] == "CronJob"]
    (submit,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    add_submit_arguments(parser)
    params = parse_param_args(parser.parse_args(submit["args"][1:]).param)
    # The model config the pipeline's Pusher writes beside the versions: TF Serving serves what CURRENT.json names.
    assert flags["model_config_file"] == params["serving_dir"] + "/models.config"
    assert tf_serving_source(flags) == params["serving_dir"]
    assert flags.get("enable_model_warmup", "true") == "true"  # replays the infra validator's warm-up file
    # The volume under the serving dir is the claim the TFJob writes its model to (the pipeline's artifacts).
    (tfjob,) = [obj for obj in rendered if obj["kind"] == "TFJob" and not obj["metadata"]["name"].endswith("-served")]
    trainer = tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]

    def claim_at(pod: dict, container: dict, path: str) -> str:
        (mount,) = [m for m in container["volumeMounts"] if (path + "/").startswith(m["mountPath"] + "/")]
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        return volume["persistentVolumeClaim"]["claimName"]

    assert claim_at(spec, container, tf_serving_source(flags)) == claim_at(
        trainer, trainer["containers"][0], tf_serving_source(flags))
    assert all(m.get("readOnly") for m in container["volumeMounts"] if m["mountPath"] != "/tmp")
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0

"""`shardflow submit`: start one run of the compiled pipeline on Kubeflow Pipelines.

    shardflow submit --host http://ml-pipeline.kubeflow:8888 \
        (--pipeline-package /pipeline/pipeline.yaml | --image REGISTRY/shardflow@sha256:DIGEST [--mount-pvc ...]) \
        [--param name=value ...] [--name shardflow-scheduled] [--experiment shardflow] [--namespace NS]

    from shardflow.pipelines.submit import submit
    run_id = submit("http://localhost:8888", "pipeline.yaml", {"epochs": "5"}, "nightly", "shardflow")

The k8s/ CronJob runs this on its schedule (KFP recurring runs cannot be declared as Kubernetes
resources). The run is named "<--name> <UTC time>", so every submission is told apart in the UI.
In a multi-user KFP the projected service-account token (--token-path) authenticates the request.
"""
from __future__ import annotations

import argparse
import datetime
import tempfile
from collections.abc import Mapping
from typing import Any

from ..core.errors import ConfigError
from .schedule import (
    DEFAULT_TOKEN_PATH,
    add_connection_arguments,
    check_host,
    compiled_package,
    connect,
    kfp_namespace,
    read_pipeline_package,
    reporting_api_errors,
    run_parameters,
)
from .params import parse_param_args


def submit(host: str, pipeline_package: str, params: Mapping[str, Any], run_name: str, experiment: str,
           namespace: str | None = None, token_path: str | None = DEFAULT_TOKEN_PATH) -> str:
    """Creates one run of the package in `experiment` (created if missing); returns the run id."""
    parameters = run_parameters(read_pipeline_package(pipeline_package), params)
    for option, value in (("--name", run_name), ("--experiment", experiment)):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{option} must be a non-empty name, got {value!r}")
    client = connect(host, token_path)
    result = client.create_run_from_pipeline_package(
        pipeline_package, arguments=parameters, run_name=run_name, experiment_name=experiment,
        namespace=kfp_namespace(client, namespace))
    return result.run_id


def add_submit_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--name", help="run name prefix; the UTC submission time is appended "
                                       "(default: the pipeline's name)")


def submit_main(args: argparse.Namespace, extra: list[str]) -> int:
    check_host(args.host)  # bad flags fail before anything is compiled or sent
    params = parse_param_args(args.param)
    with tempfile.TemporaryDirectory(prefix="shardflow-submit-") as workdir:
        package = compiled_package(args, workdir)
        prefix = args.name or read_pipeline_package(package)["pipelineInfo"]["name"]
        run_name = f"{prefix} {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M:%S}"
        run_id = reporting_api_errors("submit", args.host, lambda: submit(
            args.host, package, params, run_name, args.experiment, namespace=args.namespace,
            token_path=args.token_path))
    print(f"run {run_name!r}: {run_id}")
    return 0


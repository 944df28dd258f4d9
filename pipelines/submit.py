"""`shardflow submit`: start one run of the compiled pipeline on Kubeflow Pipelines.

    shardflow submit --host http://ml-pipeline.kubeflow:8888 \
        (--pipeline-package /pipeline/pipeline.yaml | --image REGISTRY/shardflow@sha256:DIGEST [--mount-pvc ...]) \
        [--param name=value ...] [--name shardflow-scheduled] [--experiment shardflow] [--namespace NS] \
        [--service-account pipeline-runner] [--wait [--timeout SECONDS]]

    from shardflow.pipelines.submit import submit
    run_id = submit("http://localhost:8888", "pipeline.yaml", {"epochs": "5"}, "nightly", "shardflow")

The k8s/ CronJob runs this on its schedule (KFP recurring runs cannot be declared as Kubernetes
resources). The run is named "<--name> <UTC time>", so every submission is told apart in the UI.
In a multi-user KFP the projected service-account token (--token-path) authenticates the request.

With --wait it follows the run to its end (run_wait.py): 0 when it succeeded, 75 when its push step failed
(another run pushed first: the k8s CronJob's podFailurePolicy submits again, to evaluate against the newly
served model), 1 for any other failure, a cancelled run or the timeout.
"""
from __future__ import annotations

import argparse
import datetime
import tempfile
from collections.abc import Mapping
from typing import Any

from ..core.errors import ConfigError
from .run_wait import wait_for_run
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
           namespace: str | None = None, token_path: str | None = DEFAULT_TOKEN_PATH,
           service_account: str | None = None) -> str:
    """Creates one run of the package in `experiment` (created if missing), its pods running as `service_account`
    (None: KFP's default); returns the run id."""
    parameters = run_parameters(read_pipeline_package(pipeline_package), params)
    for option, value in (("--name", run_name), ("--experiment", experiment)):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{option} must be a non-empty name, got {value!r}")
    client = connect(host, token_path)
    result = client.create_run_from_pipeline_package(
        pipeline_package, arguments=parameters, run_name=run_name, experiment_name=experiment,
        namespace=kfp_namespace(client, namespace), service_account=service_account or None)
    return result.run_id


def add_submit_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--name", help="run name prefix; the UTC submission time is appended "
                                       "(default: the pipeline's name)")
    parser.add_argument("--service-account", default="", metavar="NAME",
                        help="the service account the run's pods use (default: KFP's); k8s/ binds pipeline-runner "
                             "to patch the InferenceService")
    parser.add_argument("--wait", action="store_true",
                        help="wait for the run to end: exit 0 succeeded, 75 its push lost to another run's, 1 failed")
    parser.add_argument("--timeout", type=float, default=6 * 3600, metavar="SECONDS",
                        help="with --wait: give up after this long (exit 1; default %(default)g)")


def submit_main(args: argparse.Namespace, extra: list[str]) -> int:
    check_host(args.host)  # bad flags fail before anything is compiled or sent
    if args.wait and not args.timeout > 0:
        raise ConfigError(f"--timeout must be a positive number of seconds, got {args.timeout!r}")
    params = parse_param_args(args.param)
    with tempfile.TemporaryDirectory(prefix="shardflow-submit-") as workdir:
        package = compiled_package(args, workdir)
        prefix = args.name or read_pipeline_package(package)["pipelineInfo"]["name"]
        run_name = f"{prefix} {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M:%S}"
        run_id = reporting_api_errors("submit", args.host, lambda: submit(
            args.host, package, params, run_name, args.experiment, namespace=args.namespace,
            token_path=args.token_path, service_account=args.service_account))
    print(f"run {run_name!r}: {run_id}", flush=True)
    if args.wait:
        outcome = reporting_api_errors("submit", args.host, lambda: wait_for_run(
            connect(args.host, args.token_path), run_id, args.timeout))
        print(f"run {run_name!r}: {outcome}")
    return 0


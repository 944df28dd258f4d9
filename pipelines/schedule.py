"""`shardflow schedule`: create or update a Kubeflow Pipelines recurring run of the shardflow pipeline.

    shardflow schedule --host http://ml-pipeline.kubeflow:8888 --cron '0 3 * * *' \
        (--image REGISTRY/shardflow@sha256:DIGEST [--mount-pvc CLAIM=PATH ...] | --pipeline-package pipeline.yaml) \
        [--param name=value ...] [--name N] [--experiment E]

    from shardflow.pipelines.schedule import schedule
    schedule("http://localhost:8888", "0 3 * * *", "pipeline.yaml", {"epochs": "5"},
             job_name="shardflow-retrain", experiment="shardflow")

The cron expression is standard 5-field cron (minute hour day-of-month month day-of-week, UTC); KFP
wants 6 fields with seconds first, so "0 3 * * *" is sent as "0 0 3 * * *". Every option is checked
before the first request. The recurring run is identified by (experiment, name): scheduling again
creates the new one first, then deletes the old ones, so there is never a gap and never two left.
Runs do not overlap (max_concurrency=1) and missed intervals are not backfilled (no_catchup).
The package is either compiled here with --image (and the cluster flags of `shardflow compile`)
or given with --pipeline-package: exactly one, so nothing scheduled runs a placeholder image.
One-off runs (used by the k8s CronJob): `shardflow submit`, see shardflow.pipelines.submit.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from ..core.errors import ConfigError, ShardflowError
from .cluster_options import add_cluster_arguments, check_image, cluster_options_from_args
from .names import PIPELINE_NAME
from .params import declared_parameters, parse_param_args, typed_params

if TYPE_CHECKING:  # kfp (and the kubernetes client it imports) costs seconds: loaded when a command runs
    import kfp

# (name, lowest, highest, names usable instead of numbers) of the 6 KFP fields, seconds first.
_CRON_FIELDS = (
    ("second", 0, 59, ()),
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")),
    ("day-of-week", 0, 6, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")),
)
_CRON_PART = re.compile(r"^(?P<base>\*|\?|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:/(?P<step>\d+))?$")
_NAME_FILTER_KEY = "display_name"
DEFAULT_TOKEN_PATH = "/var/run/secrets/kubeflow/pipelines/token"  # kfp's default for the projected token


def to_kfp_cron(expression: str) -> str:
    """Checks a 5-field cron expression (or a 6-field one, seconds first) and returns KFP's 6 fields."""
    fields = expression.split() if isinstance(expression, str) else []
    if len(fields) not in (5, 6):
        raise ConfigError(f"--cron {expression!r}: expected 5 fields (minute hour day-of-month month day-of-week), "
                          f"e.g. '0 3 * * *', got {len(fields)}")
    if len(fields) == 5:
        fields = ["0", *fields]
    for text, (name, low, high, names) in zip(fields, _CRON_FIELDS):
        for part in text.split(","):
            _check_cron_part(expression, name, part, low, high, names)
    return " ".join(fields)


def _check_cron_part(expression: str, field: str, part: str, low: int, high: int, names: tuple[str, ...]) -> None:
    match = _CRON_PART.match(part)
    if not match:
        raise ConfigError(f"--cron {expression!r}: {field} field: {part!r} is not a value, a range a-b, '*' "
                          "or one of those with a step /n")
    base, step = match["base"], match["step"]
    if base == "?" and field not in ("day-of-month", "day-of-week"):
        raise ConfigError(f"--cron {expression!r}: '?' is only allowed in day-of-month and day-of-week")
    if step is not None and int(step) < 1:
        raise ConfigError(f"--cron {expression!r}: {field} field: step must be >= 1, got {part!r}")
    if base in ("*", "?"):
        return
    bounds = [_cron_value(expression, field, value, low, high, names) for value in base.split("-")]
    if bounds[0] > bounds[-1]:
        raise ConfigError(f"--cron {expression!r}: {field} field: range {base!r} runs backwards")


def _cron_value(expression: str, field: str, text: str, low: int, high: int, names: tuple[str, ...]) -> int:
    if text.upper() in names:
        return low + names.index(text.upper())
    if not text.isdigit():
        raise ConfigError(f"--cron {expression!r}: {field} field: {text!r} is not a number"
                          + (f" or one of {', '.join(names)}" if names else ""))
    if not low <= int(text) <= high:
        hint = " (use 0 for Sunday)" if field == "day-of-week" and text == "7" else ""
        raise ConfigError(f"--cron {expression!r}: {field} field: {text} is out of range {low}-{high}{hint}")
    return int(text)


def read_pipeline_package(path: str) -> dict[str, Any]:
    """The pipeline spec (first YAML document) of a compiled package; a clear error if it is not one."""
    if not path.endswith((".yaml", ".yml")):
        raise ConfigError(f"--pipeline-package {path!r}: expected a compiled pipeline .yaml file")
    try:
        with open(path, encoding="utf-8") as handle:
            spec = next(yaml.safe_load_all(handle), None)
    except OSError as err:
        raise ConfigError(f"--pipeline-package {path!r}: cannot read it ({err.strerror})") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"--pipeline-package {path!r}: not YAML ({err})") from err
    if not isinstance(spec, dict) or "pipelineInfo" not in spec or "root" not in spec:
        raise ConfigError(f"--pipeline-package {path!r}: not a compiled KFP pipeline (no pipelineInfo/root); "
                          "compile it with `shardflow compile`")
    return spec


def check_host(host: str) -> str:
    if not isinstance(host, str) or not re.match(r"^https?://[^/\s]+", host):
        raise ConfigError(f"--host must be the KFP API URL such as http://ml-pipeline.kubeflow:8888, got {host!r}")
    return host.rstrip("/")


def connect(host: str, token_path: str | None = None) -> kfp.Client:
    """A kfp.Client; with the projected service-account token when the file exists (multi-user KFP)."""
    from kfp.client import Client, ServiceAccountTokenVolumeCredentials  # not kfp.Client: see kfp_sdk.py

    use_token = bool(token_path) and os.path.isfile(token_path)
    credentials = ServiceAccountTokenVolumeCredentials(token_path) if use_token else None
    with warnings.catch_warnings():  # kfp warns on every Client() that it needs KFP >= 2.0.0-beta.2
        warnings.simplefilter("ignore", FutureWarning)
        return Client(host=check_host(host), credentials=credentials)


def kfp_namespace(client: kfp.Client, namespace: str | None) -> str | None:
    """The namespace to send: only multi-user KFP has per-namespace experiments."""
    return namespace if namespace and client.get_kfp_healthz().multi_user else None


def name_filter(name: str) -> str:
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": _NAME_FILTER_KEY, "stringValue": name}]})


def _pipeline_version(client: kfp.Client, package: str, pipeline_name: str) -> tuple[str, str]:
    """Uploads the package as a pipeline version named by its content hash, unless that version exists."""
    pipeline_id = client.get_pipeline_id(pipeline_name)
    if pipeline_id is None:  # the first upload creates the pipeline and its first version
        pipeline_id = client.upload_pipeline(package, pipeline_name=pipeline_name).pipeline_id
        versions = client.list_pipeline_versions(pipeline_id, sort_by="created_at desc", page_size=1)
        return pipeline_id, versions.pipeline_versions[0].pipeline_version_id
    with open(package, "rb") as handle:
        version_name = f"{pipeline_name}-{hashlib.sha256(handle.read()).hexdigest()[:12]}"
    found = client.list_pipeline_versions(pipeline_id, filter=name_filter(version_name)).pipeline_versions
    if found:
        return pipeline_id, found[0].pipeline_version_id
    version = client.upload_pipeline_version(package, version_name, pipeline_id=pipeline_id)
    return pipeline_id, version.pipeline_version_id


def _recurring_run_ids(client: kfp.Client, experiment_id: str, job_name: str) -> list[str]:
    ids, token = [], ""
    while True:
        page = client.list_recurring_runs(page_token=token, page_size=100, experiment_id=experiment_id,
                                          filter=name_filter(job_name))
        ids += [run.recurring_run_id for run in page.recurring_runs or [] if run.display_name == job_name]
        token = page.next_page_token or ""
        if not token:
            return ids


def schedule(host: str, cron: str, pipeline_package: str, params: Mapping[str, Any], job_name: str,
             experiment: str, max_concurrency: int = 1, no_catchup: bool = True,
             namespace: str | None = None, token_path: str | None = DEFAULT_TOKEN_PATH) -> str:
    """Creates or replaces the recurring run `job_name` in `experiment`; returns its id."""
    kfp_cron = to_kfp_cron(cron)
    spec = read_pipeline_package(pipeline_package)
    parameters = run_parameters(spec, params)
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or not 1 <= max_concurrency <= 10:
        raise ConfigError(f"--max-concurrency must be an integer in 1..10 (KFP's limit), got {max_concurrency!r}")
    for option, value in (("--name", job_name), ("--experiment", experiment)):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{option} must be a non-empty name, got {value!r}")
    client = connect(host, token_path)
    experiment_id = client.create_experiment(experiment, namespace=kfp_namespace(client, namespace)).experiment_id
    pipeline_id, version_id = _pipeline_version(client, pipeline_package, spec["pipelineInfo"]["name"])
    previous = _recurring_run_ids(client, experiment_id, job_name)
    created = client.create_recurring_run(
        experiment_id, job_name, cron_expression=kfp_cron, max_concurrency=max_concurrency,
        no_catchup=no_catchup, params=parameters, pipeline_id=pipeline_id, version_id=version_id, enabled=True)
    for recurring_run_id in previous:  # after the create: a failed create keeps the old schedule
        client.delete_recurring_run(recurring_run_id)
    return created.recurring_run_id


def compiled_package(args: argparse.Namespace, workdir: str) -> str:
    """--pipeline-package, or the shardflow pipeline compiled into `workdir` with --image and the cluster flags."""
    cluster = cluster_options_from_args(args)  # bad values fail before anything is compiled
    if args.pipeline_package:
        if not cluster.is_empty():  # a compiled package carries its own; silently ignoring them would mislead
            raise ConfigError("--mount-pvc, --node-selector and --toleration are compiled into the pipeline: "
                              f"with --pipeline-package {args.pipeline_package!r}, pass them to `shardflow compile`")
        return args.pipeline_package
    image = check_image(args.image, args.allow_mutable_image)
    from .compiler import compile_pipeline

    return str(compile_pipeline(os.path.join(workdir, "pipeline.yaml"), image, cluster,
                                allow_mutable_image=args.allow_mutable_image))


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--host", required=True, help="KFP API URL, e.g. http://ml-pipeline.kubeflow:8888")
    package = parser.add_mutually_exclusive_group(required=True)  # never a default (placeholder) image
    package.add_argument("--image", help="compile the shardflow pipeline for this component image (by digest)")
    package.add_argument("--pipeline-package", help="a compiled pipeline .yaml (from `shardflow compile`)")
    add_cluster_arguments(parser)
    add("--param", action="append", default=[], metavar="NAME=VALUE",
        help="pipeline parameter, converted to the type the pipeline declares; repeatable")
    add("--experiment", default="shardflow", help="KFP experiment, created if missing (default shardflow)")
    add("--namespace", help="user namespace of a multi-user KFP (ignored by single-user KFP)")
    add("--token-path", default=os.environ.get("KF_PIPELINES_SA_TOKEN_PATH", DEFAULT_TOKEN_PATH),
        help="service-account token for multi-user KFP, used when the file exists (default: %(default)s)")


def add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--cron", required=True, help="5-field cron, UTC, e.g. '0 3 * * *' (03:00 daily)")
    parser.add_argument("--name", default="shardflow-retrain", help="recurring run name; replaces one of that name")
    parser.add_argument("--max-concurrency", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument("--catchup", action="store_true", help="backfill missed intervals (default: no catch-up)")


def schedule_main(args: argparse.Namespace, extra: list[str]) -> int:
    check_host(args.host)  # bad flags fail before anything is compiled or sent
    to_kfp_cron(args.cron)
    params = parse_param_args(args.param)
    with tempfile.TemporaryDirectory(prefix="shardflow-schedule-") as workdir:
        package = compiled_package(args, workdir)
        recurring_run_id = reporting_api_errors("schedule", args.host, lambda: schedule(
            args.host, args.cron, package, params, args.name, args.experiment,
            max_concurrency=args.max_concurrency, no_catchup=not args.catchup,
            namespace=args.namespace, token_path=args.token_path))
    print(f"recurring run {args.name!r}: {recurring_run_id} (KFP cron {to_kfp_cron(args.cron)!r}, UTC)")
    return 0


class KfpApiError(ShardflowError):
    """The KFP API refused a request or could not be reached (exit 1)."""


def reporting_api_errors(command: str, host: str, call: Callable[[], Any]) -> Any:
    """`call()`; KfpApiError (one line) when the KFP API refuses or cannot be reached."""
    from kfp_server_api.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        return call()
    except ApiException as err:
        body = " ".join((err.body or "").split())[:500]
        raise KfpApiError(f"the KFP API at {host} answered {err.status} {err.reason}: {body}") from None
    except HTTPError as err:
        raise KfpApiError(f"cannot reach the KFP API at {host}: {err}") from None


def run_parameters(spec: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """A run's `--param`s typed against the package; for shardflow's own pipeline, every step's options
    are checked as `shardflow run` checks its flags (unknown flags, bad values), before anything is sent."""
    parameters = typed_params(spec, params)
    if spec.get("pipelineInfo", {}).get("name") == PIPELINE_NAME:
        from .run_target import check_baked_params

        check_baked_params(declared_parameters(spec), parameters)
    return parameters

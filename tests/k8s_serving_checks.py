"""Checks over the rendered TF Serving Deployment (used by test_k8s_serving.py and test_k8s.py): its flags,
ports, readiness, that it serves the version CURRENT.json names, and its Service. Each returns the offenders.
"""
from __future__ import annotations

import posixpath
from typing import Any

from k8s_checks import containers_of, name_of, pod_specs
from shardflow.pusher import MODEL_CONFIG, TfServing

# tensorflow_model_server's flags (TF Serving 2.x `--help`): a misspelt flag stops the server at start.
TF_SERVING_FLAGS = {
    "port", "grpc_socket_path", "rest_api_port", "rest_api_num_threads", "rest_api_timeout_in_ms", "enable_batching",
    "allow_version_labels_for_unavailable_models", "batching_parameters_file", "model_config_file",
    "model_config_file_poll_wait_seconds", "model_name", "model_base_path", "max_num_load_retries",
    "load_retry_interval_micros", "file_system_poll_wait_seconds", "flush_filesystem_caches",
    "tensorflow_session_parallelism", "tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism",
    "ssl_config_file", "platform_config_file", "per_process_gpu_memory_fraction", "saved_model_tags",
    "grpc_channel_arguments", "enable_model_warmup", "num_request_iterations_for_warmup", "monitoring_config_file",
    "enable_signature_method_name_check", "xla_cpu_compilation_enabled", "enable_profiler", "version"}


def tf_serving_flags(container: dict) -> dict[str, str]:
    """The `--name=value` flags of a tensorflow_model_server container."""
    return dict(arg[2:].split("=", 1) if "=" in arg else (arg[2:], "true") for arg in container.get("args") or [])


def tf_serving_containers(objects: list[dict]) -> list[tuple[dict, dict, dict]]:
    """(workload, pod spec, container) of every container running tensorflow_model_server."""
    return [(obj, spec, container) for obj in objects for _, spec in pod_specs(obj)
            for _, container in containers_of(spec)
            if (container.get("command") or [""])[0] == "tensorflow_model_server"]


def _port(container: dict, port: Any) -> int | None:
    """A probe's or Service's target port (a number or a container port's name) as a number."""
    if isinstance(port, int):
        return port
    return next((p["containerPort"] for p in container.get("ports") or [] if p.get("name") == port), None)


def tf_serving_source(flags: dict[str, str]) -> str:
    """The serving directory TF Serving reads: where its --model_config_file lies (shardflow push writes it there)."""
    return posixpath.dirname(flags.get("model_config_file", ""))


def tf_serving_problems(objects: list[dict]) -> list[str]:
    """The TF Serving Deployment's flags, ports, readiness on the REST model status, model source, Service."""
    problems = []
    for obj, spec, container in tf_serving_containers(objects):
        where, flags = f"{name_of(obj)} container {container['name']}", tf_serving_flags(container)
        problems += [f"{where}: unknown flag --{f}" for f in sorted(set(flags) - TF_SERVING_FLAGS)]
        problems += [f"{where}: no --{f}" for f in ("port", "rest_api_port", "model_config_file",
                                                     "model_config_file_poll_wait_seconds") if f not in flags]
        if posixpath.basename(flags.get("model_config_file", "")) != MODEL_CONFIG:
            problems.append(f"{where}: --model_config_file is not the serving directory's {MODEL_CONFIG}: TF Serving "
                            "would not serve the version CURRENT.json names")
        problems += [f"{where}: --{f} is ignored beside --model_config_file" for f in ("model_name", "model_base_path")
                     if f in flags]
        grpc, rest = int(flags.get("port", 8500)), int(flags.get("rest_api_port", 0))
        declared = {p["containerPort"] for p in container.get("ports") or []}
        problems += [f"{where}: port {p} of the flags is not a container port"
                     for p in (grpc, rest) if p not in declared]
        probe = (container.get("readinessProbe") or {}).get("httpGet") or {}
        if probe.get("path") != f"/v1/models/{TfServing.name}" or _port(container, probe.get("port")) != rest:
            problems.append(f"{where}: no readinessProbe on the REST model status /v1/models/{TfServing.name}")
        base = tf_serving_source(flags)
        mounts = [m for m in container.get("volumeMounts") or [] if (base + "/").startswith(m["mountPath"] + "/")]
        claims = {v["name"] for v in spec.get("volumes") or [] if "persistentVolumeClaim" in v}
        if not base.startswith(("gs://", "s3://")) and not any(m["name"] in claims for m in mounts):
            problems.append(f"{where}: the serving directory {base!r} is neither a bucket nor on a mounted volume claim")
        labels = obj["spec"]["template"]["metadata"].get("labels") or {}
        services = [s for s in objects if s["kind"] == "Service" and s["spec"].get("selector")
                    and s["spec"]["selector"].items() <= labels.items()]
        targets = {_port(container, p["targetPort"]) for s in services for p in s["spec"]["ports"]}
        if not {grpc, rest} <= targets:
            problems.append(f"{where}: no Service selects its pods on both the gRPC and the REST port")
    return problems

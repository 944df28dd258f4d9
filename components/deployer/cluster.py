"""The InferenceService through the official `kubernetes` client: get, create and merge-patch, each with a
server-side dry run first where the caller asks, every refusal one line.

    api = InferenceServices(ClusterTarget(name="digits", namespace="ml"))
    live = api.get()                          # the object, or None when it does not exist
    api.patch({"spec": {...}}, dry_run=True)  # validated by the API server and KServe's webhook, not stored

A 4xx answer (404, 409 conflict, 422 invalid, 403 forbidden) is the cluster refusing: ConfigError (exit 2).
A 5xx answer or no answer is a failure: ShardflowError (exit 1).
"""
from __future__ import annotations

import json
import os
from typing import Any

from ..core.errors import ConfigError, ShardflowError
from .config import ClusterTarget
from .inference_service import GROUP, PLURAL, VERSION

IN_CLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
TIMEOUT_SECONDS = 30


def namespace_of(target: ClusterTarget) -> str:
    """The namespace asked for, else the pod's own (in a cluster), else `default`."""
    if target.namespace:
        return target.namespace
    if os.path.isfile(IN_CLUSTER_NAMESPACE):
        with open(IN_CLUSTER_NAMESPACE, encoding="utf-8") as handle:
            return handle.read().strip() or "default"
    return "default"


def _api(target: ClusterTarget) -> Any:
    from kubernetes import client, config  # imported when a command talks to a cluster

    configuration = client.Configuration()
    if target.api_server:  # kubectl proxy, or the tests' loopback API: no credentials of ours
        configuration.host = target.api_server.rstrip("/")
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        try:
            config.load_kube_config(client_configuration=configuration)
        except (config.ConfigException, OSError) as err:
            raise ConfigError(f"no cluster to talk to: not in a pod and no kubeconfig ({err}); pass --kube-api "
                              "URL (e.g. kubectl proxy's) or set KUBECONFIG") from None
    configuration.retries = 2
    return client.CustomObjectsApi(client.ApiClient(configuration))


class InferenceServices:
    """One InferenceService (`target.name` in its namespace) of a cluster."""

    def __init__(self, target: ClusterTarget) -> None:
        self.name, self.namespace = target.name, namespace_of(target)
        self.where = f"InferenceService {self.namespace}/{self.name}"
        self._api = _api(target)

    def get(self) -> dict[str, Any] | None:
        """The live object, or None when it does not exist."""
        return self._call("read", lambda: self._api.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, self.name, _request_timeout=TIMEOUT_SECONDS), missing_ok=True)

    def create(self, body: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        return self._call("create", lambda: self._api.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, body, field_validation="Strict",
            _request_timeout=TIMEOUT_SECONDS, **({"dry_run": "All"} if dry_run else {})))

    def patch(self, patch: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """A JSON merge patch (null removes a field, a list is replaced whole): CRDs take no strategic merge."""
        return self._call("patch", lambda: self._api.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, self.name, patch, field_validation="Strict",
            _request_timeout=TIMEOUT_SECONDS, **({"dry_run": "All"} if dry_run else {})))

    def _call(self, verb: str, call: Any, missing_ok: bool = False) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return call()
        except ApiException as err:
            if missing_ok and err.status == 404:
                return None
            message = f"the cluster refused to {verb} {self.where}: {err.status} {err.reason}: {_message(err.body)}"
            raise (ConfigError if 400 <= (err.status or 0) < 500 else ShardflowError)(message) from None
        except HTTPError as err:
            raise ShardflowError(f"cannot reach the cluster to {verb} {self.where}: {err}") from None


def _message(body: Any) -> str:
    """A Status object's message (the API server's and KServe's webhook's reason), on one line."""
    try:
        text = json.loads(body).get("message") or body
    except (TypeError, ValueError, AttributeError):
        text = body or ""
    return " ".join(str(text).split())[:500]

"""The serving versions a registry alias names, for `shardflow clean-serving --keep` to protect (MLflow needed).

    aliased_versions("http://127.0.0.1:5000", "digits", "champion", "runs/digits/serving")   # {7}, or set()

The registry follows CURRENT.json (registry.py): each model version carries the serving version it is (VERSION_TAG).
An alias that lags the pointer (a rollback not yet synced) still names a version a person may load by it. A version
registered from another serving directory (its SERVED_URI_TAG elsewhere: two outputs sharing a name) is not this
one's. `follow_pointer` moves the alias onto the version CURRENT.json names now, as `shardflow promote` and
`rollback --inference-service` do right after the pointer moved (without waiting for the next `shardflow track`):

    follow_pointer("http://127.0.0.1:5000", "digits", "champion", "runs/digits/serving")   # "3": the model version
"""
from __future__ import annotations

from typing import Any

from ..core.errors import ShardflowError
from .mlflow_sink import MlflowSink, check_reachable, sink_errors
from ..pusher.serving import normalized, read_served
from .registry import SERVED_URI_TAG, VERSION_TAG, registered_versions, served_location


def _registry(tracking_uri: str, registered_model: str) -> Any:
    """The MLflow client of `tracking_uri` (ConfigError, exit 2, in one line when it cannot be reached), or None
    when `registered_model` is not registered there."""
    check_reachable(tracking_uri)
    client = MlflowSink(tracking_uri).client
    with sink_errors(tracking_uri):
        found = client.search_registered_models(filter_string=f"name = '{registered_model}'")
    return client if found else None


def aliased_versions(tracking_uri: str, registered_model: str, alias: str, serving_dir: str) -> set[int]:
    """The version of `serving_dir` that `alias` names on `registered_model` (set() when none); a tracking server
    that cannot be reached is ConfigError (exit 2) in one line, one that refuses ShardflowError (exit 1)."""
    from mlflow.exceptions import MlflowException

    client = _registry(tracking_uri, registered_model)
    if client is None:
        return set()
    with sink_errors(tracking_uri):
        try:
            version = client.get_model_version_by_alias(registered_model, alias)
        except MlflowException:  # the alias is not set on this model
            return set()
    tags = version.tags or {}
    number, served = tags.get(VERSION_TAG, ""), tags.get(SERVED_URI_TAG)
    if served and not normalized(served).startswith(normalized(serving_dir).rstrip("/") + "/"):
        return set()  # another output's version (served URI: SERVING/N/model/N, or SERVING/N of an older pointer)
    return {int(number)} if number.isdigit() else set()


def follow_pointer(tracking_uri: str, registered_model: str, alias: str, serving_dir: str) -> str:
    """Points `alias` at the model version registered for the version `serving_dir`'s CURRENT.json names (found by
    its served URI, as the registry sync registers it); that model version. A version not registered yet is
    ShardflowError (exit 1: the pointer has moved, the alias not); a server that cannot be reached ConfigError."""
    served = read_served(serving_dir)
    if served.pointer is None:
        raise ShardflowError(f"nothing is served from {serving_dir}: no version for alias {alias!r} to name")
    where = served_location(serving_dir, str(served.version), served.pointer)
    client = _registry(tracking_uri, registered_model)
    with sink_errors(tracking_uri):
        version = None if client is None else registered_versions(client, registered_model).get(normalized(where))
        if version is None:
            raise ShardflowError(f"version {served.version} of {serving_dir} is not registered in {registered_model!r} "
                                 f"at {tracking_uri} yet, so alias {alias!r} did not move: `shardflow track` "
                                 "registers it and moves the alias")
        client.set_registered_model_alias(registered_model, alias, version)
    return str(version)

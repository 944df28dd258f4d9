"""The serving versions a registry alias names, for `shardflow clean-serving --keep` to protect (MLflow needed).

    aliased_versions("http://127.0.0.1:5000", "digits", "champion")   # {7}, or set() when the alias is not set

The registry follows CURRENT.json (registry.py): each model version carries the serving version it is (VERSION_TAG).
An alias that lags the pointer (a rollback not yet synced) still names a version a person may load by it.
"""
from __future__ import annotations

from .mlflow_sink import MlflowSink, check_reachable, sink_errors
from .registry import VERSION_TAG


def aliased_versions(tracking_uri: str, registered_model: str, alias: str) -> set[int]:
    """The serving version `alias` names on `registered_model` (set() when neither exists); a tracking server
    that cannot be reached is ConfigError (exit 2) in one line, one that refuses ShardflowError (exit 1)."""
    from mlflow.exceptions import MlflowException

    check_reachable(tracking_uri)
    client = MlflowSink(tracking_uri).client
    with sink_errors(tracking_uri):
        if not client.search_registered_models(filter_string=f"name = '{registered_model}'"):
            return set()
        try:
            version = client.get_model_version_by_alias(registered_model, alias)
        except MlflowException:  # the alias is not set on this model
            return set()
    number = (version.tags or {}).get(VERSION_TAG, "")
    return {int(number)} if number.isdigit() else set()

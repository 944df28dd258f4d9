"""The serving versions a registry alias names, for `shardflow clean-serving --keep` to protect (MLflow needed).

    aliased_versions("http://127.0.0.1:5000", "digits", "champion", "runs/digits/serving")   # {7}, or set()

The registry follows CURRENT.json (registry.py): each model version carries the serving version it is (VERSION_TAG).
An alias that lags the pointer (a rollback not yet synced) still names a version a person may load by it. A version
registered from another serving directory (its SERVED_URI_TAG elsewhere: two outputs sharing a name) is not this
one's.
"""
from __future__ import annotations

from .mlflow_sink import MlflowSink, check_reachable, sink_errors
from ..pusher.serving import normalized
from .registry import SERVED_URI_TAG, VERSION_TAG


def aliased_versions(tracking_uri: str, registered_model: str, alias: str, serving_dir: str) -> set[int]:
    """The version of `serving_dir` that `alias` names on `registered_model` (set() when none); a tracking server
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
    tags = version.tags or {}
    number, served = tags.get(VERSION_TAG, ""), tags.get(SERVED_URI_TAG)
    if served and not normalized(served).startswith(normalized(serving_dir).rstrip("/") + "/"):
        return set()  # another output's version (served URI: SERVING/N/model/N, or SERVING/N of an older pointer)
    return {int(number)} if number.isdigit() else set()

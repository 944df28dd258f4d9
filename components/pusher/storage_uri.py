"""Where KServe loads a served version from: the one function that knows (its owner: the serving layout's).

KServe's storage initializer downloads an InferenceService's `storageUri` whole into `/mnt/models`, and TF
Serving then serves the highest integer folder there. So the URI must name a prefix holding exactly one
integer folder, the version's: the serving directory itself holds every version (and a racing push's copy),
and `SERVING/<N>` puts `saved_model.pb` at the top, which TF Serving cannot load (docs/kserve.md).

    served_storage_uri("s3://b/serving", 7, pointer)   # pointer["storage_uri"]: a prefix holding only 7/

The serving layout records that prefix as `storage_uri` in CURRENT.json (and in `served_versions` entries);
a version pushed before it has none, and cannot be served by KServe without being pushed again.
"""
from __future__ import annotations

from typing import Any

from ..core.errors import ConfigError

STORAGE_URI = "storage_uri"


def served_storage_uri(serving_dir: str, version: int, record: dict[str, Any] | None) -> str:
    """The storageUri of `version`: `record`'s (the pointer's, or the version's entry in `served_versions`)."""
    uri = (record or {}).get(STORAGE_URI)
    if not isinstance(uri, str) or not uri:
        raise ConfigError(f"version {version} of {serving_dir} records no {STORAGE_URI}: no prefix holds it alone, "
                          "and KServe would serve whatever version folder it downloads last; push it again with "
                          "this shardflow")
    return uri

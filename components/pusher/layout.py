"""Where a pushed version lives in a serving directory: one immutable folder per version, which both TF Serving's
model config and a KServe InferenceService's `storageUri` read, in place (one copy).

    SERVING/<N>/                  the version's folder: claimed, copied, retired and removed as one unit
    SERVING/<N>/model/            its storage URI: holds exactly one integer folder, the version itself
    SERVING/<N>/model/<N>/        the SavedModel (saved_model.pb copied last)

KServe's storage initializer copies everything under an InferenceService's `storageUri` and TF Serving then serves
the highest integer folder it finds, so the URI must hold exactly one. It lists by string prefix: on S3 a URI
`SERVING/7` also takes `SERVING/70/…` (no '/' is added), so the URI ends in a name no other version's key starts
with (`7/model`, never a bare number).

>>> model_location("s3://b/serving", 7), storage_uri("s3://b/serving", 7)
('s3://b/serving/7/model/7', 's3://b/serving/7/model')
>>> tf_serving_base_path("/models/serving", {"version": 7, "storage_uri": "s3://b/serving/7/model"})
'/models/serving/7/model'
>>> tf_serving_base_path("/models/serving", {"version": 3})   # pushed by an older shardflow: SERVING/3 itself
'/models/serving'
"""
from __future__ import annotations

import os
from typing import Any

from ..core import storage

SERVED_BASE = "model"  # the folder of a version that a storageUri (and TF Serving's base_path) names
SAVED_MODEL = "saved_model.pb"


def version_folder(serving_dir: str, version: int) -> str:
    return storage.join(serving_dir, str(version))


def storage_uri(serving_dir: str, version: int) -> str:
    """What an InferenceService's storageUri names for `version` (a local path made absolute)."""
    location = storage.join(version_folder(serving_dir, version), SERVED_BASE)
    return location if storage.is_remote(location) else os.path.abspath(location)


def model_location(serving_dir: str, version: int) -> str:
    """The SavedModel directory of `version` (what CURRENT.json's "model" and `latest` name)."""
    return storage.join(version_folder(serving_dir, version), SERVED_BASE, str(version))


def relative_model(version: int) -> str:
    """`model_location` below the version's folder: where a push copies the model."""
    return f"{SERVED_BASE}/{version}"


def entry_model(serving_dir: str, version: int, entry: dict[str, Any]) -> str:
    """The model directory of a served version's record: its own "model", or SERVING/<N> for a version pushed by
    an older shardflow (no per-version storage URI)."""
    return entry.get("model") or version_folder(serving_dir, version)


def tf_serving_base_path(base_path: str, pointer: dict[str, Any]) -> str:
    """The base_path TF Serving's model config names for `pointer`'s version, given the serving directory's."""
    if not pointer.get("storage_uri"):
        return base_path
    return f"{base_path.rstrip('/')}/{pointer['version']}/{SERVED_BASE}"

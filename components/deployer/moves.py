"""The serving pointer as an InferenceService serves it, and the pointer's moves a canary needs.

CURRENT.json is the one record of what is served: its version is the InferenceService's predictor, the next
run's baseline (`latest`) and the registry's alias; a canary beside it is the pointer's `canary` field
({"version", "percent", "storage_uri", "content_digest", "pushed_from"}; its version also as `canary_version`,
which `clean-serving --keep` protects). Every command moves the pointer
first (a compare-and-swap: a lost race is exit 75 and the InferenceService is left as it was), then makes the
InferenceService what the pointer says (`wanted`); so a command cut off between the two is repaired by
running it again, or by `shardflow deploy`, which makes the InferenceService follow the pointer as it is.

    served = read_served("s3://b/serving")
    wanted(serving_dir, served.pointer)            # Wanted(stable=Target(uri of 7, 7), canary=None)
    moved = move(serving_dir, served, as_canary(serving_dir, served, 10), tf_serving)   # 6 served, 7 at 10 %
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..core import storage
from ..core.uri import relative_to
from ..core.errors import ConfigError
from ..pusher.serving import Served, serve_pointer_version, served_history, successor, swap_pointer
from ..pusher.storage_uri import served_storage_uri
from ..pusher.tf_serving import TfServing
from .inference_service import Target

CANARY = "canary"
CANARY_VERSION = "canary_version"  # the version retention never removes while it is a canary (pusher/retention.py)


@dataclass(frozen=True)
class Wanted:
    """What the InferenceService should serve: the pointer's version and its canary, if any."""

    stable: Target
    canary: Target | None = None

    def targets(self) -> list[Target]:
        return [self.stable] + ([self.canary] if self.canary else [])


def wanted(serving_dir: str, pointer: dict[str, Any] | None, storage_base: str = "") -> Wanted:
    """The InferenceService's versions for `pointer` (CURRENT.json's content), their URIs as KServe reads them
    (`as_kserve_reads`); ConfigError when nothing is served."""
    if pointer is None:
        raise ConfigError(f"nothing is served from {serving_dir} yet (no version in its CURRENT.json): push first")
    uri = served_storage_uri(serving_dir, pointer["version"], pointer)
    stable = Target(as_kserve_reads(serving_dir, uri, storage_base), pointer["version"], source=uri)
    canary = pointer.get(CANARY)
    if not canary:
        return Wanted(stable)
    uri = served_storage_uri(serving_dir, canary["version"], canary)
    return Wanted(stable, Target(as_kserve_reads(serving_dir, uri, storage_base), canary["version"],
                                 canary["percent"], source=uri))


def as_kserve_reads(serving_dir: str, uri: str, storage_base: str) -> str:
    """A version's storage URI with the serving directory replaced by `storage_base`, the same directory as KServe
    reads it (e.g. pvc://artifacts/serving for /artifacts/serving on the `artifacts` claim); '' : as it is.

    >>> as_kserve_reads("/artifacts/serving", "/artifacts/serving/7/model", "pvc://artifacts/serving")
    'pvc://artifacts/serving/7/model'
    """
    if not storage_base:
        return uri
    root = serving_dir if storage.is_remote(serving_dir) else os.path.abspath(serving_dir)
    try:
        return f"{storage_base.rstrip('/')}/{relative_to(uri, root)}"
    except ValueError:
        raise ConfigError(f"storage URI {uri} is not below the serving directory {root}: --kserve-storage-base "
                          "cannot be applied to it") from None


def model_dir(target: Target) -> str:
    """The SavedModel KServe loads for `target`: the one integer folder under its storage URI."""
    return storage.join(target.source or target.storage_uri, str(target.version))


def record_of(serving_dir: str, served: Served, version: int, action: str) -> dict[str, Any]:
    """A pointer serving `version` again (one a pointer named before), recorded as `action`."""
    history = served_history(serving_dir, served)
    entry = history.get(str(version))
    if entry is None:
        listed = ", ".join(sorted(history, key=int)) or "none"
        raise ConfigError(f"version {version} was never served from {serving_dir} (served versions: {listed})")
    record = {"version": version, "model": entry.get("model") or storage.join(serving_dir, str(version)),
              "pushed_from": entry.get("pushed_from"), "content_digest": entry.get("content_digest", ""),
              "gated_against": None, "action": action, "rolled_back_from": served.version}
    return {**record, **{key: entry[key] for key in ("storage_uri",) if entry.get(key)}}


def as_canary(serving_dir: str, served: Served, percent: int) -> dict[str, Any] | None:
    """The pointer that serves the version the pointer's version replaced, with the pointer's version as a canary
    at `percent`; None when the pointer already says so. A canary already recorded keeps its version."""
    pointer = served.pointer
    if pointer is None:
        raise ConfigError(f"nothing is served from {serving_dir} yet: push a model, then deploy it as a canary")
    canary = pointer.get(CANARY)
    if canary:
        if canary["percent"] == percent:
            return None
        return {**record_of(serving_dir, served, pointer["version"], "canary"), CANARY: {**canary, "percent": percent},
                CANARY_VERSION: canary["version"]}
    previous = pointer.get("replaced_version")
    if previous is None or previous == pointer["version"]:
        raise ConfigError(f"version {pointer['version']} of {serving_dir} replaced no other version: there is nothing "
                          "to run it beside as a canary; deploy it without --canary-percent")
    candidate = {"version": pointer["version"], "percent": percent,
                 "storage_uri": served_storage_uri(serving_dir, pointer["version"], pointer),
                 **{key: pointer.get(key) for key in ("content_digest", "pushed_from", "model")}}
    return {**record_of(serving_dir, served, previous, "canary"), CANARY: candidate,
            CANARY_VERSION: candidate["version"]}


def promoted(serving_dir: str, served: Served) -> dict[str, Any] | None:
    """The pointer serving its canary's version, or None when the pointer has no canary."""
    canary = (served.pointer or {}).get(CANARY)
    if not canary:
        return None
    return record_of(serving_dir, served, canary["version"], "promote")


def move(serving_dir: str, served: Served, record: dict[str, Any], tf_serving: TfServing) -> dict[str, Any]:
    """CURRENT.json replaced by `record` only while it names what `served` read (else ServingChanged: exit 75),
    then TF Serving's model config made to follow it; the new pointer."""
    pointer = swap_pointer(serving_dir, served, lambda now: successor(serving_dir, now, record), None)
    serve_pointer_version(serving_dir, tf_serving)
    return pointer

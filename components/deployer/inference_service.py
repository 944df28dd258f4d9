"""KServe InferenceService bodies (`serving.kserve.io/v1beta1`) from what the serving pointer says: pure functions.

The served version is the predictor; a canary is a second version taking `percent` of the traffic, spelt
as each of KServe's deployment modes wants it:

- Standard (KServe's default since kserve#4608; canaries since kserve#5672): `spec.canary` is a list of
  `{trafficPercent, predictor}`; each predictor's `name` names its Deployment (`{isvc}-{name}-predictor`),
  so the stable predictor and the canary are both named `v<N>` by their version: promoting sets the stable
  predictor to the canary's name and drops the entry (KServe keeps the canary's pods), a rollback drops it.
- Knative: the predictor is the canary and `canaryTrafficPercent` splits the traffic with the revision
  that was ready before it (which must be the stable version: `knative_canary_problem`).

>>> p = Predictor(runtime_version="2.16.1", cpu="1", memory="2Gi", cpu_limit="2", memory_limit="4Gi")
>>> spec = desired_spec(STANDARD, Target("s3://b/serving/v/7", 7), Target("s3://b/serving/v/9", 9, 10), p)
>>> spec["predictor"]["name"], spec["canary"][0]["trafficPercent"], spec["canary"][0]["predictor"]["name"]
('v7', 10, 'v9')
>>> spec["predictor"]["model"]["modelFormat"], spec["predictor"]["model"]["storageUri"]
({'name': 'tensorflow'}, 's3://b/serving/v/7')
>>> knative = desired_spec(KNATIVE, Target("s3://b/serving/v/7", 7), Target("s3://b/serving/v/9", 9, 10), p)
>>> knative["predictor"]["canaryTrafficPercent"], knative["predictor"]["model"]["storageUri"], knative["canary"]
(10, 's3://b/serving/v/9', None)
>>> try:
...     check_runtime("2.15.1", "2.16.2")
... except ConfigError as refused:
...     print(str(refused).split(": ")[0])
runtime version 2.15.1 is below the TensorFlow the model was trained with (2.16.2)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..core.errors import ConfigError

GROUP, VERSION, PLURAL, KIND = "serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService"
API_VERSION = f"{GROUP}/{VERSION}"
MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
STANDARD, KNATIVE = "Standard", "Knative"
MODES = (STANDARD, KNATIVE)
_LEGACY_MODES = {"RawDeployment": STANDARD, "Serverless": KNATIVE}  # KServe's older names of the two modes
MODEL_FORMAT = "tensorflow"  # KServe's kserve-tensorflow-serving runtime: tensorflow_model_server
# The model's container name. KServe names it so anyway; the CRD requires it of a canary's model (its schema
# keeps the container's `required: [name]` under spec.canary[].predictor.model, unlike spec.predictor.model).
CONTAINER = "kserve-container"
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Target:
    """One served version as KServe loads it: the prefix holding only its integer folder, its number, and (for
    a canary) its share of the traffic."""

    storage_uri: str
    version: int
    percent: int = 0
    source: str = ""  # where shardflow reads the same prefix, when KServe's URI differs (a pvc:// of a mount)


@dataclass(frozen=True, kw_only=True)
class Predictor:
    """What every predictor of the InferenceService gets: the TF Serving release, resources, service account."""

    runtime_version: str
    cpu: str = "1"
    memory: str = "2Gi"
    cpu_limit: str = "2"
    memory_limit: str = "4Gi"
    service_account: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.runtime_version, str) or not _VERSION.match(self.runtime_version):
            raise ConfigError(f"runtime version must be a TF Serving release such as 2.16.1, got "
                              f"{self.runtime_version!r}")
        for name in ("cpu", "memory", "cpu_limit", "memory_limit"):
            if not re.fullmatch(r"\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?", str(getattr(self, name))):
                raise ConfigError(f"{name.replace('_', '-')} must be a Kubernetes quantity such as 500m or 2Gi, "
                                  f"got {getattr(self, name)!r}")


def release(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a version text ('2.16.2-gpu' → (2, 16, 2)).

    >>> release("2.16.2"), release("2.17")
    ((2, 16, 2), (2, 17, 0))
    """
    found = _VERSION.match(version or "")
    if not found:
        raise ConfigError(f"{version!r} is not a version such as 2.16.1")
    return int(found[1]), int(found[2]), int(found[3] or 0)


def check_runtime(runtime_version: str, trained_with: str) -> None:
    """ConfigError when TF Serving `runtime_version` is of an older TensorFlow minor release than the model's:
    TF Serving x.y is built on TensorFlow x.y, and a model may use ops added since (kserve#997). Same minor: fine."""
    if release(runtime_version)[:2] < release(trained_with)[:2]:
        major, minor, _ = release(trained_with)
        raise ConfigError(f"runtime version {runtime_version} is below the TensorFlow the model was trained with "
                          f"({trained_with}): TF Serving {runtime_version} may not load its ops; pin {major}.{minor} "
                          "or later")


def check_percent(percent: int) -> int:
    """A canary's share of the traffic: 1 to 99 (0 would serve nothing, 100 is a promotion)."""
    if isinstance(percent, bool) or not isinstance(percent, int) or not 1 <= percent <= 99:
        raise ConfigError(f"canary percent must be an integer from 1 to 99, got {percent!r}")
    return percent


def mode_of(isvc: dict[str, Any] | None, default: str = STANDARD) -> str:
    """The deployment mode an InferenceService runs in: its annotation (older names accepted), else `default`."""
    annotations = ((isvc or {}).get("metadata") or {}).get("annotations") or {}
    mode = annotations.get(MODE_ANNOTATION, default)
    mode = _LEGACY_MODES.get(mode, mode)
    if mode not in MODES:
        raise ConfigError(f"InferenceService deployment mode {mode!r} is neither {STANDARD} nor {KNATIVE}")
    return mode


def predictor_spec(target: Target, options: Predictor, name: str | None) -> dict[str, Any]:
    """One predictor: the tensorflow model format at `target`'s URI, on TF Serving `runtime_version`."""
    model = {"name": CONTAINER, "modelFormat": {"name": MODEL_FORMAT}, "runtimeVersion": options.runtime_version,
             "storageUri": target.storage_uri,
             "resources": {"requests": {"cpu": options.cpu, "memory": options.memory},
                           "limits": {"cpu": options.cpu_limit, "memory": options.memory_limit}}}
    spec: dict[str, Any] = {"model": model}
    if name:
        spec["name"] = name
    if options.service_account:
        spec["serviceAccountName"] = options.service_account
    return spec


def desired_spec(mode: str, stable: Target, canary: Target | None, options: Predictor) -> dict[str, Any]:
    """The InferenceService's spec serving `stable`, and `canary` at its percent, as a merge patch: the fields
    a previous state may hold and this one does not are null (a JSON merge patch removes them)."""
    if mode == STANDARD:
        entries = [{"trafficPercent": canary.percent, "predictor": predictor_spec(canary, options, _name(canary))}
                   ] if canary else None
        predictor = predictor_spec(stable, options, _name(stable))
        predictor["canaryTrafficPercent"] = None
        return {"predictor": predictor, "canary": entries}
    predictor = predictor_spec(canary or stable, options, None)
    predictor["canaryTrafficPercent"] = canary.percent if canary else None
    return {"predictor": predictor, "canary": None}


def _name(target: Target) -> str:
    return f"v{target.version}"


def knative_canary_problem(live: dict[str, Any] | None, stable: Target, canary: Target) -> str:
    """In Knative mode a canary splits the traffic with the revision ready before it: '' when the live
    InferenceService serves `stable` alone now (or already `canary` as its canary), else what it serves."""
    predictor = ((live or {}).get("spec") or {}).get("predictor") or {}
    serving, percent = (predictor.get("model") or {}).get("storageUri"), predictor.get("canaryTrafficPercent")
    if (serving == stable.storage_uri and percent in (None, 100)) or (serving == canary.storage_uri and percent):
        return ""
    return (f"in {KNATIVE} mode a canary shares the traffic with the revision served before it, but the "
            f"InferenceService serves {serving or 'nothing'} (canaryTrafficPercent {percent}), not version "
            f"{stable.version} ({stable.storage_uri}): deploy version {stable.version} first")


def new_inference_service(name: str, namespace: str, mode: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A whole InferenceService to create (null fields of the merge patch dropped)."""
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": namespace, "annotations": {MODE_ANNOTATION: mode},
                         "labels": {"app.kubernetes.io/name": "shardflow"}},
            "spec": without_nulls(spec)}


def without_nulls(value: Any) -> Any:
    """`value` less every null field, recursively (what a merge patch leaves on an object without them).

    >>> without_nulls({"a": None, "b": {"c": None, "d": 1}, "e": [{"f": None}]})
    {'b': {'d': 1}, 'e': [{}]}
    """
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def merged(live: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386: `live` after the JSON merge patch `patch` (what the API server stores).

    >>> merged({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}, "f": [1]})
    {'a': 1, 'b': {'d': 3, 'e': 4}, 'f': [1]}
    """
    result = dict(live)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = without_nulls(value)
    return result


def served_uris(isvc: dict[str, Any] | None) -> tuple[str | None, list[tuple[str, int]]]:
    """(the stable predictor's storageUri, [(canary storageUri, percent)]) of a live InferenceService, as KServe
    routes it in its mode (Knative: the spec's predictor is the canary while canaryTrafficPercent is set)."""
    spec = (isvc or {}).get("spec") or {}
    predictor = spec.get("predictor") or {}
    uri = (predictor.get("model") or {}).get("storageUri")
    if mode_of(isvc) == KNATIVE:
        percent = predictor.get("canaryTrafficPercent")
        return (None, [(uri, percent)]) if percent not in (None, 100) else (uri, [])
    canaries = [((c.get("predictor", {}).get("model") or {}).get("storageUri"), c.get("trafficPercent", 0))
                for c in spec.get("canary") or []]
    return uri, canaries


def predictor_of(isvc: dict[str, Any]) -> Predictor:
    """The predictor options a live InferenceService runs with (a promotion or a rollback keeps them)."""
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    model = predictor.get("model") or {}
    resources = model.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    defaults = Predictor(runtime_version=model.get("runtimeVersion") or "0.0")
    return Predictor(runtime_version=defaults.runtime_version, cpu=str(requests.get("cpu", defaults.cpu)),
                     memory=str(requests.get("memory", defaults.memory)),
                     cpu_limit=str(limits.get("cpu", defaults.cpu_limit)),
                     memory_limit=str(limits.get("memory", defaults.memory_limit)),
                     service_account=predictor.get("serviceAccountName", ""))

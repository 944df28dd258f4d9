"""KServe's InferenceService CRD schema (`openAPIV3Schema` of serving.kserve.io/v1beta1), trimmed, and a strict
validator over it: what an API server with KServe installed checks before it stores an InferenceService.

    problems(obj)      # [] when `obj` (a whole InferenceService) passes; else one line per violation

The trimmed copy (inferenceservice_schema.json) keeps, whole, every field shardflow writes or k8s/ declares
(`KEPT`: the predictor's name, service account, replicas, canaryTrafficPercent and its model's format, runtime,
runtimeVersion, storageUri, protocol and resources; the same inside `spec.canary[]`); every other field keeps its
name but accepts any value, so a misspelt or unknown field is still refused. Strictness is the API server's
`fieldValidation=Strict` (kubectl's default): an object with declared properties refuses any other, unless the
schema preserves unknown fields. Regenerate from a KServe checkout:

    python tests/kserve_crd/crd_schema.py KSERVE/config/crd/full/serving.kserve.io_inferenceservices.yaml COMMIT
"""
from __future__ import annotations

import copy
import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_FILE = Path(__file__).with_name("inferenceservice_schema.json")
_PREDICTOR: dict[str, Any] = {
    "name": True, "serviceAccountName": True, "minReplicas": True, "maxReplicas": True, "canaryTrafficPercent": True,
    "model": {"modelFormat": True, "runtime": True, "runtimeVersion": True, "storageUri": True,
              "protocolVersion": True, "resources": True}}
KEPT: dict[str, Any] = {"apiVersion": True, "kind": True, "metadata": True,
                        "spec": {"predictor": _PREDICTOR, "canary": {"[]": {"trafficPercent": True,
                                                                            "predictor": _PREDICTOR}}}}
TRIMMED = {"x-kubernetes-preserve-unknown-fields": True, "description": "trimmed: not written by shardflow"}


def trim(schema: dict[str, Any], keep: Any) -> dict[str, Any]:
    """`schema` with the subtrees `keep` does not name replaced by TRIMMED (their names stay declared)."""
    if keep is True:
        return schema
    out = {k: v for k, v in schema.items() if k not in ("properties", "items")}
    if "items" in schema:
        out["items"] = trim(schema["items"], keep.get("[]", False)) if keep.get("[]") else TRIMMED
    if "properties" in schema:
        out["properties"] = {name: trim(sub, keep[name]) if name in keep else TRIMMED
                             for name, sub in schema["properties"].items()}
    return out


def _strict(schema: Any) -> Any:
    """Every object schema with declared properties made to refuse others (fieldValidation=Strict)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


@lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    document = json.loads(SCHEMA_FILE.read_text())
    return jsonschema.Draft7Validator(_strict(document["openAPIV3Schema"]))


def source() -> dict[str, str]:
    """Where the trimmed copy came from: repository, path, commit."""
    return json.loads(SCHEMA_FILE.read_text())["source"]


def problems(obj: dict[str, Any]) -> list[str]:
    """Each violation of the CRD schema by `obj`, as `path: message`."""
    found = []
    if obj.get("apiVersion") != "serving.kserve.io/v1beta1" or obj.get("kind") != "InferenceService":
        found.append(f"not a serving.kserve.io/v1beta1 InferenceService: {obj.get('apiVersion')} {obj.get('kind')}")
    for error in sorted(_validator().iter_errors(obj), key=lambda e: list(e.absolute_path)):
        found.append(f"{'.'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}")
    return found


def main(crd_path: str, commit: str) -> None:
    import yaml

    crd = yaml.safe_load(Path(crd_path).read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
    document = {"source": {"repository": "github.com/kserve/kserve",
                           "path": "config/crd/full/serving.kserve.io_inferenceservices.yaml", "commit": commit,
                           "trimmed_by": "tests/kserve_crd/crd_schema.py (KEPT)"},
                "openAPIV3Schema": trim(schema, KEPT)}
    SCHEMA_FILE.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])

"""A fake Kubernetes API on 127.0.0.1 for one resource, KServe's InferenceService, that records every request.

    with FakeKubeServer() as kube:
        kube.put(isvc)                      # an object the "cluster" holds
        kube.refuse("PATCH", 403, "Forbidden", "cannot patch")   # the next PATCH is refused so
        ... the kubernetes client with Configuration(host=kube.url) ...
        kube.requests                       # [KubeRequest(method, path, query, body, content_type), ...]
        kube.stored[("ml", "digits")]       # what it holds now

It answers GET, POST (create) and PATCH (JSON merge patch only, as for every custom resource) under
/apis/serving.kserve.io/v1beta1/namespaces/NS/inferenceservices[/NAME], with `dryRun=All` (validated, not stored)
and Kubernetes' Status errors: 404 NotFound, 409 AlreadyExists, 415 for another patch type, and 422 Invalid for
an object that breaks KServe's CRD schema (tests/kserve_crd/crd_schema.py, strict as fieldValidation=Strict) or the
rules KServe's webhook adds for canaries (named predictors, traffic adding up to at most 100). Each object gets a
resourceVersion and a generation, raised by every change.
"""
from __future__ import annotations

import copy
import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback_server import InThreadServer, JsonHandler

from kserve_crd.crd_schema import problems as schema_problems
from shardflow.deployer.inference_service import merged

_PATH = re.compile(r"^/apis/serving\.kserve\.io/v1beta1/namespaces/([^/]+)/inferenceservices(?:/([^/]+))?$")
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class KubeRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str

    @property
    def dry_run(self) -> bool:
        return self.query.get("dryRun") == "All"


def webhook_problems(obj: dict[str, Any]) -> list[str]:
    """What KServe's validating webhook adds for canaries (CanarySpec: predictor.name required, unique, and the
    percentages adding up to at most 100)."""
    canaries = (obj.get("spec") or {}).get("canary") or []
    names = [(c.get("predictor") or {}).get("name") for c in canaries]
    found = [f"spec.canary[{i}].predictor.name is required" for i, name in enumerate(names) if not name]
    if len(set(names)) < len(names):
        found.append("spec.canary: predictor names must be unique")
    if sum(c.get("trafficPercent", 0) for c in canaries) > 100:
        found.append("spec.canary: the traffic percentages add up to more than 100")
    return found


class FakeKubeServer(InThreadServer):
    """Threaded HTTP server on a free port; use as a context manager."""

    def __init__(self) -> None:
        self.requests: list[KubeRequest] = []
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.refusals: dict[tuple[str, bool | None], tuple[int, str, str]] = {}
        self.before: Any = None  # called with each write request before it is answered (a racing push, say)
        self._version = 0
        self._lock = threading.Lock()
        self._serve(_handler_for(self))

    def put(self, obj: dict[str, Any]) -> None:
        """An object the cluster holds (checked as a create would be)."""
        assert not self.problems(obj), self.problems(obj)
        self._store(copy.deepcopy(obj))

    def refuse(self, method: str, status: int, reason: str, message: str, dry_run: bool | None = None) -> None:
        """The next `method` request (a dry run or not, or either: None) is answered with this Status."""
        self.refusals[(method, dry_run)] = (status, reason, message)

    def writes(self, dry_run: bool | None = None) -> list[KubeRequest]:
        return [r for r in self.requests if r.method in ("POST", "PATCH") and dry_run in (None, r.dry_run)]

    @staticmethod
    def problems(obj: dict[str, Any]) -> list[str]:
        return schema_problems(obj) + webhook_problems(obj)

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._version += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self._version)
        meta["generation"] = meta.get("generation", 0) + 1
        self.stored[(meta["namespace"], meta["name"])] = obj
        return obj

    def handle(self, request: KubeRequest) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(request)
            found = _PATH.match(request.path)
            if not found:
                return _status(404, "NotFound", f"fake kube: no route for {request.method} {request.path}")
            for key in ((request.method, request.dry_run), (request.method, None)):
                if key in self.refusals:
                    return _status(*self.refusals.pop(key))
            if self.before is not None and request.method in ("POST", "PATCH"):
                self.before(request)
            namespace, name = found.groups()
            if request.method == "GET" and name:
                obj = self.stored.get((namespace, name))
                return (200, obj) if obj else _status(404, "NotFound", f'inferenceservices "{name}" not found')
            if request.method == "POST" and not name:
                return self._create(namespace, request)
            if request.method == "PATCH" and name:
                return self._patch(namespace, name, request)
            return _status(405, "MethodNotAllowed", f"fake kube: {request.method} {request.path}")

    def _create(self, namespace: str, request: KubeRequest) -> tuple[int, dict[str, Any]]:
        obj = copy.deepcopy(request.body)
        obj.setdefault("metadata", {}).setdefault("namespace", namespace)
        name = obj["metadata"].get("name", "")
        if (namespace, name) in self.stored:
            return _status(409, "AlreadyExists", f'inferenceservices.serving.kserve.io "{name}" already exists')
        return self._accept(obj, request.dry_run, 201)

    def _patch(self, namespace: str, name: str, request: KubeRequest) -> tuple[int, dict[str, Any]]:
        if request.content_type != MERGE_PATCH:
            return _status(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: "
                                                        f"{request.content_type}")
        live = self.stored.get((namespace, name))
        if live is None:
            return _status(404, "NotFound", f'inferenceservices.serving.kserve.io "{name}" not found')
        return self._accept(merged(live, request.body), request.dry_run, 200)

    def _accept(self, obj: dict[str, Any], dry_run: bool, status: int) -> tuple[int, dict[str, Any]]:
        found = self.problems(obj)
        if found:
            return _status(422, "Invalid", f'InferenceService.serving.kserve.io "{obj["metadata"].get("name")}" is '
                                           f"invalid: {'; '.join(found)}")
        return status, (obj if dry_run else copy.deepcopy(self._store(obj)))


def _status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
                  "code": code}


def _handler_for(fake: FakeKubeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def _answer(self) -> None:
            path, query, raw = self.request_parts()
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            self.send_json(*fake.handle(KubeRequest(self.command, path, query, json.loads(raw) if raw else None,
                                                    content_type)))

        do_GET = do_POST = do_PATCH = _answer

    return Handler

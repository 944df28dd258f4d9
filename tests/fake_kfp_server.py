"""A fake Kubeflow Pipelines v2beta1 API on 127.0.0.1 that records every request.

    with FakeKfpServer() as server:
        client = kfp.Client(host=server.url)
        ...
        server.requests          # [Request(method, path, query, body, files, authorization), ...]
        server.recurring_runs    # what the "server" holds now, by id

It answers the calls kfp.Client 2.13 makes for experiments, pipeline uploads and versions, recurring
runs (list, create, disable, delete) and runs (create), with JSON shaped like the real API, and keeps
their state so a second call sees what the first created. Filters support EQUALS on display_name.
Anything else is answered 404 and recorded, so a test sees a request the fake does not know.
"""
from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback_server import InThreadServer, JsonHandler

_API = "/apis/v2beta1"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any = None                                           # parsed JSON body, if any
    files: dict[str, bytes] = field(default_factory=dict)      # multipart uploads by form field
    authorization: str | None = None                           # the Authorization header, if sent


class FakeKfpServer(InThreadServer):
    """Threaded HTTP server on a free port; use as a context manager."""

    def __init__(self, multi_user: bool = False) -> None:
        self.multi_user = multi_user
        self.requests: list[Request] = []
        self.experiments: dict[str, dict] = {}
        self.pipelines: dict[str, dict] = {}
        self.versions: dict[str, dict] = {}
        self.recurring_runs: dict[str, dict] = {}
        self.runs: dict[str, dict] = {}
        # What every created run becomes after `polls` reads of it (GET /runs/ID): RUNNING until then.
        self.run_outcome: dict = {"state": "SUCCEEDED"}
        self.polls = 1
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._serve(_handler_for(self))

    def requests_to(self, method: str, path: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and r.path == _API + path]

    def new_id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids)}"

    def handle(self, request: Request) -> tuple[int, dict]:
        """(status, JSON answer) for one request; state changes under the lock."""
        with self._lock:
            self.requests.append(request)
            path = request.path.removeprefix(_API)
            for (method, pattern), answer in _ROUTES.items():
                parts = _match(pattern, path)
                if method == request.method and parts is not None:
                    return answer(self, request, *parts)
            return 404, {"error": f"fake KFP: no route for {request.method} {request.path}"}


def _match(pattern: str, path: str) -> list[str] | None:
    """'/recurringruns/{}:disable' matches '/recurringruns/x:disable' -> ['x']."""
    regex = "^" + "([^/:]+)".join(re.escape(piece) for piece in pattern.split("{}")) + "$"
    found = re.match(regex, path)
    return list(found.groups()) if found else None


def _name_matches(query: dict[str, str], item: dict) -> bool:
    if not query.get("filter"):
        return True
    for predicate in json.loads(query["filter"]).get("predicates", []):
        if predicate.get("operation") not in ("EQUALS", 1) or predicate.get("key") != "display_name":
            raise ValueError(f"fake KFP only filters display_name EQUALS, got {predicate}")
        if item.get("display_name") != predicate.get("stringValue", predicate.get("string_value")):
            return False
    return True


def _listed(fake: FakeKfpServer, key: str, items: list[dict], query: dict[str, str]) -> tuple[int, dict]:
    chosen = [item for item in items if _name_matches(query, item)]
    if query.get("sort_by") == "created_at desc":
        chosen = chosen[::-1]  # ids are created in order
    if query.get("page_size"):
        chosen = chosen[: int(query["page_size"])]
    return 200, {key: chosen, "total_size": len(chosen), "next_page_token": ""}


def _healthz(fake: FakeKfpServer, request: Request) -> tuple[int, dict]:
    return 200, {"multi_user": fake.multi_user}


def _list_experiments(fake: FakeKfpServer, request: Request) -> tuple[int, dict]:
    return _listed(fake, "experiments", list(fake.experiments.values()), request.query)


def _create_experiment(fake: FakeKfpServer, request: Request) -> tuple[int, dict]:
    experiment = {**request.body, "experiment_id": fake.new_id("experiment"), "storage_state": "AVAILABLE"}
    fake.experiments[experiment["experiment_id"]] = experiment
    return 200, experiment


def _list_pipelines(fake: FakeKfpServer, request: Request) -> tuple[int, dict]:
    return _listed(fake, "pipelines", list(fake.pipelines.values()), request.query)


def _new_version(fake: FakeKfpServer, pipeline_id: str, name: str, package: bytes) -> dict:
    version = {"pipeline_id": pipeline_id, "pipeline_version_id": fake.new_id("version"), "display_name": name}
    fake.versions[version["pipeline_version_id"]] = {**version, "package": package}
    return version


def _upload_pipeline(fake: FakeKfpServer, request: Request) -> tuple[int, dict]:
    name = request.query["name"]
    if any(p["display_name"] == name for p in fake.pipelines.values()):
        return 409, {"error": f"pipeline {name} already exists"}
    pipeline = {"pipeline_id": fake.new_id("pipeline"), "display_name": name}
    fake.pipelines[pipeline["pipeline_id"]] = pipeline
    _new_version(fake, pipeline["pipeline_id"], name, request.files["uploadfile"])
    return 200, pipeline


def _upload_version(fake: FakeKfpServer, request: Request) -> tuple[int, dict]:
    pipeline_id, name = request.query["pipelineid"], request.query["name"]
    if pipeline_id not in fake.pipelines:
        return 404, {"error": f"no pipeline {pipeline_id}"}
    if any(v["pipeline_id"] == pipeline_id and v["display_name"] == name for v in fake.versions.values()):
        return 409, {"error": f"version {name} already exists"}
    return 200, _new_version(fake, pipeline_id, name, request.files["uploadfile"])


def _list_versions(fake: FakeKfpServer, request: Request, pipeline_id: str) -> tuple[int, dict]:
    versions = [{k: v for k, v in version.items() if k != "package"}
                for version in fake.versions.values() if version["pipeline_id"] == pipeline_id]
    return _listed(fake, "pipeline_versions", versions, request.query)


def _list_recurring_runs(fake: FakeKfpServer, request: Request) -> tuple[int, dict]:
    runs = [run for run in fake.recurring_runs.values()
            if request.query.get("experiment_id") in (None, run.get("experiment_id"))]
    return _listed(fake, "recurringRuns", runs, request.query)


def _create_recurring_run(fake: FakeKfpServer, request: Request) -> tuple[int, dict]:
    run = {**request.body, "recurring_run_id": fake.new_id("recurring"), "status": "ENABLED"}
    fake.recurring_runs[run["recurring_run_id"]] = run
    return 200, run


def _disable_recurring_run(fake: FakeKfpServer, request: Request, run_id: str) -> tuple[int, dict]:
    if run_id not in fake.recurring_runs:
        return 404, {"error": f"no recurring run {run_id}"}
    fake.recurring_runs[run_id]["mode"] = "DISABLE"
    return 200, {}


def _delete_recurring_run(fake: FakeKfpServer, request: Request, run_id: str) -> tuple[int, dict]:
    if fake.recurring_runs.pop(run_id, None) is None:
        return 404, {"error": f"no recurring run {run_id}"}
    return 200, {}


def _create_run(fake: FakeKfpServer, request: Request) -> tuple[int, dict]:
    run = {**request.body, "run_id": fake.new_id("run"), "state": "PENDING", "reads": 0}
    fake.runs[run["run_id"]] = run
    return 200, run


def _get_run(fake: FakeKfpServer, request: Request, run_id: str) -> tuple[int, dict]:
    run = fake.runs.get(run_id)
    if run is None:
        return 404, {"error": f"no run {run_id}"}
    run["reads"] += 1
    run.update(fake.run_outcome if run["reads"] > fake.polls else {"state": "RUNNING"})
    return 200, {k: v for k, v in run.items() if k != "reads"}


_ROUTES = {
    ("GET", "/healthz"): _healthz,
    ("GET", "/experiments"): _list_experiments,
    ("POST", "/experiments"): _create_experiment,
    ("GET", "/pipelines"): _list_pipelines,
    ("POST", "/pipelines/upload"): _upload_pipeline,
    ("POST", "/pipelines/upload_version"): _upload_version,
    ("GET", "/pipelines/{}/versions"): _list_versions,
    ("GET", "/recurringruns"): _list_recurring_runs,
    ("POST", "/recurringruns"): _create_recurring_run,
    ("POST", "/recurringruns/{}:disable"): _disable_recurring_run,
    ("DELETE", "/recurringruns/{}"): _delete_recurring_run,
    ("POST", "/runs"): _create_run,
    ("GET", "/runs/{}"): _get_run,
}


def _handler_for(fake: FakeKfpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def _answer(self) -> None:
            path, query, raw = self.request_parts()
            body, files = _decode(self.headers.get("Content-Type", ""), raw)
            self.send_json(*fake.handle(Request(self.command, path, query, body, files,
                                                self.headers.get("Authorization"))))

        do_GET = do_POST = do_DELETE = _answer

    return Handler


def _decode(content_type: str, raw: bytes) -> tuple[Any, dict[str, bytes]]:
    if content_type.startswith("multipart/form-data"):
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
        return None, {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                      for part in message.iter_parts()}
    return (json.loads(raw) if raw else None), {}

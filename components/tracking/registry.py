"""The MLflow Model Registry made to follow a serving directory's CURRENT.json, never to lead it.

Every version the pointer ever served (`served_versions`) is one model version, found again by its
VERSION_TAG; `source` is the version's directory in the serving directory, tags name the run that pushed
it, its gate's verdict and what it was gated against. The alias (`champion`) names the version the pointer
names now (a rollback moves it back). A refused or unblessed push moved no pointer: nothing is registered.
A registration cut off after the pointer moved is made by the next sync: each run's, or `shardflow track`.

    sync_registry(sink, "runs/digits/serving", "digits", "champion", lambda job: parent_run_ids.get(job))
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from ..core import storage
from ..core.run_layout import JOB_NAME
from ..pusher.serving import read_served, served_history
from .mlflow_sink import MlflowSink

VERSION_TAG = "shardflow.serving_version"
_JOB = re.compile(rf"(.*/({JOB_NAME.pattern}))/")  # the run folder of a model pushed from it


def sync_registry(sink: MlflowSink, serving_dir: str, name: str, alias: str,
                  run_id_of: Callable[[str], str | None]) -> dict[str, Any]:
    """{"registered": [serving versions registered now], "alias": (alias, model version) or None}."""
    served = read_served(serving_dir)
    if served.pointer is None:
        return {"registered": [], "alias": None}
    client = sink.client
    if not client.search_registered_models(filter_string=f"name = '{name}'"):
        client.create_registered_model(name, tags={"shardflow.serving_dir": serving_dir})
    known = {mv.tags.get(VERSION_TAG): mv.version for mv in client.search_model_versions(f"name = '{name}'")}
    registered = []
    for number, record in sorted(served_history(serving_dir, served).items(), key=lambda item: int(item[0])):
        if number in known:
            continue
        job, verdict = _pushed_by(record, served.pointer if served.version == int(number) else None)
        tags = {VERSION_TAG: number, "shardflow.content_digest": record.get("content_digest", ""),
                "shardflow.pushed_from": record.get("pushed_from", ""), **verdict}
        run_id = run_id_of(job) if job else None
        if job:
            tags["shardflow.job"] = job
        source = _source(sink, serving_dir, number, run_id, tags)
        if source is None:
            continue
        version = client.create_model_version(name, source=source, run_id=run_id, tags=tags, await_creation_for=0)
        known[number] = version.version
        registered.append(int(number))
    current = known.get(str(served.version))
    if current is not None:
        client.set_registered_model_alias(name, alias, current)
    return {"registered": registered, "alias": (alias, current) if current is not None else None}


def _source(sink: MlflowSink, serving_dir: str, number: str, run_id: str | None, tags: dict[str, str]) -> str | None:
    """The version's directory; for a local one on a tracking server, which refuses a local path outside a run's
    artifacts ("Invalid model version source"), a record of it in the pushing run's artifacts (None without
    a run), the path in a tag."""
    location = storage.join(serving_dir, number)
    tags["shardflow.served_uri"] = location
    if storage.is_remote(location) or not sink.is_server:
        return location
    if run_id is None:
        return None
    sink.client.log_dict(run_id, {"served": location, **tags}, f"served/{number}/served_model.json")
    return f"runs:/{run_id}/served/{number}"


def _pushed_by(record: dict[str, Any], pointer: dict[str, Any] | None) -> tuple[str | None, dict[str, str]]:
    """The job that pushed a version (from the training output it was pushed from) and its gate's verdict."""
    match = _JOB.match(record.get("pushed_from", ""))
    verdict: dict[str, str] = {}
    if pointer is not None and pointer.get("gated_against"):
        verdict["shardflow.gated_against"] = str(pointer["gated_against"])
    if match is None:
        return None, verdict
    blessing = Path(match.group(1)) / "evaluate" / "evaluation" / "blessing.json"
    if not storage.is_remote(match.group(1)) and blessing.is_file():
        found = json.loads(blessing.read_text())
        verdict["shardflow.blessed"] = str(bool(found.get("blessed"))).lower()
        verdict["shardflow.gated_against"] = str(found.get("gated_against"))
        verdict["shardflow.verdict"] = "; ".join(found.get("reasons") or [])[:5000]
    return match.group(2), verdict

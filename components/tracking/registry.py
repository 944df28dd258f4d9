"""The MLflow Model Registry made to follow a serving directory's CURRENT.json, never to lead it.

Every version the pointer ever served (`served_versions`) is one model version, found again by its served URI
(SERVED_URI_TAG: the version's model folder as the pointer names it, so two outputs whose folders share a name,
and so a registered model, never take each other's versions). Each is linked to an MLflow logged model of the
run that pushed it, and tagged with that run's job and the verdict of the evaluation that blessed it there
(`pushed_by`: records.py's `pushing_runs`; a cached Trainer's model was trained earlier, but blessed and pushed
by this run). The alias
(`champion`) names the version the pointer names now (a rollback moves it back). A refused or unblessed push
moved no pointer: nothing is registered. A registration cut off after the pointer moved is made by the next
sync: each run's, or `shardflow track`.

    sync_registry(sink, "/abs/runs/digits/serving", "digits", "champion", parent_run_ids.get, pushed_by)
    set_alias(sink.client, "digits", "champion", pointer["model"])   # the version registered for it, or None
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from ..core import storage
from ..pusher.serving import normalized, read_served, served_history
from .mlflow_sink import MlflowSink

VERSION_TAG = "shardflow.serving_version"
SERVED_URI_TAG = "shardflow.served_uri"
SERVED_RECORD = "served_model.json"  # the logged model's one file: where the version is served
MAX_VERDICT = 5000


def sync_registry(sink: MlflowSink, serving_dir: str, name: str, alias: str,
                  run_id_of: Callable[[str], str | None],
                  pushed_by: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """{"registered": [serving versions registered now], "alias": (alias, model version) or None}.
    `run_id_of(job)`: the job's parent run in MLflow (None: not sent); `pushed_by`: {served URI: {"job",
    "evaluation"}}, the run that pushed each version (without it, no version is said to be anyone's)."""
    served = read_served(serving_dir)
    if served.pointer is None:
        return {"registered": [], "alias": None}
    client = sink.client
    if not client.search_registered_models(filter_string=f"name = '{name}'"):
        client.create_registered_model(name, tags={"shardflow.serving_dir": serving_dir})
    known = registered_versions(client, name)
    pushers = {normalized(uri): pusher for uri, pusher in (pushed_by or {}).items()}
    registered = []
    for number, record in sorted(served_history(serving_dir, served).items(), key=lambda item: int(item[0])):
        location = served_location(serving_dir, number, record)
        if normalized(location) in known:
            continue
        pusher = pushers.get(normalized(location)) or {}
        tags = {VERSION_TAG: number, SERVED_URI_TAG: location, **_verdict(pusher, record, served.pointer, number),
                "shardflow.content_digest": record.get("content_digest", ""),
                "shardflow.pushed_from": record.get("pushed_from", "")}
        run_id = run_id_of(pusher["job"]) if pusher.get("job") else None
        source, model_id = _source(sink, name, location, run_id, tags)
        if source is None:
            continue
        version = client.create_model_version(name, source=source, run_id=run_id, tags=tags, await_creation_for=0,
                                              model_id=model_id)
        known[normalized(location)] = version.version
        registered.append(int(number))
    current = set_alias(client, name, alias, served_location(serving_dir, str(served.version), served.pointer), known)
    return {"registered": registered, "alias": (alias, current) if current is not None else None}


def served_location(serving_dir: str, number: str, record: Mapping[str, Any]) -> str:
    """The folder a served version's model is in, as its pointer record names it (`model`: SERVING/N/model/N in
    the per-version layout); a record of an older pusher names none: SERVING/N."""
    return str(record.get("model") or storage.join(serving_dir, number))


def registered_versions(client: Any, name: str) -> dict[str, str]:
    """{served URI (normalized): model version} of the registered model `name`."""
    return {normalized(mv.tags[SERVED_URI_TAG]): mv.version
            for mv in client.search_model_versions(f"name = '{name}'") if mv.tags.get(SERVED_URI_TAG)}


def set_alias(client: Any, name: str, alias: str, served_uri: str,
              known: Mapping[str, str] | None = None) -> str | None:
    """Points `alias` of `name` at the model version registered for `served_uri` (a serving version's folder);
    that version, or None (nothing moved) when none is registered for it."""
    version = (registered_versions(client, name) if known is None else known).get(normalized(served_uri))
    if version is not None:
        client.set_registered_model_alias(name, alias, version)
    return version


def _verdict(pusher: Mapping[str, str], record: dict[str, Any], pointer: dict[str, Any],
             number: str) -> dict[str, str]:
    """The pushing run's job and its evaluation's verdict; what the pointer gated it against."""
    tags: dict[str, str] = {}
    if pointer.get("gated_against") and str(pointer.get("version")) == number:
        tags["shardflow.gated_against"] = str(pointer["gated_against"])
    if pusher.get("job"):
        tags["shardflow.job"] = pusher["job"]
    blessing = storage.join(pusher["evaluation"], "blessing.json") if pusher.get("evaluation") else None
    if blessing and storage.is_file(blessing):
        found = storage.read_json(blessing)
        tags["shardflow.blessed"] = str(bool(found.get("blessed"))).lower()
        tags["shardflow.gated_against"] = str(found.get("gated_against"))
        tags["shardflow.verdict"] = "; ".join(found.get("reasons") or [])[:MAX_VERDICT]
    return tags


def _source(sink: MlflowSink, name: str, location: str, run_id: str | None,
            tags: dict[str, str]) -> tuple[str | None, str | None]:
    """(the version's source, the logged model it comes from). With the pushing run known, an MLflow logged
    model of that run holds a record of the served folder; a tracking server takes a source only inside it
    (`models:/ID`: it refuses a local path, "Invalid model version source"), a file or SQLite store takes the
    folder itself. Without the run: the folder when the store takes it (a bucket, or no server), else None."""
    if run_id is None:
        return (location if storage.is_remote(location) or not sink.is_server else None), None
    model_id = _logged_model(sink, name, location, run_id, tags)
    return (f"models:/{model_id}" if sink.is_server else location), model_id


def _logged_model(sink: MlflowSink, name: str, location: str, run_id: str, tags: dict[str, str]) -> str:
    """The pushing run's logged model of `location`: found again (a sync cut off after making it), else made,
    its record uploaded, READY, and listed as the run's output."""
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus

    client = sink.client
    experiment = client.get_run(run_id).info.experiment_id
    for found in client.search_logged_models([experiment], filter_string=f"source_run_id = '{run_id}'"):
        if found.tags.get(SERVED_URI_TAG) == location and str(found.status) == str(LoggedModelStatus.READY):
            return found.model_id
    model = client.create_logged_model(experiment, name=f"{name}-{tags[VERSION_TAG]}", source_run_id=run_id,
                                       tags=tags, model_type="tensorflow-saved-model")
    with tempfile.TemporaryDirectory() as scratch:
        record = Path(scratch) / SERVED_RECORD
        record.write_text(json.dumps({"served": location, **tags}, indent=2, sort_keys=True))
        client.log_model_artifact(model.model_id, str(record))
    client.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
    client.log_outputs(run_id, [LoggedModelOutput(model.model_id, 0)])
    return model.model_id

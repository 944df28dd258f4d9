"""Pushes as separate processes do them, and what TF Serving would serve meanwhile.

    model, evaluation = candidate(root, "t3-a", gated_against="none")  # every file says "… of t3-a"
    served = served_now(serving)    # (version, tag) TF Serving would load now, from the model config
    Process(target=poll_served, args=(serving, stop, found))            # every change of it, every few ms

A model here is a small tree whose every file names its tag, so a copy is complete exactly when all its
files are there and carry one tag. The model config is parsed by TF Serving's own proto
(tensorflow_serving.config.model_server_config_pb2), as the server reads it.
"""
from __future__ import annotations

import json
import time
from typing import Any

from shardflow.core import storage
from shardflow.pusher import MODEL_CONFIG, PusherConfig
from shardflow.pusher import run as push

MODEL_FILES = ("saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001",
               "shardflow_model.json")
POLL_SECONDS = 0.003


class Incomplete(AssertionError):
    """The version the model config names is not a whole model."""


def candidate(root: str, tag: str, gated_against: str) -> tuple[str, str]:
    """A tiny exported model whose every file names `tag`, and its blessing evaluation gated against `gated_against`."""
    model = storage.join(root, tag, "model")
    for relative in MODEL_FILES:
        storage.write_text(storage.join(model, *relative.split("/")), f"{relative} of {tag}")
    evaluation = storage.join(root, tag, "eval")
    storage.write_text(storage.join(evaluation, "metrics.json"), json.dumps({"model": model,
                                                                            "gated_against": gated_against}))
    storage.write_text(storage.join(evaluation, "BLESSED"), "accuracy = 0.93 meets threshold accuracy>=0.9\n")
    return model, evaluation


def pusher(name: str, serving: str, tasks: Any, results: Any) -> None:
    """A worker process: one push per task (model, evaluation, start time), its outcome back on `results`."""
    storage.list_names(serving)  # the scheme's client made before the first start time, not within the race
    results.put(("ready", name))
    for model, evaluation, start_at in iter(tasks.get, None):
        time.sleep(max(0.0, start_at - time.time()))
        result = push(PusherConfig(model=model, evaluation=evaluation, serving_dir=serving), echo=lambda _: None)
        results.put((name, model, result.pushed, result.version, result.reasons))


def configured(serving: str) -> tuple[str, int] | None:
    """(base path, version) TF Serving would serve from SERVING/models.config, parsed by TF Serving's own proto;
    None before the first push. One model with one specific version, or the test fails."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    try:
        text = storage.read_text(storage.join(serving, MODEL_CONFIG))
    except FileNotFoundError:
        return None
    config = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
    (model,) = config.model_config_list.config
    (version,) = model.model_version_policy.specific.versions
    assert model.model_platform == "tensorflow" and model.name == "shardflow", model
    return model.base_path, version


def served_now(serving: str) -> tuple[int, str] | None:
    """(version, tag) of what TF Serving would load now, a `candidate` model; None before the first push.

    Incomplete when the version it names lacks a file or mixes two models' files."""
    found = configured(serving)
    if found is None:
        return None
    base_path, version = found
    tags = set()
    for relative in MODEL_FILES:
        try:
            tags.add(storage.read_text(storage.join(base_path, str(version), *relative.split("/"))).split(" of ")[1])
        except FileNotFoundError:
            raise Incomplete(f"version {version} has no {relative}") from None
    if len(tags) != 1:
        raise Incomplete(f"version {version} mixes the files of {sorted(tags)}")
    return version, tags.pop()


def poll_served(serving: str, stop: Any, found: Any) -> None:
    """A process that does what TF Serving does with its model config, every POLL_SECONDS until `stop` is set:
    puts every change of (version, tag) on `found`, an Incomplete as ("incomplete", its message), then "done"."""
    last = None
    try:
        storage.list_names(serving)  # the client made before the race
        found.put("ready")
        while not stop.is_set():
            try:
                now = served_now(serving)
            except Incomplete as error:
                found.put(("incomplete", str(error)))
                now = None
            if now != last and now is not None:
                found.put(now)
                last = now
            time.sleep(POLL_SECONDS)
    finally:
        found.put("done")

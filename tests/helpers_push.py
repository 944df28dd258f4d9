"""Push's test models and what TF Serving would serve, read as the server reads it, not from shardflow's records.

A model here is a small tree whose every file names its tag (`candidate`), so a copy is whole exactly when all its
files are there and carry one tag; `served_now` is the (version, tag) TF Serving would load: the version
SERVING/models.config names, parsed by TF Serving's own proto, or the newest integer-named folder. The serving
tests and benchmarks/serving_race.py (the race of two pushers under pollers) use them.
"""
from __future__ import annotations

import json

from shardflow.core import storage
from shardflow.pusher import MODEL_CONFIG
from shardflow.pusher.layout import storage_uri

MODEL_FILES = ("saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001",
               "shardflow_model.json")


class Incomplete(AssertionError):
    """The version a server would load is not a whole model."""

    def __init__(self, version: int, message: str) -> None:
        super().__init__(message)
        self.version = version


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


def configured(serving: str) -> tuple[str, int] | None:
    """(base path, version) TF Serving would serve from SERVING/models.config, parsed by TF Serving's own proto;
    None before the first push. One model with one specific version, or AssertionError."""
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


def _tag_of(base_path: str, version: int) -> str:
    """The one tag of every file of `version`; Incomplete when one is missing or two models' files are mixed."""
    tags = set()
    for relative in MODEL_FILES:
        try:
            tags.add(storage.read_text(storage.join(base_path, str(version), *relative.split("/"))).split(" of ")[1])
        except FileNotFoundError:
            raise Incomplete(version, f"version {version} has no {relative}") from None
    if len(tags) != 1:
        raise Incomplete(version, f"version {version} mixes the files of {sorted(tags)}")
    return tags.pop()


def served_now(serving: str, policy: str = "config") -> tuple[int, str] | None:
    """(version, tag) TF Serving would load now under `policy` (POLICIES); None while there is nothing to load."""
    if policy == "config":
        found = configured(serving)
    else:
        numbers = [int(name) for name in storage.list_names(serving) if name.isdigit()]  # the newest version's folder
        found = (storage_uri(serving, max(numbers)), max(numbers)) if numbers else None  # (pusher/layout.py)
    return None if found is None else (found[1], _tag_of(*found))

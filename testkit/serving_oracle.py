"""Push's test models, what TF Serving would serve, and the racing pushers: the oracle of the serving tests and
of the push-race benchmark (benchmarks/serving_race.py), here so that tests import no benchmark (issue 68) and the
benchmark imports nothing of tests/ (no package: a fresh clone could not import it).

A model here is a small tree whose every file names its tag (`candidate`), so a copy is whole exactly when all its
files are there and carry one tag (`_tag_of`, else `Incomplete`). `served_now` is the (version, tag) TF Serving
would load under a policy: "config", the version SERVING/models.config names, parsed by TF Serving's own proto
(`configured`; `--model_config_file`), or "newest", the newest integer-named folder (`--model_base_path`).
`pusher` and `poll_served` are the race's processes (spawned: they are pickled by name), `race_trials` gives each
pusher a model per round, all gated against what is served, one round after the other.
"""
from __future__ import annotations

import json
import random
import time
from typing import Any

from shardflow.core import storage
from shardflow.pusher import MODEL_CONFIG, PusherConfig
from shardflow.pusher import run as push
from shardflow.pusher.layout import storage_uri

MODEL_FILES = ("saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001",
               "shardflow_model.json")
POLL_SECONDS = 0.003
SPREAD = {"local": 0.02, "s3": 0.25, "gs": 0.25}  # seconds: about one push's length, so that the two overlap or not
POLICIES = ("config", "newest")


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


def poll_served(serving: str, stop: Any, found: Any, policy: str = "config") -> None:
    """A process that does what TF Serving does under `policy`, every POLL_SECONDS until `stop` is set: puts every
    change of (version, tag) on `found`, every version first seen incomplete as ("incomplete", its message),
    then "done"."""
    last, incomplete = None, set()
    try:
        storage.list_names(serving)  # the client made before the race
        found.put("ready")
        while not stop.is_set():
            try:
                now = served_now(serving, policy)
            except Incomplete as error:
                if error.version not in incomplete:  # counted once a version, however many polls see it
                    found.put(("incomplete", str(error)))
                    incomplete.add(error.version)
                now = None
            if now != last and now is not None:
                found.put(now)
                last = now
            time.sleep(POLL_SECONDS)
    finally:
        found.put("done")


def race_trials(root: str, serving: str, queues: dict, results: Any, trials: int,
                spread: float) -> list[tuple[int, str]]:
    """`trials` rounds of one push per pusher's queue, all gated against what is served when the round starts,
    started within `spread` seconds of each other; (version, tag) of each round's winner."""
    from shardflow.pusher import read_pointer

    rng, winners = random.Random(43), []
    for trial in range(trials):
        before = read_pointer(serving)
        start = time.time() + 0.1
        for name, tasks in queues.items():
            model, evaluation = candidate(root, f"t{trial}-{name}", before["model"] if before else "none")
            tasks.put((model, evaluation, start + rng.uniform(0, spread)))
        outcomes = [results.get(timeout=60) for _ in queues]
        winners += [(o[3], f"t{trial}-{o[0]}") for o in outcomes if o[2]]
    return winners

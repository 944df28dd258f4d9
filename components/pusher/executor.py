"""`run(config)`: push a blessed model to `<serving_dir>/<N>/` and repoint `<serving_dir>/CURRENT.json`.

TF Serving watches a base path whose integer-named subdirectories are model versions; the newest
is served. `CURRENT.json` names the version shardflow pushed last (the model a pipeline's `latest`
means for warm starts and baselines):

    {"version": 3, "model": "s3://b/serving/3", "pushed_at": "2026-11-23T12:00:00Z", **source}

Locally the copy is made under a temporary sibling and renamed to `<N>`, so a server never sees half
a model. Object stores have no rename: the copy goes straight to `<N>/`. On both, the pointer is
replaced atomically and only after the copy is complete, so it never names a missing or partial
model. A model whose evaluation did not end in BLESSED is not pushed.

    result = run(PusherConfig(model="runs/train/model", evaluation="runs/eval", serving_dir="runs/serving"))
    result.pushed, result.version, result.location
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..core import storage
from ..core.errors import ConfigError
from ..core.model_info import MODEL_INFO_NAME
from .config import LATEST, PusherConfig

SERVING_POINTER = "CURRENT.json"
# The Evaluator's verdict markers (shardflow.evaluator.executor writes exactly one of them, last).
BLESSED, NOT_BLESSED = "BLESSED", "NOT_BLESSED"


@dataclass(frozen=True)
class PushResult:
    pushed: bool
    version: int | None = None
    location: str = ""  # the pushed version's directory ('' when not pushed)
    reasons: list[str] = field(default_factory=list)  # why not pushed


def run(config: PusherConfig, echo: Callable[[str], None] = print) -> PushResult:
    """Pushes `config.model` when `config.evaluation` blessed it; otherwise changes nothing."""
    if not storage.is_file(storage.join(config.model, MODEL_INFO_NAME)):
        raise ConfigError(f"model {config.model!r} has no {MODEL_INFO_NAME}: not a model exported by shardflow train")
    reasons = _not_blessed_reasons(config)
    if reasons:
        echo(f"push: not pushed: {'; '.join(reasons)}")
        return PushResult(False, reasons=reasons)
    version, location = push_model(config.model, config.serving_dir, config.source)
    echo(f"push: {config.model} → {location} (version {version}); {SERVING_POINTER} points to it")
    return PushResult(True, version, location)


def _not_blessed_reasons(config: PusherConfig) -> list[str]:
    """[] when the evaluation blessed this very model; otherwise what stands in the way."""
    evaluation = config.evaluation
    if not storage.is_file(storage.join(evaluation, BLESSED)):
        verdict = storage.join(evaluation, NOT_BLESSED)
        if storage.is_file(verdict):
            return storage.read_text(verdict).splitlines() or ["the evaluation did not bless the model"]
        return [f"{evaluation} has no verdict (neither {BLESSED} nor {NOT_BLESSED}): the evaluation did not finish"]
    scored = storage.read_json(storage.join(evaluation, "metrics.json")).get("model", "")
    if _normalized(scored) != _normalized(config.model):
        return [f"the evaluation in {evaluation} blessed {scored}, not {config.model}"]
    return []


def _normalized(location: str) -> str:
    return location.rstrip("/") if storage.is_remote(location) else os.path.realpath(location)


def push_model(model_dir: str, serving_dir: str, source: dict[str, Any] | None = None) -> tuple[int, str]:
    """Copies `model_dir` to the next version `<serving_dir>/<N>/`, then repoints CURRENT.json; (N, location).

    No blessing check: `run` makes it (or a pipeline's condition on the Evaluator's verdict). The model
    already served (the same `model_dir`, as a rerun whose Trainer was cached blesses it) is not
    copied again: its version stays current.
    """
    pointer = read_pointer(serving_dir)
    if pointer and pointer.get("pushed_from") == _normalized(model_dir) and storage.exists(pointer["model"]):
        return pointer["version"], pointer["model"]
    versions = [int(name) for name in storage.list_names(serving_dir) if name.isdigit()]
    version = max(versions, default=0) + 1
    target = storage.join(serving_dir, str(version))
    if storage.is_remote(target):
        storage.remove(target)  # objects of a push killed before its pointer was written
        storage.copy_tree(model_dir, target)
    else:
        staging = storage.temp_name(target)
        try:
            storage.copy_tree(model_dir, staging)
            storage.move(staging, target)  # atomic rename: the version appears whole
        finally:
            storage.remove(staging)
    pointer = {"version": version, "model": target, "pushed_from": _normalized(model_dir),
               "pushed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **(source or {})}
    storage.write_json(storage.join(serving_dir, SERVING_POINTER), pointer)  # last, atomically
    return version, target


def read_pointer(serving_dir: str) -> dict[str, Any] | None:
    """The content of CURRENT.json, or None when nothing was pushed to `serving_dir` yet."""
    pointer = storage.join(serving_dir, SERVING_POINTER)
    return storage.read_json(pointer) if storage.is_file(pointer) else None


def resolve_latest(serving_dir: str) -> str:
    """The model directory CURRENT.json names ('' when nothing was pushed yet)."""
    pointer = read_pointer(serving_dir)
    return pointer["model"] if pointer else ""


def resolve_model_reference(reference: str, serving_dir: str) -> str:
    """`latest` → the served model ('' when none); any other reference (a path or URI) as is."""
    return resolve_latest(serving_dir) if reference == LATEST else reference

"""`run(config)`: push a blessed model to `<serving_dir>/<N>/` and repoint `<serving_dir>/CURRENT.json`.

TF Serving watches a base path whose integer-named subdirectories are model versions; the newest
is served. `CURRENT.json` names the version shardflow pushed last (the model a pipeline's `latest`
means for warm starts and baselines):

    {"version": 3, "model": "s3://b/serving/3", "pushed_at": "2026-11-23T12:00:00Z", **source}

Locally the copy is made under a temporary sibling and renamed to `<N>`, so a server never sees half
a model. Object stores have no rename: the copy goes straight to `<N>/`. On both, the pointer is
replaced atomically and only after the copy is complete, so it never names a missing or partial
model. A model whose evaluation did not end in BLESSED is not pushed. With `infra_validation` (the
output of `shardflow infra-validate`), a model is pushed only when it is INFRA_BLESSED too, and the
validator's TF Serving warm-up file is copied into the version (`<N>/assets.extra/`) within the same
atomic copy, so a served version answers its first request without start-up cost.

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
from ..evaluator.config import BLESSED, METRICS, NOT_BLESSED
from ..infra_validator.config import INFRA_BLESSED, INFRA_NOT_BLESSED, REPORT, WARMUP_FILE
from .config import LATEST, PusherConfig

SERVING_POINTER = "CURRENT.json"


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
    reasons = _verdict_reasons(config.evaluation, BLESSED, NOT_BLESSED, "evaluation", METRICS, config.model)
    if not reasons and config.infra_validation:
        reasons = _verdict_reasons(config.infra_validation, INFRA_BLESSED, INFRA_NOT_BLESSED, "infra validation",
                                   REPORT, config.model)
    if reasons:
        echo(f"push: not pushed: {'; '.join(reasons)}")
        return PushResult(False, reasons=reasons)
    extra = ({WARMUP_FILE: storage.join(config.infra_validation, *WARMUP_FILE.split("/"))}
             if config.infra_validation else {})
    version, location = push_model(config.model, config.serving_dir, config.source, extra)
    echo(f"push: {config.model} → {location} (version {version}); {SERVING_POINTER} points to it")
    return PushResult(True, version, location)


def _verdict_reasons(root: str, blessed: str, not_blessed: str, step: str, report: str, model: str) -> list[str]:
    """[] when the `step`'s output in `root` blessed this very model; otherwise what stands in the way.

    The verdict is the marker `blessed` or `not_blessed` (one reason per line); `report` names the model checked.
    """
    if not storage.is_file(storage.join(root, blessed)):
        verdict = storage.join(root, not_blessed)
        if storage.is_file(verdict):
            return storage.read_text(verdict).splitlines() or [f"the {step} did not bless the model"]
        return [f"{root} has no verdict (neither {blessed} nor {not_blessed}): the {step} did not finish"]
    checked = storage.read_json(storage.join(root, report)).get("model", "")
    if _normalized(checked) != _normalized(model):
        return [f"the {step} in {root} blessed {checked}, not {model}"]
    return []


def _normalized(location: str) -> str:
    return location.rstrip("/") if storage.is_remote(location) else os.path.realpath(location)


def push_model(model_dir: str, serving_dir: str, source: dict[str, Any] | None = None,
               extra_files: dict[str, str] | None = None) -> tuple[int, str]:
    """Copies `model_dir` to the next version `<serving_dir>/<N>/`, then repoints CURRENT.json; (N, location).

    `extra_files` ({path inside the version: source file}, e.g. the warm-up file) are part of the same copy.

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
    if not storage.can_rename(target):  # object stores: written in place, the pointer (last) publishes it
        storage.remove(target)  # objects of a push killed before its pointer was written
        _copy_version(model_dir, target, extra_files or {})
    else:
        staging = storage.temp_name(target)
        try:
            _copy_version(model_dir, staging, extra_files or {})
            storage.move(staging, target)  # atomic rename: the version appears whole
        finally:
            storage.remove(staging)
    pointer = {"version": version, "model": target, "pushed_from": _normalized(model_dir),
               "pushed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **(source or {})}
    storage.write_json(storage.join(serving_dir, SERVING_POINTER), pointer)  # last, atomically
    return version, target


def _copy_version(model_dir: str, target: str, extra_files: dict[str, str]) -> None:
    storage.copy_tree(model_dir, target)
    for relative, source in extra_files.items():
        storage.copy_file(source, storage.join(target, *relative.split("/")))


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

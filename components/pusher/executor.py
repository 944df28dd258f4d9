"""`run(config)`: push a blessed model to `<serving_dir>/<N>/` and repoint `<serving_dir>/CURRENT.json`.

TF Serving watches a base path whose integer-named subdirectories are model versions; the newest
is served. `CURRENT.json` names the version shardflow pushed last (the model a pipeline's `latest`
means for warm starts and baselines):

    {"version": 3, "model": "s3://b/serving/3", "pushed_from": "s3://b/runs/train/model",
     "gated_against": "s3://b/serving/2", "replaced_version": 2, "pushed_at": "2026-11-23T12:00:00Z", **source}

Locally the copy is made under a temporary sibling and renamed to `<N>`, so a server never sees half
a model. Object stores have no rename: the copy goes straight to `<N>/`. On both, the pointer is
replaced atomically and only after the copy is complete, so it never names a missing or partial
model. A model whose evaluation did not end in BLESSED is not pushed. With `infra_validation` (the
output of `shardflow infra-validate`), a model is pushed only when it is INFRA_BLESSED too, and the
validator's TF Serving warm-up file is copied into the version (`<N>/assets.extra/`) within the same
atomic copy, so a served version answers its first request without start-up cost.

Concurrent pushes (serving.py): the pointer moves only while it names the baseline the Evaluator gated
the model against (its `gated_against` record: a model, or none when nothing was served), checked and
written as one compare-and-swap; `<N>` is claimed before the copy, so two pushes never share a number.
A refused push removes its copy and says what is served now and what the model was gated against.

    result = run(PusherConfig(model="runs/train/model", evaluation="runs/eval", serving_dir="runs/serving"))
    result.pushed, result.version, result.location
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..core import storage
from ..core.errors import ConfigError
from ..core.model_info import MODEL_INFO_NAME
from ..evaluator.config import BLESSED, GATED_AGAINST, METRICS, NOT_BLESSED
from ..infra_validator.config import INFRA_BLESSED, INFRA_NOT_BLESSED, REPORT, WARMUP_FILE
from .config import GATED, LATEST, PusherConfig, ServingChanged
from .serving import (SERVING_POINTER, check_gated, check_unchanged, claim_version, normalized, read_pointer,
                      read_served, swap_pointer)


@dataclass(frozen=True)
class PushResult:
    pushed: bool
    version: int | None = None
    location: str = ""  # the pushed version's directory ('' when not pushed)
    reasons: list[str] = field(default_factory=list)  # why not pushed


def run(config: PusherConfig, echo: Callable[[str], None] = print) -> PushResult:
    """Pushes `config.model` when `config.evaluation` blessed it and (with `replace` GATED) what it was gated
    against is still served; otherwise changes nothing and says why (`PushResult.reasons`)."""
    if not storage.is_file(storage.join(config.model, MODEL_INFO_NAME)):
        raise ConfigError(f"model {config.model!r} has no {MODEL_INFO_NAME}: not a model exported by shardflow train")
    reasons = _verdict_reasons(config.evaluation, BLESSED, NOT_BLESSED, "evaluation", METRICS, config.model)
    if not reasons and config.infra_validation:
        reasons = _verdict_reasons(config.infra_validation, INFRA_BLESSED, INFRA_NOT_BLESSED, "infra validation",
                                   REPORT, config.model)
    gated, reasons = _gated_against(config) if not reasons else (None, reasons)
    extra = ({WARMUP_FILE: storage.join(config.infra_validation, *WARMUP_FILE.split("/"))}
             if config.infra_validation else {})
    if not reasons:
        try:
            version, location = push_model(config.model, config.serving_dir, config.source, extra,
                                           gated_against=gated)
            echo(f"push: {config.model} → {location} (version {version}); {SERVING_POINTER} points to it")
            return PushResult(True, version, location)
        except ServingChanged as refused:  # its one line: what is served now, what the model was gated against
            reasons = [str(refused)]
    echo(f"push: not pushed: {'; '.join(reasons)}")
    return PushResult(False, reasons=reasons)


def _gated_against(config: PusherConfig) -> tuple[str | None, list[str]]:
    """The evaluation's record of the baseline it gated against (None: `replace` ANY), or why there is none."""
    if config.replace != GATED:
        return None, []
    recorded = storage.read_json(storage.join(config.evaluation, METRICS)).get(GATED_AGAINST)
    if not isinstance(recorded, str) or not recorded:
        return None, [f"the evaluation in {config.evaluation} does not record the baseline it was gated against "
                      f"(no {GATED_AGAINST} in its {METRICS}: an older shardflow's): evaluate again"]
    return recorded, []


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
    if normalized(checked) != normalized(model):
        return [f"the {step} in {root} blessed {checked}, not {model}"]
    return []


def push_model(model_dir: str, serving_dir: str, source: dict[str, Any] | None = None,
               extra_files: dict[str, str] | None = None, *, gated_against: str | None) -> tuple[int, str]:
    """Copies `model_dir` to the next version `<serving_dir>/<N>/`, then repoints CURRENT.json; (N, location).

    `gated_against`: the baseline the candidate was gated against (its location, or evaluator.config's
    NO_BASELINE when nothing was served); the pointer moves only if it still names that, checked and moved
    as one compare-and-swap, else ServingChanged and this push's copy is removed. None: whatever is
    served may be replaced (still only if no other push moved the pointer during this one).
    `extra_files` ({path inside the version: source file}, e.g. the warm-up file) are part of the same copy.

    No blessing check: `run` makes it (or a pipeline's condition on the Evaluator's verdict). The model
    already served (the same `model_dir`, as a rerun whose Trainer was cached blesses it) is not
    copied again: its version stays current.
    """
    served, origin = read_served(serving_dir), normalized(model_dir)
    current = served.pointer
    if current and current.get("pushed_from") == origin and storage.exists(current["model"]):
        return current["version"], current["model"]
    check_gated(served, gated_against)
    version = claim_version(serving_dir, origin)
    target = storage.join(serving_dir, str(version))
    try:
        _publish(model_dir, target, extra_files or {}, lambda: check_unchanged(serving_dir, served, gated_against))
        pointer = {"version": version, "model": target, "pushed_from": origin, "gated_against": gated_against,
                   "replaced_version": current["version"] if current else None,
                   "pushed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **(source or {})}
        swap_pointer(serving_dir, served, pointer, gated_against)  # last, and only if `served` is still current
    except ServingChanged:
        storage.remove(target)  # TF Serving serves the newest directory: a refused version must not stay
        raise
    return version, target


def _publish(model_dir: str, target: str, extra_files: dict[str, str], still_current: Callable[[], None]) -> None:
    """Makes `target` a copy of the model: whole when it appears where the scheme renames, in place elsewhere."""
    if not storage.can_rename(target):  # object stores: written in place (the claim made `target` this push's)
        _copy_version(model_dir, target, extra_files)
        return
    staging = storage.temp_name(target)
    try:
        _copy_version(model_dir, staging, extra_files)
        still_current()  # a push that already lost is refused before its version appears
        storage.move(staging, target)  # atomic rename: the version appears whole
    finally:
        storage.remove(staging)


def _copy_version(model_dir: str, target: str, extra_files: dict[str, str]) -> None:
    storage.copy_tree(model_dir, target)
    for relative, source in extra_files.items():
        storage.copy_file(source, storage.join(target, *relative.split("/")))


def resolve_latest(serving_dir: str) -> str:
    """The model directory CURRENT.json names ('' when nothing was pushed yet)."""
    return served_model_for(read_pointer(serving_dir))


def resolve_model_reference(reference: str, serving_dir: str, candidate: str = "") -> str:
    """`latest` → the served model ('' when none); any other reference (a path or URI) as is.

    With `candidate` (the model a baseline is for): '' when `latest` names a version pushed from that very
    model (`served_model_for`).
    """
    return served_model_for(read_pointer(serving_dir), candidate) if reference == LATEST else reference


def served_model_for(pointer: dict[str, Any] | None, candidate: str = "") -> str:
    """The model `pointer` (CURRENT.json's content) serves, as `candidate`'s baseline: '' when none is served
    or it was pushed from `candidate` itself. A model compared with itself has zero deltas, so its verdict is
    its thresholds' alone, and Push leaves a served candidate as it is; so the rerun of a run that pushed is
    the same evaluation as the run."""
    if pointer is None or (candidate and pointer.get("pushed_from") == normalized(candidate)):
        return ""
    return pointer["model"]

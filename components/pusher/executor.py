"""`run(config)`: push a blessed model to `<serving_dir>/<N>/`, repoint `<serving_dir>/CURRENT.json` and TF Serving.

`CURRENT.json` names the version served (the model a pipeline's `latest` means for warm starts and
baselines), and `models.config` makes TF Serving serve exactly that version (tf_serving.py); its `storage_uri`
is what a KServe InferenceService's storageUri names (layout.py: a prefix holding that version alone):

    {"version": 3, "model": "s3://b/serving/3/model/3", "storage_uri": "s3://b/serving/3/model", "serial": 5,
     "pushed_from": "s3://b/runs/train/model", "content_digest": "…", "gated_against": "s3://b/serving/2/model/2",
     "replaced_version": 2, "pushed_at": "2026-11-23T12:00:00Z", "action": "push",
     "served_versions": {"1": {…}, "3": {…}}, "abandoned_through": 2, **source}

Locally the copy is made under a temporary sibling and renamed to `<N>`; object stores have no rename, so
the copy goes straight to `<N>/model/<N>/`, `saved_model.pb` last. The pointer is swapped only after the copy
is complete, and TF Serving's config follows the pointer, so what TF Serving loads is never a half copy, a
loser or an orphan. A model
whose evaluation did not end in BLESSED (or, with `infra_validation`, not INFRA_BLESSED) is not pushed; the
validator's TF Serving warm-up file goes into the version (`<N>/assets.extra/`) within the same copy.

Concurrent pushes (serving.py): the pointer moves only while it names the baseline the Evaluator gated
the model against (its `gated_against` record: a model, or none when nothing was served), checked and
written as one compare-and-swap; `<N>` is claimed before the copy, so two pushes never share a number.
A refused push removes its copy and says what is served now and what the model was gated against; what a
killed push left is removed by the next one (cleanup.py).

    result = run(PusherConfig(model="runs/train/model", evaluation="runs/eval", serving_dir="runs/serving"))
    result.pushed, result.version, result.location, result.exit_code
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..core import storage
from ..core.errors import EXIT_REFUSED, ConfigError
from ..core.model_info import MODEL_INFO_NAME, model_digest
from ..evaluator.config import BLESSED, GATED_AGAINST, METRICS, NOT_BLESSED
from ..infra_validator.config import INFRA_BLESSED, INFRA_NOT_BLESSED, REPORT, WARMUP_FILE
from .cleanup import clean_serving_dir
from .config import GATED, LATEST, STALE_CLAIM_SECONDS, PusherConfig, ServingChanged
from .serving import (SERVING_POINTER, check_gated, check_unchanged, claim_version, normalized, read_pointer,
                      read_served, serve_pointer_version, successor, swap_pointer)
from .layout import SAVED_MODEL, model_location, relative_model, storage_uri, version_folder
from .tf_serving import MODEL_CONFIG, TfServing


@dataclass(frozen=True)
class PushResult:
    pushed: bool
    version: int | None = None
    location: str = ""  # the pushed version's directory ('' when not pushed)
    reasons: list[str] = field(default_factory=list)  # why not pushed
    retryable: bool = False  # not pushed because another push moved the pointer: a rerun may succeed

    @property
    def exit_code(self) -> int:
        """0 pushed; 3 refused by a verdict (final for this model); 75 lost to another push (worth a rerun)."""
        return 0 if self.pushed else ServingChanged.exit_code if self.retryable else EXIT_REFUSED


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
                                           gated_against=gated, tf_serving=config.tf_serving,
                                           stale_after=config.stale_claims_after)
            echo(f"push: {config.model} → {location} (version {version}); {SERVING_POINTER} and TF Serving's "
                 f"{MODEL_CONFIG} name it")
            return PushResult(True, version, location)
        except ServingChanged as refused:  # its one line: what is served now, what the model was gated against
            echo(f"push: not pushed: {refused}")
            return PushResult(False, reasons=[str(refused)], retryable=True)
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
               extra_files: dict[str, str] | None = None, *, gated_against: str | None,
               tf_serving: TfServing = TfServing(), stale_after: float = STALE_CLAIM_SECONDS) -> tuple[int, str]:
    """Copies `model_dir` to the next version `<serving_dir>/<N>/`, repoints CURRENT.json, then TF Serving's model
    config; (N, location).

    `gated_against`: the baseline the candidate was gated against (its location, or evaluator.config's
    NO_BASELINE when nothing was served); the pointer moves only if it still names that, checked and moved
    as one compare-and-swap, else ServingChanged and this push's copy is removed. None: whatever is
    served may be replaced (still only if no other push moved the pointer during this one).
    `extra_files` ({path inside the version: source file}, e.g. the warm-up file) are part of the same copy.
    First, what killed pushes left is cleaned up (cleanup.py); last, the model config names the pointer's version.

    No blessing check: `run` makes it (or a pipeline's condition on the Evaluator's verdict). A model whose
    content is already served (model_digest: a rerun whose Trainer was cached) is not copied again.
    """
    storage.check_conditional_writes(serving_dir)  # a store that would make the swap last-writer-wins: refused first
    served, _ = clean_serving_dir(serving_dir, read_served(serving_dir), stale_after)
    origin, digest = normalized(model_dir), model_digest(model_dir)
    if served.pointer and served_digest(served.pointer) == digest:
        serve_pointer_version(serving_dir, tf_serving)
        return served.version, served.pointer["model"]
    check_gated(served, gated_against)
    version = claim_version(serving_dir, origin, served)
    target = version_folder(serving_dir, version)  # holds one folder, `model/<N>`: one storage URI, one version
    record = {"version": version, "model": model_location(serving_dir, version), "pushed_from": origin,
              "content_digest": digest, "storage_uri": storage_uri(serving_dir, version),
              "gated_against": gated_against, "action": "push", **(source or {})}
    try:
        _publish(model_dir, target, relative_model(version), extra_files or {},
                 lambda: check_unchanged(serving_dir, served, gated_against, version))
        swap_pointer(serving_dir, served, lambda now: successor(serving_dir, now, record), gated_against)
    except BaseException:  # refused, failed or interrupted before the swap: no pointer names this copy
        _discard(target)
        raise
    serve_pointer_version(serving_dir, tf_serving)
    return version, record["model"]


def served_digest(pointer: dict[str, Any]) -> str:
    """The content digest of the served version: recorded by the push, or read (a pointer of an older shardflow)."""
    return pointer.get("content_digest") or (model_digest(pointer["model"]) if storage.exists(pointer["model"]) else "")


def _discard(target: str) -> None:
    """Removes this push's own copy; a store that fails now too leaves it to the next push's clean-up."""
    try:
        storage.remove(target)
    except Exception:  # noqa: BLE001 (the first error is the one raised; this copy is then an abandoned claim's)
        pass


def _publish(model_dir: str, target: str, inner: str, extra_files: dict[str, str],
             still_current: Callable[[], None]) -> None:
    """Makes `target/inner` a copy of the model: whole when `target` appears where the scheme renames, in place
    elsewhere."""
    if not storage.can_rename(target):  # object stores: written in place (the claim made `target` this push's)
        _copy_version(model_dir, storage.join(target, *inner.split("/")), extra_files)
        return
    staging = storage.temp_name(target)
    try:
        _copy_version(model_dir, storage.join(staging, *inner.split("/")), extra_files)
        still_current()  # a push that already lost is refused before its version appears
        storage.move(staging, target)  # atomic rename: the version appears whole
    finally:
        storage.remove(staging)


def _copy_version(model_dir: str, target: str, extra_files: dict[str, str]) -> None:
    """The extra files, the model, and `saved_model.pb` last: where TF Serving is pointed at a base path instead
    of the model config, a version without it is no model yet (it retries the load) rather than a half one."""
    for relative, source in extra_files.items():
        storage.copy_file(source, storage.join(target, *relative.split("/")))
    storage.copy_tree(model_dir, target, last=(SAVED_MODEL,))


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
    or it serves `candidate`'s very content (model_digest, not its path: a model retrained in place is another
    model). A model compared with itself has zero deltas, so its verdict is its thresholds' alone, and Push
    leaves a served candidate as it is; so the rerun of a run that pushed is the same evaluation as the run."""
    if pointer is None:
        return ""
    if candidate and storage.exists(candidate) and served_digest(pointer) == model_digest(candidate):
        return ""
    return pointer["model"]

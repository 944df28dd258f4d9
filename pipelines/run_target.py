"""The target a pipeline run trains on, and its kind, known from its index before any step runs.

ExampleGen's own role detection on the index's header and first rows (`columns.index_roles`) and
the Trainer's own target rule (`trainer.task.choose_target`) give the target column; a mask target
means segmentation, a box index's boxes (`box_schema.BOX_TARGET`, the seven features of role "boxes")
detection, any other classification. From the kind come the default blessing threshold and
a check that every threshold and regression names a metric of that kind: a mistake costs a second,
not an ExampleGen, a Transform and a training first. (In pipelines/, "task" is KFP's word: a node of
the compiled pipeline.)

    parameters = prepare_run(LocalRunConfig(...).arguments())
    parameters["eval_thresholds"]  # ["mean_iou>=0.5"] for an index with a mask column and no --threshold
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.box_schema import BOX_ROLE, BOX_TARGET
from ..core.errors import ConfigError
from ..evaluator.config import DEFAULT_THRESHOLDS, check_metric_names
from ..example_gen.columns import index_roles
from ..trainer.task import choose_target, task_kind
from .step_options import PIPELINE_PARAMETERS, RUN_FLAGS, check_step_options


@dataclass(frozen=True)
class ImpliedTarget:
    """What the index implies: the target column, its role, and the kind of model it asks for."""

    kind: str  # classification | segmentation | detection (the Trainer's task kind)
    column: str
    role: str
    # False with a user preprocessing_fn: its outputs, unknown before Transform runs, decide the target.
    certain: bool = True


def implied_target(configs: dict[str, Any], labels: dict[str, str] = RUN_FLAGS) -> ImpliedTarget:
    """The target of a run, from its step configs (`check_step_options`' result); reads the index's start.

    ConfigError names the option (`labels`, as in check_step_options) when no target can be chosen.
    """
    try:
        roles = index_roles(configs["example-gen"])
    except ConfigError as err:
        raise ConfigError(f"{labels['index']}: shardflow example-gen: {err}") from None
    custom = configs["transform"].preprocessing is not None
    try:
        target = choose_target(configs["train"].input.label, roles)
    except ConfigError as err:
        if custom:  # the preprocessing_fn may make the target: guess from the index, check nothing
            guessed = "mask" if "mask" in roles.values() else BOX_ROLE if BOX_ROLE in roles.values() else "label"
            return ImpliedTarget(task_kind(guessed), "", "", certain=False)
        raise ConfigError(f"{labels['train']}: shardflow train: {err}; "
                          f"the index's columns: {_described(roles)}") from None
    role = BOX_ROLE if target == BOX_TARGET else roles[target]  # the boxes' target names their seven features
    return ImpliedTarget(task_kind(role), target, role, certain=not custom)


def _described(roles: dict[str, str]) -> str:
    return ", ".join(f"{name} ({role})" for name, role in roles.items())


def prepare_run(parameters: dict[str, Any], labels: dict[str, str] = RUN_FLAGS) -> dict[str, Any]:
    """The pipeline's `parameters` checked before any step runs; returns them with `eval_thresholds`
    None replaced by the default of the target's kind (DEFAULT_THRESHOLDS).

    Checks every step's options with that command's own parser and config, then the thresholds and
    regressions against the kind of target the index implies. ConfigError names the option (`labels`: a run's
    flags, or the pipeline's parameters) and the value.
    """
    configs = check_step_options({**parameters, "eval_thresholds": parameters.get("eval_thresholds") or []}, labels)
    target = implied_target(configs, labels)
    if parameters.get("eval_thresholds") is None:
        parameters = {**parameters, "eval_thresholds": [DEFAULT_THRESHOLDS[target.kind]]}
    if target.certain:
        evaluator = configs["evaluate"]
        try:
            check_metric_names(target.kind, evaluator.thresholds, evaluator.max_regressions)
        except ConfigError as err:
            raise ConfigError(f"{labels['evaluate']}: {err}; the index's target {target.column!r} is a "
                              f"{target.role} column") from None
    return parameters


# `shardflow compile` without these parameters: placeholders, never read (the configs touch no file).
_PLACEHOLDERS = {"index": ["train=/option-check/index.csv"], "data_root": "/option-check/data",
                 "serving_dir": "/option-check/serving", "run_record_dir": "/option-check/runs"}


def check_baked_params(declared: dict[str, Any], baked: dict[str, Any]) -> dict[str, Any]:
    """`shardflow compile`'s check of the values it bakes into the IR (`baked`, typed, over the defaults of
    `declared`, the pipeline's parameters): the same checks as a run's. The target part only when the baked
    index and data root are local files here (a cluster's paths, or spans still to come, are not);
    then, without baked thresholds, the default of the target's kind is baked. Returns `baked`, maybe with it."""
    parameters = {name: info.get("defaultValue") for name, info in declared.items()}
    parameters.update({name: value for name, value in _PLACEHOLDERS.items() if parameters.get(name) is None})
    parameters.update(baked)
    if not _readable_here(baked):
        check_step_options(parameters, PIPELINE_PARAMETERS)
        return baked
    resolved = prepare_run({**parameters, "eval_thresholds": baked.get("eval_thresholds")}, PIPELINE_PARAMETERS)
    return {**baked, "eval_thresholds": resolved["eval_thresholds"]}


def _readable_here(baked: dict[str, Any]) -> bool:
    if "index" not in baked or "data_root" not in baked or not Path(baked["data_root"]).is_dir():
        return False
    return all(Path(spec.split("=", 1)[-1]).is_file() for spec in baked["index"])

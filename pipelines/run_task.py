"""The task a pipeline run trains, known from its index before any step runs.

ExampleGen's own role detection on the index's header and first rows (`columns.index_roles`) and
the Trainer's own target rule (`task.choose_target`) give the target; a mask target means
segmentation. From the task come the default blessing threshold and a check that every threshold
and regression names a metric of that task: a mistake costs a second, not an ExampleGen, a
Transform and a training first.

    p = prepare_run(LocalRunConfig(...).arguments())
    p["eval_thresholds"]        # ["mean_iou>=0.5"] for an index with a mask column and no --threshold
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..evaluator.config import DEFAULT_THRESHOLDS, check_metric_names
from ..example_gen.columns import index_roles
from ..trainer.task import choose_target, task_kind
from .step_options import PIPELINE_PARAMETERS, RUN_FLAGS, check_step_options


@dataclass(frozen=True)
class ImpliedTask:
    """What the index implies: the task, its target column and the target's role."""

    kind: str  # classification | segmentation
    target: str
    role: str
    # False with a user preprocessing_fn: its outputs, unknown before Transform runs, decide the target.
    certain: bool = True


def implied_task(configs: dict[str, Any], labels: dict[str, str] = RUN_FLAGS) -> ImpliedTask:
    """The task of a run, from its step configs (`check_step_options`' result); reads the index's start.

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
            kind = "segmentation" if "mask" in roles.values() else "classification"
            return ImpliedTask(kind, "", "", certain=False)
        raise ConfigError(f"{labels['train']}: shardflow train: {err}; "
                          f"the index's columns: {_described(roles)}") from None
    return ImpliedTask(task_kind(roles[target]), target, roles[target], certain=not custom)


def _described(roles: dict[str, str]) -> str:
    return ", ".join(f"{name} ({role})" for name, role in roles.items())


def prepare_run(p: dict[str, Any], labels: dict[str, str] = RUN_FLAGS) -> dict[str, Any]:
    """The pipeline's parameters `p` checked before any step runs; returns them with `eval_thresholds`
    None replaced by the task's default (DEFAULT_THRESHOLDS).

    Checks every step's options with that command's own parser and config, then the thresholds and
    regressions against the task the index implies. ConfigError names the option (`labels`: a run's
    flags, or the pipeline's parameters) and the value.
    """
    configs = check_step_options({**p, "eval_thresholds": p["eval_thresholds"] or []}, labels)
    task = implied_task(configs, labels)
    if p["eval_thresholds"] is None:
        p = {**p, "eval_thresholds": [DEFAULT_THRESHOLDS[task.kind]]}
    if task.certain:
        evaluator = configs["evaluate"]
        try:
            check_metric_names(task.kind, evaluator.thresholds, evaluator.max_regressions)
        except ConfigError as err:
            raise ConfigError(f"{labels['evaluate']}: {err}; the index's target {task.target!r} is a "
                              f"{task.role} column") from None
    return p


# `shardflow compile` without these parameters: placeholders, never read (the configs touch no file).
_PLACEHOLDERS = {"index": ["train=/option-check/index.csv"], "data_root": "/option-check/data",
                 "serving_dir": "/option-check/serving", "run_record_dir": "/option-check/runs"}


def check_baked_params(declared: dict[str, Any], baked: dict[str, Any]) -> dict[str, Any]:
    """`shardflow compile`'s check of the values it bakes into the IR (`baked`, typed, over the defaults of
    `declared`, the pipeline's parameters): the same checks as a run's. The task part only when the baked
    index and data root are local files here (a cluster's paths, or spans still to come, are not);
    then, without baked thresholds, the task's default is baked. Returns `baked`, maybe with it."""
    p = {name: info.get("defaultValue") for name, info in declared.items()}
    p.update({name: value for name, value in _PLACEHOLDERS.items() if p.get(name) is None})
    p.update(baked)
    if not _readable_here(baked):
        check_step_options(p, PIPELINE_PARAMETERS)
        return baked
    resolved = prepare_run({**p, "eval_thresholds": baked.get("eval_thresholds")}, PIPELINE_PARAMETERS)
    return {**baked, "eval_thresholds": resolved["eval_thresholds"]}


def _readable_here(baked: dict[str, Any]) -> bool:
    if "index" not in baked or "data_root" not in baked or not Path(baked["data_root"]).is_dir():
        return False
    return all(Path(spec.split("=", 1)[-1]).is_file() for spec in baked["index"])

"""The task kinds shardflow serves, one package each, and the registry the components find them in.

    from shardflow.tasks import task_for
    task = task_for(model_info.task)           # a `base.Task`: the components name no kind
    task.metric_names, task.evaluate(run)

A kind is one folder (classification/, segmentation/, detection/) and one line below. The components import
`shardflow.tasks` (this registry) and `shardflow.tasks.base`, never a kind's package; a kind imports no other
kind (tests/architecture/test_task_arrows.py). Each kind's package imports only its light `Task` class here;
the scoring code (TensorFlow) loads when `evaluate` runs.

>>> sorted(TASKS), task_for("segmentation").default_threshold
(['classification', 'detection', 'segmentation'], 'mean_iou>=0.5')
>>> task_for("keypoints")
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: unknown task kind 'keypoints' (known: classification, segmentation, detection)
"""
from __future__ import annotations

from ..core.errors import ConfigError
from .base import EvaluationRun, Task, TaskEvaluation
from .classification import ClassificationTask
from .detection import DetectionTask
from .segmentation import SegmentationTask

TASKS: dict[str, Task] = {task.kind: task for task in (
    ClassificationTask(),  # labels: one class per example
    SegmentationTask(),  # masks: one class per pixel
    DetectionTask(),  # boxes: classes and boxes per image
)}


def task_for(kind: str) -> Task:
    """The registered task of `kind` (a model's `ModelInfo.task`); a ConfigError naming an unknown one."""
    task = TASKS.get(kind)
    if task is None:
        raise ConfigError(f"unknown task kind {kind!r} (known: {', '.join(TASKS)})")
    return task


__all__ = ["TASKS", "EvaluationRun", "Task", "TaskEvaluation", "task_for"]

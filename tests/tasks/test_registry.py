"""The task registry (components/tasks/__init__.py) in a fresh process: light to import, no import cycle.

The Evaluator's config reads the registry, and the kinds' scoring modules import the Evaluator's: only lazy
imports keep that from being a cycle (docs/architecture.md, rule 9). A fresh interpreter shows whether
importing either side first still works, and that the registry loads no TensorFlow.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from shardflow.core.errors import ConfigError
from shardflow.tasks import TASKS, task_for


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_registry_loads_neither_tensorflow_nor_a_component() -> None:
    loaded = _fresh("import sys, shardflow.tasks; print(sorted(m for m in sys.modules if m == 'tensorflow' or "
                    "m.startswith('shardflow.') and m.split('.')[1] not in ('core', 'tasks')))")
    assert loaded == "[]"


@pytest.mark.parametrize("first", ["shardflow.tasks.detection.evaluation", "shardflow.evaluator.executor",
                                   "shardflow.tasks.classification.task", "shardflow.evaluator.confusion"])
def test_either_side_imports_first(first: str) -> None:
    assert _fresh(f"import {first}, shardflow.evaluator.config as c; print(sorted(c.TASK_METRICS))") == (
        "['classification', 'detection', 'segmentation']")


def test_each_kind_is_registered_under_its_own_name_and_an_unknown_one_is_named() -> None:
    assert all(task_for(kind) is task and task.kind == kind for kind, task in TASKS.items())
    with pytest.raises(ConfigError, match="unknown task kind 'keypoints'"):
        task_for("keypoints")

"""Evaluator: score a split with an exported model (and a baseline), write metrics, bless or not.

    from shardflow.evaluator import EvaluatorConfig, run
    outcome = run(EvaluatorConfig(model="runs/train/model", examples="runs/examples", output="runs/eval",
                                  thresholds=("accuracy>=0.9",)))
    # runs/eval/metrics.json, confusion_matrix.png, blessing.json, BLESSED or NOT_BLESSED
"""
from typing import Any

_LAZY = {"run": "executor", "Evaluation": "executor", "ConfigError": "config", "EvaluationError": "config",
         "EvaluatorConfig": "config", "Regression": "config", "Threshold": "config"}


def __getattr__(name: str) -> Any:
    """The executor loads TensorFlow and matplotlib: import it only when used. The config too: it reads the task
    registry (shardflow.tasks), whose kinds import modules of this package (scorer, intervals) when they score,
    so importing the package itself must not import the registry (no import cycle)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ConfigError", "Evaluation", "EvaluationError", "EvaluatorConfig", "Regression", "Threshold", "run"]

"""The Tuner: a hyperparameter search over the Trainer's options (KerasTuner 1.3, tf-keras); see `executor.run`.

    from shardflow.tuner import TunerConfig, run
"""
from __future__ import annotations

from typing import Any

from .config import TunerConfig

__all__ = ["TunerConfig", "run"]


def run(config: TunerConfig, **kwargs: Any) -> dict:
    from .executor import run as run_tuner  # TensorFlow and KerasTuner are imported only when the search runs

    return run_tuner(config, **kwargs)

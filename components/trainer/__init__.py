"""The Trainer: streams shards through tf.data into a tf-keras model; see `executor.run`.

    from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig, run
    run(TrainerConfig(input=InputOptions(examples="runs/digits/transform"), fit=FitOptions(epochs=5),
                      export=ExportOptions(output="runs/digits/model")))
"""
from __future__ import annotations

from typing import Any

from .config import ExportOptions, FitOptions, InputOptions, ModelOptions, TrainerConfig

__all__ = ["ExportOptions", "FitOptions", "InputOptions", "ModelOptions", "TrainerConfig", "run"]


def run(config: TrainerConfig, **kwargs: Any) -> dict:
    from .executor import run as run_trainer  # TensorFlow is imported only when training runs

    return run_trainer(config, **kwargs)

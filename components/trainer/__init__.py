"""The Trainer: streams shards through tf.data into a tf-keras model; see `executor.run`.

    from shardflow.trainer import TrainerConfig, run
    run(TrainerConfig(examples="runs/digits/transform", output="runs/digits/model", epochs=5))
"""
from __future__ import annotations

from typing import Any

from .config import TrainerConfig

__all__ = ["TrainerConfig", "run"]


def run(config: TrainerConfig, **kwargs: Any) -> dict:
    from .executor import run as run_trainer  # TensorFlow is imported only when training runs

    return run_trainer(config, **kwargs)

"""find-label-issues: the train split's label issues from K fold models' out-of-fold probabilities; see `executor.run`.
On boxes (a detection target): overlooked, swapped and badly located boxes from out-of-fold detections (boxes.py).

    from shardflow.label_finder import LabelFinderConfig, run
    run(LabelFinderConfig(train=TrainerConfig(input=InputOptions(examples="runs/examples"), fit=FitOptions(epochs=10),
                                              export=ExportOptions(output="runs/issues")),
                          output="runs/issues", folds=3))
"""
from __future__ import annotations

from typing import Any

from .config import LabelFinderConfig

__all__ = ["LabelFinderConfig", "run"]


def run(config: LabelFinderConfig, **kwargs: Any) -> dict:
    from .executor import run as find  # TensorFlow and Beam are imported only when the search runs

    return find(config, **kwargs)

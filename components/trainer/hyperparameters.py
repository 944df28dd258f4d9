"""`best_hyperparameters.json`: what `shardflow tune` finds and `shardflow train --hyperparameters` takes.

The file's "values" map TrainerConfig fields (learning_rate, batch_size, model, freeze_epochs, …) to
values; KerasTuner's own bookkeeping values ("tuner/epochs", …) are kept out of it. This module
owns the format: the Tuner writes through `hyperparameters_record`, the Trainer reads through
`apply_hyperparameters`, which replaces the config's fields (checked again by its __post_init__).

>>> sorted(TUNABLE)[:4]
['augment', 'backbone_alpha', 'batch_size', 'box_loss']
>>> hyperparameters_record({"learning_rate": 0.01, "tuner/epochs": 2}, "val_accuracy", 0.93)["values"]
{'learning_rate': 0.01}
"""
from __future__ import annotations

from typing import Any

from ..core import storage
from ..core.errors import ConfigError
from .config import TrainerConfig

HYPERPARAMETERS_FILE = "best_hyperparameters.json"
# The fields a search may set: how to train, never where the data or the outputs are.
TUNABLE = frozenset({"model", "batch_size", "learning_rate", "augment", "weights", "backbone_alpha", "freeze_epochs",
                     "fine_tune_layers", "fine_tune_learning_rate", "class_weight", "shuffle_buffer_mb", "epochs",
                     "schedule", "warmup_epochs", "ema_momentum", "box_loss"})


def hyperparameters_record(values: dict[str, Any], objective: str, score: float | None,
                           extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The file's content: the TrainerConfig values of the best trial, its objective and score."""
    kept = {name: value for name, value in values.items() if not name.startswith("tuner/")}
    unknown = sorted(set(kept) - TUNABLE)
    if unknown:
        raise ConfigError(f"hyperparameters {unknown} are not tunable Trainer options (tunable: {', '.join(sorted(TUNABLE))})")
    return {"values": kept, "objective": objective, "score": score, **(extra or {})}


def apply_hyperparameters(config: TrainerConfig) -> TrainerConfig:
    """`config` with the values of its `hyperparameters` file (local or URI) in place of its own fields."""
    if config.hyperparameters is None:
        return config
    if not storage.is_file(config.hyperparameters):
        raise ConfigError(f"hyperparameters {config.hyperparameters!r}: no such file (shardflow tune writes "
                          f"{HYPERPARAMETERS_FILE})")
    values = storage.read_json(config.hyperparameters).get("values")
    if not isinstance(values, dict):
        raise ConfigError(f"hyperparameters {config.hyperparameters!r}: no 'values' object")
    hyperparameters_record(values, "", None)  # the same names check as when it was written
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    if "epochs" in values and config.fit.steps is not None:
        values["steps"] = None
    return config.replaced(hyperparameters=None, **values)

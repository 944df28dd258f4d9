"""`TunerConfig`: every option of `shardflow tune`, checked when it is built.

A trial is a short `shardflow train` run (`base`, with `trial_epochs`) whose tunable options take the
trial's values; the search picks them with KerasTuner's random search or Hyperband.

>>> from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig
>>> base = TrainerConfig(input=InputOptions(examples="runs/ex"), fit=FitOptions(epochs=2),
...                      export=ExportOptions(output="runs/tune/trials"))
>>> TunerConfig(base=base, output="runs/tune", max_trials=4).algorithm
'random'
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import ConfigError
from ..core.config_values import require_locations
from ..core.input_checks import check_examples
from ..trainer.config import TrainerConfig
from .space import DEFAULT_SPACE, parse_space

ALGORITHMS = ("random", "hyperband")


@dataclass(frozen=True, kw_only=True)
class TunerConfig:
    base: TrainerConfig  # every trial's options; its epochs are the trial's (Hyperband's largest)
    output: str
    space: tuple[str, ...] = DEFAULT_SPACE
    algorithm: str = "random"
    max_trials: int = 8  # random search's trial budget (Hyperband derives its own from the epochs)
    objective: str | None = None  # a Keras history metric; default val_accuracy, val_mean_iou for masks, val_loss for boxes
    hyperband_factor: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        require_locations(self, "output")
        parse_space(self.space)
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        for name in ("max_trials", "hyperband_factor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (2 if name == "hyperband_factor" else 1):
                raise ConfigError(f"{name} must be an integer >= {2 if name == 'hyperband_factor' else 1}, got {value!r}")
        if self.base.fit.epochs is None:
            raise ConfigError("trials train for a number of epochs (--trial-epochs), not --steps")
        if self.objective is not None and not self.objective.replace("_", "").isalnum():
            raise ConfigError(f"objective must be a metric name such as val_accuracy, got {self.objective!r}")

    def check_inputs(self) -> None:
        """The checks that read storage: the examples are an ExampleGen or Transform output."""
        check_examples(self.base.input.examples, transform_ok=True)

"""Value checks that components' configs share, each raising ConfigError that names the field and the value.

Pure: they compare values and touch no file or bucket, so a config can be built anywhere.

>>> from types import SimpleNamespace
>>> require_locations(SimpleNamespace(model="m", output=""), "model", "output")
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: output must be a non-empty path or URI, got ''
>>> require_apart("runs/eval", examples="runs/examples", model="runs/eval/model")
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: output 'runs/eval' must be a directory apart from model 'runs/eval/model'
"""
from __future__ import annotations

import math
from typing import Any

from .errors import ConfigError
from .uri import overlaps


def require_locations(config: Any, *names: str) -> None:
    """Each of the fields `names` of `config` is a non-empty path or URI."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{name} must be a non-empty path or URI, got {value!r}")


def require_positive(name: str, value: Any, unit: str) -> None:
    """`value` is a finite number > 0 (not a bool): seconds, megabytes, ...

    >>> require_positive("memory_mb", float("inf"), "megabytes")
    Traceback (most recent call last):
    ...
    shardflow.core.errors.ConfigError: memory_mb must be a number of megabytes > 0, got inf
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a number of {unit} > 0, got {value!r}")


def require_in_range(name: str, value: Any, interval: str, note: str = "", optional: bool = False) -> None:
    """`value` is a finite number (not a bool) inside `interval`, written as the message shows it: "(0, 10)",
    "[0, 1)", "[0, inf)"; None passes when `optional`.

    >>> require_in_range("ema_momentum", 1.0, "[0, 1)", note="0: no moving average")
    Traceback (most recent call last):
    ...
    shardflow.core.errors.ConfigError: ema_momentum must be in [0, 1) (0: no moving average), got 1.0
    >>> require_in_range("learning_rate", None, "(0, 10)", optional=True)
    >>> require_in_range("nms_iou", "0.5", "[0, 1)")
    Traceback (most recent call last):
    ...
    shardflow.core.errors.ConfigError: nms_iou must be in [0, 1), got '0.5'
    """
    if value is None and optional:
        return
    low, high = (float(bound) for bound in interval[1:-1].split(","))
    number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not number or not ((low < value if interval[0] == "(" else low <= value)
                          and (value < high if interval[-1] == ")" else value <= high)):
        raise ConfigError(f"{name} must be in {interval}{f' ({note})' if note else ''}, got {value!r}")


def require_apart(output: str, **inputs: str | None) -> None:
    """`output` is neither one of `inputs` (by option name; None skipped) nor inside one, nor around one."""
    for name, location in inputs.items():
        if location is not None and overlaps(output, location):
            raise ConfigError(f"output {output!r} must be a directory apart from {name} {location!r}")

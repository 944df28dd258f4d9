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


def require_apart(output: str, **inputs: str | None) -> None:
    """`output` is neither one of `inputs` (by option name; None skipped) nor inside one, nor around one."""
    for name, location in inputs.items():
        if location is not None and overlaps(output, location):
            raise ConfigError(f"output {output!r} must be a directory apart from {name} {location!r}")

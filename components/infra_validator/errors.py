"""The error infra validation raises when the validation itself cannot be done (not a verdict on the model).

Apart from config.py, which reads the task registry (each kind's need of canary files), so that the task
packages whose checks raise it (components/tasks/<kind>/serving_checks.py) import neither the config nor the
registry through it: no import cycle (docs/architecture.md, rule 9).

>>> issubclass(InfraValidationError, ShardflowError)
True
"""
from __future__ import annotations

from ..core.errors import ShardflowError


class InfraValidationError(ShardflowError, RuntimeError):
    """The validation itself could not be done (unreadable canaries, a canary without its image)."""

"""The error predict raises when it cannot account for every row, or the model broke its contract.

Apart from config.py, so that the task packages whose prediction writers raise it
(components/tasks/<kind>/predictions.py) import neither predict's config nor the registry through it: no
import cycle (docs/architecture.md, rule 9).

>>> issubclass(PredictionError, ShardflowError)
True
"""
from __future__ import annotations

from ..core.errors import ShardflowError


class PredictionError(ShardflowError, RuntimeError):
    """The run could not account for every row, or the model broke its contract. Exit 1."""

"""The search space of `shardflow tune`: `NAME=KIND:ARGS` entries over the Trainer's tunable options.

    learning_rate=log:1e-4:1e-1        a float sampled on a log scale
    fine_tune_learning_rate=float:1e-5:1e-3
    freeze_epochs=int:0:3              an integer in [0, 3]
    batch_size=choice:16,32,64         one of the values (numbers stay numbers)
    model=choice:lenet,mobilenet_v2

>>> parse_space(("learning_rate=log:1e-4:1e-1", "batch_size=choice:16,32"))
(Dimension(name='learning_rate', kind='log', values=(0.0001, 0.1)), Dimension(name='batch_size', kind='choice', values=(16, 32)))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import ConfigError
from ..trainer.hyperparameters import TUNABLE

KINDS = ("log", "float", "int", "choice")
DEFAULT_SPACE = ("learning_rate=log:1e-4:1e-1",)


@dataclass(frozen=True)
class Dimension:
    name: str
    kind: str
    values: tuple[Any, ...]  # (low, high) for log/float/int; the choices for choice


def parse_space(entries: tuple[str, ...]) -> tuple[Dimension, ...]:
    """The dimensions; ConfigError naming the entry that is not NAME=KIND:ARGS over a tunable option."""
    dimensions = [_dimension(entry) for entry in entries]
    names = [d.name for d in dimensions]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"space: {repeated} given more than once")
    if not dimensions:
        raise ConfigError("space: give at least one NAME=KIND:ARGS entry")
    return tuple(dimensions)


def _dimension(entry: str) -> Dimension:
    name, _, rest = entry.partition("=")
    kind, _, args = rest.partition(":")
    name, kind = name.strip(), kind.strip()
    if name not in TUNABLE or name == "epochs":
        raise ConfigError(f"space {entry!r}: {name!r} is not a tunable option "
                          f"(tunable: {', '.join(sorted(TUNABLE - {'epochs'}))})")
    if kind not in KINDS or not args:
        raise ConfigError(f"space {entry!r}: expected NAME=KIND:ARGS with KIND one of {', '.join(KINDS)}")
    if kind == "choice":
        return Dimension(name, kind, tuple(_typed(v.strip()) for v in args.split(",") if v.strip()))
    low, _, high = args.partition(":")
    try:
        bounds = (int(low), int(high)) if kind == "int" else (float(low), float(high))
    except ValueError:
        raise ConfigError(f"space {entry!r}: {kind} bounds must be two numbers LOW:HIGH") from None
    if not bounds[0] < bounds[1] or (kind == "log" and bounds[0] <= 0):
        raise ConfigError(f"space {entry!r}: needs LOW < HIGH" + (" and LOW > 0" if kind == "log" else ""))
    return Dimension(name, kind, bounds)


def _typed(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def register(hp: Any, dimension: Dimension) -> Any:
    """The dimension's value in a KerasTuner HyperParameters `hp` (defined on first use)."""
    low_high = dimension.values
    if dimension.kind == "choice":
        return hp.Choice(dimension.name, list(dimension.values))
    if dimension.kind == "int":
        return hp.Int(dimension.name, low_high[0], low_high[1])
    return hp.Float(dimension.name, low_high[0], low_high[1], sampling="log" if dimension.kind == "log" else "linear")

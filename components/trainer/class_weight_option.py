"""`--class-weight`'s text: "balanced", or CLASS=WEIGHT pairs. Parsed without TensorFlow: the config checks it when
built (config.py), class_weights.py turns it into the weights of a task's classes.
"""
from __future__ import annotations

from ..core.errors import ConfigError


def parse_class_weight(text: str) -> str | dict[str, float]:
    """`--class-weight`: "balanced", or CLASS=WEIGHT pairs (class ids or names, weights > 0).

    >>> parse_class_weight("balanced"), parse_class_weight("0=1, 1=4.5")
    ('balanced', {'0': 1.0, '1': 4.5})
    """
    if text.strip() == "balanced":
        return "balanced"
    weights: dict[str, float] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = pair.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if not sep or not name.strip() or not weight > 0 or name.strip() in weights:
            raise ConfigError(f"class_weight {text!r}: expected 'balanced' or CLASS=WEIGHT pairs with weights > 0, "
                              f"each class once (at {pair!r})")
        weights[name.strip()] = weight
    if not weights:
        raise ConfigError(f"class_weight {text!r}: expected 'balanced' or CLASS=WEIGHT pairs")
    return weights

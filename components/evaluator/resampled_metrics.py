"""Ratios and means over a leading resample axis, NaN or a given value where undefined: what each confusion
kind's bootstrap formulas (tasks/<kind>/intervals.py) are written with, so the bootstrap needs no Python loop
over resamples.

>>> ratio(np.array([1.0, 2.0]), np.array([2.0, 0.0])).tolist()
[0.5, 0.0]
>>> mean_over(np.array([[1.0, 3.0], [5.0, 7.0]]), np.array([[True, True], [False, False]])).tolist()
[2.0, nan]
"""
from __future__ import annotations

import numpy as np


def ratio(numerator: np.ndarray, denominator: np.ndarray, empty: float = 0.0) -> np.ndarray:
    out = np.full(np.broadcast(numerator, denominator).shape, empty, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def mean_over(values: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """Per row, the mean of `values` where `chosen`; NaN for a row with nothing chosen."""
    count = chosen.sum(axis=1)
    return ratio(np.where(chosen, values, 0.0).sum(axis=1), count, empty=np.nan)

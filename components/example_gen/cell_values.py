"""How ExampleGen reads a cell as a value, and the names that tell a column's role: a leaf module, so that the
column detection (columns.py) and the box index readers (box_csv.py) share them without importing each other.

Integer cells are plain decimal integers (`-12`, not `1_000` or `١٢`); float cells are decimals
with an optional exponent, or nan/inf.

>>> parse_value("-7", "int64"), parse_value("2.5e1", "float32")
(-7, 25.0)
"""
from __future__ import annotations

import math
import re

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")
LABEL_NAMES = ("y", "label", "labels", "class", "target", "category")
FLOAT32_MAX = 3.4028234663852886e38
# Python's int()/float() also take "1_000", " 7", Unicode digits: a cell must be written as below.
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)", re.IGNORECASE)


def parse_value(cell: str, dtype: str) -> int | float | str:
    """The cell as the column's type; ValueError names the value."""
    if dtype == "int64":
        if not _INT.fullmatch(cell):
            raise ValueError(f"{cell!r} is not a plain decimal integer")
        value = int(cell)
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"{cell!r} is outside the int64 range")
        return value
    if dtype == "float32":
        if not _FLOAT.fullmatch(cell):
            raise ValueError(f"{cell!r} is not a decimal number")
        value = float(cell)
        if math.isfinite(value) and abs(value) > FLOAT32_MAX:
            raise ValueError(f"{cell!r} is outside the float32 range")
        return value
    return cell

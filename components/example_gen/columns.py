"""Column roles and types, detected from a sample of rows and overridable per column.

A column whose cells name image files (.png/.jpg/.jpeg) is an image column, or a mask column when
its name says so (mask, msk, seg). Other columns are typed int, float or string from their cells;
one of them is the label (named y/label/class/target, or the only non-file column), the rest are
metadata carried into every example for slicing.

>>> guess_value_dtype(["1", "2"]), guess_value_dtype(["1", "2.5"]), guess_value_dtype(["a"])
('int64', 'float32', 'string')
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from ..core.manifest import FeatureSpec
from .config import ConfigError, ExampleGenConfig
from .data_root import BadCell, DataRoot, RemoteDataRoot, open_data_root
from .images import ImageRules, decode

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")
LABEL_NAMES = ("y", "label", "labels", "class", "target", "category")
FLOAT32_MAX = 3.4028234663852886e38
_MASK_NAME = re.compile(r"(mask|msk|seg)", re.IGNORECASE)


@dataclass(frozen=True)
class ColumnSpec:
    """How one CSV column becomes one feature."""

    name: str
    position: int
    role: str  # image | mask | label | metadata
    dtype: str  # uint8 | uint16 for files; int64 | float32 | string for values
    shape: tuple[int, ...] = ()  # (H, W, C) for files
    storage: str = "value"  # raw | png | jpeg for files
    rules: ImageRules | None = None

    @property
    def is_file(self) -> bool:
        return self.role in ("image", "mask")

    def feature_spec(self) -> FeatureSpec:
        return FeatureSpec(self.name, self.dtype, list(self.shape), self.storage, self.role)


def guess_value_dtype(cells: list[str]) -> str:
    """The narrowest type that at least 90 % of the sampled cells parse as.

    A majority rule, so that one bad value among the sampled rows is rejected as a bad value
    instead of turning the whole column into strings.
    """
    values = [c for c in cells if c]
    if not values:
        return "string"
    for dtype, parse in (("int64", int), ("float32", float)):
        parsed = 0
        for value in values:
            try:
                parse(value)
                parsed += 1
            except ValueError:
                pass
        if parsed * 10 >= len(values) * 9:
            return dtype
    return "string"


def parse_value(cell: str, dtype: str) -> int | float | str:
    """The cell as the column's type; ValueError names the value."""
    if dtype == "int64":
        value = int(cell)
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"{cell!r} is outside the int64 range")
        return value
    if dtype == "float32":
        value = float(cell)
        if math.isfinite(value) and abs(value) > FLOAT32_MAX:
            raise ValueError(f"{cell!r} is outside the float32 range")
        return value
    return cell


def _looks_like_files(cells: list[str]) -> bool:
    values = [c for c in cells if c]
    hits = sum(c.lower().endswith(IMAGE_EXTENSIONS) for c in values)
    return bool(values) and hits * 2 >= len(values)


def _base_roles(header: list[str], samples: list[list[str]], overrides: dict[str, str]) -> dict[str, str]:
    roles: dict[str, str] = {}
    for position, name in enumerate(header):
        cells = [row[position] for row in samples]
        if name in overrides:
            roles[name] = overrides[name]
        elif _looks_like_files(cells):
            roles[name] = "mask" if _MASK_NAME.search(name) else "image"
        else:
            roles[name] = "value"
    values = [n for n, r in roles.items() if r == "value"]
    named = [n for n in values if n.lower() in LABEL_NAMES]
    has_label = "label" in roles.values()
    # "The only non-file column" counts columns set to metadata by --role: demoting y must not
    # promote another column to label.
    non_file = [n for n, r in roles.items() if r not in ("image", "mask")]
    for name in values:
        is_label = not has_label and (name in named[:1] or (not named and len(non_file) == 1))
        roles[name] = "label" if is_label else "metadata"
    return roles


def _probe_shape(name: str, cells: list[str], root: DataRoot | RemoteDataRoot,
                 rules: ImageRules) -> tuple[str, tuple[int, ...]]:
    """The most common dtype and HxWxC among the column's sampled files that decode.

    The majority, not the first file: one odd file early in the index must not make every
    other row a reject."""
    found: Counter[tuple[str, tuple[int, ...]]] = Counter()
    reasons = []
    for cell in cells:
        try:
            pixels = decode(root.read(cell), rules)
            found[(str(pixels.dtype), tuple(int(d) for d in pixels.shape))] += 1
        except BadCell as err:
            reasons.append(err.reason)
    if not found:
        raise ConfigError(f"column {name!r}: none of the {len(cells)} sampled files could be read ({reasons[:3]})")
    return found.most_common(1)[0][0]


def detect_columns(header: list[str], samples: list[list[str]], config: ExampleGenConfig) -> list[ColumnSpec]:
    """The column specs of an index, from its header and sampled rows (cells as parsed)."""
    overrides = dict(config.roles)
    unknown = sorted(set(overrides) - set(header))
    if unknown:
        raise ConfigError(f"--role names columns {unknown} that the index header {header} lacks")
    roles = _base_roles(header, samples, overrides)
    root = open_data_root(config.data_root)
    specs = []
    for position, name in enumerate(header):
        role = roles[name]
        cells = [row[position] for row in samples if row[position]]
        if role in ("image", "mask"):
            specs.append(_file_column(name, position, role, cells, root, config))
        else:
            specs.append(ColumnSpec(name, position, role, guess_value_dtype(cells)))
    return specs


def _file_column(name: str, position: int, role: str, cells: list[str], root: DataRoot | RemoteDataRoot,
                 config: ExampleGenConfig) -> ColumnSpec:
    is_mask = role == "mask"
    resize = config.per_column(config.resize, name, None)
    channels = None if is_mask else config.per_column(config.channels, name, None)
    rules = ImageRules(config.max_pixels, channels, resize, nearest=is_mask,  # type: ignore[arg-type]
                       exif_transpose=not config.keep_exif_orientation)
    storage = str(config.per_column(config.storage, name, "raw"))
    if is_mask and storage == "jpeg":
        raise ConfigError(f"column {name!r} is a mask: jpeg storage would change its class ids; use raw or png")
    dtype, shape = _probe_shape(name, cells[:20], root, rules)
    if storage == "jpeg" and (dtype != "uint8" or shape[2] not in (1, 3)):
        raise ConfigError(f"column {name!r}: jpeg storage needs uint8 with 1 or 3 channels, got {dtype} {shape}")
    return ColumnSpec(name, position, role, dtype, shape, storage, rules)

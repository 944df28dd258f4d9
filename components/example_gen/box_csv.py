"""The two CSV layouts of a box index (box_index.py describes them): the headerless Vertex AI / AutoML one
and one whose header names its columns; the layout, and "auto" units, are decided once per file.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from typing import Iterator

from ..core import storage
from .box_groups import Group, ImageGroups
from .box_types import COORDINATES, BadBox, Box, BoxIndex, BoxIndexOptions, checked_box
from .box_units import UnitsDecision, UnitsUndecided, decide_units
from .cell_values import IMAGE_EXTENSIONS, LABEL_NAMES, parse_value
from .csv_cells import parse_record
from .csv_index import IndexFileError, _Records  # the index dialect's one scanner: rows numbered alike

CORNERS = ("xmin", "ymin", "xmax", "ymax")
PATH_NAMES = ("path", "image", "file", "filename", "imagepath", "imagefile", "imageuri", "uri")
SPLIT_NAMES = ("split", "set")
_BOX_NAME = re.compile(r"(?:bbox|box)?(?:([xy])(min|max)|(min|max)([xy]))")  # on the name's letters and digits
_UNASSIGNED = ("", "unassigned")  # Vertex AI's "the service splits": no split here either


@dataclass(frozen=True)
class BoxColumns:
    """Positions of the cells read; `names`: the coordinates' names in reasons."""

    path: int
    label: int
    coordinates: tuple[int, int, int, int]  # xmin, ymin, xmax, ymax
    split: int | None
    names: tuple[str, ...] = COORDINATES
    layout: str = "header"  # or "automl": its coordinates are normalised by definition


def _role(name: str) -> str:
    """What a header name says a column holds: a corner, label, split, path, or "" (not read)."""
    letters, plain = re.sub(r"[^a-z0-9]", "", name.lower()), name.strip().lower()
    match = _BOX_NAME.fullmatch(letters)
    if match:
        return (match.group(1) or match.group(4)) + (match.group(2) or match.group(3))
    if plain in LABEL_NAMES or plain in SPLIT_NAMES:
        return "label" if plain in LABEL_NAMES else "split"
    return "path" if letters in PATH_NAMES else ""


def box_columns(header: list[str]) -> BoxColumns | None:
    """The columns a header names; None when it names no box column (a headerless file's first row).

    >>> box_columns(["image", "Label", "XMin", "YMin", "XMax", "YMax", "set"])
    BoxColumns(path=0, label=1, coordinates=(2, 3, 4, 5), split=6, names=('XMin', 'YMin', 'XMax', 'YMax'), layout='header')
    """
    found: dict[str, int] = {}
    for position, name in enumerate(header):
        found.setdefault(_role(name), position)
    if not any(c in found for c in CORNERS):
        return None
    missing = [role for role in ("path", "label", *CORNERS) if role not in found]
    if missing:
        raise IndexFileError(f"the header names box columns but no {', '.join(missing)} column: {header}")
    at = tuple(found[c] for c in CORNERS)
    names = tuple(header[p] for p in at)
    return BoxColumns(found["path"], found["label"], at, found.get("split"), names)  # type: ignore[arg-type]


def _automl_columns(path: str, cells: list[str]) -> BoxColumns:
    if len(cells) not in (10, 11):
        raise IndexFileError(f"{path}: no header naming box columns, and the first row has {len(cells)} fields, "
                             f"not the AutoML layout's [set,]path,label,x_min,y_min,,,x_max,y_max,,")
    s = len(cells) - 10  # 1 with the set column first
    return BoxColumns(s, s + 1, (s + 2, s + 3, s + 6, s + 7), 0 if s else None, layout="automl")


def box_layout(path: str) -> str | None:
    """"header" when the CSV's header names box columns, "automl" when its first record has the AutoML layout
    (10 or 11 fields, an image file's path, numbers or nothing where the corners are), else None: how ExampleGen
    tells a box index from its table of files without a flag. IndexFileError: a header naming box columns
    without a path or label column."""
    with storage.open_read(path) as stream:
        first = next(iter(_Records(stream, file_start=True)), None)
    try:
        cells = parse_record(first[1]) if first is not None else []
    except (csv.Error, UnicodeDecodeError):
        return None
    if box_columns(cells) is not None:
        return "header"
    if len(cells) not in (10, 11):
        return None
    columns = _automl_columns(path, cells)
    corners_ok = all(not cells[p] or _number(cells[p]) is not None for p in columns.coordinates)
    return "automl" if corners_ok and cells[columns.path].lower().endswith(IMAGE_EXTENSIONS) else None


def _records(path: str) -> Iterator[tuple[list[str] | None, str, BoxColumns, int]]:
    """(cells or None, error, columns, fields) of each data record; the layout from the first record."""
    with storage.open_read(path) as stream:
        scanner = _Records(stream, file_start=True)
        records = iter(scanner)
        first = next(records, None)
        if first is None:
            raise IndexFileError(f"{path}: empty index file")
        try:
            cells = parse_record(first[1])
        except (csv.Error, UnicodeDecodeError) as err:
            raise IndexFileError(f"{path}: the first row does not parse: {err}") from err
        try:
            columns, fields = box_columns(cells), len(cells)
        except IndexFileError as err:
            raise IndexFileError(f"{path}: {err}") from None
        scanner.num_fields = fields  # a quoted cell over lines must make a record of this many, as ExampleGen's
        if columns is None:
            columns = _automl_columns(path, cells)
            yield cells, "", columns, fields
        for _, raw in records:
            try:
                yield parse_record(raw), "", columns, fields
            except (csv.Error, UnicodeDecodeError) as err:
                yield None, f"malformed CSV record: {err}", columns, fields


# A short plain decimal ("0.375", "12", "96."): finite, far inside float32's range and written as parse_value
# asks, so float() alone gives its value: half the time of parse_value on the 4 corners of every row.
_PLAIN = re.compile(r"[0-9]{1,15}(?:\.[0-9]*)?")


def _number(cell: str) -> float | None:
    """The cell's finite float32-range value as ExampleGen reads a float cell, or None.

    >>> [_number(c) for c in ("0.375", "12", " 1", "1_0", "1e400", "-0.5", "nan")]
    [0.375, 12.0, None, None, None, -0.5, None]
    """
    if _PLAIN.fullmatch(cell):
        return float(cell)
    try:
        value = float(parse_value(cell, "float32"))  # ExampleGen's float cells: no "1_0", no Unicode digits
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _csv_box(label: str, cells: list[str], names: tuple[str, ...], normalized: bool) -> Box | None:
    """The row's box, or None for an image without objects (no label, no coordinates)."""
    if not label and not any(cells):
        return None
    if not label:
        raise BadBox("missing_label", "label", "a box with no label")
    if not all(cells):
        name = names[cells.index("")]
        raise BadBox("missing_box", name, f"label {label!r} with an empty {name}")
    values = [_number(cell) for cell in cells]
    for name, cell, value in zip(names, cells, values):
        if value is None:
            raise BadBox("bad_value", name, f"{name} {cell!r} is not a finite number")
    return checked_box(tuple(values), names, normalized)  # type: ignore[arg-type]


def _decide_units(path: str, units: str, rows: list[tuple[int, list[str] | None, str, BoxColumns, int]]
                  ) -> UnitsDecision:
    """The file's units (box_units.py's rule) from the far corners (x_max, y_max) of its well-formed rows, read
    only when the rule needs evidence (a generator: "auto" on a header CSV)."""
    layout = rows[0][3].layout if rows else "header"
    corners = ((_number(cells[columns.coordinates[2]]), _number(cells[columns.coordinates[3]]))
               for _, cells, _, columns, fields in rows if cells and len(cells) == fields)
    far = ((x, y) for x, y in corners if x is not None and y is not None)
    try:
        return decide_units(units, far, layout)
    except UnitsUndecided as err:
        raise IndexFileError(f"{path}: {err}") from None


def read_box_csv(path: str, options: BoxIndexOptions | None = None) -> BoxIndex:
    """The images and boxes of a CSV index (local, s3:// or gs://), each row kept or rejected."""
    options = options or BoxIndexOptions()
    rows = [(number, *record) for number, record in enumerate(_records(path), 1)]
    decision = _decide_units(path, options.units, rows)
    units = decision.units
    images = ImageGroups(path, options.max_boxes)
    for number, cells, error, columns, fields in rows:
        if cells is None or len(cells) != fields:
            reason = error or f"malformed CSV record: {len(cells or ())} fields, the first row has {fields}"
            images.reject(number, None, None, BadBox("malformed_csv", None, reason))
            continue
        image, split = cells[columns.path], cells[columns.split].lower() if columns.split is not None else None
        split = None if split in _UNASSIGNED else split
        if not image:
            images.reject(number, split, None, BadBox("empty_cell", "path", "empty image path"))
            continue
        group = images.groups.setdefault(image, Group(image, split))
        try:
            if split != group.split:
                raise BadBox("split_conflict", "split",
                              f"split {split!r}, but the image's first row has {group.split!r}")
            box = _csv_box(cells[columns.label], [cells[p] for p in columns.coordinates], columns.names,
                           units == "normalized")
        except BadBox as bad:
            images.reject(number, split, image, bad, group)
            continue
        if box is None:
            group.negatives.append(number)
        else:
            group.boxes.append((number, box, cells[columns.label], False))
    return images.finish(len(rows), decision)

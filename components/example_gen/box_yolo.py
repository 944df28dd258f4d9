"""An Ultralytics YOLO detection set, read from its `data.yaml` (box_index.py describes the rules).

The yaml: `path` (the set's root; relative to the yaml's folder, the yaml's folder when absent), `train`, `val`
(or `validation`), `test` (each a folder of images searched recursively, a .txt list of image paths, or a list of
those; relative to the root) and `names` (a list, or a dict {0: name, ...}; or `nc` alone: class_0, ...). A list
file's line starting with `./` is relative to the list's folder, as Ultralytics reads it; other relative lines are
relative to the root (Ultralytics takes them from its working folder, which a pipeline step does not share).

An image's labels are where Ultralytics looks (`img2label_paths`): the last `/images/` of the image's path replaced
by `/labels/` and its extension by `.txt`. One line per object, `class x_center y_center width height`, normalised
by definition, class from 0. A missing or empty label file is an image without objects (YOLO's own rule).

Rows are a label file's non-blank lines, each numbered by its 1-based line in that file; a reject names the label
file as its index. An image's label file that is not UTF-8 text rejects the image (row 0: the whole file), and so
does an image listed in two splits (its later listing; the same image is never in two splits) or listed outside
the data root (its label file is not read). The served ids are `names` index + 1 (the TF OD API keeps 0 for the
background).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Iterator

import yaml

from ..core import uri
from .box_groups import Group, ImageGroups
from .box_types import COORDINATES, BadBox, Box, BoxIndex, BoxIndexOptions, checked_box
from .box_units import decide_units
from .csv_index import IndexFileError

YAML_SUFFIXES = (".yaml", ".yml")
IMAGE_SUFFIXES = frozenset({"bmp", "dng", "jpeg", "jpg", "mpo", "png", "tif", "tiff", "webp", "pfm", "heic"})  # YOLO's
SPLIT_KEYS = {"train": "train", "val": "eval", "test": "test"}  # the yaml's keys → ExampleGen's split names
FIELDS = ("class", "x_center", "y_center", "width", "height")


@dataclass(frozen=True)
class YoloSet:
    """A data.yaml as read: its root, class names by index, and per split (ExampleGen's name) the image files."""

    yaml: str
    root: str
    names: tuple[str, ...]
    splits: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def category_ids(self) -> dict[str, int]:
        return {name: number for number, name in enumerate(self.names, start=1)}


def is_yolo(path: str) -> bool:
    return path.lower().endswith(YAML_SUFFIXES)


def label_path(image: str) -> str:
    """Ultralytics' `img2label_paths` for one image: its labels' file.

    >>> label_path("/d/images/train/images/a.b.jpg")
    '/d/images/train/labels/a.b.txt'
    """
    images, labels = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    return labels.join(image.rsplit(images, 1)).rsplit(".", 1)[0] + ".txt"


def _load(path: str) -> dict[str, Any]:
    if uri.is_remote(path):
        raise IndexFileError(f"{path}: a YOLO data.yaml is read from a local folder (copy the set locally)")
    try:
        with open(path, encoding="utf-8") as stream:
            data = yaml.safe_load(stream)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise IndexFileError(f"{path}: not a readable YOLO data.yaml: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise IndexFileError(f"{path}: not a YOLO data.yaml: no mapping of path, train, val, test, names")
    return data


def yolo_root(path: str) -> str:
    """The set's root that `path` (the yaml) names: the data root of a run given no --data-root. Relative when
    `path` is, as every file this reader names."""
    data = _load(path)
    folder = os.path.dirname(path)
    root = data.get("path") or os.curdir
    if not isinstance(root, str):
        raise IndexFileError(f"{path}: path {root!r} is not a folder's path")
    return os.path.normpath(os.path.join(folder, os.path.expanduser(root)))


def _names(path: str, data: dict[str, Any]) -> tuple[str, ...]:
    """Class names by index: `names` as a list or as {0: name, ...} (keys 0..n-1), else `nc` generated names."""
    names = data.get("names")
    if names is None and isinstance(data.get("nc"), int) and data["nc"] > 0:
        names = [f"class_{number}" for number in range(data["nc"])]  # Ultralytics' names for `nc` alone
    if isinstance(names, dict):
        try:
            by_key = {int(key): value for key, value in names.items()}
        except (TypeError, ValueError):
            by_key = {}
        if sorted(by_key) != list(range(len(names))):
            raise IndexFileError(f"{path}: names keys {list(names)[:10]} are not the class indexes 0..{len(names) - 1}")
        names = [by_key[number] for number in range(len(names))]
    if not isinstance(names, list) or not names or any(n is None or not str(n).strip() for n in names):
        raise IndexFileError(f"{path}: names must be a non-empty list or {{0: name, ...}}, got {str(names)[:200]}")
    text = tuple(str(name).strip() for name in names)
    if len(set(text)) != len(text):
        raise IndexFileError(f"{path}: two classes share a name in names {list(text)[:20]}: a name must name one class")
    return text


def _image_files(source: str, root: str) -> list[str]:
    """A split entry's image files, sorted, as Ultralytics lists them (`get_img_files`): a folder's images at any
    depth, an image file itself, or a .txt list's lines; IndexFileError when the entry does not exist."""
    if os.path.isdir(source):
        found = [os.path.join(folder, name) for folder, _, names in os.walk(source) for name in names]
    elif os.path.isfile(source) and source.rsplit(".", 1)[-1].lower() in IMAGE_SUFFIXES:
        found = [source]
    elif os.path.isfile(source):
        try:
            with open(source, encoding="utf-8") as stream:
                lines = [line.strip() for line in stream.read().splitlines() if line.strip()]
        except (OSError, UnicodeDecodeError) as err:
            raise IndexFileError(f"{source}: the image list is not readable text: {err}") from None
        parent = os.path.dirname(source)
        found = [os.path.join(parent, line[2:]) if line.startswith("./") else os.path.join(root, line)
                 for line in lines]
    else:
        raise IndexFileError(f"{source} does not exist (a split of the YOLO set names it)")
    return sorted(os.path.normpath(f) for f in found if f.rsplit(".", 1)[-1].lower() in IMAGE_SUFFIXES)


def yolo_set(path: str) -> YoloSet:
    """The data.yaml read: root, names and each split's images; IndexFileError names what is unusable."""
    data, root = _load(path), yolo_root(path)
    if data.get("val") is None and data.get("validation") is not None:
        data = {**data, "val": data["validation"]}  # as Ultralytics renames it
    splits = []
    for key in SPLIT_KEYS:
        entries = data.get(key)
        if not entries:
            continue
        entries = entries if isinstance(entries, list) else [entries]
        if any(not isinstance(entry, str) for entry in entries):
            raise IndexFileError(f"{path}: {key} must be a folder, a .txt list or a list of those, got {entries!r}")
        images = [f for entry in entries for f in _image_files(os.path.join(root, entry), root)]
        splits.append((SPLIT_KEYS[key], tuple(dict.fromkeys(images))))
    if not splits:
        raise IndexFileError(f"{path}: names none of the splits {', '.join(SPLIT_KEYS)}")
    return YoloSet(path, root, _names(path, data), tuple(splits))


def _decimal(text: str, name: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or "_" in text:
        raise BadBox("bad_value", name, f"{name} {text!r} is not a finite number")
    return value


def yolo_box(fields: list[str], names: tuple[str, ...]) -> tuple[Box, str]:
    """A label line's box and class name; BadBox names the fault. The corners are computed in decimal from the
    file's own digits, then rounded once: the float a pixel corner divided by its size gives. In float, x_center
    - width / 2 missed it on 2,293 of the 5,050 boxes of a 100-px grid (0.035 - 0.05 / 2 = 0.010000000000000002).

    >>> yolo_box("1 0.035 0.25 0.05 0.1".split(), ("cat", "dog"))
    (Box(ymin=0.2, xmin=0.01, ymax=0.3, xmax=0.06, normalized=True), 'dog')
    """
    if len(fields) != len(FIELDS):
        extra = " (a polygon segment or keypoints: not a box)" if len(fields) > len(FIELDS) else ""
        raise BadBox("malformed_label", None, f"{len(fields)} fields, not the 5 of `{' '.join(FIELDS)}`{extra}")
    number = _decimal(fields[0], "class")
    if number != number.to_integral_value() or not 0 <= number < len(names):
        raise BadBox("unknown_category", "class", f"class {fields[0]} is not an index of names (0-{len(names) - 1})")
    xc, yc, w, h = (_decimal(text, name) for text, name in zip(fields[1:], FIELDS[1:]))
    corners = (xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2)
    try:
        box = checked_box(tuple(float(c) for c in corners), COORDINATES, normalized=True)
    except BadBox as bad:
        raise BadBox(bad.code, bad.column, f"{bad.reason} (line: {' '.join(fields)})") from None
    return box, names[int(number)]


def _label_lines(label: str) -> Iterator[tuple[int, list[str]]]:
    """(1-based line, fields) of each non-blank line; none for a missing file. UnicodeDecodeError: not text."""
    try:
        with open(label, "rb") as stream:
            text = stream.read().decode("utf-8-sig")
    except FileNotFoundError:
        return
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield number, line.split()


def _add_labels(found: ImageGroups, group: Group, label: str, names: tuple[str, ...]) -> int:
    """The image's label lines into its group; the rows read (a file that is not text: one reject, one row)."""
    try:
        lines = list(_label_lines(label))
    except (OSError, UnicodeDecodeError) as err:
        reason = f"the label file is not readable text: {err}"
        found.reject(0, group.split, group.path, BadBox("malformed_annotation", None, reason), group)
        return 1
    for number, fields in lines:
        try:
            box, name = yolo_box(fields, names)
        except BadBox as bad:
            found.reject(number, group.split, group.path, bad, group)
            continue
        group.boxes.append((number, box, name, False))
    return len(lines)


def _listing_fault(cell: str, split: str, found: ImageGroups) -> BadBox | None:
    """Why a listed image is rejected before its labels are read: outside the data root (nothing there is read),
    or listed in an earlier split (its lines were read there)."""
    if cell.startswith(os.pardir):
        return BadBox("path_escapes_root", None, f"path escapes the data root: {cell}")
    if cell in found.groups:
        return BadBox("split_conflict", None, f"listed in {found.groups[cell].split} and in {split}")
    return None


def _shown(label: str, yaml_path: str) -> str:
    """A label file's path as rejects name it: absolute, or relative as the yaml's path is given."""
    return label if os.path.isabs(yaml_path) else os.path.relpath(label)


def read_yolo(path: str, options: BoxIndexOptions | None = None, data_root: str | None = None) -> BoxIndex:
    """Every split's images and boxes of the YOLO set `path` names, one index, each image's split "train", "eval"
    or "test"; image paths relative to `data_root` (default: the set's root), which must hold the set's root."""
    options, dataset = options or BoxIndexOptions(), yolo_set(path)
    root = os.path.abspath(data_root or dataset.root)
    if os.path.relpath(dataset.root, root).startswith(os.pardir):
        raise IndexFileError(f"{path}: the set's root {dataset.root} (its `path`) is not inside the data root {root}")
    found, labels_of, rows = ImageGroups(path, options.max_boxes), {}, 0
    for split, images in dataset.splits:
        for image in images:
            cell = os.path.relpath(image, root)
            label = labels_of.setdefault(cell, _shown(label_path(os.path.abspath(image)), path))
            fault = _listing_fault(cell, split, found)
            if fault is not None:  # one reject for the image; its label file is not read
                found.reject(0, split, cell, fault)
                rows += 1
                continue
            found.groups[cell] = Group(cell, split, source=label)
            rows += _add_labels(found, found.groups[cell], label, dataset.names)
    index = found.finish(rows, decide_units("auto", (), "yolo"), dataset.category_ids)
    rejects = tuple(dataclasses.replace(r, index=labels_of.get(r.path or "", r.index)) for r in index.rejects)
    return dataclasses.replace(index, rejects=rejects)

"""A COCO JSON box index: `images`, `categories` and `annotations`, each `bbox` [x, y, w, h] in pixels
normalised by its image's width and height; a row is an annotation's 1-based position in `annotations`.
"""
from __future__ import annotations

import math
from typing import Any

from ..core import storage
from .box_groups import Group, ImageGroups
from .box_types import COORDINATES, BadBox, Box, BoxIndex, BoxIndexOptions, checked_box
from .csv_index import IndexFileError


def _coco_list(path: str, data: Any, key: str) -> list[Any]:
    entries = data.get(key, [] if key == "annotations" else None) if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise IndexFileError(f"{path}: not COCO JSON: no {key!r} list")
    return entries


def _is_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)  # JSON's ids; a list cannot key a table


def _coco_table(path: str, data: Any, key: str, fields: tuple[str, ...]) -> dict[Any, dict[str, Any]]:
    """COCO's `images` or `categories` by id; a bad entry makes the whole file unusable."""
    table: dict[Any, dict[str, Any]] = {}
    for position, entry in enumerate(_coco_list(path, data, key)):
        if not isinstance(entry, dict) or any(f not in entry for f in fields) or not _is_id(entry["id"]):
            raise IndexFileError(f"{path}: {key}[{position}] lacks one of {fields}: {str(entry)[:200]}")
        if entry["id"] in table:
            raise IndexFileError(f"{path}: {key}[{position}] repeats id {entry['id']!r}")
        table[entry["id"]] = entry
    return table


def _coco_images(path: str, data: Any) -> dict[Any, dict[str, Any]]:
    """COCO's `images` by id; a size that cannot normalise makes the file unusable, as a bad entry does."""
    images = _coco_table(path, data, "images", ("id", "file_name", "width", "height"))
    for key, image in images.items():
        size = (image["width"], image["height"])
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf for v in size):
            raise IndexFileError(f"{path}: image {key!r} has width x height {size}, not positive numbers")
    return images


def _coco_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadBox("bad_value", "bbox", f"bbox value {value!r} is not a finite number")
    return float(value)


def _coco_box(annotation: dict[str, Any], images: dict[Any, dict[str, Any]], categories: dict[Any, Any]) -> Box:
    """[x, y, w, h] in pixels → the normalised box, checked as a CSV's pixel box and against the image."""
    category, bbox = annotation["category_id"], annotation["bbox"]
    if not _is_id(category) or category not in categories:
        raise BadBox("unknown_category", "category_id", f"category id {category!r} is not in categories")
    if not isinstance(bbox, list) or len(bbox) != 4:
        raise BadBox("bad_value", "bbox", f"bbox {bbox!r} is not [x, y, width, height]")
    x, y, w, h = map(_coco_number, bbox)
    try:
        box = checked_box((x, y, x + w, y + h), COORDINATES, normalized=False)
    except BadBox as bad:
        raise BadBox(bad.code, "bbox", f"bbox {bbox}: {bad.reason}") from None
    image = images[annotation["image_id"]]
    try:
        return box.normalize(image["height"], image["width"])
    except ValueError as err:
        raise BadBox("box_outside_image", "bbox", f"bbox {bbox}: {err}") from None


def read_coco(path: str, options: BoxIndexOptions | None = None, split: str | None = None) -> BoxIndex:
    """The images and normalised boxes of a COCO JSON file; `split`: every image's (COCO has none).

    An image with no annotation is an image without objects. `options.units` does not apply."""
    options = options or BoxIndexOptions()
    data = storage.read_json(path)
    images = _coco_images(path, data)
    categories = _coco_table(path, data, "categories", ("id", "name"))
    names = {str(c["name"]): c["id"] for c in categories.values()}
    if len(names) != len(categories):
        raise IndexFileError(f"{path}: two categories share a name; a class name must name one category")
    found = ImageGroups(path, options.max_boxes)
    found.groups = {key: Group(str(image["file_name"]), split) for key, image in images.items()}  # all images
    annotations = _coco_list(path, data, "annotations")
    for row, annotation in enumerate(annotations, 1):
        image_id = annotation.get("image_id") if isinstance(annotation, dict) else None
        group = found.groups.get(image_id) if _is_id(image_id) else None
        try:
            if not isinstance(annotation, dict) or not {"image_id", "category_id", "bbox"} <= annotation.keys():
                raise BadBox("malformed_annotation", None, f"not an annotation with image_id, category_id and "
                              f"bbox: {str(annotation)[:200]}")
            if group is None:
                raise BadBox("unknown_image", "image_id", f"image id {image_id!r} is not in images")
            box = _coco_box(annotation, images, categories)
        except BadBox as bad:
            found.reject(row, split, group.path if group else None, bad, group)
            continue
        name = str(categories[annotation["category_id"]]["name"])
        group.boxes.append((row, box, name, bool(annotation.get("iscrowd", 0))))
    return found.finish(len(annotations), "pixels", names)

"""A COCO JSON box index: `images`, `categories` and `annotations`, each `bbox` [x, y, w, h] in pixels; a row is
an annotation's 1-based position in `annotations`.

Boxes stay in pixels until the worker decodes the image: the declared `width`/`height` are recorded and checked
against the decoded image (EXIF orientation applied), which normalises the boxes. The category ids are the label
map (the served ids): they must be positive integers (0 is the TF OD API's background); a category 0 that no
annotation uses (as some exporters write for the data set's name) is left out of the map.
"""
from __future__ import annotations

import math
from typing import Any

from ..core import storage
from .box_groups import Group, ImageGroups
from .box_types import COORDINATES, BadBox, Box, BoxIndex, BoxIndexOptions, checked_box
from .box_units import decide_units
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
    """[x, y, w, h] in pixels → the pixel box, checked as a CSV's pixel box and against the declared size."""
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
        box.normalize(image["height"], image["width"])
    except ValueError as err:
        raise BadBox("box_outside_image", "bbox", f"bbox {bbox}: {err} (as declared)") from None
    return box


def _label_map(path: str, categories: dict[Any, dict[str, Any]], annotations: list[Any]) -> dict[str, int]:
    """Category name → its id, the served id; IndexFileError for an id that cannot be served."""
    used = {a.get("category_id") for a in annotations if isinstance(a, dict)}
    kept = [(key, str(c["name"])) for key, c in categories.items() if key != 0 or 0 in used]  # 0 unused: a placeholder
    for key, name in kept:
        if isinstance(key, bool) or not isinstance(key, int) or key < 1:
            raise IndexFileError(f"{path}: category id {key!r} ({name!r}) is not an integer >= 1: the ids are the "
                                 "served label map, where 0 is the background")
    names = {name: key for key, name in kept}
    if len(names) != len(kept):
        raise IndexFileError(f"{path}: two categories share a name; a class name must name one category")
    return names


def read_coco(path: str, options: BoxIndexOptions | None = None, split: str | None = None) -> BoxIndex:
    """The images and pixel boxes of a COCO JSON file; `split`: every image's (COCO has none).

    An image with no annotation is an image without objects. `options.units` does not apply."""
    options = options or BoxIndexOptions()
    data = storage.read_json(path)
    images = _coco_images(path, data)
    categories = _coco_table(path, data, "categories", ("id", "name"))
    annotations = _coco_list(path, data, "annotations")
    names = _label_map(path, categories, annotations)
    found = ImageGroups(path, options.max_boxes)
    found.groups = {key: Group(str(image["file_name"]), split, declared=(int(image["height"]), int(image["width"])))
                    for key, image in images.items()}  # all images, each with its declared size
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
    return found.finish(len(annotations), decide_units("auto", (), "coco"), names)

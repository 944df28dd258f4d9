"""A Pascal VOC set (box_index.py describes the rules). An index is `ImageSets/Main/<split>.txt` (one image id a
line; a class list's second column is not read), recognised by that layout with `Annotations/` beside
`ImageSets/`. Each id's `Annotations/<id>.xml` holds `<filename>` (the image, in `JPEGImages/`), `<size>` and the
`<object>`s, each with `<name>`, `<difficult>` and `<bndbox>` xmin, ymin, xmax, ymax in pixels.

Coordinates: VOC's are 1-based pixel indexes in the original data set. The TF OD API's create_pascal_tf_record
divides them by the width and height as they are (`float(xmin) / width`, no 1 subtracted), and so does ExampleGen:
they stay pixel boxes until the worker normalises them by the decoded image's size, which must equal the declared
`<size>` (recorded as `ImageBoxes.declared`; a `<size>` of 0, as tools write when they did not know it, declares
nothing). `<difficult>1</difficult>` marks an ignore region, as COCO's iscrowd (`ImageBoxes.crowd`).

Rows: an XML file's objects, numbered by their 1-based position in it; a reject names the XML file as its index.
An image is rejected whole, one reject, when its id's XML is missing, outside `Annotations/` or listed twice (naming
the list file and the id's line) or when its XML does not parse or lacks `<filename>` (naming the XML file, row 0:
the whole file).
"""
from __future__ import annotations

import dataclasses
import math
import os
import xml.etree.ElementTree as ET  # a stranger's XML: ET loads no external entity, expat >= 2.4 bounds expansion

from ..core import uri
from .box_groups import Group, ImageGroups
from .box_types import BadBox, Box, BoxIndex, BoxIndexOptions, BoxReject, checked_box
from .box_units import decide_units
from .csv_index import IndexFileError

CORNERS = ("xmin", "ymin", "xmax", "ymax")
LIST_FOLDERS = ("ImageSets", "Main")
ANNOTATIONS, IMAGES = "Annotations", "JPEGImages"


def voc_root(path: str) -> str | None:
    """The VOC folder of the list `path` (`<root>/ImageSets/Main/<split>.txt` with `<root>/Annotations/`), or None.

    >>> voc_root("VOC/ImageSets/Main/train.csv") is None
    True
    """
    if uri.is_remote(path) or not path.lower().endswith(".txt"):
        return None
    main = os.path.dirname(os.path.abspath(path))
    sets = os.path.dirname(main)
    if (os.path.basename(sets), os.path.basename(main)) != LIST_FOLDERS:
        return None
    root = os.path.dirname(os.path.dirname(os.path.dirname(path))) or os.curdir  # as `path` is given: relative or not
    return root if os.path.isdir(os.path.join(os.path.dirname(sets), ANNOTATIONS)) else None


def _listed_ids(path: str) -> list[tuple[int, str]]:
    """(1-based line, id) of each non-blank line of the list."""
    try:
        with open(path, "rb") as stream:
            text = stream.read().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise IndexFileError(f"{path}: the VOC image list is not readable text: {err}") from None
    return [(number, line.split()[0]) for number, line in enumerate(text.splitlines(), 1) if line.strip()]


def _text(element: ET.Element | None, tag: str) -> str:
    found = element.find(tag) if element is not None else None
    return (found.text or "").strip() if found is not None else ""


def _number(element: ET.Element, tag: str) -> float:
    text = _text(element, tag)
    if not text:
        raise BadBox("missing_box", tag, f"the object's bndbox has no {tag}")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BadBox("bad_value", tag, f"{tag} {text!r} is not a finite number")
    return value


def voc_object(element: ET.Element) -> tuple[Box, str, bool]:
    """An `<object>`'s pixel box, class name and difficult flag; BadBox names the fault.

    >>> voc_object(ET.fromstring("<object> <name> dog </name><difficult>1</difficult>"
    ...                          "<bndbox><xmin>48</xmin><ymin> 240 </ymin><xmax>195</xmax><ymax>371</ymax></bndbox>"
    ...                          "</object>"))
    (Box(ymin=240.0, xmin=48.0, ymax=371.0, xmax=195.0, normalized=False), 'dog', True)
    """
    name, difficult = _text(element, "name"), _text(element, "difficult") or "0"
    if not name:
        raise BadBox("missing_label", "name", "an object with no name")
    if difficult not in ("0", "1"):
        raise BadBox("bad_value", "difficult", f"difficult {difficult!r} is not 0 or 1")
    bndbox = element.find("bndbox")
    if bndbox is None:
        raise BadBox("missing_box", "bndbox", f"object {name!r} has no bndbox")
    values = tuple(_number(bndbox, tag) for tag in CORNERS)
    return checked_box(values, CORNERS, normalized=False), name, difficult == "1"


def _declared(root: ET.Element) -> tuple[int, int] | None:
    """(height, width) of `<size>`; None when absent or 0. BadBox when not whole numbers."""
    size = root.find("size")
    texts = (_text(size, "height"), _text(size, "width"))
    if not all(texts):
        return None
    try:
        values = tuple(float(text) for text in texts)
    except ValueError:
        values = (math.nan, math.nan)
    if not all(math.isfinite(v) and v >= 0 and v == int(v) for v in values):
        raise BadBox("malformed_annotation", "size", f"size {texts[1]}x{texts[0]} is not whole pixels")
    height, width = int(values[0]), int(values[1])
    return (height, width) if height and width else None


def _annotation(xml: str) -> tuple[str, tuple[int, int] | None, list[ET.Element]]:
    """The XML's filename, declared size and objects; BadBox `malformed_annotation` when unusable."""
    try:
        root = ET.parse(xml).getroot()
    except (ET.ParseError, OSError, UnicodeDecodeError) as err:
        raise BadBox("malformed_annotation", None, f"the XML does not parse: {err}") from None
    filename = _text(root, "filename")
    if root.tag != "annotation" or not filename:
        raise BadBox("malformed_annotation", "filename", f"<{root.tag}> is not a VOC <annotation> with a <filename>")
    return filename, _declared(root), root.findall("object")


def _image(found: ImageGroups, group: Group, objects: list[ET.Element]) -> None:
    for row, element in enumerate(objects, 1):
        try:
            box, name, difficult = voc_object(element)
        except BadBox as bad:
            found.reject(row, group.split, group.path, bad, group)
            continue
        group.boxes.append((row, box, name, difficult))


def read_voc(path: str, options: BoxIndexOptions | None = None, split: str | None = None,
             data_root: str | None = None) -> BoxIndex:
    """The images and pixel boxes of the ids the list `path` names; image paths relative to `data_root`
    (default: the VOC folder), which must hold the VOC folder."""
    options, root = options or BoxIndexOptions(), voc_root(path)
    if root is None:
        raise IndexFileError(f"{path}: not a VOC list (ImageSets/Main/<split>.txt with Annotations/ beside ImageSets)")
    base = os.path.abspath(data_root or root)
    if os.path.relpath(root, base).startswith(os.pardir):
        raise IndexFileError(f"{path}: the VOC folder {root} is not inside the data root {base}")
    found, whole, xml_of, seen, rows = ImageGroups(path, options.max_boxes), [], {}, set(), 0
    for line, image_id in _listed_ids(path):
        xml = os.path.join(root, ANNOTATIONS, image_id + ".xml")
        try:
            if os.sep in image_id or image_id.startswith(os.pardir):  # nothing outside Annotations/ is read
                raise BadBox("path_escapes_root", None, f"id {image_id!r} names a file outside {ANNOTATIONS}/")
            if image_id in seen:
                raise BadBox("duplicate_id", None, f"id {image_id!r} is listed earlier in the file")
            seen.add(image_id)
            if not os.path.isfile(xml):
                raise BadBox("missing_annotation", None, f"id {image_id!r} has no annotation file {xml}")
        except BadBox as bad:
            whole.append(BoxReject(line, split, None, None, bad.code, bad.reason, index=path))
            rows += 1
            continue
        try:
            filename, declared, objects = _annotation(xml)
        except BadBox as bad:
            whole.append(BoxReject(0, split, bad.column, None, bad.code, bad.reason, index=xml))
            rows += 1
            continue
        cell = os.path.relpath(os.path.join(root, IMAGES, filename), base)
        found.groups[image_id] = group = Group(cell, split, declared=declared, source=xml)
        xml_of[cell] = xml
        _image(found, group, objects)
        rows += len(objects)
    index = found.finish(rows, decide_units("auto", (), "voc"))
    named = [dataclasses.replace(r, index=xml_of.get(r.path or "", r.index)) for r in index.rejects]
    return dataclasses.replace(index, rejects=tuple(sorted(named + whole, key=lambda r: r.row)))

"""Object-detection boxes from an index, one entry per image; opens no image, imports no TensorFlow.

- The Vertex AI / AutoML Vision CSV, no header: `[set,]path,label,x_min,y_min,,,x_max,y_max,,` (10 or 11
  fields, fixed by the first record). Cells 5-6 and 9-10 (the other two vertices) are not read.
- A CSV whose header names its columns: path (path, image, file, filename, image_path, uri), label (the
  names of ExampleGen's label column), box columns recognised by name as a mask column is (xmin, x_min,
  XMin, bbox_xmin, min_x, ...; the same for ymin, xmax, ymax), optionally split or set. Others are not read.
- COCO JSON (`read_coco`): `bbox` [x, y, w, h] in pixels, normalised by the decoded image's size, which must equal
  the declared `width`/`height`; the category ids are the label map.
- Ultralytics YOLO (`read_yolo`, box_yolo.py): a `data.yaml` naming the set's root, its `train`/`val`/`test`
  images and `names`; each image's `labels/...txt` beside `images/...`, one `class x_center y_center width height`
  line per object, normalised by definition. One index holds every split (val → eval); served ids: names index + 1.
- Pascal VOC (`read_voc`, box_voc.py): an `ImageSets/Main/<split>.txt` list of ids beside `Annotations/`; each
  `Annotations/<id>.xml` names its image in `JPEGImages/`, its `<size>` and its objects' `<bndbox>` in pixels
  (divided by the size as create_pascal_tf_record does); `<difficult>` objects are ignore regions, as COCO's crowd.

Rows are numbered as rejects.jsonl numbers CSV rows: 1-based data records, the first after the header
(without one, the file's first record) is 1; blank lines are skipped, a quoted cell over lines is one
row. A COCO row is an annotation's 1-based position in `annotations`; a YOLO row a label file's line, a VOC row an
object's 1-based position in its XML file, each reject naming that file.

Rule: an image is kept only when every row of it is good. A bad row is rejected with its reason and the
image's other rows as `image_rejected`, naming it: an image kept without one of its boxes would teach a
model that the object is background. So more than `max_boxes` boxes rejects the whole image
(`too_many_boxes` on each box row). The first row of an image sets its split; a later one with another is
`split_conflict`. An empty label with empty coordinates is an image without objects (kept, no box);
beside box rows of the same image it is `negative_with_boxes`.

Units: "normalized" coordinates lie in [0, 1]; "pixels" are not negative and stay pixel boxes until the
step that decodes the image calls `Box.normalize`; "auto" takes the layout's own units (AutoML and YOLO normalised,
COCO and VOC pixels) and decides a header CSV from the evidence of the whole file (box_units.py), recorded in
`BoxIndex.units` and `units_decision` for the manifest. A box under one pixel of the decoded image is a reject.

This module names the public API; the code is in box_types.py (the values read into, the check of a box),
box_groups.py (the rule above), box_csv.py (the two CSV layouts), box_coco.py (COCO JSON), box_yolo.py and
box_voc.py.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "boxes.csv")
>>> _ = open(path, "w").write("TRAIN,a.jpg,cat,0.1,0.2,,,0.5,0.6,,\\nTRAIN,b.jpg,,,,,,,,,\\n"
...                           "TRAIN,c.jpg,dog,0.5,0.5,,,0.4,0.9,,\\nTRAIN,a.jpg,dog,0,0,,,1,1,,\\n")
>>> index = read_box_csv(path)
>>> index.units, [(image.path, image.split, image.rows, image.classes) for image in index.images]
('normalized', [('a.jpg', 'train', (1, 4), ('cat', 'dog')), ('b.jpg', 'train', (2,), ())])
>>> index.images[0].boxes[0], [(r.row, r.code) for r in index.rejects], index.reconciled
(Box(ymin=0.2, xmin=0.1, ymax=0.6, xmax=0.5, normalized=True), [(3, 'box_reversed')], True)
"""
from __future__ import annotations

from .box_coco import read_coco
from .box_csv import CORNERS, PATH_NAMES, SPLIT_NAMES, BoxColumns, box_columns, box_layout, read_box_csv
from .box_types import COORDINATES, UNITS, Box, BoxIndex, BoxIndexOptions, BoxReject, ImageBoxes
from .box_voc import read_voc, voc_root
from .box_yolo import is_yolo, read_yolo, yolo_root

__all__ = ["COORDINATES", "CORNERS", "IMAGE_COLUMN", "PATH_NAMES", "SPLIT_NAMES", "UNITS", "Box", "BoxColumns",
           "BoxIndex", "BoxIndexOptions", "BoxReject", "ImageBoxes", "box_columns", "box_format", "read_box_csv",
           "read_coco", "read_voc", "read_yolo", "yolo_root"]

IMAGE_COLUMN = "image"  # an example's image feature: its column name, as a table of files would name it


def box_format(path: str) -> str | None:
    """"coco" (a .json file), "yolo" (a .yaml), "voc" (a list in VOC's layout), "header" or "automl"
    (box_csv.box_layout) for a box index, None for any other index: how ExampleGen tells a box index from a table
    of files without a flag, as it tells a mask column by its name."""
    if path.lower().endswith(".json"):
        return "coco"
    if is_yolo(path):
        return "yolo"
    return "voc" if voc_root(path) is not None else box_layout(path)

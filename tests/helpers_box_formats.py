"""One small detection set written in the five formats ExampleGen reads (the Vertex AI / AutoML CSV, a header CSV in
pixels, COCO JSON, Ultralytics YOLO, Pascal VOC): tests/example_gen/test_box_five_formats.py compares their
examples, tests/pipeline/test_detection_quickstarts.py runs docs/detection.md's quickstart lines on it.

The boxes lie on multiples of 5 px across and 4 px down on 100x80 images, so every format writes them exactly (a
pixel, its fraction of the side, or YOLO's centre and size in decimal).
"""
from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

from PIL import Image, ImageDraw

W, H = 100, 80
CLASSES = ("disc", "square", "triangle")
COLOURS = {"disc": (220, 40, 40), "square": (40, 200, 60), "triangle": (50, 70, 230)}
SPLITS = {  # split → image → [(class, (xmin, ymin, xmax, ymax) in pixels)]
    "train": {"i1": [("disc", (10, 8, 40, 32)), ("square", (50, 40, 95, 76))],
              "i2": [("triangle", (0, 0, 100, 80))],  # the whole image: corners 0 and 1 exactly
              "i3": [("square", (5, 4, 25, 20)), ("disc", (60, 12, 85, 44)), ("disc", (35, 52, 55, 72))],
              "i4": []},  # an image without objects
    "eval": {"i5": [("disc", (20, 16, 65, 48))],
             "i6": [("triangle", (70, 4, 100, 36)), ("square", (15, 44, 45, 80))]},
}
YOLO_SPLIT = {"train": "train", "eval": "val"}
FORMATS = ("automl", "header", "coco", "yolo", "voc")


def picture(path: Path, boxes: list[tuple[str, tuple[int, ...]]], shade: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", (W, H), (shade, shade, shade))
    draw = ImageDraw.Draw(image)
    for name, (x0, y0, x1, y1) in boxes:
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=COLOURS[name])
    image.save(path, quality=90)


def _fraction(value: int, side: int) -> str:
    return str(Decimal(value) / side)  # 10 / 100 → "0.1": the exact decimal


def _csvs(data: Path) -> None:
    for split, images in SPLITS.items():
        automl, header = [], ["filename,class,xmin,ymin,xmax,ymax"]
        for image, boxes in images.items():
            path = f"VOC/JPEGImages/{image}.jpg"
            for name, (x0, y0, x1, y1) in boxes:
                corners = (_fraction(x0, W), _fraction(y0, H), _fraction(x1, W), _fraction(y1, H))
                automl.append(f"{path},{name},{corners[0]},{corners[1]},,,{corners[2]},{corners[3]},,")
                header.append(f"{path},{name},{x0},{y0},{x1},{y1}")
            if not boxes:
                automl.append(f"{path},,,,,,,,,")
                header.append(f"{path},,,,,")
        (data / f"automl_{split}.csv").write_text("\n".join(automl) + "\n")
        (data / f"header_{split}.csv").write_text("\r\n".join(header) + "\r\n")


def _coco(data: Path) -> None:
    categories = [{"id": number, "name": name} for number, name in enumerate(CLASSES, 1)]
    for split, images in SPLITS.items():
        entries, annotations = [], []
        for number, (image, boxes) in enumerate(images.items(), 1):
            entries.append({"id": number, "file_name": f"VOC/JPEGImages/{image}.jpg", "width": W, "height": H})
            annotations += [{"id": len(annotations) + 1, "image_id": number, "category_id": CLASSES.index(name) + 1,
                             "bbox": [x0, y0, x1 - x0, y1 - y0], "iscrowd": 0} for name, (x0, y0, x1, y1) in boxes]
        (data / f"coco_{split}.json").write_text(json.dumps({"images": entries, "categories": categories,
                                                             "annotations": annotations}))


def _yolo(data: Path) -> None:
    for split, images in SPLITS.items():
        for image, boxes in images.items():
            folder = YOLO_SPLIT[split]
            shutil.copy(data / "VOC" / "JPEGImages" / f"{image}.jpg", data / "yolo" / "images" / folder)
            if boxes:  # an image without objects has no label file, as YOLO's own tools leave it
                lines = [" ".join((str(CLASSES.index(name)), _fraction(x0 + x1, 2 * W), _fraction(y0 + y1, 2 * H),
                                   _fraction(x1 - x0, W), _fraction(y1 - y0, H)))
                         for name, (x0, y0, x1, y1) in boxes]
                (data / "yolo" / "labels" / folder / f"{image}.txt").write_text("\n".join(lines) + "\n")
    (data / "yolo" / "data.yaml").write_text("path: .\ntrain: images/train\nval: images/val\nnames:\n"
                                             + "".join(f"  {n}: {name}\n" for n, name in enumerate(CLASSES)))


def _voc(data: Path) -> None:
    for split, images in SPLITS.items():
        for image, boxes in images.items():
            objects = "".join(f"<object><name>{name}</name><difficult>0</difficult><bndbox><xmin>{x0}</xmin>"
                              f"<ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
                              for name, (x0, y0, x1, y1) in boxes)
            (data / "VOC" / "Annotations" / f"{image}.xml").write_text(
                f"<annotation><folder>VOC</folder><filename>{image}.jpg</filename><size><width>{W}</width>"
                f"<height>{H}</height><depth>3</depth></size>{objects}</annotation>")
        (data / "VOC" / "ImageSets" / "Main" / f"{YOLO_SPLIT[split]}.txt").write_text("\n".join(images) + "\n")


def write_set(data: Path) -> None:
    """The set in all five formats under `data`: VOC/, yolo/, automl_|header_<split>.csv, coco_<split>.json."""
    for folder in ("VOC/JPEGImages", "VOC/Annotations", "VOC/ImageSets/Main", "yolo/images/train",
                   "yolo/images/val", "yolo/labels/train", "yolo/labels/val"):
        (data / folder).mkdir(parents=True)
    for shade, (image, boxes) in enumerate((i for images in SPLITS.values() for i in images.items())):
        picture(data / "VOC" / "JPEGImages" / f"{image}.jpg", boxes, 30 * shade)
    _csvs(data)
    _coco(data)
    _yolo(data)
    _voc(data)

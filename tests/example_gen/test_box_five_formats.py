"""One small detection set written in all five formats ExampleGen reads — the Vertex AI / AutoML CSV (normalised),
a header CSV in pixels, COCO JSON, Ultralytics YOLO and Pascal VOC — gives byte-identical examples (issue 65);
then YOLO and VOC runs on files with faults: each fault costs its own image, named by its label or XML file, and
a user's mistake is one line.

The boxes lie on multiples of 5 px across and 4 px down on 100x80 images, so every format writes them exactly (a
pixel, its fraction of the side, or YOLO's centre and size in decimal) and all five must agree to the bit.
"""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from shardflow.cli import main as shardflow_main
from shardflow.core.box_schema import BBOX, BOXES_KEY, CLASS_LABEL, CLASS_TEXT, IS_CROWD

import test_box_example_gen as box_runs  # its reader of a split's examples and their values, reused

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


def _run(args: list[str], out: Path) -> dict:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = shardflow_main(["example-gen", *args, "--output", str(out), "--progress-seconds", "600",
                               "--near-duplicates", "off", "--max-reject-fraction", "1.0"])
    assert code == 0, printed.getvalue()
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    return {"out": out, "manifest": json.loads((out / "manifest.json").read_text()), "rejects": rejects}


def _mistake(args: list[str]) -> str:
    """A run that must stop at once: exit 2 and one line."""
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        code = shardflow_main(["example-gen", *args, "--output", "/nonexistent/out"])
    assert code == 2 and len(errors.getvalue().strip().splitlines()) == 1, errors.getvalue()
    return errors.getvalue()


def _picture(path: Path, boxes: list[tuple[str, tuple[int, ...]]], shade: int) -> None:
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


def _write_set(data: Path) -> None:
    for folder in ("VOC/JPEGImages", "VOC/Annotations", "VOC/ImageSets/Main", "yolo/images/train",
                   "yolo/images/val", "yolo/labels/train", "yolo/labels/val"):
        (data / folder).mkdir(parents=True)
    for shade, (image, boxes) in enumerate((i for images in SPLITS.values() for i in images.items())):
        _picture(data / "VOC" / "JPEGImages" / f"{image}.jpg", boxes, 30 * shade)
    _csvs(data)
    _coco(data)
    _yolo(data)
    _voc(data)


def _arguments(data: Path, layout: str) -> list[str]:
    if layout == "yolo":
        return ["--index", str(data / "yolo" / "data.yaml")]  # no --data-root: the yaml's path is the root
    if layout == "voc":
        lists = data / "VOC" / "ImageSets" / "Main"
        return ["--index", f"train={lists / 'train.txt'}", "--index", f"eval={lists / 'val.txt'}",
                "--data-root", str(data / "VOC")]
    suffix = "json" if layout == "coco" else "csv"
    return [*(f for split in SPLITS for f in ("--index", f"{split}={data / f'{layout}_{split}.{suffix}'}")),
            "--data-root", str(data)]


@pytest.fixture(scope="module")
def five(tmp_path_factory: pytest.TempPathFactory) -> dict:
    data = tmp_path_factory.mktemp("five") / "data"
    _write_set(data)
    return {layout: _run(_arguments(data, layout), data.parent / f"out_{layout}") for layout in FORMATS}


def _by_image(run: dict, split: str) -> dict[str, dict]:
    return {Path(e["path"]).stem: e for e in box_runs._examples(run["out"], split)}


def test_five_formats_give_identical_examples(five: dict) -> None:
    for split, images in SPLITS.items():
        first = _by_image(five[FORMATS[0]], split)
        assert sorted(first) == sorted(images)
        for layout in FORMATS[1:]:
            other = _by_image(five[layout], split)
            assert sorted(other) == sorted(first), layout
            for image in images:  # every feature: image bytes, boxes, classes, ids, crowd flags, areas
                assert other[image]["feature"] == first[image]["feature"], (layout, split, image)


def test_the_examples_hold_the_sets_boxes_and_classes(five: dict) -> None:
    for split, images in SPLITS.items():
        examples = _by_image(five["voc"], split)
        for image, boxes in images.items():
            feature = examples[image]["feature"]
            assert [t.decode() for t in box_runs._values(feature, CLASS_TEXT)] == [name for name, _ in boxes]
            assert box_runs._values(feature, CLASS_LABEL) == [CLASSES.index(name) + 1 for name, _ in boxes]
            assert box_runs._values(feature, IS_CROWD) == [0] * len(boxes)
            expected = [[y0 / H for _, (_, y0, _, _) in boxes], [x0 / W for _, (x0, _, _, _) in boxes],
                        [y1 / H for _, (_, _, _, y1) in boxes], [x1 / W for _, (_, _, x1, _) in boxes]]
            for name, values in zip(BBOX, expected):  # ymin, xmin, ymax, xmax
                assert box_runs._values(feature, name) == np.float32(values).tolist(), (image, name)
            pixels = np.frombuffer(feature["image"].bytes_list.value[0], np.uint8).reshape(H, W, 3)
            for name, (x0, y0, x1, y1) in boxes[:1]:  # the first box is drawn on top: its centre has its colour
                centre = pixels[(y0 + y1) // 2, (x0 + x1) // 2].astype(int)
                assert np.abs(centre - COLOURS[name]).max() < 40, (image, centre)


def test_every_format_reads_every_row_with_one_label_map(five: dict) -> None:
    for layout, run in five.items():
        manifest = run["manifest"]
        assert run["rejects"] == [] and manifest["rejected"] == 0, layout
        assert manifest[BOXES_KEY]["label_map"] == {"disc": 1, "square": 2, "triangle": 3}, layout
        assert manifest[BOXES_KEY]["format"] == layout
        assert {s: manifest["splits"][s]["num_examples"] for s in SPLITS} == {"train": 4, "eval": 2}, layout
    assert five["yolo"]["manifest"]["options"]["data_root"].endswith("yolo")  # the yaml's `path`, no flag


# ---------------------------------------------------------------- faults in a YOLO and a VOC set


@pytest.fixture(scope="module")
def yolo_faults(tmp_path_factory: pytest.TempPathFactory) -> dict:
    data = tmp_path_factory.mktemp("yolo_faults")
    for image in ("a", "b", "c"):
        _picture(data / "images" / "train" / f"{image}.jpg", [], 60)
    labels = {"a": "0 0.5 0.5 0.2 0.2\n", "b": "0 0.5 0.5 0.2 0.2\n0 1.0 0.5 0.04 0.2\n",  # b: x_max 1.02
              "c": "1 0.5 0.5 0.2 0.2\n", "gone": "0 0.5 0.5 0.2 0.2\n"}
    (data / "labels" / "train").mkdir(parents=True)
    for image, text in labels.items():
        (data / "labels" / "train" / f"{image}.txt").write_text(text)
    (data / "list.txt").write_text("./images/train/a.jpg\n./images/train/b.jpg\n./images/train/c.jpg\n"
                                   "./images/train/gone.jpg\n")  # gone.jpg: listed, no image file
    (data / "set.yml").write_text("train: list.txt\nnames: [disc, square]\n")
    return _run(["--index", str(data / "set.yml")], data / "out")


def test_a_yolo_fault_costs_its_own_image_named_by_its_label_file(yolo_faults: dict) -> None:
    found = {(Path(r["index"]).name, r["row"], r["code"], r["path"]) for r in yolo_faults["rejects"]}
    assert found == {("b.txt", 2, "box_out_of_range", "images/train/b.jpg"),
                     ("b.txt", 1, "image_rejected", "images/train/b.jpg"),
                     ("gone.txt", 1, "missing_file", "images/train/gone.jpg")}  # the worker's too: its label file
    manifest = yolo_faults["manifest"]
    assert (manifest["rows"], manifest["accepted"], manifest["rejected"]) == (5, 2, 3)
    assert manifest[BOXES_KEY]["label_map"] == {"disc": 1, "square": 2}
    examples = _by_image(yolo_faults, "train")
    assert sorted(examples) == ["a", "c"]
    assert box_runs._values(examples["c"]["feature"], CLASS_LABEL) == [2]  # names index 1 → served id 2


@pytest.fixture(scope="module")
def voc_faults(tmp_path_factory: pytest.TempPathFactory) -> dict:
    voc = tmp_path_factory.mktemp("voc_faults") / "VOC"
    for folder in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (voc / folder).mkdir(parents=True)
    for image in ("a", "b"):
        _picture(voc / "JPEGImages" / f"{image}.jpg", [], 90)
    hard = "<object><name>disc</name><difficult>1</difficult><bndbox><xmin>5</xmin><ymin>4</ymin><xmax>30</xmax>" \
           "<ymax>24</ymax></bndbox></object>"
    easy = hard.replace("<difficult>1", "<difficult>0")
    (voc / "Annotations" / "a.xml").write_text(f"<annotation><filename>a.jpg</filename><size><width>{W}</width>"
                                               f"<height>{H}</height></size>{easy}{hard}</annotation>")
    (voc / "Annotations" / "b.xml").write_text(f"<annotation><filename>b.jpg</filename><size><width>{H}</width>"
                                               f"<height>{W}</height></size>{easy}</annotation>")  # a size that lies
    (voc / "ImageSets" / "Main" / "train.txt").write_text("a\nb\nmissing\n")
    return _run(["--index", f"train={voc / 'ImageSets' / 'Main' / 'train.txt'}", "--data-root", str(voc)],
                voc.parent / "out")


def test_a_voc_fault_costs_its_own_image_and_difficult_objects_are_ignore_regions(voc_faults: dict) -> None:
    found = {(Path(r["index"]).name, r["row"], r["code"]) for r in voc_faults["rejects"]}
    assert found == {("train.txt", 3, "missing_annotation"), ("b.xml", 1, "size_mismatch")}  # the list's line 3
    mismatch = next(r for r in voc_faults["rejects"] if r["code"] == "size_mismatch")
    assert "80x100" in mismatch["reason"] and "100x80" in mismatch["reason"]  # both sizes named
    examples = _by_image(voc_faults, "train")
    assert sorted(examples) == ["a"]
    assert box_runs._values(examples["a"]["feature"], IS_CROWD) == [0, 1]
    manifest = voc_faults["manifest"]
    assert (manifest["rows"], manifest["accepted"], manifest["rejected"]) == (4, 2, 2)


def test_yolo_and_voc_mistakes_are_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _write_set(data)
    assert "names its own splits" in _mistake(["--index", f"train={data / 'yolo' / 'data.yaml'}"])
    assert "--data-root is required" in _mistake(["--index", f"train={data / 'header_train.csv'}"])
    lists = data / "VOC" / "ImageSets" / "Main"
    assert "is not inside the data root" in _mistake(["--index", f"train={lists / 'train.txt'}",
                                                      "--data-root", str(data / "yolo")])

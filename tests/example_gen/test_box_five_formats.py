"""One small detection set written in all five formats ExampleGen reads — the Vertex AI / AutoML CSV (normalised),
a header CSV in pixels, COCO JSON, Ultralytics YOLO and Pascal VOC — gives byte-identical examples (issue 65);
then YOLO and VOC runs on files with faults: each fault costs its own image, named by its label or XML file, and
a user's mistake is one line.

The set (tests/helpers_box_formats.py) puts its boxes on whole pixels that every format writes exactly, so all five
must agree to the bit.
"""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from shardflow.cli import main as shardflow_main
from shardflow.core.box_schema import BBOX, BOXES_KEY, CLASS_LABEL, CLASS_TEXT, IS_CROWD

import test_box_example_gen as box_runs  # its reader of a split's examples and their values, reused
from helpers_box_formats import CLASSES, COLOURS, FORMATS, H, SPLITS, W, picture as _picture, write_set


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
    write_set(data)
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
    write_set(data)
    assert "names its own splits" in _mistake(["--index", f"train={data / 'yolo' / 'data.yaml'}"])
    assert "--data-root is required" in _mistake(["--index", f"train={data / 'header_train.csv'}"])
    lists = data / "VOC" / "ImageSets" / "Main"
    assert "is not inside the data root" in _mistake(["--index", f"train={lists / 'train.txt'}",
                                                      "--data-root", str(data / "yolo")])

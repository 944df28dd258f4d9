"""Boxes read from an Ultralytics YOLO set and a Pascal VOC set (box_yolo.py, box_voc.py), written here in the
styles other tools write (names as a dict, CRLF line ends, blank lines, whitespace inside XML elements, a class
list's second column): every label line or object is kept or rejected naming its own file and line, and the
counts reconcile with an independent count of the files' lines and objects.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from PIL import Image

from shardflow.example_gen.box_index import Box, box_format, read_voc, read_yolo
from shardflow.example_gen.csv_index import IndexFileError

pytestmark = pytest.mark.unit  # in process, small generated files

SIZE = (100, 80)  # width, height of every image here


def _image(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", SIZE, (90, 120, 30)).save(path)


def _text(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _non_blank(path: Path) -> int:
    """An independent count of a label file's objects: its lines holding anything but spaces."""
    return sum(1 for line in re.split(rb"\r\n|\n", path.read_bytes()) if line.strip())


def _rejects(index: object, root: Path) -> set[tuple[str, int, str]]:
    return {(str(Path(r.index).relative_to(root)), r.row, r.code) for r in index.rejects}  # type: ignore[attr-defined]


# ---------------------------------------------------------------- YOLO


@pytest.fixture()
def yolo(tmp_path: Path) -> dict:
    """A set whose yaml lies in its own folder (`path: ../ds`), names as a dict out of order, three splits given
    as a folder (with a sub-folder), a .txt list (CRLF, a blank line, `./` and root-relative lines) and a list."""
    ds = tmp_path / "ds"
    for name in ("train/a", "train/b", "train/c", "train/sub/d", "val/v1", "val/v2", "test/t"):
        _image(ds / "images" / f"{name}.png")
    _text(ds / "images" / "train" / "notes.md", "not an image: not listed")
    labels = {
        "train/a": "0 0.035 0.5 0.05 0.2\r\n\r\n   \r\n2 0.95 0.5 0.1 0.2\r\n",  # lines 1 and 4 kept
        "train/b": "1 0.5 0.5 0.2 0.2\n0 1.0 0.5 0.04 0.2\n",  # 2: x_max 1.02 -> box_out_of_range; 1 image_rejected
        "train/c": "5 0.5 0.5 0.1 0.1\n",  # class 5 of three -> unknown_category
        "val/v1": "0 0.5 0.5 0.2 0.2 0.1 0.1 0.3 0.3\n",  # a segment's polygon -> malformed_label
        "val/v2": "1 0.25 0.25 0.5 0.5",  # no final line end: kept
    }
    for name, text in labels.items():
        _text(ds / "labels" / f"{name}.txt", text)
    _text(ds / "labels" / "test" / "t.txt", b"\xff\xfe0\x00 \x00")  # UTF-16: not UTF-8 text -> the image rejected
    _image(tmp_path / "outside.png")
    _text(tmp_path / "outside.txt", "secret words\n")  # beside an image outside the root: never read
    _text(ds / "val.txt", "./images/val/v1.png\r\n\r\nimages/val/v2.png\r\n./images/train/a.png\r\n../outside.png\r\n")
    yaml = _text(tmp_path / "cfg" / "data.yaml", "path: ../ds\ntrain: images/train\nval: val.txt\n"
                                                 "test: [images/test]\nnames:\n  2: triangle\n  0: disc\n  1: square\n")
    return {"root": tmp_path, "ds": ds, "yaml": yaml, "labels": labels}


def test_yolo_lines_are_kept_or_rejected_naming_their_label_file_and_line(yolo: dict) -> None:
    root, ds = yolo["root"], yolo["ds"]
    index = read_yolo(str(yolo["yaml"]))
    assert _rejects(index, root) == {
        ("ds/labels/train/b.txt", 2, "box_out_of_range"), ("ds/labels/train/b.txt", 1, "image_rejected"),
        ("ds/labels/train/c.txt", 1, "unknown_category"), ("ds/labels/val/v1.txt", 1, "malformed_label"),
        ("ds/labels/test/t.txt", 0, "malformed_annotation"),
        ("ds/labels/train/a.txt", 0, "split_conflict"),  # a.png listed again in val.txt
        ("outside.txt", 0, "path_escapes_root"),
    }
    assert not any("secret" in r.reason for r in index.rejects)
    stray = next(r for r in index.rejects if r.code == "box_out_of_range")
    assert "1.02" in stray.reason and stray.path == "images/train/b.png" and stray.split == "train"
    kept = {image.path: image for image in index.images}
    assert sorted(kept) == ["images/train/a.png", "images/train/sub/d.png", "images/val/v2.png"]
    a = kept["images/train/a.png"]
    assert (a.split, a.rows, a.classes, a.crowd, a.declared) == ("train", (1, 4), ("disc", "triangle"),
                                                                 (False, False), None)
    # The corners a pixel box gives (1 px / 100 px), not float arithmetic's 0.010000000000000002
    assert a.boxes == (Box(40 / 100, 1 / 100, 60 / 100, 6 / 100), Box(0.4, 0.9, 0.6, 1.0))
    assert kept["images/train/sub/d.png"].boxes == () and kept["images/train/sub/d.png"].rows == ()  # no label file
    assert kept["images/val/v2.png"].split == "eval" and kept["images/val/v2.png"].boxes == (Box(0.0, 0.0, 0.5, 0.5),)
    assert index.category_ids == {"disc": 1, "square": 2, "triangle": 3} and index.units == "normalized"
    lines = sum(_non_blank(ds / "labels" / f"{name}.txt") for name in yolo["labels"])
    assert lines == 7 and index.rows == lines + 3  # + the unreadable file, the second listing, the outsider
    assert index.reconciled and index.counts()["rejected"] == 7


def test_yolo_paths_are_relative_to_the_data_root_and_names_may_be_a_list(yolo: dict) -> None:
    _text(yolo["yaml"], "path: ../ds\ntrain: images/train/sub\nnames: [disc, square, triangle]\n")
    index = read_yolo(str(yolo["yaml"]), data_root=str(yolo["root"]))
    assert [image.path for image in index.images] == ["ds/images/train/sub/d.png"]
    assert index.category_ids == {"disc": 1, "square": 2, "triangle": 3} and index.rejects == ()
    with pytest.raises(IndexFileError, match="is not inside the data root"):
        read_yolo(str(yolo["yaml"]), data_root=str(yolo["root"] / "cfg"))


@pytest.mark.parametrize("relative", [False, True])
def test_a_yolo_yaml_in_the_sets_root_needs_no_path(yolo: dict, relative: bool, monkeypatch) -> None:
    yaml = _text(yolo["ds"] / "coco8.yml", "train: images/val\nnc: 2\n")  # Ultralytics' names for nc alone
    if relative:  # the yaml named from the folder above, as a user types it
        monkeypatch.chdir(yolo["root"])
    index = read_yolo("ds/coco8.yml" if relative else str(yaml))
    assert [image.path for image in index.images] == ["images/val/v2.png"]
    assert index.category_ids == {"class_0": 1, "class_1": 2} and len(index.rejects) == 1
    assert index.rejects[0].index == ("ds/labels/val/v1.txt" if relative else str(yolo["ds"] / "labels/val/v1.txt"))


@pytest.mark.parametrize("text, expected", [
    ("train: [images/train\n", "not a readable YOLO data.yaml"),
    ("- a list\n", "no mapping"),
    ("train: images/train\n", "names must be a non-empty list"),
    ("train: images/train\nnames: [disc, disc]\n", "two classes share a name"),
    ("train: images/train\nnames: {0: disc, 2: square}\n", "not the class indexes 0..1"),
    ("train: images/nowhere\nnames: [disc]\n", "does not exist"),
    ("train: 3\nnames: [disc]\n", "must be a folder, a .txt list"),
    ("names: [disc]\n", "names none of the splits"),
])
def test_a_yolo_yaml_that_cannot_be_used_is_refused_naming_it(yolo: dict, text: str, expected: str) -> None:
    _text(yolo["yaml"], text if text.startswith("-") else "path: ../ds\n" + text)
    with pytest.raises(IndexFileError, match=re.escape(expected)):
        read_yolo(str(yolo["yaml"]))


# ---------------------------------------------------------------- Pascal VOC

A_XML = """<annotation>
\t<folder>VOC2012</folder>
\t<filename>
\t\ta.jpg
\t</filename>
\t<size>
\t\t<width> 100 </width>
\t\t<height>80</height>
\t\t<depth>3</depth>
\t</size>
\t<object>
\t\t<name>  disc </name><pose>Left</pose><truncated>1</truncated><difficult>0</difficult>
\t\t<bndbox><xmin> 20 </xmin><ymin>16</ymin><xmax>65.0</xmax><ymax>48</ymax></bndbox>
\t</object>
\t<object>
\t\t<name>square</name>
\t\t<difficult>1</difficult>
\t\t<bndbox>
\t\t\t<xmin>5</xmin><ymin>4</ymin><xmax>10</xmax><ymax>8</ymax>
\t\t</bndbox>
\t</object>
</annotation>
"""


def _voc_xml(filename: str, size: tuple[int, int] | None, objects: list[str]) -> str:
    size_xml = f"<size><width>{size[0]}</width><height>{size[1]}</height></size>" if size else ""
    return f"<annotation><filename>{filename}</filename>{size_xml}{''.join(objects)}</annotation>"


def _voc_object(name: str, box: tuple[object, ...]) -> str:
    corners = "".join(f"<{tag}>{value}</{tag}>" for tag, value in zip(("xmin", "ymin", "xmax", "ymax"), box))
    return f"<object><name>{name}</name><bndbox>{corners}</bndbox></object>"


@pytest.fixture()
def voc(tmp_path: Path) -> dict:
    voc = tmp_path / "VOC"
    xmls = {
        "a": A_XML,  # two objects, the second difficult: kept, an ignore region
        "b": _voc_xml("b.jpg", (50, 50), []),  # the size lies: recorded for the worker, which rejects the image
        "d": "<annotation><filename>d.jpg</filename><object>",  # does not parse
        "e": _voc_xml("e.jpg", SIZE, [_voc_object("disc", (1, 1, 20, 5)), _voc_object("disc", (30, 1, 20, 5))]),
        "f": _voc_xml("f.jpg", (0, 0), []),  # no objects; a size of 0 declares nothing
        "g": _voc_xml("g.jpg", SIZE, [_voc_object("", (1, 1, 20, 5))]),
        "h": _voc_xml("h.jpg", SIZE, [_voc_object("disc", (1, 1, "2e", 5))]),
    }
    for name, text in xmls.items():
        _text(voc / "Annotations" / f"{name}.xml", text)
    for name in "abefgh":
        _image(voc / "JPEGImages" / f"{name}.jpg")
    listed = "a  1\r\n\r\nb\r\nc\r\nd\r\ne\r\nf\r\ng\r\nh\r\na\r\n../a\r\n"  # c: no XML; a twice; ../a
    return {"root": tmp_path, "voc": voc, "list": _text(voc / "ImageSets" / "Main" / "train.txt", listed)}


def test_voc_objects_are_kept_or_rejected_naming_their_xml_file_and_position(voc: dict) -> None:
    index = read_voc(str(voc["list"]), split="train")
    assert _rejects(index, voc["root"]) == {
        ("VOC/ImageSets/Main/train.txt", 4, "missing_annotation"), ("VOC/Annotations/d.xml", 0, "malformed_annotation"),
        ("VOC/Annotations/e.xml", 2, "box_reversed"), ("VOC/Annotations/e.xml", 1, "image_rejected"),
        ("VOC/Annotations/g.xml", 1, "missing_label"), ("VOC/Annotations/h.xml", 1, "bad_value"),
        ("VOC/ImageSets/Main/train.txt", 10, "duplicate_id"), ("VOC/ImageSets/Main/train.txt", 11, "path_escapes_root"),
    }
    kept = {image.path: image for image in index.images}
    assert sorted(kept) == ["JPEGImages/a.jpg", "JPEGImages/b.jpg", "JPEGImages/f.jpg"]
    a = kept["JPEGImages/a.jpg"]
    # Pixels as the file holds them (1-based in VOC), divided by the decoded size later, as create_pascal_tf_record
    assert a.boxes == (Box(16, 20, 48, 65, normalized=False), Box(4, 5, 8, 10, normalized=False))
    assert (a.classes, a.crowd, a.rows, a.declared, a.split) == (("disc", "square"), (False, True), (1, 2), (80, 100),
                                                                 "train")
    assert kept["JPEGImages/b.jpg"].declared == (50, 50)  # the lie is the worker's to find, against the decoded size
    assert kept["JPEGImages/f.jpg"].declared is None and kept["JPEGImages/f.jpg"].boxes == ()
    objects = sum(text.count("<object>") for text in (A_XML,) + tuple(
        (voc["voc"] / "Annotations" / f"{n}.xml").read_text() for n in "befgh"))
    assert objects == 6 and index.rows == objects + 4  # + the id without XML, the bad XML, the repeat, ../a
    assert index.reconciled and index.labels == ("disc", "square") and index.category_ids == {}
    assert index.units == "pixels"


def test_voc_paths_follow_the_data_root_which_must_hold_the_voc_folder(voc: dict, tmp_path: Path) -> None:
    index = read_voc(str(voc["list"]), data_root=str(voc["root"]))
    assert [image.path for image in index.images][0] == "VOC/JPEGImages/a.jpg"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(IndexFileError, match="is not inside the data root"):
        read_voc(str(voc["list"]), data_root=str(elsewhere))


def test_box_format_tells_yolo_and_voc_by_their_files(voc: dict, tmp_path: Path) -> None:
    assert box_format(str(voc["list"])) == "voc"
    assert box_format(str(_text(tmp_path / "data.yaml", "names: [a]\n"))) == "yolo"
    assert box_format(str(_text(tmp_path / "ImageSets" / "Main" / "train.txt", "a\n"))) is None  # no Annotations/
    assert box_format(str(_text(tmp_path / "ids.txt", "a\n"))) is None

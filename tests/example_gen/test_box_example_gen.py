"""`shardflow example-gen` on box indexes (issue 54): the demo's AutoML layout, a CSV with a header, COCO JSON
and an AutoML CSV with a set column, each a real run on JPEGs/PNGs written here. Rejects are checked as exact
(row, code) lists, rows reconcile against an independent count of the CSV's data lines, a stored box is
checked against the stored (resized) image's pixels, and TFDV validation runs on the demo's output.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shardflow.cli import main as shardflow_main
from shardflow.core.box_schema import BBOX, BOX_DTYPES, BOX_FEATURES, BOX_ROLE, BOXES_KEY, CLASS_LABEL, CLASS_TEXT, \
    IS_CROWD
from shardflow.core.example_rows import read_example_rows
from shardflow.core.manifest import read_manifest
from shardflow.core.tfrecord import iter_records
from shardflow.demo_boxes import write_boxes


def _run(root: Path, out: Path, *indexes: str, extra: tuple[str, ...] = ()) -> dict:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = shardflow_main(["example-gen", *(f for i in indexes for f in ("--index", i)), "--data-root", str(root),
                               "--output", str(out), "--progress-seconds", "600", "--near-duplicates", "off",
                               "--max-reject-fraction", "1.0", *extra])
    assert code == 0, printed.getvalue()
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    return {"out": out, "manifest": json.loads((out / "manifest.json").read_text()), "rejects": rejects,
            "printed": printed.getvalue()}


def _examples(out: Path, split: str) -> list[dict]:
    """The split's examples in reading order, each with its provenance (row, path)."""
    import tensorflow as tf

    manifest = read_manifest(out)
    rows = read_example_rows(str(out), manifest, split)
    found = []
    for shard in manifest.splits[split].shards:
        with open(out / shard.path, "rb") as stream:
            found += [tf.train.Example.FromString(r).features.feature for r in iter_records(stream)]
    assert len(found) == len(rows)
    return [{"row": int(row), "path": rows.paths[n], "feature": feature}
            for n, (feature, row) in enumerate(zip(found, rows.row))]


def _values(feature, name: str) -> list:
    kind = {"float32": "float_list", "int64": "int64_list", "string": "bytes_list"}[BOX_DTYPES.get(name, "string")]
    return list(getattr(feature[name], kind).value)


def _data_lines(path: Path, header: bool) -> int:
    """An independent count of a CSV's data records: the csv module's, blank lines left out."""
    with open(path, newline="") as stream:
        records = [r for r in csv.reader(stream) if r]
    return len(records) - (1 if header else 0)


# ---------------------------------------------------------------- the demo's layout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("boxes")
    write_boxes(root, count=60)
    return _run(root, root / "out", f"train={root / 'train.csv'}", f"eval={root / 'eval.csv'}",
                extra=("--resize", "48x64", "--storage", "png", "--box-resize", "stretch"))  # boxes as the CSV says


def test_demo_manifest_follows_box_schema(demo: dict) -> None:
    manifest, root = demo["manifest"], demo["out"].parent
    features = manifest["features"]
    assert features["image"] == {"name": "image", "dtype": "uint8", "shape": [48, 64, 3], "encoding": "png",
                                 "role": "image"}
    for name in BOX_FEATURES:
        assert features[name] == {"name": name, "dtype": BOX_DTYPES[name], "shape": [-1], "encoding": "value",
                                  "role": BOX_ROLE}
    boxes = manifest[BOXES_KEY]
    assert (boxes["label_map"], boxes["units"], boxes["max_boxes"], boxes["format"]) == (
        {"disc": 1, "square": 2, "triangle": 3}, "normalized", 100, "automl")
    for split in ("train", "eval"):
        with open(root / f"{split}.csv", newline="") as stream:
            rows = list(csv.reader(stream))
        images, classes = {r[0] for r in rows}, Counter(r[1] for r in rows if r[1])
        assert manifest["splits"][split]["num_examples"] == len(images) == boxes["figures"][split]["images"]
        assert manifest["splits"][split]["label_counts"] == {CLASS_TEXT: dict(classes)}
        assert boxes["figures"][split]["boxes_per_class"] == dict(classes)
    assert manifest["rows"] == manifest["accepted"] == sum(_data_lines(root / f"{s}.csv", False)
                                                          for s in ("train", "eval"))
    assert manifest["rejected"] == 0 and demo["rejects"] == []
    assert "boxes: 3 classes, automl index, normalized units" in demo["printed"]


def test_demo_examples_hold_their_rows_boxes(demo: dict) -> None:
    root = demo["out"].parent
    with open(root / "eval.csv", newline="") as stream:
        rows = list(csv.reader(stream))
    by_image: dict[str, list[list[str]]] = {}
    for row in rows:
        by_image.setdefault(row[0], []).append(row)
    examples = _examples(demo["out"], "eval")
    assert sorted(e["path"] for e in examples) == sorted(by_image)
    negatives = 0
    for example in examples:
        expected = [r for r in by_image[example["path"]] if r[1]]
        negatives += not expected
        feature = example["feature"]
        assert [t.decode() for t in _values(feature, CLASS_TEXT)] == [r[1] for r in expected]
        assert _values(feature, CLASS_LABEL) == [{"disc": 1, "square": 2, "triangle": 3}[r[1]] for r in expected]
        assert _values(feature, IS_CROWD) == [0] * len(expected)
        for name, cell in zip(BBOX, (3, 2, 7, 6)):  # ymin, xmin, ymax, xmax in the AutoML columns
            assert np.allclose(_values(feature, name), [float(r[cell]) for r in expected], atol=1e-6)
    assert negatives > 0  # images without objects are kept, with empty lists


def test_validation_runs_on_box_examples(demo: dict, tmp_path: Path) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        # The eval split's 12 images: their box corners' drift is sampling noise (about 0.1 JS divergence)
        code = shardflow_main(["validate", "--examples", str(demo["out"]), "--output", str(tmp_path / "v"),
                               "--drift-threshold", "0.5"])
    assert code == 0, printed.getvalue()
    assert "PASSED" in printed.getvalue()


# ---------------------------------------------------------------- a header, pixels, bad rows of each kind

SIZE = (40, 60)  # H, W of the header layout's images


def _rectangle(path: Path, box: tuple[int, int, int, int]) -> None:
    """A black PNG with a white rectangle on pixel edges (xmin, ymin, xmax, ymax)."""
    pixels = np.zeros((*SIZE, 3), np.uint8)
    pixels[box[1]:box[3], box[0]:box[2]] = 255
    Image.fromarray(pixels).save(path)


@pytest.fixture(scope="module")
def header_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("header")
    for name in ("a", "b", "c", "n", "past"):
        _rectangle(root / f"{name}.png", (6, 4, 30, 20))
    (root / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    rows = [
        ["a.png", "rect", 6, 4, 30, 20, "x"],      # 1 kept (a has rows 1 and 13)
        ["b.png", "rect", 6, 4, 30, 20, "x"],      # 2 kept
        ["n.png", "", "", "", "", "", "x"],        # 3 an image without objects: kept
        ["c.png", "rect", "abc", 4, 30, 20, "x"],  # 4 bad_value
        ["c.png", "rect", 6, 4, 30, 20, "x"],      # 5 image_rejected (row 4)
        ["b.png", "", 6, 4, 30, 20, "x"],          # 6 missing_label -> b's row 2 image_rejected
        ["d.png", "rect", 6, "", 30, 20, "x"],     # 7 missing_box
        ["e.png", "rect", 30, 4, 6, 20, "x"],      # 8 box_reversed
        ["f.png", "rect", 6, 4, 6, 20, "x"],       # 9 box_zero_area
        ["g.png", "rect", -1, 4, 6, 20, "x"],      # 10 box_negative
        ["", "rect", 6, 4, 30, 20, "x"],           # 11 empty_cell
        ["past.png", "rect", 6, 4, 61, 20, "x"],   # 12 box_past_image (the image is 60 wide)
        ["a.png", "rect", 0, 0, 10, 10, "x"],      # 13 kept, a's second box
        ["past.png", "rect", 1, 1, 5, 5, "x"],     # 14 image_rejected (row 12)
        ["missing.png", "rect", 1, 1, 5, 5, "x"],  # 15 missing_file
        ["missing.png", "rect", 2, 2, 5, 5, "x"],  # 16 missing_file
        ["corrupt.png", "rect", 1, 1, 5, 5, "x"],  # 17 corrupt_image
    ]
    index = root / "boxes.csv"
    with open(index, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["filename", "class", "XMin", "YMin", "XMax", "YMax", "note"])
        writer.writerows(rows[:10])
        stream.write("h.png,rect,1,2\n")  # 11 malformed_csv: 4 fields
        writer.writerows(rows[10:])
    return _run(root, root / "out", f"train={index}", extra=("--resize", "20x30", "--rows-per-chunk", "2"))


def test_header_layout_rejects_each_row_with_its_code(header_run: dict) -> None:
    found = [(r["row"], r["code"]) for r in header_run["rejects"]]
    assert sorted(found) == [(2, "image_rejected"), (4, "bad_value"), (5, "image_rejected"), (6, "missing_label"),
                             (7, "missing_box"), (8, "box_reversed"), (9, "box_zero_area"), (10, "box_negative"),
                             (11, "malformed_csv"), (12, "empty_cell"), (13, "box_past_image"),
                             (15, "image_rejected"), (16, "missing_file"), (17, "missing_file"),
                             (18, "corrupt_image")]
    index = str(header_run["out"].parent / "boxes.csv")
    assert {r["index"] for r in header_run["rejects"]} == {index}
    past = next(r for r in header_run["rejects"] if r["code"] == "box_past_image")
    assert past["path"] == "past.png" and "60" in past["reason"]


def test_header_layout_rows_reconcile(header_run: dict) -> None:
    manifest, root = header_run["manifest"], header_run["out"].parent
    lines = _data_lines(root / "boxes.csv", header=True)
    assert lines == 18
    assert manifest["rows"] == lines == manifest["accepted"] + manifest["rejected"]
    assert manifest["accepted"] == 3  # a's rows 1 and 14, n's row 3
    assert manifest["rejected"] == len(header_run["rejects"])
    assert manifest["rejected_by_reason"] == dict(Counter(r["code"] for r in header_run["rejects"]))
    assert manifest[BOXES_KEY]["units"] == "pixels" and manifest[BOXES_KEY]["format"] == "header"


def test_resize_keeps_boxes_on_the_stored_pixels(header_run: dict) -> None:
    examples = {e["path"]: e for e in _examples(header_run["out"], "train")}
    assert sorted(examples) == ["a.png", "n.png"]
    assert examples["a.png"]["row"] == 1 and examples["n.png"]["row"] == 3
    feature = examples["a.png"]["feature"]
    pixels = np.frombuffer(feature["image"].bytes_list.value[0], np.uint8).reshape(20, 30, 3)
    ymin, xmin, ymax, xmax = (_values(feature, name)[0] for name in BBOX)
    white = np.argwhere(pixels[:, :, 0] > 127)  # the rectangle, halved by the resize
    assert (ymin * 20, xmin * 30, ymax * 20, xmax * 30) == pytest.approx(
        (white[:, 0].min(), white[:, 1].min(), white[:, 0].max() + 1, white[:, 1].max() + 1), abs=0.5)
    assert _values(feature, "image/object/bbox/xmax") == pytest.approx([30 / 60, 10 / 60])
    assert all(_values(examples["n.png"]["feature"], name) == [] for name in BOX_FEATURES)


# ---------------------------------------------------------------- COCO and an AutoML set column


@pytest.fixture(scope="module")
def coco_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("coco")
    for name in ("one", "two", "empty", "liar"):
        _rectangle(root / f"{name}.png", (6, 4, 30, 20))
    data = {"images": [{"id": 1, "file_name": "one.png", "width": 60, "height": 40},
                       {"id": 2, "file_name": "two.png", "width": 60, "height": 40},
                       {"id": 3, "file_name": "empty.png", "width": 60, "height": 40},
                       {"id": 8, "file_name": "liar.png", "width": 120, "height": 40}],  # twice the file's width
            "categories": [{"id": 7, "name": "rect"}, {"id": 9, "name": "zebra"}],
            "annotations": [{"image_id": 1, "category_id": 7, "bbox": [6, 4, 24, 16]},
                            {"image_id": 1, "category_id": 7, "bbox": [0, 0, 60, 40], "iscrowd": 1},
                            {"image_id": 2, "category_id": 5, "bbox": [6, 4, 24, 16]},
                            {"image_id": 4, "category_id": 7, "bbox": [6, 4, 24, 16]},
                            {"image_id": 2, "category_id": 7, "bbox": [6, 4, 24, 16]},
                            {"image_id": 8, "category_id": 9, "bbox": [12, 4, 48, 16]}]}
    (root / "coco.json").write_text(json.dumps(data))
    return _run(root, root / "out", f"train={root / 'coco.json'}")


def test_coco_examples_and_rejects(coco_run: dict) -> None:
    manifest = coco_run["manifest"]
    assert manifest[BOXES_KEY]["label_map"] == {"rect": 7, "zebra": 9}  # COCO's ids are the served ids
    assert manifest[BOXES_KEY]["format"] == "coco"
    assert [(r["row"], r["code"]) for r in coco_run["rejects"]] == [(3, "unknown_category"), (4, "unknown_image"),
                                                                      (5, "image_rejected"), (6, "size_mismatch")]
    liar = coco_run["rejects"][-1]
    assert liar["path"] == "liar.png" and "declares 120x40" in liar["reason"] and "decodes to 60x40" in liar["reason"]
    assert (manifest["rows"], manifest["accepted"], manifest["rejected"]) == (6, 2, 4)
    examples = {e["path"]: e for e in _examples(coco_run["out"], "train")}
    assert sorted(examples) == ["empty.png", "one.png"]
    one = examples["one.png"]["feature"]
    assert _values(one, IS_CROWD) == [0, 1] and _values(one, CLASS_LABEL) == [7, 7]
    assert _values(one, "image/object/area") == [24 * 16, 60 * 40]  # pixels of the decoded image
    assert _values(one, "image/object/bbox/ymax") == pytest.approx([0.5, 1.0])
    assert examples["empty.png"]["row"] == 0  # no annotation names it


def test_automl_set_column_gives_splits(tmp_path: Path) -> None:
    for number in range(8):
        _rectangle(tmp_path / f"{number}.jpg", (6, 4, 30, 20))
    sets = ["TRAIN", "TRAIN", "VALIDATION", "TEST", "UNASSIGNED", "", "FOO", "TRAIN"]
    lines = [f"{s},{n}.jpg,rect,0.1,0.1,,,0.5,0.5,," for n, s in enumerate(sets)]
    lines.append("VALIDATION,0.jpg,rect,0.2,0.2,,,0.6,0.6,,")  # 9: the image's first row said TRAIN
    (tmp_path / "all.csv").write_text("\n".join(lines) + "\n")
    run = _run(tmp_path, tmp_path / "out", str(tmp_path / "all.csv"))
    splits = run["manifest"]["splits"]
    assert sorted(splits) == ["eval", "test", "train"]
    assert [(r["row"], r["code"]) for r in run["rejects"]] == [(1, "image_rejected"), (7, "unknown_split"),
                                                                 (9, "split_conflict")]
    assert sum(s["num_examples"] for s in splits.values()) == 6  # 0.jpg and 6.jpg rejected
    assert splits["test"]["num_examples"] == 1 and splits["eval"]["num_examples"] >= 1
    leaked = run["manifest"]["leakage"]  # the eight images are the same picture: leakage names their rows
    assert leaked["count"] == 1
    occurrences = {(o["split"], o["row"], o["path"]) for e in leaked["examples"] for o in e["occurrences"]}
    assert ("test", 4, "3.jpg") in occurrences and all(path == f"{row - 1}.jpg" for _, row, path in occurrences)


# ---------------------------------------------------------------- a user's mistakes: one line, exit 2


@pytest.mark.parametrize("flags, expected", [
    (("--max-boxes", "0"), "max_boxes must be an integer >= 1, got 0"),
    (("--index", "eval={root}/b.json"), "mix formats"),
    (("--split-key", "x"), "--split-key"),
    (("--keep-exif-orientation",), "--keep-exif-orientation does not apply to a box index"),
    (("--index", "eval={root}/pixels.csv"), "the index files disagree on units"),
])
def test_box_option_mistakes_are_one_line(tmp_path: Path, flags: tuple[str, ...], expected: str) -> None:
    _rectangle(tmp_path / "a.png", (1, 1, 5, 5))
    (tmp_path / "b.json").write_text(json.dumps({"images": [], "categories": []}))
    (tmp_path / "a.csv").write_text("image,label,xmin,ymin,xmax,ymax\na.png,rect,0.1,0.1,0.5,0.5\n")
    (tmp_path / "pixels.csv").write_text("image,label,xmin,ymin,xmax,ymax\na.png,rect,1,1,5,5\n")
    index = str(tmp_path / "a.csv") if "--split-key" in flags else f"train={tmp_path / 'a.csv'}"
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        code = shardflow_main(["example-gen", "--index", index, "--data-root", str(tmp_path), "--output",
                               str(tmp_path / "out"), *(f.format(root=tmp_path) for f in flags)])
    assert code == 2 and expected in errors.getvalue() and len(errors.getvalue().strip().splitlines()) == 1


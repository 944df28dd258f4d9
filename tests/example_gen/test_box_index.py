"""Boxes read from detection indexes (components/example_gen/box_index.py): the AutoML CSV, a CSV with named
box columns, and COCO JSON, on files written here. Rows are checked against ExampleGen's own CSV reader's
numbering and against an independent count of the file's lines.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from shardflow.core.errors import ConfigError
from shardflow.example_gen.box_index import (BoxIndexOptions, BoxReject, box_columns, read_box_csv,
                                             read_coco)
from shardflow.example_gen.csv_index import IndexFileError, plan_chunks, read_chunk
from shardflow.example_gen.rows import Reject

pytestmark = pytest.mark.unit  # in process, small generated files

NEG = ",,,,,,,,,"  # the AutoML layout's empty label and coordinates after the path


def _write(tmp: Path, name: str, lines: list[str]) -> str:
    path = tmp / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _automl(path: str, label: str, box: tuple[float | str, ...], split: str = "TRAIN") -> str:
    """One AutoML row from (xmin, ymin, xmax, ymax)."""
    x0, y0, x1, y1 = box
    return f"{split},{path},{label},{x0},{y0},,,{x1},{y1},,"


def _data_lines(path: str) -> int:
    """An independent count: non-blank lines (no quoted line breaks in these files), less a header line."""
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return len(lines) - (not lines[0].startswith(("TRAIN", "TEST", "VALIDATION", "UNASSIGNED")))


def _by_row(index: object) -> dict[int, str]:
    return {r.row: r.code for r in index.rejects}  # type: ignore[attr-defined]


def test_each_csv_reject_reason_names_its_row_file_and_column(tmp_path: Path) -> None:
    lines = [
        _automl("ok.jpg", "cat", (0.1, 0.1, 0.5, 0.5)),          # 1 kept
        _automl("out.jpg", "cat", (0.1, 0.1, 1.5, 0.5)),         # 2 box_out_of_range
        _automl("rev.jpg", "cat", (0.6, 0.1, 0.5, 0.5)),         # 3 box_reversed
        _automl("flat.jpg", "cat", (0.1, 0.3, 0.5, 0.3)),        # 4 box_zero_area
        _automl("nan.jpg", "cat", ("0.1", "abc", "0.5", "0.5")),  # 5 bad_value
        _automl("nolabel.jpg", "", (0.1, 0.1, 0.5, 0.5)),        # 6 missing_label
        _automl("nobox.jpg", "cat", ("0.1", "", "0.5", "0.5")),  # 7 missing_box
        "TRAIN,short.jpg,cat,0.1",                                # 8 malformed_csv
        _automl("", "cat", (0.1, 0.1, 0.5, 0.5)),                # 9 empty_cell
        "",                                                       # blank: not a row
        _automl("ok.jpg", "dog", (0.2, 0.2, 0.3, 0.3), "TEST"),  # 10 split_conflict, and row 1 image_rejected
        _automl("inf.jpg", "cat", ("0.1", "inf", "0.5", "0.5")),  # 11 bad_value
    ]
    path = _write(tmp_path, "boxes.csv", lines)
    index = read_box_csv(path, BoxIndexOptions(units="normalized"))
    assert _by_row(index) == {1: "image_rejected", 2: "box_out_of_range", 3: "box_reversed", 4: "box_zero_area",
                              5: "bad_value", 6: "missing_label", 7: "missing_box", 8: "malformed_csv",
                              9: "empty_cell", 10: "split_conflict", 11: "bad_value"}
    assert index.images == () and index.reconciled and index.rows == _data_lines(path) == 11
    first = {r.row: r for r in index.rejects}
    assert (first[2].index, first[2].column, first[2].path, first[2].split) == (path, "x_max", "out.jpg", "train")
    assert "1.5" in first[2].reason and first[5].column == "y_min" and "'abc'" in first[5].reason
    assert "row 10" in first[1].reason and "split_conflict" in first[1].reason
    assert index.rejected_by_reason()["bad_value"] == 2


def test_pixel_units_reject_negative_coordinates_only(tmp_path: Path) -> None:
    lines = [_automl("a.jpg", "cat", (-1, 5, 40, 50)), _automl("b.jpg", "cat", (10, 5, 400, 50))]
    path = _write(tmp_path, "px.csv", lines)
    index = read_box_csv(path, BoxIndexOptions(units="pixels"))
    assert _by_row(index) == {1: "box_negative"} and index.rejects[0].column == "x_min"
    assert [i.path for i in index.images] == ["b.jpg"] and index.images[0].pending


def test_max_boxes_rejects_the_whole_image_and_a_negative_row_beside_boxes_rejects_its_image(tmp_path: Path) -> None:
    lines = [_automl("many.jpg", "cat", (0.1 * i, 0.1, 0.1 * i + 0.05, 0.2)) for i in range(3)]
    lines += [_automl("few.jpg", "cat", (0.1, 0.1, 0.2, 0.2)) for _ in range(2)]
    lines += ["TRAIN,mixed.jpg" + NEG, _automl("mixed.jpg", "dog", (0.1, 0.1, 0.2, 0.2))]
    index = read_box_csv(_write(tmp_path, "many.csv", lines), BoxIndexOptions(max_boxes=2))
    assert _by_row(index) == {1: "too_many_boxes", 2: "too_many_boxes", 3: "too_many_boxes",
                              6: "negative_with_boxes", 7: "image_rejected"}
    assert [(i.path, len(i.boxes)) for i in index.images] == [("few.jpg", 2)]
    assert "max_boxes=2" in index.rejects[0].reason and index.reconciled


def test_scattered_rows_of_an_image_make_one_example_and_negatives_are_kept(tmp_path: Path) -> None:
    lines = [_automl("a.jpg", "cat", (0.1, 0.2, 0.3, 0.4)), "TRAIN,empty.jpg" + NEG,
             _automl("b.jpg", "dog", (0.5, 0.5, 0.9, 0.9)), _automl("a.jpg", "dog", (0.2, 0.3, 0.4, 0.5)),
             "TRAIN,empty.jpg" + NEG, _automl("a.jpg", "cat", (0.0, 0.0, 1.0, 1.0))]
    index = read_box_csv(_write(tmp_path, "scattered.csv", lines))
    images = {i.path: i for i in index.images}
    assert list(images) == ["a.jpg", "empty.jpg", "b.jpg"]  # in order of first row
    assert images["a.jpg"].rows == (1, 4, 6) and images["a.jpg"].classes == ("cat", "dog", "cat")
    np.testing.assert_allclose(images["a.jpg"].array(), [[0.2, 0.1, 0.4, 0.3], [0.3, 0.2, 0.5, 0.4], [0, 0, 1, 1]])
    empty = images["empty.jpg"]
    assert (empty.rows, empty.boxes, empty.split) == ((2, 5), (), "train")
    assert index.labels == ("cat", "dog") and index.rejects == ()
    assert index.counts() == {"rows": 6, "box_rows": 4, "negative_rows": 2, "rejected": 0, "images": 3,
                              "negative_images": 1}


def test_a_header_names_box_columns_and_rows_are_numbered_as_example_gen_numbers_them(tmp_path: Path) -> None:
    lines = ["image,label,x_min,y_min,x_max,y_max,split,notes", "a.jpg,cat,0.1,0.1,0.5,0.5,train,x", "",
             'b.jpg,dog,0.1,0.1,0.5,0.5,train,"two', 'lines"', "c.jpg,cat,0.1,0.1,0.05,0.5,eval,y"]
    path = _write(tmp_path, "header.csv", lines)
    index = read_box_csv(path)
    _, chunks = plan_chunks(path, index_id=0, rows_per_chunk=100)
    reference = {record.cells[0]: record.row for record in read_chunk(chunks[0])}  # type: ignore[index]
    assert reference == {"a.jpg": 1, "b.jpg": 2, "c.jpg": 3}
    assert {i.path: i.rows for i in index.images} == {"a.jpg": (1,), "b.jpg": (2,)}
    assert [(r.row, r.code, r.column, r.split) for r in index.rejects] == [(3, "box_reversed", "x_min", "eval")]
    assert index.rows == len(reference)


def test_box_columns_are_recognised_by_name() -> None:
    plain = box_columns(["path", "class", "xmin", "ymin", "xmax", "ymax"])
    assert plain is not None and plain.coordinates == (2, 3, 4, 5) and plain.split is None
    named = box_columns(["set", "file_name", "Label", "bbox_min_x", "bbox-min-y", "BBox XMax", "ymax"])
    assert named is not None and (named.path, named.label, named.split, named.coordinates) == (1, 2, 0, (3, 4, 5, 6))
    assert box_columns(["gs://b/xmin.jpg", "cat", "0.1", "0.1", "", "", "0.5", "0.5", "", ""]) is None
    with pytest.raises(IndexFileError, match="no label, ymax"):
        box_columns(["image", "tag", "xmin", "ymin", "xmax"])


def test_a_file_of_neither_layout_is_refused_naming_it(tmp_path: Path) -> None:
    for name, lines in (("tag.csv", ["image,tag,xmin,ymin,xmax,ymax"]), ("short.csv", ["a.jpg,cat,0.1,0.1,0.5,0.5"]),
                        ("empty.csv", [""])):
        path = _write(tmp_path, name, lines)
        with pytest.raises(IndexFileError, match=f"{path}: .*(no label|AutoML layout|empty)"):
            read_box_csv(path)


def test_options_name_the_bad_value() -> None:
    with pytest.raises(ConfigError, match="units .*'inches'"):
        BoxIndexOptions(units="inches")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError, match=f"max_boxes .*{bad!r}"):
            BoxIndexOptions(max_boxes=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        BoxIndexOptions("pixels")  # type: ignore[misc]  # keyword-only


def test_rejects_have_the_keys_of_example_gen_rejects(tmp_path: Path) -> None:
    reject = BoxReject(3, "train", "x_min", "a.jpg", "box_reversed", "r", index="i.csv")
    assert reject.to_json() == Reject(3, "train", "x_min", "a.jpg", "box_reversed", "r").to_json("i.csv")


def _coco(tmp: Path, images: list[tuple[str, int, int]], boxes: list[tuple[int, int, list[float]]]) -> str:
    """COCO JSON: images (file, width, height) with ids 1.., annotations (image id, category id, bbox)."""
    data = {"images": [{"id": i, "file_name": f, "width": w, "height": h} for i, (f, w, h) in enumerate(images, 1)],
            "annotations": [{"id": n, "image_id": i, "category_id": c, "bbox": b, "iscrowd": 0}
                            for n, (i, c, b) in enumerate(boxes, 1)],
            "categories": [{"id": 7, "name": "dog"}, {"id": 3, "name": "cat"}, {"id": 9, "name": "bird"}]}
    path = tmp / "coco.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _sorted(boxes: np.ndarray) -> np.ndarray:
    return boxes[np.lexsort(boxes.T[::-1])]


def test_coco_boxes_equal_the_csv_route_for_the_same_boxes(tmp_path: Path) -> None:
    rng = random.Random(0)
    images = [(f"img{i}.jpg", rng.randint(50, 900), rng.randint(50, 900)) for i in range(20)]
    boxes = []
    for image_id, (_, w, h) in enumerate(images[:-2], 1):  # the last two images have no objects
        for _ in range(rng.randint(1, 4)):
            x, y = rng.uniform(0, w / 2), rng.uniform(0, h / 2)
            boxes.append((image_id, rng.choice([7, 3]), [x, y, rng.uniform(1, w - x), rng.uniform(1, h - y)]))
    coco = read_coco(_coco(tmp_path, images, boxes), split="train")
    names, lines = {7: "dog", 3: "cat"}, []
    for image_id, category, (x, y, bw, bh) in boxes:  # the same boxes, normalised as the CSV writes them
        name, w, h = images[image_id - 1]
        lines.append(_automl(name, names[category], (x / w, y / h, (x + bw) / w, (y + bh) / h)))
    lines += [f"TRAIN,{name}" + NEG for name, _, _ in images[-2:]]
    csv_index = read_box_csv(_write(tmp_path, "same.csv", lines[::-1]))  # another order: rows are matched by box
    from_csv = {i.path: i for i in csv_index.images}
    assert len(coco.images) == len(from_csv) == 20 and coco.rejects == csv_index.rejects == ()
    for image in coco.images:
        twin = from_csv[image.path]
        assert image.pending == bool(image.boxes) and image.declared == next((h, w) for n, w, h in images if n == image.path)
        np.testing.assert_allclose(_sorted(_declared_normalized(image)), _sorted(twin.array()), rtol=0, atol=1e-9)
        assert sorted(image.classes) == sorted(twin.classes) and image.split == twin.split == "train"
    assert coco.labels == ("bird", "cat", "dog") and coco.category_ids == {"dog": 7, "cat": 3, "bird": 9}
    assert coco.units == "pixels" and csv_index.units == "normalized" and coco.reconciled


def _declared_normalized(image: object) -> np.ndarray:
    """A COCO image's pixel boxes normalised by its declared size (the worker uses the decoded one, once equal)."""
    boxes = [box.normalize(*image.declared) for box in image.boxes]  # type: ignore[attr-defined]
    return np.array([(b.ymin, b.xmin, b.ymax, b.xmax) for b in boxes], np.float64).reshape(-1, 4)


def test_coco_category_ids_are_the_label_map_and_an_unservable_id_is_refused(tmp_path: Path) -> None:
    images = [("a.jpg", 100, 50)]
    path = _coco(tmp_path, images, [(1, 7, [10, 10, 20, 20])])
    data = json.loads(Path(path).read_text())
    data["categories"].append({"id": 0, "name": "shapes-dataset", "supercategory": "none"})  # an exporter's 0
    Path(path).write_text(json.dumps(data))
    index = read_coco(path)
    assert 0 not in index.category_ids.values() and index.category_ids["dog"] == 7
    data["annotations"].append({"id": 2, "image_id": 1, "category_id": 0, "bbox": [1, 1, 5, 5]})
    Path(path).write_text(json.dumps(data))
    with pytest.raises(IndexFileError, match=r"category id 0 \('shapes-dataset'\) is not an integer >= 1"):
        read_coco(path)


def test_each_coco_reject_reason_names_its_annotation(tmp_path: Path) -> None:
    images = [("a.jpg", 100, 50), ("b.jpg", 100, 50), ("c.jpg", 100, 50), ("d.jpg", 100, 50)]
    boxes = [(1, 3, [10, 10, 20, 20]),   # 1 kept
             (2, 42, [10, 10, 20, 20]),  # 2 unknown_category
             (99, 3, [10, 10, 20, 20]),  # 3 unknown_image
             (3, 3, [90, 10, 20, 20]),   # 4 box_outside_image (x + w = 110 > 100)
             (3, 3, [-1, 10, 20, 20]),   # 5 box_negative
             (3, 7, [10, 10, 0, 20]),    # 6 box_zero_area
             (3, 7, [10, 10, -5, 20]),   # 7 box_reversed
             (2, 7, [10, "a", 5, 20]),   # 8 bad_value
             (1, 7, [0, 0, 100, 50])]    # 9 kept: the whole image
    path = _coco(tmp_path, images, boxes)
    data = json.loads(Path(path).read_text())
    data["annotations"].append({"id": 10, "bbox": [1, 1, 2, 2]})  # 10 malformed_annotation
    Path(path).write_text(json.dumps(data))
    index = read_coco(path)
    assert _by_row(index) == {2: "unknown_category", 3: "unknown_image", 4: "box_outside_image", 5: "box_negative",
                              6: "box_zero_area", 7: "box_reversed", 8: "bad_value", 10: "malformed_annotation"}
    kept = [(i.path, i.rows, i.classes) for i in index.images]
    assert kept == [("a.jpg", (1, 9), ("cat", "dog")), ("d.jpg", (), ())]
    np.testing.assert_allclose(_declared_normalized(index.images[0]), [[0.2, 0.1, 0.6, 0.3], [0, 0, 1, 1]], atol=1e-12)
    assert index.reconciled and index.counts()["rows"] == 10 and index.counts()["negative_images"] == 1
    assert {r.row: r.path for r in index.rejects}[4] == "c.jpg" and {r.row: r.path for r in index.rejects}[3] is None


def test_a_coco_file_without_its_tables_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    image = {"id": 1, "file_name": "a.jpg", "width": 0, "height": 5}
    path.write_text(json.dumps({"images": [image], "categories": []}))
    with pytest.raises(IndexFileError, match="not positive"):
        read_coco(str(path))
    path.write_text(json.dumps({"annotations": []}))
    with pytest.raises(IndexFileError, match="'images'"):
        read_coco(str(path))


def test_counts_reconcile_with_an_independent_line_count_on_ten_thousand_rows(tmp_path: Path) -> None:
    """Linear by construction (one scan, a dict per image); no timing assertion."""
    rng = random.Random(1)
    lines = []
    for _ in range(10_000):
        image, kind = f"img{rng.randrange(2500)}.jpg", rng.random()
        if kind < 0.05:
            lines.append(f"TRAIN,{image}" + NEG)
        elif kind < 0.08:
            lines.append(_automl(image, "cat", (0.5, 0.5, 0.4, 0.9)))
        else:
            x, y = rng.uniform(0, 0.5), rng.uniform(0, 0.5)
            lines.append(_automl(image, rng.choice(["cat", "dog", "bird"]), (x, y, x + 0.3, y + 0.3)))
    path = _write(tmp_path, "big.csv", lines)
    index = read_box_csv(path, BoxIndexOptions(max_boxes=8))
    counts = index.counts()
    assert counts["rows"] == _data_lines(path) == 10_000
    assert counts["box_rows"] + counts["negative_rows"] + counts["rejected"] == 10_000
    assert len({r.row for r in index.rejects}) == counts["rejected"]  # each rejected row once
    kept_rows = [row for image in index.images for row in image.rows]
    assert len(set(kept_rows)) == len(kept_rows) and not set(kept_rows) & {r.row for r in index.rejects}
    assert {"box_reversed", "image_rejected"} <= set(index.rejected_by_reason())

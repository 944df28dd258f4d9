"""The units of a box CSV decided from the evidence of the whole file (components/example_gen/box_units.py), on
files written here: a header file in either unit, one stray corner among normalised rows in both CSV layouts (it
costs its own image; the file is never read again in pixels), and a file that is neither, refused in one line.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from shardflow.example_gen.box_index import Box, BoxIndexOptions, read_box_csv
from shardflow.example_gen.csv_index import IndexFileError

from test_box_index import _automl, _write  # the index tests' writers of a file and of an AutoML row

pytestmark = pytest.mark.unit


def _header(path: str, label: str, box: tuple[float | str, ...]) -> str:
    return ",".join([path, label, *map(str, box)])


@pytest.mark.parametrize("scale, units", [(1.0, "normalized"), (640.0, "pixels")])
def test_auto_units_decide_per_header_file(tmp_path: Path, scale: float, units: str) -> None:
    lines = [_header(f"{i}.jpg", "cat", (0.1 * scale, 0.2 * scale, 0.5 * scale, 1.0 * scale)) for i in range(3)]
    index = read_box_csv(_write(tmp_path, "auto.csv", ["image,label,xmin,ymin,xmax,ymax", *lines, "neg.jpg,,,,,"]))
    assert index.units == units and index.rejects == ()
    assert index.units_decision["decided_by"] == "evidence" and index.units_decision["box_rows"] == 3
    box = index.images[0].boxes[0]
    assert box.normalized == (units == "normalized") and index.images[0].pending == (units == "pixels")
    assert box.normalize(height=640, width=640) == Box(0.2, 0.1, 1.0, 0.5)  # a normalised box is returned as it is
    with pytest.raises(ValueError, match="past the image"):
        Box(0, 0, 700, 10, normalized=False).normalize(height=640, width=640)


@pytest.mark.parametrize("layout", ["automl", "header"])
def test_one_stray_corner_rejects_its_own_image_and_never_rereads_the_file(tmp_path: Path, layout: str) -> None:
    """Issue 65's planted row: a corner of 1.3 among normalised rows used to turn every box of the file into a dot."""
    rng = random.Random(3)
    boxes = [(round(rng.uniform(0, 0.4), 3), round(rng.uniform(0, 0.4), 3), round(rng.uniform(0.5, 1), 3),
              round(rng.uniform(0.5, 1), 3)) for _ in range(200)]
    boxes[57] = (0.2, 0.3, 1.3, 0.8)
    if layout == "automl":
        lines = [_automl(f"{i}.jpg", "cat", box) for i, box in enumerate(boxes)]
    else:
        lines = ["image,label,xmin,ymin,xmax,ymax"] + [_header(f"{i}.jpg", "cat", b) for i, b in enumerate(boxes)]
    index = read_box_csv(_write(tmp_path, f"{layout}.csv", lines))
    assert index.units == "normalized" and all(not image.pending for image in index.images)
    assert [(r.row, r.code, r.path) for r in index.rejects] == [(58, "box_out_of_range", "57.jpg")]
    assert len(index.images) == 199 and index.reconciled
    decided = index.units_decision
    assert decided["decided_by"] == ("layout" if layout == "automl" else "evidence")
    if layout == "header":
        assert decided["far_corner_in_unit"] == 199 and decided["far_corner_in_unit_share"] == 0.995


def test_a_file_neither_normalised_nor_in_pixels_is_refused_in_one_line_unless_the_flag_says(tmp_path: Path) -> None:
    lines = ["image,label,xmin,ymin,xmax,ymax"] + [_header(f"{i}.jpg", "cat", (0.1, 0.1, 0.5, 0.5)) for i in range(8)]
    lines += [_header(f"p{i}.jpg", "cat", (10, 10, 50, 50)) for i in range(2)]
    path = _write(tmp_path, "mixed.csv", lines)
    with pytest.raises(IndexFileError, match=r"mixed.csv: 8 of 10 box rows \(80%\) .* pass --box-units"):
        read_box_csv(path)
    pixels = read_box_csv(path, BoxIndexOptions(units="pixels"))
    assert pixels.units_decision == {"units": "pixels", "decided_by": "flag"} and len(pixels.images) == 10

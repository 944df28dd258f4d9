"""EXIF orientation moves pixels and boxes alike, a declared size is checked against the decoded image, and a named
index's rejects carry its split: `shardflow example-gen` on files written here (test_box_example_gen's helpers)."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shardflow.core.box_schema import BBOX

from test_box_example_gen import _examples, _rectangle, _run, _values


def test_an_exif_rotated_photo_keeps_its_box_on_the_upright_pixels_and_a_declared_stored_size_is_refused(
        tmp_path: Path) -> None:
    """A phone photo stored sideways (orientation 6): its box, drawn upright as a labelling tool shows it, must
    enclose the same pixels in the example; COCO declaring the stored (sideways) size is a lie about the image."""
    upright = np.zeros((40, 60, 3), np.uint8)
    upright[4:20, 6:30] = 255  # (xmin, ymin, xmax, ymax) = (6, 4, 30, 20) on the upright image
    exif = Image.Exif()
    exif[0x0112] = 6  # the viewer turns it 90 degrees clockwise
    Image.fromarray(upright).transpose(Image.Transpose.ROTATE_90).save(tmp_path / "side.jpg", quality=95, exif=exif)
    categories = [{"id": 4, "name": "rect"}]
    for name, (width, height) in (("upright", (60, 40)), ("stored", (40, 60))):
        data = {"images": [{"id": 1, "file_name": "side.jpg", "width": width, "height": height}],
                "categories": categories, "annotations": [{"image_id": 1, "category_id": 4, "bbox": [6, 4, 24, 16]}]}
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    run = _run(tmp_path, tmp_path / "out", f"train={tmp_path / 'upright.json'}", extra=("--storage", "png"))
    feature = _examples(run["out"], "train")[0]["feature"]
    pixels = np.asarray(Image.open(io.BytesIO(feature["image"].bytes_list.value[0])))
    assert pixels.shape[:2] == (40, 60)
    bright = np.argwhere(pixels[..., 0] > 127)
    (top, left), (bottom, right) = bright.min(axis=0), bright.max(axis=0) + 1
    ymin, xmin, ymax, xmax = (_values(feature, name)[0] for name in BBOX)
    assert (ymin * 40, xmin * 60, ymax * 40, xmax * 60) == pytest.approx((top, left, bottom, right), abs=1)
    refused = _run(tmp_path, tmp_path / "out2", f"train={tmp_path / 'stored.json'}")
    assert [(r["code"], r["path"]) for r in refused["rejects"]] == [("size_mismatch", "side.jpg")]
    assert "declares 40x60" in refused["rejects"][0]["reason"] and "decodes to 60x40" in refused["rejects"][0]["reason"]


def test_rejects_of_an_index_named_by_its_split_carry_that_split(tmp_path: Path) -> None:
    _rectangle(tmp_path / "a.png", (6, 4, 30, 20))
    (tmp_path / "t.csv").write_text("image,label,xmin,ymin,xmax,ymax\na.png,rect,0.1,0.1,0.5,0.5\n"
                                    "b.png,rect,0.5,0.1,0.2,0.5\n")
    run = _run(tmp_path, tmp_path / "out", f"train={tmp_path / 't.csv'}")
    assert [(r["row"], r["code"], r["split"]) for r in run["rejects"]] == [(2, "box_reversed", "train")]

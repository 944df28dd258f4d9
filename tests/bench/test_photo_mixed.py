"""The mixed photo set (issue 46): its files hold the traits `traits.csv` records, and ExampleGen's
decode of them is Pillow's upright, RGB, bilinear 224-px image exactly."""
from __future__ import annotations

import argparse
import csv
import hashlib
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, JpegImagePlugin

from benchmarks import photos_suite
from benchmarks.photo_mixed import ensure_mixed_photos
from shardflow.example_gen.images import ImageRules, decode

COUNT = 40
_SAMPLING = {-1: "none", 0: "4:4:4", 2: "4:2:0"}  # JpegImagePlugin.get_sampling; gray files have none


def test_mixed_files_hold_their_recorded_traits(tmp_path: Path) -> None:
    root = ensure_mixed_photos(tmp_path / "mixed", COUNT)
    traits = list(csv.DictReader(open(root / "traits.csv", newline="")))
    assert len(traits) == COUNT and len(np.load(root / "labels.npy")) == COUNT
    digests = set()
    for trait in traits:
        data = (root / "img" / trait["name"]).read_bytes()
        digests.add(hashlib.sha256(data).hexdigest())
        with Image.open(root / "img" / trait["name"]) as image:
            assert image.mode == ("L" if trait["gray"] == "1" else "RGB")
            assert _SAMPLING[JpegImagePlugin.get_sampling(image)] == trait["subsampling"]
            assert image.getexif().get(0x0112, 1) == int(trait["orientation"])
            assert bool(image.info.get("progressive")) == (trait["progressive"] == "1")
            assert image.size == (int(trait["width"]), int(trait["height"]))
            assert 300 <= min(image.size) <= max(image.size) <= 500
    assert len(digests) == COUNT  # distinct files: no repetition for a page cache or a copy check to favour
    kinds = {(t["gray"], t["subsampling"], t["orientation"] != "1") for t in traits}
    assert {("1", "none"), ("0", "4:4:4"), ("0", "4:2:0")} <= {k[:2] for k in kinds}
    assert any(rotated for *_, rotated in kinds)
    assert ensure_mixed_photos(root, COUNT) == root  # done once: the stamp is read back


def test_example_gen_decodes_mixed_files_as_pillow_upright_rgb(tmp_path: Path) -> None:
    root = ensure_mixed_photos(tmp_path / "mixed", COUNT)
    rules = ImageRules(10**9, "rgb", (224, 224))
    for path in sorted((root / "img").iterdir()):
        with Image.open(path) as image:
            expected = ImageOps.exif_transpose(image).convert("RGB").resize((224, 224), Image.Resampling.BILINEAR)
        np.testing.assert_array_equal(decode(path.read_bytes(), rules), np.asarray(expected))


def test_suite_picks_the_photo_set(tmp_path: Path) -> None:
    args = argparse.Namespace(photo_set="mixed", photo_count=None)
    root, count = photos_suite._data_root(args, tmp_path, 30)
    assert (root.name, count) == ("photos-mixed-30", 30) and (root / "traits.csv").is_file()

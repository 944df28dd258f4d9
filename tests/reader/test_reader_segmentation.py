"""The tf.data reader on a resized segmentation set: masks keep their class ids, images Pillow's pixels."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers_images import random_pixels, write_csv, write_palette_mask, write_png
from helpers_reader import collect
from shardflow.core.manifest import read_manifest
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

SEG_SIZE = (16, 13)  # resize target (H, W), an up-scale by a non-integer factor
SEG_CLASSES = np.array([0, 1, 2, 5], dtype=np.uint8)


@pytest.fixture(scope="module")
def segmentation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """16 RGB images with palette masks of class ids {0, 1, 2, 5}, hash-split, resized, masks stored as PNG."""
    root = tmp_path_factory.mktemp("seg")
    rng = np.random.default_rng(11)
    rows = []
    for i in range(16):
        write_png(root / f"img/{i}.png", random_pixels(rng, (12, 10, 3)))
        write_palette_mask(root / f"msk/{i}.png", rng.choice(SEG_CLASSES, size=(12, 10)))
        rows.append([f"img/{i}.png", f"msk/{i}.png", str(100 + i)])
    write_csv(root / "all.csv", ["img", "msk", "case_id"], rows)
    out = tmp_path_factory.mktemp("seg_out") / "out"
    run(ExampleGenConfig(indexes=(IndexSpec(str(root / "all.csv")),), data_root=str(root), output=str(out),
                         split_weights=(("train", 1), ("eval", 1)), resize=(("*", SEG_SIZE),),
                         storage=(("msk", "png"),), rows_per_chunk=4))
    return root, out


def test_segmentation_resize_keeps_mask_class_ids(segmentation: tuple[Path, Path]) -> None:
    root, out = segmentation
    manifest = read_manifest(out)
    assert manifest.features["msk"].role == "mask" and manifest.features["msk"].encoding == "png"
    height, width = SEG_SIZE
    seen = 0
    for split in ("train", "eval"):
        got = collect(build_stream(out, split, StreamOptions(batch_size=3)))
        assert got["img"].shape[1:] == (height, width, 3) and got["msk"].shape[1:] == (height, width, 1)
        assert set(np.unique(got["msk"])) <= set(SEG_CLASSES.tolist())
        for img, msk, case in zip(got["img"], got["msk"], got["case_id"]):
            i = int(case) - 100
            with Image.open(root / f"msk/{i}.png") as source:
                expected_mask = np.asarray(source.resize((width, height), Image.Resampling.NEAREST))
            with Image.open(root / f"img/{i}.png") as source:
                expected_img = np.asarray(source.resize((width, height), Image.Resampling.BILINEAR))
            np.testing.assert_array_equal(msk[:, :, 0], expected_mask, err_msg=f"mask {i}")
            np.testing.assert_array_equal(img, expected_img, err_msg=f"image {i}")
            seen += 1
    assert seen == 16

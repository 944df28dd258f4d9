"""Letterboxing a box index's images (issue 65, `--box-resize letterbox`, the default): the geometry is
tf.image.resize_with_pad's, every stored box is its object's pixel extent moved into the padded frame, the
padding is 0, and `--box-resize stretch` keeps today's boxes. Runs ExampleGen on demo_boxes' mixed set (any
size and aspect, gray and EXIF-turned JPEGs), whose scenes give each object's pixels before encoding.
"""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shardflow.cli import main as shardflow_main
from shardflow.core.box_schema import BBOX
from shardflow.core.letterbox import letterbox_layout
from shardflow.core.manifest import read_manifest
from shardflow.core.example_rows import read_example_rows
from shardflow.core.tfrecord import iter_records
from shardflow.demo_boxes import scenes, write_boxes
from shardflow.example_gen.images import ImageRules, decode

COUNT, SEED, SIZE = 24, 5, (64, 64)


def _resize_with_pad_window(source: tuple[int, int], target: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the pixels tf.image.resize_with_pad writes: read from its output."""
    import tensorflow as tf

    written = tf.image.resize_with_pad(tf.ones([*source, 1]), *target, method="nearest").numpy()[..., 0] > 0
    rows, cols = np.nonzero(written.any(axis=1))[0], np.nonzero(written.any(axis=0))[0]
    return int(rows[0]), int(cols[0]), int(rows[-1] - rows[0] + 1), int(cols[-1] - cols[0] + 1)


@pytest.mark.unit
def test_the_layout_is_resize_with_pads_own() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        source = (int(rng.integers(1, 300)), int(rng.integers(1, 300)))
        target = (int(rng.integers(8, 200)), int(rng.integers(8, 200)))
        layout = letterbox_layout(source, target)
        if min(layout.height, layout.width) > 0:  # resize_with_pad fails on a side of 0 pixels: ExampleGen rejects it
            assert tuple(layout) == _resize_with_pad_window(source, target), (source, target)


@pytest.mark.unit
def test_a_letterboxed_image_is_its_resize_in_the_window_and_zero_around() -> None:
    pixels = np.random.default_rng(1).integers(1, 256, (30, 90, 3), dtype=np.uint8)  # no zero inside
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    stored = decode(out.getvalue(), ImageRules(10**6, resize=(40, 40), letterbox=True))
    top, left, height, width = letterbox_layout((30, 90), (40, 40))
    assert (top, left, height, width) == (13, 0, 13, 40)
    assert stored.shape == (40, 40, 3) and not stored[:top].any() and not stored[top + height:].any()
    expected = np.asarray(Image.fromarray(pixels).resize((width, height), Image.Resampling.BILINEAR))
    assert np.array_equal(stored[top:top + height], expected)
    stretched = decode(out.getvalue(), ImageRules(10**6, resize=(40, 40)))
    assert stretched[:top].all()  # the stretch fills the frame


def _run(root: Path, out: Path, *extra: str) -> dict:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = shardflow_main(["example-gen", "--index", f"train={root / 'train.csv'}", "--index",
                               f"eval={root / 'eval.csv'}", "--data-root", str(root), "--output", str(out),
                               "--resize", f"{SIZE[0]}x{SIZE[1]}", "--channels", "rgb", "--storage", "png",
                               "--near-duplicates", "off", "--progress-seconds", "600", *extra])
    assert code == 0, printed.getvalue()
    return json.loads((out / "manifest.json").read_text())


def _stored(out: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """path → (stored pixels, boxes [K, 4]) of every example of both splits."""
    import tensorflow as tf

    manifest, found = read_manifest(out), {}
    for split in ("train", "eval"):
        paths = read_example_rows(str(out), manifest, split).paths
        records = [r for shard in manifest.splits[split].shards for r in iter_records(open(out / shard.path, "rb"))]
        for path, record in zip(paths, records):
            feature = tf.train.Example.FromString(record).features.feature
            image = np.asarray(Image.open(io.BytesIO(feature["image"].bytes_list.value[0])))
            found[path] = image, np.stack([np.asarray(feature[n].float_list.value) for n in BBOX], -1).reshape(-1, 4)
    return found


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("mixed")
    write_boxes(root, count=COUNT, seed=SEED, mixed=True)
    return {"scenes": list(scenes(COUNT, seed=SEED, mixed=True)), "root": root,
            "letterbox": _run(root, root / "letterbox"), "stretch": _run(root, root / "stretch", "--box-resize", "stretch")}


def _extents(scene) -> np.ndarray:
    """The scene's objects' outer pixel edges (ymin, xmin, ymax, xmax), from their masks."""
    boxes = []
    for shape in scene.shapes:
        rows, cols = np.nonzero(shape.visible.any(axis=1))[0], np.nonzero(shape.visible.any(axis=0))[0]
        boxes.append([rows[0], cols[0], rows[-1] + 1, cols[-1] + 1])
    return np.asarray(boxes, np.float64).reshape(-1, 4)


@pytest.mark.pipeline
def test_letterboxed_boxes_are_their_objects_moved_into_the_padded_frame(mixed: dict) -> None:
    ops = mixed["letterbox"]["ingest_ops"]["image"]
    assert (ops["resize_mode"], ops["pad"], ops["resize"]) == ("letterbox", 0, list(SIZE))
    stored = _stored(mixed["root"] / "letterbox")
    assert {s.orientation for s in mixed["scenes"]} > {1} and any(s.gray for s in mixed["scenes"])
    for scene in mixed["scenes"]:
        image, boxes = stored[scene.name]
        height, width = scene.image.shape[:2]  # upright
        top, left, inner_h, inner_w = _resize_with_pad_window((height, width), SIZE)
        scale = np.array([inner_h / height, inner_w / width] * 2)
        expected = (_extents(scene) * scale + [top, left, top, left]) / np.array([*SIZE, *SIZE])
        np.testing.assert_allclose(boxes, expected, atol=1e-6, err_msg=scene.name)
        assert not image[:top].any() and not image[top + inner_h:].any(), scene.name  # padding: exactly 0
        assert not image[:, :left].any() and not image[:, left + inner_w:].any(), scene.name
        for shape, box in zip(scene.shapes, boxes):  # an object's colour is found where its box says
            y0, x0, y1, x1 = np.round(box * np.array([*SIZE, *SIZE])).astype(int)
            centre = image[(y0 + y1) // 2, (x0 + x1) // 2].astype(int)
            if shape.label == "square" and min(y1 - y0, x1 - x0) >= 4:
                assert np.abs(centre - shape.colour).max() < 60, scene.name


@pytest.mark.pipeline
def test_stretched_boxes_are_the_sources_normalised_boxes(mixed: dict) -> None:
    assert mixed["stretch"]["ingest_ops"]["image"]["resize_mode"] == "stretch"
    stored = _stored(mixed["root"] / "stretch")
    for scene in mixed["scenes"]:
        image, boxes = stored[scene.name]
        height, width = scene.image.shape[:2]
        np.testing.assert_allclose(boxes, _extents(scene) / [height, width, height, width], atol=1e-6)
        assert image.shape[:2] == SIZE and image[0].any() and image[-1].any()


@pytest.mark.unit
def test_an_image_too_narrow_to_keep_a_pixel_is_rejected_with_the_fix() -> None:
    from shardflow.example_gen.data_root import BadCell

    out = io.BytesIO()
    Image.new("RGB", (200, 1), (9, 9, 9)).save(out, "PNG")  # 1 px tall: 0.32 px once fitted into 64 x 64
    with pytest.raises(BadCell) as raised:
        decode(out.getvalue(), ImageRules(10**6, resize=(64, 64), letterbox=True))
    assert raised.value.code == "too_narrow_to_letterbox" and "--box-resize stretch" in raised.value.reason
    assert decode(out.getvalue(), ImageRules(10**6, resize=(64, 64))).shape == (64, 64, 3)  # a stretch keeps it

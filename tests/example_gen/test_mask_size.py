"""Masks are checked against their image's size as the files are (EXIF orientation applied), before
any resize: a mask saved at half its image's size is rejected with or without --resize, on every
decode path (fast PNG, Pillow PNG, TurboJPEG with a DCT downscale, Pillow's `draft` for rotated
JPEGs) and in every local running mode. Unit tests on `decode_sized` and `RowEncoder`, then real
`shardflow example-gen` runs on Pillow-written files.
"""
from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers_images import exif_with_orientation, png_file_bytes, write_csv
from shardflow.cli import main as shardflow_main
from shardflow.core.tfrecord import iter_records
from shardflow.example_gen.columns import ColumnSpec
from shardflow.example_gen.csv_index import Record
from shardflow.example_gen.images import ImageRules, decode_sized
from shardflow.example_gen.rows import Reject, RowEncoder
from shardflow.example_gen.splitting import SplitAssigner

H, W = 96, 48  # every good image, as viewed (EXIF orientation applied)
RESIZE = "8x4"  # 96 // (3 * 8) = 4: JPEGs are DCT-downscaled by 4 while decoding


def _saved(pixels: np.ndarray, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format=fmt, **options)
    return out.getvalue()


def _photo(seed: int, height: int, width: int) -> np.ndarray:
    """Smooth colour (JPEG keeps it close), different per seed."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([(y * 2 + seed * 20) % 256, (x * 3 + seed * 7) % 256, (x + y + seed) % 256], -1).astype(np.uint8)


def _mask(seed: int, height: int, width: int) -> bytes:
    ids = np.random.default_rng(seed).integers(0, 3, (height, width), dtype=np.uint8)  # distinct per seed
    return _saved(ids, "PNG")


def _jpeg(seed: int, stored_h: int, stored_w: int, orientation: int = 1) -> bytes:
    options = {"exif": exif_with_orientation(orientation)} if orientation != 1 else {}
    return _saved(_photo(seed, stored_h, stored_w), "JPEG", quality=95, **options)


# ------------------------------------------------------------------ decode_sized on every path

@pytest.mark.parametrize("resize", [None, (8, 4)])
def test_source_size_on_every_decode_path(resize: tuple[int, int] | None) -> None:
    rules = ImageRules(max_pixels=1 << 20, resize=resize)
    files = {
        "fast png": _saved(_photo(0, H, W), "PNG"),
        "png rotated by exif": _saved(_photo(0, W, H), "PNG", exif=exif_with_orientation(6)),
        "16-bit png": png_file_bytes(np.full((H, W, 3), 40000, np.uint16), 16, 2),
        "jpeg (turbo)": _jpeg(0, H, W),
        "jpeg rotated (draft)": _jpeg(0, W, H, orientation=6),
        "gray jpeg": _saved(_photo(0, H, W)[:, :, 0], "JPEG"),
    }
    for name, data in files.items():
        image, source = decode_sized(data, rules)
        assert source == (H, W), name
        size = np.asarray(image).shape[:2]
        assert size == (resize or (H, W)), name


def test_keep_exif_orientation_reports_the_stored_size() -> None:
    _, source = decode_sized(_jpeg(0, W, H, orientation=6), ImageRules(1 << 20, resize=(8, 4), exif_transpose=False))
    assert source == (W, H)


# ------------------------------------------------------------------ RowEncoder: a mask column before the image

def test_mask_column_before_its_image_is_checked(tmp_path: Path) -> None:
    (tmp_path / "i.jpg").write_bytes(_jpeg(1, H, W))
    (tmp_path / "good.png").write_bytes(_mask(1, H, W))
    (tmp_path / "half.png").write_bytes(_mask(1, H // 2, W // 2))
    size = (8, 4)
    mask = ColumnSpec("mask", 0, "mask", "uint8", (*size, 1), "raw", ImageRules(1 << 20, resize=size, nearest=True))
    label = ColumnSpec("label", 1, "label", "int64")
    image = ColumnSpec("image", 2, "image", "uint8", (*size, 3), "raw", ImageRules(1 << 20, resize=size))
    encoder = RowEncoder([mask, label, image], str(tmp_path), SplitAssigner((("train", 1),), (1,)))
    assert not isinstance(encoder.encode(Record(1, ["good.png", "3", "i.jpg"]), "train"), Reject)
    reject = encoder.encode(Record(2, ["half.png", "3", "i.jpg"]), "train")
    assert isinstance(reject, Reject) and (reject.code, reject.column) == ("mask_shape_mismatch", "mask")
    assert "mask 48x24 differs from its image 96x48" in reject.reason


# ------------------------------------------------------------------ end to end

def _write_data(root: Path) -> tuple[Path, dict[int, str], dict[int, str]]:
    """The index, and the expected reject code by row without and with --resize."""
    files: list[tuple[str, bytes, str, bytes]] = []
    for i in range(6):  # good rows first: the columns' shapes come from the majority of sampled rows
        files.append((f"p{i}.png", _saved(_photo(i, H, W), "PNG"), f"m{i}.png", _mask(i, H, W)))
    files.append(("j0.jpg", _jpeg(10, H, W), "mj0.png", _mask(10, H, W)))
    files.append(("r0.jpg", _jpeg(11, W, H, orientation=6), "mr0.png", _mask(11, H, W)))  # rotated, mask as viewed
    bad = {  # row → (code without --resize, code with it)
        9: ("half_png.png", _saved(_photo(20, H, W), "PNG"), "h1.png", _mask(20, H // 2, W // 2)),
        10: ("half_jpg.jpg", _jpeg(21, H, W), "h2.png", _mask(21, H // 2, W // 2)),
        11: ("half_rot.jpg", _jpeg(22, W, H, orientation=6), "h3.png", _mask(22, H // 2, W // 2)),
        12: ("stored_rot.jpg", _jpeg(23, W, H, orientation=6), "h4.png", _mask(23, W, H)),  # mask as stored
        13: ("short.png", _saved(_photo(24, 64, W), "PNG"), "h5.png", _mask(24, 64, W)),  # sizes agree
    }
    files += list(bad.values())
    for image, image_data, mask, mask_data in files:
        (root / image).write_bytes(image_data)
        (root / mask).write_bytes(mask_data)
    index = write_csv(root / "index.csv", ["image", "mask", "label"],
                      [[image, mask, n % 3] for n, (image, _, mask, _) in enumerate(files)])
    plain = {row: "mask_shape_mismatch" for row in (9, 10, 11, 12)}
    return index, {**plain, 13: "wrong_shape"}, plain


def _run(root: Path, index: Path, out: Path, *extra: str) -> dict:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = shardflow_main(["example-gen", "--index", f"train={index}", "--data-root", str(root),
                               "--output", str(out), "--rows-per-chunk", "3", "--progress-seconds", "600",
                               "--max-reject-fraction", "1.0", *extra])
    assert code == 0, printed.getvalue()
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    return {"manifest": json.loads((out / "manifest.json").read_text()), "rejects": rejects, "out": out}


RUNS = {
    "no_resize": (),
    "resize": ("--resize", RESIZE, "--direct_running_mode=in_memory"),
    "resize_threads": ("--resize", RESIZE, "--direct_running_mode=multi_threading", "--direct_num_workers=2"),
    "resize_processes": ("--resize", RESIZE, "--direct_running_mode=multi_processing", "--direct_num_workers=2"),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("mask_size")
    index, plain, resized = _write_data(root)
    return {"root": root, "index": index, "expected": {"no_resize": plain, "resize": resized}}


@pytest.fixture(scope="module", params=list(RUNS))
def run(request: pytest.FixtureRequest, data: dict) -> dict:
    result = _run(data["root"], data["index"], data["root"] / request.param, *RUNS[request.param])
    kind = "no_resize" if request.param == "no_resize" else "resize"
    return {**result, "name": request.param, "expected": data["expected"][kind], "index": data["index"]}


def test_half_size_and_unoriented_masks_rejected(run: dict) -> None:
    got = {r["row"]: r for r in run["rejects"]}
    assert {row: r["code"] for row, r in got.items()} == run["expected"], run["name"]
    for row in (9, 10, 11):
        reason = got[row]["reason"]
        assert reason == ("mask 48x24 differs from its image 96x48 (column 'image', after EXIF orientation); "
                          "masks must be saved at their image's size"), reason
        assert got[row]["column"] == "mask"
    assert "mask 48x96 differs from its image 96x48" in got[12]["reason"]


def test_wrong_shape_suggests_resize(run: dict) -> None:
    wrong = [r["reason"] for r in run["rejects"] if r["code"] == "wrong_shape"]
    if run["name"] != "no_resize":
        assert not wrong  # with --resize every image fits
        return
    (reason,) = wrong
    assert "(64, 48, 3)" in reason and "(96, 48, 3)" in reason and "--resize HxW" in reason, reason


def test_counts_reconcile(run: dict) -> None:
    manifest, rejects = run["manifest"], run["rejects"]
    asked = [a.partition("=")[2] for a in RUNS[run["name"]] if a.startswith("--direct_running_mode=")]
    expected = f"FnApiRunner({asked[0]}," if asked else "local process pool"
    assert expected in manifest["runner"], manifest["runner"]
    rows = len(run["index"].read_text().splitlines()) - 1
    assert manifest["rows"] == rows == 13
    assert manifest["accepted"] + manifest["rejected"] == rows
    assert manifest["rejected"] == len(rejects) == len(run["expected"])
    assert manifest["accepted"] == manifest["splits"]["train"]["num_examples"]
    assert manifest["rejected_by_reason"] == dict(Counter(r["code"] for r in rejects))


def test_rotated_jpeg_with_oriented_mask_accepted(run: dict) -> None:
    import tensorflow as tf

    shape = [8, 4] if run["name"] != "no_resize" else [H, W]
    features = run["manifest"]["features"]
    assert (features["image"]["shape"], features["mask"]["shape"]) == ([*shape, 3], [*shape, 1])
    records = []
    for shard in run["manifest"]["splits"]["train"]["shards"]:
        with open(run["out"] / shard["path"], "rb") as stream:
            records += [tf.train.Example.FromString(r).features.feature for r in iter_records(stream)]
    masks = {bytes(r["mask"].bytes_list.value[0]) for r in records}
    with Image.open(run["out"].parent / "mr0.png") as mask:  # the rotated photo's mask, as viewed
        expected = mask.resize((shape[1], shape[0]), Image.Resampling.NEAREST) if shape != [H, W] else mask.copy()
    assert np.asarray(expected).tobytes() in masks

"""Image quirks: low-bit gray masks, EXIF orientation, 16-bit colour PNGs, --max-pixels above
Pillow's own limit. Unit tests on `decode` with exact pixels, and one end-to-end run of
`shardflow example-gen` (plus one with --keep-exif-orientation) that reads the shards back.
"""
from __future__ import annotations

import contextlib
import io
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from helpers_images import exif_with_orientation, png_file_bytes, png_from_chunks, write_csv
from shardflow.cli import main as shardflow_main
from shardflow.core.tfrecord import iter_records
from shardflow.example_gen.data_root import BadCell
from shardflow.example_gen.images import ImageRules, decode, decode_image, encode

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

IMAGE = ImageRules(max_pixels=10_000)
MASK = ImageRules(max_pixels=10_000, nearest=True)  # what columns.py gives a mask column


def _saved(pixels: np.ndarray, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format=fmt, **options)
    return out.getvalue()


def test_hand_written_pngs_match_pillow_where_pillow_reads_them() -> None:
    """The helper's own check: its filters and packing give Pillow's pixels (8-bit RGB, 4-bit gray)."""
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (7, 5, 3), dtype=np.uint8)
    with Image.open(io.BytesIO(png_file_bytes(rgb, 8, 2))) as image:
        assert np.array_equal(np.asarray(image), rgb)
    gray4 = rng.integers(0, 16, (6, 7, 1))
    with Image.open(io.BytesIO(png_file_bytes(gray4, 4, 0))) as image:
        assert np.array_equal(np.asarray(image), gray4[:, :, 0] * 17)


# ------------------------------------------------------------------ low-bit gray masks

@pytest.mark.parametrize("bits", [1, 2, 4])
def test_low_bit_gray_masks_keep_their_class_ids(bits: int) -> None:
    rng = np.random.default_rng(bits)
    ids = rng.integers(0, 2 ** bits, (6, 7, 1))  # odd width: rows end inside a byte
    ids[0, 0, 0], ids[0, 1, 0] = 0, 2 ** bits - 1  # both ends of the range present
    data = png_file_bytes(ids, bits, 0)
    assert np.array_equal(decode(data, MASK), ids.astype(np.uint8))
    assert np.array_equal(decode(data, IMAGE), ids.astype(np.uint8) * (255 // (2 ** bits - 1)))  # Pillow's scale
    resized = decode(data, ImageRules(10_000, resize=(12, 14), nearest=True))
    assert np.array_equal(resized, ids.repeat(2, axis=0).repeat(2, axis=1).astype(np.uint8))


# ------------------------------------------------------------------ EXIF orientation

def test_exif_orientation_is_applied_by_default_and_kept_raw_on_request() -> None:
    raw = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3) * 2
    keep = ImageRules(10_000, exif_transpose=False)
    png = _saved(raw, "PNG", exif=exif_with_orientation(6))  # lossless: exact expected pixels
    assert np.array_equal(decode(png, IMAGE), np.rot90(raw, -1))  # 6: turned 90 degrees clockwise to view
    assert np.array_equal(decode(png, keep), raw)
    jpeg = _saved(raw, "JPEG", quality=95, exif=exif_with_orientation(6))
    with Image.open(io.BytesIO(jpeg)) as image:
        upright = np.asarray(ImageOps.exif_transpose(image))
        stored = np.asarray(image)
    assert upright.shape == (6, 4, 3) and stored.shape == (4, 6, 3)
    assert np.array_equal(decode(jpeg, IMAGE), upright)
    assert np.array_equal(decode(jpeg, keep), stored)


# ------------------------------------------------------------------ 16-bit colour

@pytest.mark.parametrize("color_type, channels", [(2, 3), (6, 4)])
def test_16bit_colour_pngs_keep_16_bits(color_type: int, channels: int) -> None:
    rng = np.random.default_rng(color_type)
    pixels = rng.integers(0, 65536, (7, 6, channels), dtype=np.uint16)
    pixels[0, 0] = 0x00FF  # a low byte only: truncation to the high byte would give 0
    data = png_file_bytes(pixels, 16, color_type)
    got = decode(data, IMAGE)
    assert got.dtype == np.uint16 and np.array_equal(got, pixels)
    assert encode(got, "raw") == pixels.astype("<u2").tobytes()  # little-endian, like 16-bit gray
    assert np.array_equal(decode(encode(got, "png"), IMAGE), pixels)
    assert np.array_equal(decode(data, ImageRules(10_000, channels="rgb")), pixels[:, :, :3])
    weighted = pixels[:, :, :3].astype(np.uint64) @ np.array([19595, 38470, 7471], np.uint64)
    gray = decode(data, ImageRules(10_000, channels="gray"))
    assert gray.dtype == np.uint16 and np.array_equal(gray[:, :, 0], (weighted + 0x8000) >> 16)
    resized = decode(data, ImageRules(10_000, resize=(14, 12), nearest=True))
    assert np.array_equal(resized, pixels.repeat(2, axis=0).repeat(2, axis=1))


def test_16bit_gray_alpha_and_gray_to_rgb_keep_16_bits() -> None:
    pixels = np.random.default_rng(4).integers(0, 65536, (5, 6, 2), dtype=np.uint16)
    got = decode(png_file_bytes(pixels, 16, 4), IMAGE)
    assert got.dtype == np.uint16 and np.array_equal(got, pixels[:, :, :1])  # alpha dropped, as for 8-bit
    as_rgb = decode(png_file_bytes(pixels[:, :, :1], 16, 0), ImageRules(10_000, channels="rgb"))
    assert as_rgb.dtype == np.uint16 and np.array_equal(as_rgb, pixels[:, :, [0, 0, 0]])  # not clipped to 255


# ------------------------------------------------------------------ --max-pixels above Pillow's limit

def _huge_png(width: int, extra_chunk: bool) -> bytes:
    """A 1-row gray PNG of `width` pixels, all 0 but the last (200): about 180 KB compressed."""
    packer, parts, block = zlib.compressobj(9), [], bytes(1 << 22)
    parts.append(packer.compress(b"\x00"))  # the row's filter byte
    for start in range(0, width - 1, len(block)):
        parts.append(packer.compress(block[:min(len(block), width - 1 - start)]))
    idat = b"".join(parts) + packer.compress(b"\xc8") + packer.flush()
    text = [(b"tEXt", b"k\x00v")] if extra_chunk else []  # any other chunk: the fast path declines
    return png_from_chunks(width, 1, 8, 0, [*text, (b"IDAT", idat)])


@pytest.mark.parametrize("extra_chunk", [False, True], ids=["fast_path", "pillow_path"])
def test_max_pixels_can_be_set_above_pillows_hard_limit(extra_chunk: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real image of 178,956,971 pixels (one more than twice Pillow's default limit)."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)  # restored after the test
    width = 2 * Image.MAX_IMAGE_PIXELS + 1
    data = _huge_png(width, extra_chunk)
    assert len(data) < 1_000_000
    with pytest.raises(BadCell) as err:
        decode_image(data, ImageRules(max_pixels=width - 1))
    assert err.value.code == "too_many_pixels"
    image = decode_image(data, ImageRules(max_pixels=200_000_000))
    assert (image.mode, image.size) == ("L", (width, 1))
    assert (image.getpixel((0, 0)), image.getpixel((width - 2, 0)), image.getpixel((width - 1, 0))) == (0, 0, 200)
    del image


# ------------------------------------------------------------------ end to end

def _write_data(root: Path) -> dict:
    rng = np.random.default_rng(13)
    photos = [rng.integers(0, 256, (4, 6, 3), dtype=np.uint8) for _ in range(3)]
    masks = [rng.integers(0, 4, (6, 4, 1)) for _ in range(3)]  # sized as the upright photo
    deeps = [rng.integers(0, 65536, (3, 5, 3), dtype=np.uint16) for _ in range(3)]
    for i in range(3):
        (root / f"p{i}.jpg").write_bytes(_saved(photos[i], "JPEG", quality=95, exif=exif_with_orientation(6)))
        (root / f"m{i}.png").write_bytes(png_file_bytes(masks[i], 2, 0))
        (root / f"d{i}.png").write_bytes(png_file_bytes(deeps[i], 16, 2))
    write_csv(root / "all.csv", ["photo", "mask", "deep", "label"],
              [[f"p{i}.jpg", f"m{i}.png", f"d{i}.png", i] for i in range(3)])
    write_csv(root / "photos.csv", ["photo", "label"], [[f"p{i}.jpg", i] for i in range(3)])
    return {"masks": masks, "deeps": deeps}


def _run(root: Path, index: str, out: Path, *extra: str) -> tuple[dict, list]:
    import tensorflow as tf

    with contextlib.redirect_stdout(io.StringIO()):
        code = shardflow_main(["example-gen", "--index", f"train={root / index}", "--data-root", str(root),
                               "--output", str(out), "--progress-seconds", "600", *extra])
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    records = []
    for shard in manifest["splits"]["train"]["shards"]:
        with open(out / shard["path"], "rb") as stream:
            records += [tf.train.Example.FromString(r).features.feature for r in iter_records(stream)]
    return manifest, sorted(records, key=lambda f: f["label"].int64_list.value[0])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("image_quirks")
    expected = _write_data(root)
    default = _run(root, "all.csv", root / "out", "--storage", "deep=png")
    kept = _run(root, "photos.csv", root / "out_raw", "--keep-exif-orientation")
    return {"root": root, "expected": expected, "default": default, "kept": kept}


def test_end_to_end_masks_orientation_and_16_bits(runs: dict) -> None:
    import tensorflow as tf

    manifest, records = runs["default"]
    features, ops = manifest["features"], manifest["ingest_ops"]
    assert (features["photo"]["shape"], features["mask"]["shape"]) == ([6, 4, 3], [6, 4, 1])
    assert (features["deep"]["dtype"], features["deep"]["shape"]) == ("uint16", [3, 5, 3])
    assert ops["photo"]["exif_orientation"] == ops["mask"]["exif_orientation"] == "applied"
    assert [r["label"].int64_list.value[0] for r in records] == [0, 1, 2]
    for i, record in enumerate(records):
        with Image.open(runs["root"] / f"p{i}.jpg") as image:
            upright = np.asarray(ImageOps.exif_transpose(image))
        photo = np.frombuffer(record["photo"].bytes_list.value[0], np.uint8).reshape(6, 4, 3)
        assert np.array_equal(photo, upright)
        mask = np.frombuffer(record["mask"].bytes_list.value[0], np.uint8).reshape(6, 4, 1)
        assert np.array_equal(mask, runs["expected"]["masks"][i])
        deep = tf.io.decode_png(record["deep"].bytes_list.value[0], dtype=tf.uint16).numpy()  # the Trainer's decode
        assert np.array_equal(deep, runs["expected"]["deeps"][i])


def test_end_to_end_keep_exif_orientation(runs: dict) -> None:
    manifest, records = runs["kept"]
    assert manifest["features"]["photo"]["shape"] == [4, 6, 3]
    assert manifest["ingest_ops"]["photo"]["exif_orientation"].startswith("ignored")
    assert manifest["options"]["keep_exif_orientation"] is True
    for i, record in enumerate(records):
        with Image.open(runs["root"] / f"p{i}.jpg") as image:
            stored = np.asarray(image)
        photo = np.frombuffer(record["photo"].bytes_list.value[0], np.uint8).reshape(4, 6, 3)
        assert np.array_equal(photo, stored)

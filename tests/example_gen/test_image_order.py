"""EXIF-rotated JPEGs turned after their bilinear resize (images._resized): the pixels of turn-then-resize.

ExampleGen resizes a rotated photo as stored and turns the small result; these tests hold it to
`ImageOps.exif_transpose` followed by the resize, exactly, for every orientation, colour and gray,
shrinking and enlarging, with one side already at its target, and after a DCT downscale. Masks
(nearest neighbour) are still turned before their resize: turned after, flips move pixels.
"""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps
from sklearn.datasets import load_sample_images

from shardflow.example_gen.images import ImageRules, decode, decode_sized

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

MAX_PIXELS = 50_000_000
ORIENTATIONS = [2, 3, 4, 5, 6, 7, 8]
BILINEAR, NEAREST = Image.Resampling.BILINEAR, Image.Resampling.NEAREST


@pytest.fixture(scope="module")
def photo() -> Image.Image:
    return Image.fromarray(load_sample_images().images[1])  # flower.jpg, 640×427


def _rotated_jpeg(image: Image.Image, orientation: int, quality: int = 90) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality, exif=exif.tobytes())
    return out.getvalue()


def _upright(data: bytes, mode: str, draft_to: tuple[int, int] | None = None) -> Image.Image:
    """Pillow's decode (at a DCT scale when `draft_to` is given), turned by exif_transpose."""
    with Image.open(io.BytesIO(data)) as stored:
        if draft_to is not None:
            stored.draft(stored.mode, draft_to)
        return ImageOps.exif_transpose(stored).convert(mode)


@pytest.mark.parametrize("orientation", ORIENTATIONS)
@pytest.mark.parametrize("mode", ["RGB", "L"])
@pytest.mark.parametrize("stored_wh, target_hw", [
    ((331, 457), (224, 224)),  # shrink both sides
    ((120, 90), (200, 150)),  # enlarge both sides
    ((300, 250), (300, 140)),  # upright height already at its target (quarter turns): one pass only
    ((300, 250), (170, 250)),  # upright width already at its target
])
def test_turned_after_the_resize_gives_turn_then_resize_pixels(photo: Image.Image, mode: str, orientation: int,
                                                               stored_wh: tuple[int, int],
                                                               target_hw: tuple[int, int]) -> None:
    data = _rotated_jpeg(photo.convert(mode).crop((17, 9, 17 + stored_wh[0], 9 + stored_wh[1])), orientation)
    channels = "rgb" if mode == "RGB" else "gray"
    image, source_hw = decode_sized(data, ImageRules(MAX_PIXELS, channels=channels, resize=target_hw))
    upright = _upright(data, mode)
    expected = np.asarray(upright.resize((target_hw[1], target_hw[0]), BILINEAR))
    assert source_hw == (upright.height, upright.width)
    np.testing.assert_array_equal(np.asarray(image), expected)


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_a_large_rotated_photo_is_dct_scaled_then_resized_and_turned(photo: Image.Image, orientation: int) -> None:
    """1280×854 stored; 100×150 as viewed: libjpeg's 1/2 scale, then the resize, then the turn."""
    data = _rotated_jpeg(photo.resize((1280, 854), Image.Resampling.BICUBIC), orientation)
    target_hw = (150, 100) if orientation >= 5 else (100, 150)  # as viewed: a quarter turn swaps the sides
    pixels = decode(data, ImageRules(MAX_PIXELS, channels="rgb", resize=target_hw))
    upright = _upright(data, "RGB", draft_to=(640, 427))
    assert upright.size == ((427, 640) if orientation >= 5 else (640, 427))  # Pillow took the same 1/2 scale
    np.testing.assert_array_equal(pixels, np.asarray(upright.resize((target_hw[1], target_hw[0]), BILINEAR)))


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_quadrants_land_where_the_exif_orientation_puts_them(orientation: int) -> None:
    """Geometry without Pillow's exif_transpose as the reference: four flat quadrants, stored so that
    the orientation shows them upright, come out in place within 2 levels after the resize."""
    colours = np.array([[[250, 20, 20], [20, 250, 20]], [[20, 20, 250], [240, 240, 20]]], np.uint8)
    upright = np.repeat(np.repeat(colours, 64, axis=0), 96, axis=1)  # 128 × 192, four 64 × 96 blocks
    undo = {6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}  # the others undo themselves
    turn = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
            5: Image.Transpose.TRANSPOSE, 7: Image.Transpose.TRANSVERSE}
    stored = Image.fromarray(upright).transpose(undo.get(orientation) or turn[orientation])
    out = io.BytesIO()
    exif = Image.Exif()
    exif[0x0112] = orientation
    stored.save(out, format="JPEG", quality=95, subsampling=0, exif=exif.tobytes())
    pixels = decode(out.getvalue(), ImageRules(MAX_PIXELS, channels="rgb", resize=(32, 48)))
    assert pixels.shape == (32, 48, 3)
    for row in range(2):
        for column in range(2):  # each quadrant's centre, away from the blended edges
            block = pixels[row * 16 + 4: row * 16 + 12, column * 24 + 6: column * 24 + 18].astype(int)
            assert np.abs(block - colours[row, column].astype(int)).max() <= 2, (row, column)


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_a_rotated_jpeg_mask_is_turned_before_its_nearest_resize(orientation: int) -> None:
    """Class ids in a gray JPEG, halved by nearest neighbour: the pixels of turn-then-resize exactly
    (resized first, then flipped, the sampled columns or rows would move by one)."""
    ids = (np.random.default_rng(orientation).integers(0, 6, (30, 40)) * 40).astype(np.uint8)
    data = _rotated_jpeg(Image.fromarray(ids), orientation, quality=100)
    upright = _upright(data, "L")
    target_hw = (upright.height // 2, upright.width // 2)
    pixels = decode(data, ImageRules(MAX_PIXELS, resize=target_hw, nearest=True))
    expected = np.asarray(upright.resize((target_hw[1], target_hw[0]), NEAREST))
    np.testing.assert_array_equal(pixels[:, :, 0], expected)


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_without_a_resize_the_photo_is_turned_at_full_size(photo: Image.Image, orientation: int) -> None:
    data = _rotated_jpeg(photo.crop((0, 0, 123, 77)), orientation)
    np.testing.assert_array_equal(decode(data, ImageRules(MAX_PIXELS, channels="rgb")),
                                  np.asarray(_upright(data, "RGB")))

"""ExampleGen's JPEG decode on real photographs: TurboJPEG gives Pillow's pixels, DCT scaling only with a gap.

The photos are crops of scikit-learn's sample photographs, re-encoded as cameras and tools write them.
"""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps
from sklearn.datasets import load_sample_images

from shardflow.example_gen.data_root import BadCell
from shardflow.example_gen.images import ImageRules, decode, decode_sized
from shardflow.example_gen.jpeg_decode import DRAFT_GAP, decode_turbo, draft_scale

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

MAX_PIXELS = 50_000_000


@pytest.fixture(scope="module")
def photo() -> Image.Image:
    return Image.fromarray(load_sample_images().images[0])  # china.jpg, 640×427


def _jpeg(image: Image.Image, quality: int = 90, exif: bytes | None = None) -> bytes:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality, **({"exif": exif} if exif else {}))
    return out.getvalue()


def _pillow(data: bytes, mode: str) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert(mode))


@pytest.mark.parametrize("mode,channels", [("RGB", "rgb"), ("L", "gray"), ("L", "rgb")])
def test_turbo_decode_gives_pillows_pixels(photo: Image.Image, mode: str, channels: str) -> None:
    data = _jpeg(photo.convert(mode).crop((13, 7, 13 + 331, 7 + 289)))
    with Image.open(io.BytesIO(data)) as header:
        assert decode_turbo(data, header, 1) is not None  # the fast path is taken, not Pillow's
    pixels = decode(data, ImageRules(MAX_PIXELS, channels=channels))
    expected = _pillow(data, "RGB" if channels == "rgb" else "L")
    assert pixels.shape[:2] == (289, 331)
    np.testing.assert_array_equal(pixels, expected.reshape(pixels.shape))


def test_resize_without_room_for_a_gap_decodes_at_full_size(photo: Image.Image) -> None:
    data = _jpeg(photo.crop((0, 0, 420, 400)))
    assert draft_scale((420, 400), (224, 224)) == 1
    with Image.open(io.BytesIO(data)) as image:
        expected = np.asarray(image.convert("RGB").resize((224, 224), Image.Resampling.BILINEAR))
    np.testing.assert_array_equal(decode(data, ImageRules(MAX_PIXELS, channels="rgb", resize=(224, 224))), expected)


def test_large_reduction_decodes_at_a_dct_scale_then_resizes(photo: Image.Image) -> None:
    big = photo.resize((1280, 854), Image.Resampling.BICUBIC)  # a larger photo: 854 // (3·100) = 2
    data = _jpeg(big)
    assert draft_scale(big.size, (150, 100)) == 2
    fast = decode(data, ImageRules(MAX_PIXELS, channels="rgb", resize=(100, 150)))
    with Image.open(io.BytesIO(data)) as image:  # Pillow's own draft at the same scale: the same pixels
        image.draft("RGB", (640, 427))
        assert image.size == (640, 427)
        drafted = np.asarray(image.convert("RGB").resize((150, 100), Image.Resampling.BILINEAR))
    with Image.open(io.BytesIO(data)) as image:
        full = np.asarray(image.convert("RGB").resize((150, 100), Image.Resampling.BILINEAR))
    assert fast.shape == (100, 150, 3)
    np.testing.assert_array_equal(fast, drafted)
    # The documented tolerance against a full-size decode (jpeg_decode's docstring): the resize
    # after the DCT scale still reduces by DRAFT_GAP or more.
    difference = np.abs(fast.astype(int) - full.astype(int))
    assert DRAFT_GAP == 3 and difference.mean() < 0.5 and np.percentile(difference, 99) <= 2


def test_rotated_photo_is_turned_before_its_resize(photo: Image.Image) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # stored turned: viewers rotate it 90° clockwise
    big = photo.resize((1280, 854), Image.Resampling.BICUBIC)
    data = _jpeg(big, exif=exif.tobytes())
    pixels = decode(data, ImageRules(MAX_PIXELS, channels="rgb", resize=(150, 50)))  # portrait: DCT 1/2
    with Image.open(io.BytesIO(data)) as image:
        upright = np.asarray(image.convert("RGB").transpose(Image.Transpose.ROTATE_270)
                             .resize((50, 150), Image.Resampling.BILINEAR))
    assert pixels.shape == (150, 50, 3)
    assert np.abs(pixels.astype(int) - upright.astype(int)).mean() < 0.5


def test_truncated_photo_is_still_named_by_pillow(photo: Image.Image) -> None:
    data = _jpeg(photo)
    with pytest.raises(BadCell) as err:
        decode(data[: len(data) // 2], ImageRules(MAX_PIXELS, channels="rgb", resize=(224, 224)))
    assert err.value.code == "corrupt_image" and "truncated" in err.value.reason


@pytest.mark.parametrize("size", [(224, 224), (150, 50)])
def test_gray_photo_to_rgb_has_the_pixels_of_convert_then_resize(photo: Image.Image, size: tuple[int, int]) -> None:
    """Gray JPEGs are resized as gray and repeated into RGB after (a quarter of the work): the pixels
    of Pillow's convert("RGB") then bilinear resize, exactly."""
    data = _jpeg(photo.convert("L").crop((5, 11, 5 + 403, 11 + 317)))
    pixels = decode(data, ImageRules(MAX_PIXELS, channels="rgb", resize=size))
    with Image.open(io.BytesIO(data)) as image:
        expected = np.asarray(image.convert("RGB").resize((size[1], size[0]), Image.Resampling.BILINEAR))
    assert pixels.shape == (*size, 3)
    np.testing.assert_array_equal(pixels, expected)


@pytest.mark.parametrize("mode", ["RGB", "L"])
@pytest.mark.parametrize("orientation", [2, 3, 4, 5, 6, 7, 8])
def test_every_exif_orientation_gives_exif_transposes_pixels(photo: Image.Image, mode: str, orientation: int) -> None:
    """Rotated and flipped files, colour or gray (the gray resized before its RGB): Pillow's decode
    turned by `ImageOps.exif_transpose`, then resized, exactly; the size before the resize is the upright one."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = _jpeg(photo.convert(mode).crop((0, 0, 360, 300)), exif=exif.tobytes())
    image, source_hw = decode_sized(data, ImageRules(MAX_PIXELS, channels="rgb", resize=(224, 200)))
    with Image.open(io.BytesIO(data)) as stored:
        upright = ImageOps.exif_transpose(stored).convert("RGB")
    assert source_hw == (upright.height, upright.width)
    np.testing.assert_array_equal(np.asarray(image),
                                  np.asarray(upright.resize((200, 224), Image.Resampling.BILINEAR)))

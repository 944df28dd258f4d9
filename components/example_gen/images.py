"""One image's bytes checked and decoded: format and size checks, decode, convert, resize, encode.

Every failure raises `BadCell` (see data_root.py) with a short `code` and a readable reason.
Rules beyond Pillow's defaults: EXIF orientation is applied (unless the rules keep it raw); 1-, 2-
and 4-bit grayscale masks keep their class ids (Pillow scales them to 0-255); 16-bit colour PNGs
keep all 16 bits (Pillow keeps the high byte); the pixel limit is ours, not Pillow's.

>>> out = io.BytesIO(); Image.new("1", (3, 2), 1).save(out, "PNG")  # a 1-bit grayscale PNG
>>> decode(out.getvalue(), ImageRules(max_pixels=10, nearest=True))[0, :, 0].tolist()  # a mask
[1, 1, 1]
>>> decode(out.getvalue(), ImageRules(max_pixels=10))[0, :, 0].tolist()  # an image: Pillow's scale
[255, 255, 255]
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps

from .data_root import BadCell, too_many_pixels
from .jpeg_decode import decode_turbo, draft, draft_scale
from .letterbox_image import letterbox_content, letterboxed
from ..core.letterbox import PAD, letterbox_layout
from ..core.pixel_codec import PNG_MAGIC, encode_pixels, saved_image
from .png_codec import fast_png

JPEG_MAGIC = b"\xff\xd8\xff"
# PIL mode → (numpy dtype, channels) kept as they are; other modes are converted (see `_to_array`).
_NATIVE_MODES = {"L": ("uint8", 1), "RGB": ("uint8", 3), "RGBA": ("uint8", 4), "I;16": ("uint16", 1)}
# Low-bit grayscale PNG raw modes → the factor Pillow scales their values by (masks undo it).
_LOW_BIT_GRAY = {"1": 255, "L;2": 85, "L;4": 17}
# 16-bit colour PNGs: Pillow's 8-bit modes keep the high byte of each big-endian sample. A second
# pass of the same C decoder with the raw mode below reads the other bytes (see `_join16`).
_PNG16_SECOND_PASS = {"RGB;16B": "RGB;16L", "RGBA;16B": "RGBA;16L", "LA;16B": "RGBA"}
_EXIF_ORIENTATION = 0x0112
_T = Image.Transpose
# EXIF orientation → the transpose that shows the stored pixels upright (ImageOps.exif_transpose's).
_UPRIGHT = {2: _T.FLIP_LEFT_RIGHT, 3: _T.ROTATE_180, 4: _T.FLIP_TOP_BOTTOM, 5: _T.TRANSPOSE,
            6: _T.ROTATE_270, 7: _T.TRANSVERSE, 8: _T.ROTATE_90}
_QUARTER_TURNS = (5, 6, 7, 8)  # EXIF orientations that swap width and height


@dataclass(frozen=True)
class ImageRules:
    """What one image column accepts and how it is converted at ingest."""

    max_pixels: int
    channels: str | None = None  # "gray" | "rgb" | None (keep)
    resize: tuple[int, int] | None = None  # (H, W)
    nearest: bool = False  # masks: nearest-neighbour resize, palette indices and class ids kept
    exif_transpose: bool = True  # apply EXIF orientation as viewers do; False keeps the stored pixels
    letterbox: bool = False  # resize keeping the aspect, padded to H x W (core/letterbox.py); False stretches


def sniff_format(data: bytes) -> str:
    if data.startswith(PNG_MAGIC):
        return "PNG"
    if data.startswith(JPEG_MAGIC):
        return "JPEG"
    raise BadCell("not_an_image", "not a PNG or JPEG image")


def decode_image(data: bytes, rules: ImageRules) -> Image.Image | np.ndarray:
    """The decoded, converted and resized image, checked against the pixel limit first.

    A PIL image, or an HxWxC uint16 array for 16-bit colour, which no PIL mode holds.
    """
    return decode_sized(data, rules)[0]


def decode_sized(data: bytes, rules: ImageRules) -> tuple[Image.Image | np.ndarray, tuple[int, int]]:
    """`decode_image`, and the file's (H, W) before any resize or DCT downscale, EXIF orientation
    applied as the rules say: the size a mask must match (taken from the header on the JPEG paths,
    which may decode fewer pixels than the file holds)."""
    image_format = sniff_format(data)
    _allow_pixels(rules.max_pixels)
    fast = fast_png(data, rules.max_pixels) if image_format == "PNG" else None
    if fast is not None:
        return _finish(fast, rules), (fast.size[1], fast.size[0])
    image, rawmode, source, turn = _load(data, image_format, rules)
    if rawmode in _PNG16_SECOND_PASS:  # PNGs come turned (turn is 1)
        second, _, _, _ = _load(data, image_format, rules, _PNG16_SECOND_PASS[rawmode])
        return _finish16(_join16(rawmode, image, second), rules), source
    if rules.nearest and rawmode in _LOW_BIT_GRAY:  # a mask's class ids, not Pillow's 0-255 scale
        scale = _LOW_BIT_GRAY[rawmode]
        image = image.convert("L").point([value // scale for value in range(256)])
    return _finish(image, rules, turn), source


def _allow_pixels(max_pixels: int) -> None:
    """Raises Pillow's process-wide bomb limit to the user's --max-pixels (never lowers it).

    Our own check, made before any pixel is decoded, is the limit; Pillow's would otherwise call
    images between its limit and --max-pixels corrupt. Only ever raised: safe across threads.
    """
    if Image.MAX_IMAGE_PIXELS is not None and Image.MAX_IMAGE_PIXELS < max_pixels:
        Image.MAX_IMAGE_PIXELS = max_pixels




def _load(data: bytes, image_format: str, rules: ImageRules,
          rawmode: str | None = None) -> tuple[Image.Image, str | None, tuple[int, int], int]:
    """Pillow's full decode (EXIF orientation applied if the rules say so), the file's raw mode, its
    oriented (H, W) before any downscale, and the EXIF orientation left for `_finish` to apply (1: none).

    The raw mode names the bit depth and colour type (`L;2`, `RGB;16B`); `rawmode` replaces it.
    """
    try:
        image = Image.open(io.BytesIO(data), formats=[image_format])
        width, height = image.size
        if width * height > rules.max_pixels:
            raise too_many_pixels(width, height, rules.max_pixels)
        file_rawmode = _rawmode(image.tile[0].args) if image_format == "PNG" and image.tile else None
        if rawmode is not None:  # PNG tiles' args are the raw mode alone
            image.tile = [tile._replace(args=rawmode) for tile in image.tile]
        turn = 1
        if image_format == "JPEG":
            image, source, turn = _load_jpeg(data, image, rules)
        else:
            image.load()
            if rules.exif_transpose and _orientation(image) != 1:
                image = ImageOps.exif_transpose(image)
            source = (image.size[1], image.size[0])  # PNGs are never downscaled while decoding
    except BadCell:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:  # above our own limit too
        raise BadCell("too_many_pixels", f"image exceeds the limit of {rules.max_pixels} pixels: {err}") from err
    except Exception as err:  # PIL raises many types for corrupt data
        detail = re.sub(r" at 0x[0-9a-f]+", "", str(err))  # PIL names a memory address: keep reasons stable
        raise BadCell("corrupt_image", f"corrupt or truncated image: {detail}") from err
    return image, file_rawmode, source, turn


def _load_jpeg(data: bytes, header: Image.Image,
               rules: ImageRules) -> tuple[Image.Image, tuple[int, int], int]:
    """A JPEG's pixels, DCT-downscaled when the resize allows (see jpeg_decode), the file's oriented
    (H, W), read from the header before any downscale, and the EXIF orientation still to apply.

    TurboJPEG decodes, Pillow takes what it declines. Before a bilinear resize the pixels stay as
    stored: `_resized` turns the small image after it (the same pixels, see there); otherwise
    (no resize, or a mask's nearest-neighbour one) they are turned here.
    """
    orientation = _orientation(header) if rules.exif_transpose else 1
    width, height = header.size  # `draft` below shrinks header.size: the file's size is taken first
    source = (width, height) if orientation in _QUARTER_TURNS else (height, width)
    target = None if rules.resize is None or rules.nearest else (rules.resize[1], rules.resize[0])
    if target is not None and rules.letterbox:  # the content's size: the rest is padding
        layout = letterbox_layout(source, rules.resize)  # type: ignore[arg-type]
        target = (max(layout.width, 1), max(layout.height, 1))
    if target is not None and orientation in _QUARTER_TURNS:  # the stored image is turned: so is the target
        target = (target[1], target[0])
    scale = draft_scale(header.size, target)
    decoded = decode_turbo(data, header, scale)
    if decoded is None:
        draft(header, scale)
        header.load()
        decoded = header
    if orientation == 1 or target is not None:
        return decoded, source, orientation
    return decoded.transpose(_UPRIGHT[orientation]), source, 1


def _orientation(image: Image.Image) -> int:
    """The EXIF orientation tag; 1 (as stored) when absent, unreadable or unknown, as viewers treat it."""
    try:
        orientation = int(image.getexif().get(_EXIF_ORIENTATION, 1))
    except Exception:  # noqa: BLE001  (malformed EXIF: the pixels are still good)
        return 1
    return orientation if orientation in _UPRIGHT else 1


def _rawmode(args: object) -> str | None:
    """The raw mode in a tile's decoder args: the args themselves (PNG) or their first item."""
    first = args[0] if isinstance(args, tuple) and args else args
    return first if isinstance(first, str) else None


def _join16(rawmode: str, first: Image.Image, second: Image.Image) -> np.ndarray:
    """The 16-bit samples from Pillow's two passes: high bytes from the first, low from the second.

    Gray+alpha (Pillow decodes it as RGBA): the second pass holds gray-high, gray-low, alpha-high,
    alpha-low; the gray is kept and alpha dropped, as for 8-bit gray+alpha.
    """
    low = np.asarray(second).astype(np.uint16)
    if rawmode == "LA;16B":
        return (low[:, :, 0] << 8 | low[:, :, 1])[:, :, None]
    high = np.asarray(first).astype(np.uint16)
    return high << 8 | low


def _finish(image: Image.Image, rules: ImageRules, turn: int = 1) -> Image.Image | np.ndarray:
    """Converted and resized as the rules say, then turned upright by the EXIF orientation `turn`."""
    if rules.channels == "rgb" and image.mode.startswith("I;16"):  # Pillow's RGB would clip it to 8 bits
        return _finish16(np.asarray(image).astype(np.uint16)[:, :, None], rules)
    if rules.channels == "rgb" and image.mode == "L":
        # Resized as gray, then repeated into RGB: the resize works on every band alike, so the
        # pixels are those of convert-then-resize, at a quarter of the resize's work (Pillow keeps
        # RGB as 4 bytes a pixel). Issue 46, 300-500 px gray JPEGs to 224-px RGB: a row's CPU 1.07× the
        # Pillow loop's before, 0.71-0.75× after (docs/example-gen.md, "Other photos").
        return _resized(image, rules, turn).convert("RGB")
    return _resized(_convert(image, rules), rules, turn)


def _resized(image: Image.Image, rules: ImageRules, turn: int = 1) -> Image.Image:
    """Resized to the rules' size as viewed after `turn` (an EXIF orientation), then turned.

    Turning the 224-px result, not the decoded photo (which lets TurboJPEG decode rotated files
    too), took a rotated 300-500 px photo's decode+resize from ~2,270 to ~1,950 µs CPU (issue 55).
    The pixels are exactly those of turn-then-resize: Pillow resizes width first, then height,
    rounding to 8 bits between; a quarter turn swaps the axes, so the stored height (the upright
    width) is resized first here. Its filter weights are mirror-symmetric, so flips commute with it
    (tests/example_gen/test_image_order.py checks both). Not for nearest neighbour: masks come turned.
    """
    if not rules.resize:
        return image if turn == 1 else image.transpose(_UPRIGHT[turn])
    if rules.letterbox:  # turned first: the padding is placed on the upright image
        return letterboxed(image if turn == 1 else image.transpose(_UPRIGHT[turn]), rules.resize)
    height, width = rules.resize
    resample = Image.Resampling.NEAREST if rules.nearest else Image.Resampling.BILINEAR
    if turn in _QUARTER_TURNS:
        height, width = width, height  # the stored image's target
        if image.height != height:  # the upright width first, as Pillow resizes the upright image
            image = image.resize((image.width, height), resample)
    if image.size != (width, height):
        image = image.resize((width, height), resample)
    return image if turn == 1 else image.transpose(_UPRIGHT[turn])


def _finish16(pixels: np.ndarray, rules: ImageRules) -> Image.Image | np.ndarray:
    """`_finish` for 16-bit samples: conversion and resize at 16 bits; one channel becomes I;16."""
    if rules.channels == "gray" and pixels.shape[2] >= 3:  # Pillow's L weights (ITU-R 601-2), at 16 bits
        weighted = pixels[:, :, :3].astype(np.uint64) @ np.array([19595, 38470, 7471], np.uint64)
        pixels = ((weighted + 0x8000) >> 16).astype(np.uint16)[:, :, None]
    elif rules.channels == "rgb" and pixels.shape[2] != 3:  # alpha dropped, or gray repeated
        pixels = pixels[:, :, :3] if pixels.shape[2] == 4 else np.repeat(pixels, 3, axis=2)
    if rules.resize and pixels.shape[:2] != rules.resize:
        resample = Image.Resampling.NEAREST if rules.nearest else Image.Resampling.BILINEAR
        top, left, height, width = letterbox_content(*pixels.shape[:2], rules.resize) if rules.letterbox else (
            0, 0, *rules.resize)
        planes = [np.asarray(Image.fromarray(pixels[:, :, c].astype(np.float32)).resize((width, height), resample))
                  for c in range(pixels.shape[2])]  # float32 holds every uint16 exactly
        pixels = np.clip(np.rint(np.stack(planes, axis=2)), 0, 65535).astype(np.uint16)
        if rules.letterbox:
            pixels = np.pad(pixels, ((top, rules.resize[0] - top - height), (left, rules.resize[1] - left - width),
                                     (0, 0)), constant_values=PAD)
    if pixels.shape[2] == 1:
        return Image.fromarray(np.ascontiguousarray(pixels[:, :, 0]))  # mode I;16, as 16-bit gray PNGs
    return np.ascontiguousarray(pixels)


def decode(data: bytes, rules: ImageRules) -> np.ndarray:
    """Decoded pixels as an HxWxC array, converted and resized as the rules say."""
    return _to_array(decode_image(data, rules))


def image_layout(image: Image.Image | np.ndarray) -> tuple[str, tuple[int, int, int]]:
    """dtype and (H, W, C) of a decoded image, without copying its pixels."""
    if isinstance(image, np.ndarray):
        return str(image.dtype), image.shape  # type: ignore[return-value]
    dtype = "uint16" if image.mode.startswith("I;16") else "uint8"
    return dtype, (image.size[1], image.size[0], len(image.getbands()))


def encode_image(image: Image.Image | np.ndarray, storage: str) -> bytes:
    """Payload bytes straight from the decoded image: raw row-major HWC bytes, or re-encoded."""
    if storage == "raw" and isinstance(image, Image.Image):
        return image.tobytes()
    if storage in ("jpeg", "png") and isinstance(image, Image.Image) and image.mode in ("L", "RGB"):
        return saved_image(image, storage)  # the image as it is: no round trip through numpy
    return encode(_to_array(image), storage)


def _convert(image: Image.Image, rules: ImageRules) -> Image.Image:
    if rules.channels == "gray" and image.mode not in ("L", "I;16"):
        return image.convert("L")
    if rules.channels == "rgb" and image.mode != "RGB":
        return image.convert("RGB")
    if image.mode in _NATIVE_MODES or (rules.nearest and image.mode == "P"):
        return image
    if image.mode == "P":
        return image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("1", "LA", "I", "I;16B", "I;16L"):
        return image.convert("I;16" if image.mode.startswith("I") else "L")
    return image.convert("RGB")


def _to_array(image: Image.Image | np.ndarray) -> np.ndarray:
    array = np.asarray(image)
    if array.dtype != np.uint8:
        array = array.astype(np.uint16)
    if array.ndim == 2:
        array = array[:, :, None]
    return np.ascontiguousarray(array)


def encode(pixels: np.ndarray, storage: str) -> bytes:
    """Payload bytes for the `storage` kind: raw row-major HWC bytes, or a re-encoded PNG/JPEG."""
    return encode_pixels(pixels, storage)

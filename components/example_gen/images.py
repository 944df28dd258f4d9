"""One image's bytes checked and decoded: format and size checks, decode, convert, resize, encode.

Every failure raises `BadCell` (see data_root.py) with a short `code` and a readable reason.
"""
from __future__ import annotations

import io
import re
import struct
import zlib
from dataclasses import dataclass

import numpy as np
from PIL import Image

from .data_root import BadCell

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JPEG_MAGIC = b"\xff\xd8\xff"
# PIL mode → (numpy dtype, channels) kept as they are; other modes are converted (see `_to_array`).
_NATIVE_MODES = {"L": ("uint8", 1), "RGB": ("uint8", 3), "RGBA": ("uint8", 4), "I;16": ("uint16", 1)}
# The fast PNG path: (bit depth, colour type) → PIL mode (= raw mode) for plain 8-bit images.
_FAST_PNG_MODES = {(8, 0): "L", (8, 2): "RGB", (8, 6): "RGBA"}
_PNG_CHUNK = struct.Struct(">I4s")
_PNG_IHDR = struct.Struct(">IIBBBBB")


@dataclass(frozen=True)
class ImageRules:
    """What one image column accepts and how it is converted at ingest."""

    max_pixels: int
    channels: str | None = None  # "gray" | "rgb" | None (keep)
    resize: tuple[int, int] | None = None  # (H, W)
    nearest: bool = False  # masks: nearest-neighbour resize, palette indices kept


def sniff_format(data: bytes) -> str:
    if data.startswith(PNG_MAGIC):
        return "PNG"
    if data.startswith(JPEG_MAGIC):
        return "JPEG"
    raise BadCell("not_an_image", "not a PNG or JPEG image")


def _fast_png(data: bytes, rules: ImageRules) -> Image.Image | None:
    """Plain 8-bit L/RGB/RGBA PNGs decoded by PIL's own zip decoder, without `Image.open`.

    Same C decoder, so the same pixels; it skips the Python chunk machinery that costs more than
    decoding a small image. Anything unusual (other chunks, bad CRC, interlace, truncation) returns
    None and takes the full PIL path, which then produces PIL's own error.
    """
    header, idat, pos = None, [], 8
    while pos + 12 <= len(data):
        length, kind = _PNG_CHUNK.unpack_from(data, pos)
        body, end = pos + 8, pos + 8 + length
        if end + 4 > len(data):
            return None
        if zlib.crc32(memoryview(data)[pos + 4:end]) != int.from_bytes(data[end:end + 4], "big"):
            return None
        if kind == b"IDAT" and header is not None:
            idat.append(data[body:end])
        elif kind == b"IHDR" and header is None and length == _PNG_IHDR.size:
            header = _PNG_IHDR.unpack_from(data, body)
        elif kind == b"IEND" and idat:
            break
        else:
            return None
        pos = end + 4
    else:
        return None
    width, height, depth, color, compression, filtering, interlace = header
    mode = _FAST_PNG_MODES.get((depth, color))
    pixels = width * height
    bomb_limit = Image.MAX_IMAGE_PIXELS  # beyond it PIL warns or refuses: leave that to PIL
    if mode is None or compression or filtering or interlace or not pixels or (bomb_limit and pixels > bomb_limit):
        return None
    if pixels > rules.max_pixels:
        raise BadCell("too_many_pixels", f"image of {width}x{height} exceeds the limit of {rules.max_pixels} pixels")
    try:
        return Image.frombytes(mode, (width, height), b"".join(idat), "zip", mode)
    except (ValueError, OSError):  # truncated or corrupt data: PIL's full path names the problem
        return None


def decode_image(data: bytes, rules: ImageRules) -> Image.Image:
    """The decoded, converted and resized image (PIL), checked against the pixel limit first."""
    image_format = sniff_format(data)
    fast = _fast_png(data, rules) if image_format == "PNG" else None
    if fast is not None:
        return _finish(fast, rules)
    try:
        image = Image.open(io.BytesIO(data), formats=[image_format])
        width, height = image.size
        if width * height > rules.max_pixels:
            raise BadCell("too_many_pixels", f"image of {width}x{height} exceeds the limit of {rules.max_pixels} pixels")
        image.load()
    except BadCell:
        raise
    except Exception as err:  # PIL raises many types for corrupt data
        detail = re.sub(r" at 0x[0-9a-f]+", "", str(err))  # PIL names a memory address: keep reasons stable
        raise BadCell("corrupt_image", f"corrupt or truncated image: {detail}") from err
    return _finish(image, rules)


def _finish(image: Image.Image, rules: ImageRules) -> Image.Image:
    image = _convert(image, rules)
    if rules.resize and image.size != (rules.resize[1], rules.resize[0]):
        resample = Image.Resampling.NEAREST if rules.nearest else Image.Resampling.BILINEAR
        image = image.resize((rules.resize[1], rules.resize[0]), resample)
    return image


def decode(data: bytes, rules: ImageRules) -> np.ndarray:
    """Decoded pixels as an HxWxC array, converted and resized as the rules say."""
    return _to_array(decode_image(data, rules))


def image_layout(image: Image.Image) -> tuple[str, tuple[int, int, int]]:
    """dtype and (H, W, C) of a decoded image, without copying its pixels."""
    dtype = "uint16" if image.mode.startswith("I;16") else "uint8"
    return dtype, (image.size[1], image.size[0], len(image.getbands()))


def encode_image(image: Image.Image, storage: str) -> bytes:
    """Payload bytes straight from the decoded image: raw row-major HWC bytes, or re-encoded."""
    if storage == "raw":
        return image.tobytes()
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


def _to_array(image: Image.Image) -> np.ndarray:
    array = np.asarray(image)
    if array.dtype != np.uint8:
        array = array.astype(np.uint16)
    if array.ndim == 2:
        array = array[:, :, None]
    return np.ascontiguousarray(array)


def encode(pixels: np.ndarray, storage: str) -> bytes:
    """Payload bytes for the `storage` kind: raw row-major HWC bytes, or a re-encoded PNG/JPEG."""
    if storage == "raw":
        return pixels.tobytes()
    squeezed = pixels[:, :, 0] if pixels.shape[2] == 1 else pixels
    image = Image.fromarray(squeezed)  # a 2-D uint16 array becomes mode I;16
    out = io.BytesIO()
    if storage == "png":
        image.save(out, format="PNG", compress_level=1)
    else:
        image.save(out, format="JPEG", quality=95)
    return out.getvalue()

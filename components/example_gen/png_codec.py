"""PNG bytes without Pillow's Python chunk machinery: the plain 8-bit decode fast path (writing: `core.pixel_codec`).

>>> image = Image.new("RGB", (3, 2), (1, 2, 3)); out = io.BytesIO(); image.save(out, "PNG")
>>> fast_png(out.getvalue(), max_pixels=10).getpixel((2, 1))
(1, 2, 3)
"""
from __future__ import annotations

import io  # noqa: F401 - used by the doctest
import zlib

import numpy as np
from PIL import Image

from ..core.pixel_codec import PNG_CHUNK, PNG_IHDR, PNG_MAGIC
from .data_root import too_many_pixels

# The fast path: (bit depth, colour type) → PIL mode (= raw mode) for plain 8-bit images.
_FAST_PNG_MODES = {(8, 0): "L", (8, 2): "RGB", (8, 6): "RGBA"}


def fast_png(data: bytes, max_pixels: int) -> Image.Image | None:
    """Plain 8-bit L/RGB/RGBA PNGs decoded by PIL's own zip decoder, without `Image.open`.

    Same C decoder, so the same pixels; it skips the Python chunk machinery that costs more than
    decoding a small image. Anything unusual (other chunks, bad CRC, interlace, truncation) returns
    None and takes the full PIL path, which then produces PIL's own error.
    """
    header, idat, pos = None, [], 8
    while pos + 12 <= len(data):
        length, kind = PNG_CHUNK.unpack_from(data, pos)
        body, end = pos + 8, pos + 8 + length
        if end + 4 > len(data):
            return None
        if zlib.crc32(memoryview(data)[pos + 4:end]) != int.from_bytes(data[end:end + 4], "big"):
            return None
        if kind == b"IDAT" and header is not None:
            idat.append(data[body:end])
        elif kind == b"IHDR" and header is None and length == PNG_IHDR.size:
            header = PNG_IHDR.unpack_from(data, body)
        elif kind == b"IEND" and idat:
            break
        else:
            return None
        pos = end + 4
    else:
        return None
    width, height, depth, color, compression, filtering, interlace = header
    mode = _FAST_PNG_MODES.get((depth, color))
    if mode is None or compression or filtering or interlace or not width * height:
        return None
    if width * height > max_pixels:  # our limit, not Pillow's (see images._allow_pixels)
        raise too_many_pixels(width, height, max_pixels)
    try:
        return Image.frombytes(mode, (width, height), b"".join(idat), "zip", mode)
    except (ValueError, OSError):  # truncated or corrupt data: PIL's full path names the problem
        return None

"""Pixels → stored payload bytes (raw row-major HWC, PNG or JPEG): the one encoder of image features.

ExampleGen stores ingested images with it, Transform stores transformed masks with it, and the
reader (`core.image_decode`) decodes what it writes.

>>> import numpy as np
>>> mask = np.array([[[0], [3]], [[1], [2]]], np.uint8)
>>> payload = encode_pixels(mask, "png")
>>> payload[:4], len(encode_pixels(mask, "raw"))
(b'\\x89PNG', 4)
>>> bool((decode_pixels(payload, "png", "uint8", (2, 2, 1)) == mask).all())
True
"""
from __future__ import annotations

import io
import struct
import zlib

import numpy as np
from PIL import Image

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PNG_CHUNK = struct.Struct(">I4s")
PNG_IHDR = struct.Struct(">IIBBBBB")


def encode_pixels(pixels: np.ndarray, storage: str) -> bytes:
    """Payload bytes of HxWxC uint8/uint16 pixels for the `storage` kind: raw bytes, or a PNG/JPEG."""
    if storage == "raw":
        return pixels.astype("<u2").tobytes() if pixels.dtype == np.uint16 else pixels.tobytes()
    if storage == "png" and pixels.dtype == np.uint16 and pixels.shape[2] > 1:
        return png16_bytes(pixels)
    squeezed = pixels[:, :, 0] if pixels.shape[2] == 1 else pixels
    return saved_image(Image.fromarray(squeezed), storage)  # a 2-D uint16 array becomes mode I;16


def decode_pixels(payload: bytes, storage: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """The HxWxC pixels of a payload `encode_pixels` wrote (for checks in Python; training decodes in TensorFlow)."""
    if storage == "raw":
        return np.frombuffer(payload, np.dtype(dtype).newbyteorder("<")).reshape(shape)
    with Image.open(io.BytesIO(payload)) as image:
        return np.asarray(image).reshape(shape)


def saved_image(image: Image.Image, storage: str) -> bytes:
    """A Pillow image saved as PNG (fast zlib level 1) or JPEG (quality 95)."""
    out = io.BytesIO()
    if storage == "png":
        image.save(out, format="PNG", compress_level=1)
    else:
        image.save(out, format="JPEG", quality=95)
    return out.getvalue()


def png16_bytes(pixels: np.ndarray) -> bytes:
    """A 16-bit RGB/RGBA PNG (Pillow writes none): big-endian samples, filter 0, fast zlib."""
    height, width, channels = pixels.shape
    rows = np.zeros((height, 1 + width * channels * 2), np.uint8)  # each row: filter byte 0, then samples
    rows[:, 1:] = pixels.astype(">u2").reshape(height, -1).view(np.uint8)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return PNG_CHUNK.pack(len(body), kind) + body + zlib.crc32(kind + body).to_bytes(4, "big")

    header = PNG_IHDR.pack(width, height, 16, 2 if channels == 3 else 6, 0, 0, 0)
    return PNG_MAGIC + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)) + chunk(b"IEND", b"")

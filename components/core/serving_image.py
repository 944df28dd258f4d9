"""Encoded image files of any size → the pixels ExampleGen would have stored, in the TensorFlow graph.

The served model's signatures run this before the model, so a client sends the photo as it has it
(JPEG/PNG, any size, gray/RGB/RGBA/palette) and the graph applies the ops ExampleGen applied with
Pillow at ingest (`ingest_ops` in the manifest):

1. EXIF orientation (JPEG): the APP1 segment's tag 0x0112, read with string ops, both byte orders;
2. channels: RGB as decoded (gray replicated, alpha dropped, as Pillow's convert("RGB")); gray by
   Pillow's integer ITU-R 601-2 luma, L = (19595 R + 38470 G + 7471 B + 32768) >> 16;
3. resize to the stored H x W, bilinear with antialiasing (Pillow's BILINEAR widens its filter
   when it shrinks, as `antialias=True` does), rounded and clipped to uint8; none at the stored size.
   A letterboxed column (ingest_ops' `resize_mode`) is resized with its aspect kept and padded with 0
   (core/letterbox.py), and `canonical_sized` gives the decoded size its boxes are mapped back with.

Pure graph ops (no py_function), so TF Serving runs it.

>>> import io, numpy as np, tensorflow as tf
>>> from PIL import Image
>>> out = io.BytesIO(); Image.fromarray(np.full((30, 40, 3), 200, np.uint8)).save(out, "PNG")
>>> pixels = canonical_pixels(tf.constant(out.getvalue()), (10, 20, 1), exif=True)
>>> pixels.shape.as_list(), int(pixels[0, 0, 0])
([10, 20, 1], 200)
"""
from __future__ import annotations

import tensorflow as tf

from .image_decode import JPEG_DCT

EXIF_SCAN_BYTES = 1 << 16  # APP1 sits right after SOI (or a JFIF APP0): the first 64 KB hold it
_EXIF_MAGIC = [69, 120, 105, 102, 0, 0]  # "Exif\0\0"
_ORIENTATION_TAG = 0x0112
_MAX_IFD_ENTRIES = 64
_LUMA = (19595, 38470, 7471)  # Pillow's L conversion weights, in 1/65536


def canonical_pixels(blob: tf.Tensor, shape: tuple[int, int, int], exif: bool, letterbox: bool = False) -> tf.Tensor:
    """One encoded image (string scalar) → uint8 [H, W, C] as ExampleGen stores it (C: 1 gray or 3 RGB)."""
    return canonical_sized(blob, shape, exif, letterbox)[0]


def canonical_sized(blob: tf.Tensor, shape: tuple[int, int, int], exif: bool,
                    letterbox: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
    """`canonical_pixels`, and the image's (h, w) as decoded, EXIF orientation applied (int32 [2]): what a
    letterboxed image's boxes are mapped back with. `letterbox`: resized as ExampleGen's `--box-resize letterbox`
    does (core/letterbox.py: `tf.image.resize_with_pad` itself, padded with 0) instead of stretched."""
    height, width, channels = shape
    decoded = 4 if channels == 4 else 3
    is_jpeg = tf.equal(tf.strings.substr(blob, 0, 2), b"\xff\xd8")
    pixels = tf.cond(is_jpeg, lambda: tf.io.decode_jpeg(blob, channels=decoded, dct_method=JPEG_DCT),
                     lambda: tf.io.decode_image(blob, channels=decoded, expand_animations=False, dtype=tf.uint8))
    if exif:
        pixels = oriented(pixels, exif_orientation(blob))
    if channels == 1:
        pixels = gray(pixels)
    size = tf.shape(pixels)[:2]
    same = tf.reduce_all(tf.equal(size, [height, width]))
    resize = _letterboxed if letterbox else _resized
    pixels = tf.cond(same, lambda: pixels, lambda: resize(pixels, height, width))
    return tf.ensure_shape(pixels, [height, width, channels]), size


def at_stored_layout(blob: tf.Tensor, shape: tuple[int, int, int], exif: bool) -> tf.Tensor:
    """True when an encoded file already has the stored H x W and channels (and no rotation to apply).

    Read from the headers alone (JPEG's SOF, PNG's IHDR: 8-bit gray, RGB or RGBA): such a file
    needs none of ingest's ops, and the model can decode it as it decodes stored examples.
    """
    height, width, channels = shape
    is_jpeg = tf.equal(tf.strings.substr(blob, 0, 2), b"\xff\xd8")

    def jpeg() -> tf.Tensor:
        fits = tf.reduce_all(tf.equal(tf.image.extract_jpeg_shape(blob), [height, width, channels]))
        return tf.logical_and(fits, tf.equal(exif_orientation(blob), 1)) if exif else fits

    def png() -> tf.Tensor:
        header = tf.cast(tf.io.decode_raw(tf.strings.substr(blob, 16, 10), tf.uint8), tf.int32)
        size = tf.stack([_big_endian(header[4:8]), _big_endian(header[0:4])])
        color = {1: 0, 3: 2, 4: 6}.get(channels, -1)  # PNG colour types of 8-bit gray, RGB, RGBA
        is_png = tf.logical_and(tf.equal(tf.strings.substr(blob, 1, 3), b"PNG"), tf.equal(tf.size(header), 10))
        layout = tf.reduce_all(tf.equal(tf.concat([size, header[8:10]], 0), [height, width, 8, color]))
        return tf.logical_and(is_png, layout)

    return tf.cond(is_jpeg, jpeg, png)


def _big_endian(values: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(values * tf.constant([1 << 24, 1 << 16, 1 << 8, 1]))


def stored_bytes(pixels: tf.Tensor, encoding: str) -> tf.Tensor:
    """uint8 [B, H, W, C] → each image's bytes in a stored encoding a graph can decode, losslessly.

    PNG for PNG and JPEG features (TensorFlow's JPEG decoder reads PNG too); raw row-major bytes for
    raw ones (a serialized uint8 TensorProto ends with exactly those bytes).
    """
    if encoding == "raw":
        size = pixels.shape[1] * pixels.shape[2] * pixels.shape[3]
        return tf.map_fn(lambda image: tf.strings.substr(tf.io.serialize_tensor(image), -size, size), pixels,
                         fn_output_signature=tf.TensorSpec([], tf.string))
    return tf.map_fn(tf.io.encode_png, pixels, fn_output_signature=tf.TensorSpec([], tf.string))


def gray(pixels: tf.Tensor) -> tf.Tensor:
    """uint8 RGB [H, W, 3] → [H, W, 1] with Pillow's integer luma (exact, not TF's float weights)."""
    values = tf.cast(pixels, tf.int32)
    luma = (_LUMA[0] * values[..., 0] + _LUMA[1] * values[..., 1] + _LUMA[2] * values[..., 2] + 32768) // 65536
    return tf.cast(luma, tf.uint8)[..., tf.newaxis]


def _resized(pixels: tf.Tensor, height: int, width: int) -> tf.Tensor:
    resized = tf.image.resize(tf.cast(pixels, tf.float32), [height, width], method="bilinear", antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8)


def _letterboxed(pixels: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """Aspect kept, centred and padded with 0, as ExampleGen letterboxes with Pillow (the same rows and columns)."""
    padded = tf.image.resize_with_pad(tf.cast(pixels, tf.float32), height, width, method="bilinear", antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(padded), 0.0, 255.0), tf.uint8)


def exif_orientation(blob: tf.Tensor) -> tf.Tensor:
    """The EXIF orientation (1-8) of a JPEG's bytes; 1 when there is none or it is unreadable."""
    head = tf.strings.substr(blob, 0, EXIF_SCAN_BYTES)
    data = tf.io.decode_raw(head, tf.uint8)
    data = tf.cast(data, tf.int32)
    count = tf.shape(data)[0]
    padded = tf.concat([data, tf.zeros([_MAX_IFD_ENTRIES * 12 + 64], tf.int32)], 0)  # reads past the end see 0
    window = len(_EXIF_MAGIC)
    hits = tf.ones([tf.maximum(count - window, 0)], tf.bool)
    for offset, byte in enumerate(_EXIF_MAGIC):
        hits = hits & tf.equal(padded[offset:offset + tf.maximum(count - window, 0)], byte)
    found = tf.where(hits)[:, 0]
    is_jpeg = tf.logical_and(count > 2, tf.reduce_all(tf.equal(padded[:2], [0xFF, 0xD8])))
    return tf.cond(tf.logical_and(is_jpeg, tf.size(found) > 0),
                   lambda: _orientation_at(padded, tf.cast(found[0], tf.int32) + window), lambda: tf.constant(1))


def _orientation_at(data: tf.Tensor, tiff: tf.Tensor) -> tf.Tensor:
    """The orientation tag's value in the TIFF block starting at `tiff` (IFD0 only, as Pillow reads it)."""
    little = tf.reduce_all(tf.equal(data[tiff:tiff + 2], [0x49, 0x49]))  # "II" (else "MM": big-endian)

    def number(at: tf.Tensor, size: int) -> tf.Tensor:
        values = data[at:at + size]
        weights = 256 ** tf.range(size) if size else None
        return tf.reduce_sum(values * tf.where(little, weights, tf.reverse(weights, [0])))

    ifd = tiff + number(tiff + 4, 4)
    entries = tf.minimum(number(ifd, 2), _MAX_IFD_ENTRIES)
    starts = ifd + 2 + 12 * tf.range(_MAX_IFD_ENTRIES)
    tags = tf.map_fn(lambda at: number(at, 2), starts)
    match = tf.where(tf.logical_and(tf.equal(tags, _ORIENTATION_TAG), tf.range(_MAX_IFD_ENTRIES) < entries))[:, 0]
    value = tf.cond(tf.size(match) > 0, lambda: number(starts[tf.cast(match[0], tf.int32)] + 8, 2),
                    lambda: tf.constant(1))
    return tf.where(tf.logical_and(value >= 1, value <= 8), value, 1)


def oriented(pixels: tf.Tensor, orientation: tf.Tensor) -> tf.Tensor:
    """Pixels turned upright as Pillow's `exif_transpose` does for orientations 1-8."""
    transposed = lambda: tf.transpose(pixels, [1, 0, 2])  # noqa: E731
    branches = [
        lambda: pixels,  # 1
        lambda: tf.reverse(pixels, [1]),  # 2: mirrored left-right
        lambda: tf.image.rot90(pixels, 2),  # 3: upside down
        lambda: tf.reverse(pixels, [0]),  # 4: mirrored top-bottom
        transposed,  # 5: TRANSPOSE
        lambda: tf.image.rot90(pixels, 3),  # 6: Pillow's ROTATE_270 (90° clockwise)
        lambda: tf.image.rot90(transposed(), 2),  # 7: TRANSVERSE
        lambda: tf.image.rot90(pixels, 1),  # 8: Pillow's ROTATE_90 (90° counter-clockwise)
    ]
    return tf.switch_case(tf.clip_by_value(orientation - 1, 0, 7), branches)

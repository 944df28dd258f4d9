"""Decoding stored image features (raw bytes, PNG, JPEG) into pixels, one record or a batch at a time.

`core.reader` decodes through here; so do the Trainer (its fused JPEG crop) and the benchmarks.

- `decode_one`: one record's stored bytes → [H, W, C] pixels of the feature's dtype. The reader
  runs it per record in a parallel map for PNG/JPEG features: every core decodes a different image.
- `decode_many`: a batch of stored bytes → [B, H, W, C] (one kernel for raw bytes; a sequential
  `map_fn` for PNG/JPEG, for callers that hold a batch: serving, Evaluator, Transform).
- `decode_crop_resize`: JPEG bytes → only the pixels of a window decoded
  (`tf.image.decode_and_crop_jpeg`: libjpeg skips the rows below the window and the blocks beside
  it), resized bilinearly to a given size. The fused random-resized-crop of ImageNet input
  pipelines; `decode_then_crop_resize` is the same result by full decode + slice (the reference).

    pixels = decode_one(record["x"], manifest.features["x"])            # uint8 [224, 224, 3]
    crop = decode_crop_resize(record["x"], [8, 16, 180, 180], [224, 224], channels=3)  # float32
"""
from __future__ import annotations

import tensorflow as tf

from .manifest import FeatureSpec

TF_DTYPES = {"uint8": tf.uint8, "uint16": tf.uint16, "int64": tf.int64, "float32": tf.float32, "string": tf.string}
CODED = ("png", "jpeg")  # file encodings decoded one image per kernel call
# libjpeg's accurate integer IDCT: the pixels Pillow (ExampleGen, clients) decodes; TensorFlow's
# default differs from them by up to 3 levels.
JPEG_DCT = "INTEGER_ACCURATE"


def decode_one(blob: tf.Tensor, feature: FeatureSpec) -> tf.Tensor:
    """One record's stored bytes (a string scalar) → pixels [H, W, C] with a static shape."""
    height, width, channels = feature.shape
    dtype = TF_DTYPES[feature.dtype]
    if feature.encoding == "raw":
        pixels = tf.io.decode_raw(blob, dtype, little_endian=True)
    elif feature.encoding == "png":
        pixels = tf.io.decode_png(blob, channels=channels, dtype=dtype)
    elif feature.encoding == "jpeg":
        pixels = tf.io.decode_jpeg(blob, channels=channels, dct_method=JPEG_DCT)
    else:
        raise ValueError(f"feature {feature.name!r}: unknown encoding {feature.encoding!r} for an image file")
    return tf.ensure_shape(tf.reshape(pixels, [height, width, channels]), [height, width, channels])


def decode_many(blobs: tf.Tensor, feature: FeatureSpec) -> tf.Tensor:
    """A batch of stored bytes [B] → pixels [B, H, W, C] (B stays static when it is)."""
    height, width, channels = feature.shape
    dtype = TF_DTYPES[feature.dtype]
    if feature.encoding == "raw":
        # Raw payloads are row-major HWC little-endian bytes of equal length: one kernel for the batch.
        pixels = tf.reshape(tf.io.decode_raw(blobs, dtype, little_endian=True), [-1, height, width, channels])
    else:
        pixels = tf.map_fn(lambda blob: decode_one(blob, feature), blobs,
                           fn_output_signature=tf.TensorSpec([height, width, channels], dtype))
    pixels.set_shape(blobs.shape.concatenate([height, width, channels]))
    return pixels


def decode_crop_resize(blob: tf.Tensor, window: tf.Tensor, size: list[int], channels: int) -> tf.Tensor:
    """JPEG bytes → the window [y, x, h, w] alone decoded, resized (bilinear) to `size`: float32 [H, W, C]."""
    crop = tf.image.decode_and_crop_jpeg(blob, tf.cast(window, tf.int32), channels=channels, dct_method=JPEG_DCT)
    return tf.ensure_shape(tf.image.resize(crop, size), [*size, channels])


def decode_then_crop_resize(blob: tf.Tensor, window: tf.Tensor, size: list[int], channels: int) -> tf.Tensor:
    """The same as `decode_crop_resize` by decoding the whole image first (the reference it is measured against)."""
    window = tf.cast(window, tf.int32)
    pixels = tf.io.decode_jpeg(blob, channels=channels, dct_method=JPEG_DCT)
    crop = tf.slice(pixels, [window[0], window[1], 0], [window[2], window[3], channels])
    return tf.ensure_shape(tf.image.resize(crop, size), [*size, channels])

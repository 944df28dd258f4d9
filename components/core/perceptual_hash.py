"""Perceptual hashes of an image's pixels: 64-bit codes whose Hamming distance is small for altered copies.

Two hashes, both from one 32×32 box-filtered RGB thumbnail (numpy + Pillow only, no TensorFlow):

- `dct`: the classic DCT pHash. The 64 lowest-frequency AC coefficients of the 32×32 luma's 2-D
  DCT (the 8×8 block without DC, plus coefficient (8, 0)), one bit each: above their median or
  not. Exactly 32 bits are set, so distances between two dct hashes are even. Robust to JPEG
  re-encoding, resizing, brightness and small crops on images with structure.
- `tone`: for near-uniform images (flat colours, smooth gradients, noise), whose low-frequency
  coefficients are mostly noise, so the dct bits of two copies are unrelated. 16 bits say which of
  8 low coefficients is clearly positive or clearly negative (a dead zone keeps noise at 0), and
  48 bits code the mean luma, blue and red chroma as thermometers (16 levels each: one bit per
  level crossed, so the distance grows with the colour difference). Computed only for images
  `is_near_uniform` picks: on textured images mean colour is no evidence of a copy.

Not flip- or rotation-invariant: a mirrored copy is a different image to these hashes.

>>> from PIL import Image, ImageDraw
>>> a = Image.new("RGB", (120, 90), (20, 40, 60))
>>> ImageDraw.Draw(a).ellipse((10, 20, 70, 80), fill=(250, 200, 10))
>>> copy, other = a.resize((200, 150)), a.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
>>> distance(image_hashes(a)[0], image_hashes(copy)[0]), distance(image_hashes(a)[0], image_hashes(other)[0]) > 10
(2, True)
>>> flat = thumbnail(Image.new("RGB", (50, 50), (30, 200, 40)))
>>> is_near_uniform(flat), tone_hash(flat) == tone_hash(thumbnail(Image.new("RGB", (80, 60), (30, 200, 40))))
(True, True)
"""
from __future__ import annotations

import numpy as np
from PIL import Image

SIDE = 32
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _dct_matrix(size: int) -> np.ndarray:
    """The orthonormal DCT-II matrix (rows are frequencies)."""
    k = np.arange(size)
    matrix = np.sqrt(2.0 / size) * np.cos(np.pi * (2 * k[None, :] + 1) * k[:, None] / (2 * size))
    matrix[0] /= np.sqrt(2.0)
    return matrix.astype(np.float32)


_DCT = _dct_matrix(SIDE)
_LOW = _DCT[:9]  # frequencies 0-8: the 8×8 block and the extra coefficient (8, 0)
# Low-frequency coefficients the tone hash reads, in zigzag order; a coefficient counts as clearly
# signed beyond _DEAD_ZONE (in the orthonormal DCT's units: a mean-luma step of 8 over the image).
_TONE_COEFFICIENTS = ((0, 1), (1, 0), (2, 0), (1, 1), (0, 2), (0, 3), (1, 2), (2, 1))
_DEAD_ZONE = 8.0 * SIDE / 8
# Precomputed once: these run on every image ExampleGen ingests, where numpy's per-call cost dominates.
_AC_INDEX = np.append(np.arange(1, 64) // 8 * 9 + np.arange(1, 64) % 8, 8 * 9)  # 8×8 block without DC, then (8, 0)
_TONE_INDEX = np.array([i * 9 + j for i, j in _TONE_COEFFICIENTS])
_LEVELS = (np.arange(16) + 0.5) / 16
_TONE_LOW = np.array([0.0, -112.0, -112.0])[:, None]
_TONE_SPAN = np.array([255.0, 224.0, 224.0])[:, None]
_CHROMA = np.array([0.564, 0.713])
_MEAN_WEIGHTS = np.full(SIDE * SIDE, 1.0 / (SIDE * SIDE), dtype=np.float32)  # a mean as one BLAS call
_LUMA_SUM = np.float32(_LUMA.sum())
_NEAR_UNIFORM_ENERGY = 2.0  # RMS of the low-frequency AC image below which nothing but tone is left
_NEAR_UNIFORM_TIES = 0.4  # fraction of coefficients within 2 % of the spread of the median: dct bits are noise


def thumbnail(image: Image.Image | np.ndarray) -> np.ndarray:
    """The image as a 32×32×3 float32 RGB array on a 0-255 scale (box filter: every pixel counts).

    Accepts what ExampleGen decodes: a PIL image of any mode, or an H×W×C uint16 array.
    """
    if isinstance(image, np.ndarray):
        return _thumbnail_array(image)
    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        return _thumbnail_array(np.asarray(image))
    if image.mode not in ("L", "RGB"):
        image = image.convert("RGBA").convert("RGB") if image.mode == "P" else image.convert("RGB")
    # reducing_gap: Pillow first reduces by an integer factor (2.5x faster at 224 px, within 1 grey level)
    small = np.asarray(image.resize((SIDE, SIDE), Image.Resampling.BOX, reducing_gap=1.0), dtype=np.float32)
    return np.repeat(small[..., None], 3, axis=2) if small.ndim == 2 else small


def _thumbnail_array(pixels: np.ndarray) -> np.ndarray:
    """16-bit (or wider) pixels scaled to 0-255, each channel box-resized as a float image."""
    scale = 255.0 / 65535.0 if pixels.dtype == np.uint16 or pixels.max(initial=0) > 255 else 1.0
    planes = pixels[..., None] if pixels.ndim == 2 else pixels[..., :3]
    small = [np.asarray(Image.fromarray(np.ascontiguousarray(planes[..., c], dtype=np.float32) * scale, mode="F")
                        .resize((SIDE, SIDE), Image.Resampling.BOX)) for c in range(planes.shape[2])]
    stacked = np.stack(small, axis=2)
    return np.repeat(stacked, 3, axis=2) if stacked.shape[2] == 1 else stacked


def is_near_uniform(thumb: np.ndarray) -> bool:
    """True when the dct bits are mostly noise (little low-frequency energy, or most coefficients tied
    with the median): only then does an image get a tone hash."""
    luma = thumb @ _LUMA
    return hashes_of(luma[None], (_MEAN_WEIGHTS @ thumb.reshape(-1, 3))[None])[0][1] is not None


def tone_hash(thumb: np.ndarray) -> int:
    luma = thumb @ _LUMA
    coefficients = (_LOW @ luma @ _LOW.T).reshape(1, -1)
    return int(_tones(coefficients, luma.mean()[None], thumb.reshape(-1, 3).mean(axis=0)[None])[0])


def image_hashes(image: Image.Image | np.ndarray) -> tuple[int, int | None]:
    """(dct hash, tone hash or None when the image has structure): what ExampleGen stores per image."""
    luma, means = hash_input(image)
    return hashes_of(luma[None], means[None])[0]


def hash_input(image: Image.Image | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the hashes need of one image, 4 KB whatever its size: the 32×32 luma thumbnail and the mean
    R, G, B. ExampleGen keeps these per image and hashes them in batches (`hashes_of`)."""
    if isinstance(image, Image.Image) and image.mode == "L":  # gray: the luma is the thumbnail itself
        small = np.asarray(image.resize((SIDE, SIDE), Image.Resampling.BOX, reducing_gap=1.0), dtype=np.float32)
        luma = small * _LUMA_SUM
        return luma, np.repeat(_MEAN_WEIGHTS @ small.reshape(-1, 1), 3)
    thumb = thumbnail(image)
    return thumb @ _LUMA, _MEAN_WEIGHTS @ thumb.reshape(-1, 3)


def hashes_of(lumas: np.ndarray, means: np.ndarray) -> list[tuple[int, int | None]]:
    """`image_hashes` of N images from their `hash_input`s ([N, 32, 32], [N, 3]), vectorized: per image,
    numpy's per-call cost would be most of ingest's time on small images."""
    coefficients = (_LOW @ lumas @ _LOW.T).reshape(len(lumas), -1)  # [N, 81]: frequencies 0-8 squared
    values = coefficients[:, _AC_INDEX]
    ordered = np.sort(values, axis=1)
    medians = (ordered[:, 31] + ordered[:, 32]) / 2
    dct = _packed(values > medians[:, None])
    spread = np.abs(values - medians[:, None])
    uniform = (np.sqrt(np.einsum("ij,ij->i", values, values)) / SIDE < _NEAR_UNIFORM_ENERGY) | (
        np.count_nonzero(spread < 0.02 * spread.max(axis=1, keepdims=True), axis=1) > _NEAR_UNIFORM_TIES * 64)
    tone = _tones(coefficients, lumas.mean(axis=(1, 2)), means)
    return [(int(d), int(t) if u else None) for d, t, u in zip(dct, tone, uniform)]


def _tones(coefficients: np.ndarray, mean_luma: np.ndarray, means: np.ndarray) -> np.ndarray:
    low = coefficients[:, _TONE_INDEX]
    signs = np.stack([low > _DEAD_ZONE, low < -_DEAD_ZONE], axis=2).reshape(len(low), 16)
    chroma = _CHROMA * (means[:, [2, 0]] - mean_luma[:, None])  # YCbCr blue and red chroma, centred on 0
    tones = np.concatenate([mean_luma[:, None], chroma], axis=1)
    levels = tones[:, :, None] > (_TONE_LOW + _TONE_SPAN * _LEVELS)[None]  # thermometers: [N, 3, 16]
    return _packed(np.concatenate([signs, levels.reshape(len(low), 48)], axis=1))


def _packed(bits: np.ndarray) -> np.ndarray:
    """[N, 64] booleans → N signed 64-bit integers (what int64 tables hold)."""
    return np.ascontiguousarray(np.packbits(bits.astype(np.uint8), axis=1)).view(">i8")[:, 0].astype(np.int64)


def distance(a: int, b: int) -> int:
    """Hamming distance between two 64-bit hashes (signed or not)."""
    return bin((a ^ b) & 0xFFFF_FFFF_FFFF_FFFF).count("1")


def tone_radius(distance_limit: int) -> int:
    """The tone hash's radius for a dct distance limit: 2 at the default 10 (measured), scaled with it."""
    return round(distance_limit / 5)

"""Perceptual hashes of an image's pixels: 64-bit codes that stay close for altered copies.

Both hashes come from one 32×32 box-filtered RGB thumbnail (numpy + Pillow only, no TensorFlow):

- `dct`: the classic DCT pHash. The 64 lowest-frequency AC coefficients of the 32×32 luma's 2-D
  DCT (the 8×8 block without DC, plus coefficient (8, 0)), one bit each: above their median or
  not. Exactly 32 bits are set, so distances between two dct hashes are even. Robust to JPEG
  re-encoding, resizing, brightness and small crops on images with structure. Compared by Hamming
  distance.
- `tone` (`core.tone_hash`): for near-uniform images only, whose low-frequency coefficients are
  mostly noise, so the dct bits of two copies are unrelated. It holds the mean colour and the linear
  gradient of each channel; its distance asks whether one brightness factor maps one image's onto
  the other's. An image is near-uniform when a plane (a mean plus a linear ramp) describes the
  low-frequency part of its luma to within `NEAR_UNIFORM_RESIDUAL` grey levels: then the tone is all
  there is to the image, and two images with the same tone look alike. On an image with structure
  the mean colour is no evidence of a copy, so it gets no tone hash.

Not flip- or rotation-invariant: a mirrored copy is a different image to these hashes.

>>> from PIL import Image, ImageDraw
>>> a = Image.new("RGB", (120, 90), (20, 40, 60))
>>> ImageDraw.Draw(a).ellipse((10, 20, 70, 80), fill=(250, 200, 10))
>>> copy, other = a.resize((200, 150)), a.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
>>> distance(image_hashes(a)[0], image_hashes(copy)[0]), distance(image_hashes(a)[0], image_hashes(other)[0]) > 10
(2, True)
>>> image_hashes(a)[1] is None, is_near_uniform(thumbnail(Image.new("RGB", (50, 50), (30, 200, 40))))
(True, True)
>>> flat, larger = (image_hashes(Image.new("RGB", size, (30, 200, 40)))[1] for size in ((50, 50), (80, 60)))
>>> flat == larger
True
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
from PIL import Image

from .tone_hash import tone_values

SIDE = 32
SMALL_SIDE = 64  # 8-bit images up to this side are hashed from their own pixels (`hash_input`)
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _dct_matrix(size: int) -> np.ndarray:
    """The orthonormal DCT-II matrix (rows are frequencies)."""
    k = np.arange(size)
    matrix = np.sqrt(2.0 / size) * np.cos(np.pi * (2 * k[None, :] + 1) * k[:, None] / (2 * size))
    matrix[0] /= np.sqrt(2.0)
    return matrix.astype(np.float32)


_DCT = _dct_matrix(SIDE)
_LOW = _DCT[:9]  # frequencies 0-8: the 8×8 block and the extra coefficient (8, 0)
# Precomputed once: these run on every image ExampleGen ingests, where numpy's per-call cost dominates.
_AC_INDEX = np.append(np.arange(1, 64) // 8 * 9 + np.arange(1, 64) % 8, 8 * 9)  # 8×8 block without DC, then (8, 0)
_LUMA_SUM = np.float32(_LUMA.sum())
NEAR_UNIFORM_RESIDUAL = 2.0  # grey levels (RMS) of low-frequency luma a plane leaves unexplained


def _off_plane() -> np.ndarray:
    """The 81×81 projection of the 9×9 low-frequency DCT coefficients onto what no plane
    (mean + x ramp + y ramp) produces: the low-frequency structure of an image beyond its tone."""
    ramp = (np.arange(SIDE) - (SIDE - 1) / 2) / SIDE
    planes = np.stack([np.ones((SIDE, SIDE)), np.tile(ramp, (SIDE, 1)), np.tile(ramp[:, None], (1, SIDE))])
    basis = np.einsum("ai,kij,bj->kab", _LOW, planes, _LOW).reshape(3, 81)
    return (np.eye(81) - np.linalg.pinv(basis) @ basis).astype(np.float32)


_OFF_PLANE = _off_plane()


def thumbnail(image: Image.Image | np.ndarray) -> np.ndarray:
    """The image as a 32×32×3 float32 RGB array on a 0-255 scale (box filter: every pixel counts).

    Accepts what ExampleGen decodes: a PIL image of any mode, or an H×W×C uint16 array.
    """
    if isinstance(image, np.ndarray):
        return _thumbnail_array(image)
    if image.mode in _WIDE_MODES:
        return _thumbnail_array(np.asarray(image))
    small = _pixels(_small_8bit(image)).astype(np.float32)
    return np.repeat(small[..., None], 3, axis=2) if small.ndim == 2 else small


_WIDE_MODES = ("I;16", "I;16B", "I;16L", "I", "F")  # more than 8 bits a sample: thumbnailed as floats


def _small_8bit(image: Image.Image) -> Image.Image:
    """An 8-bit image's 32×32 box thumbnail, gray kept as L and every other mode as RGB."""
    if image.mode not in ("L", "RGB"):
        image = image.convert("RGBA").convert("RGB") if image.mode == "P" else image.convert("RGB")
    # reducing_gap: Pillow first reduces by an integer factor (2.5x faster at 224 px, within 1 grey level)
    return image.resize((SIDE, SIDE), Image.Resampling.BOX, reducing_gap=1.0)


def _thumbnail_array(pixels: np.ndarray) -> np.ndarray:
    """16-bit (or wider) pixels scaled to 0-255, each channel box-resized as a float image."""
    scale = 255.0 / 65535.0 if pixels.dtype == np.uint16 or pixels.max(initial=0) > 255 else 1.0
    planes = pixels[..., None] if pixels.ndim == 2 else pixels[..., :3]
    small = [np.asarray(Image.fromarray(np.ascontiguousarray(planes[..., c], dtype=np.float32) * scale, mode="F")
                        .resize((SIDE, SIDE), Image.Resampling.BOX)) for c in range(planes.shape[2])]
    stacked = np.stack(small, axis=2)
    return np.repeat(stacked, 3, axis=2) if stacked.shape[2] == 1 else stacked


def is_near_uniform(thumb: np.ndarray) -> bool:
    """True when a plane describes the thumbnail's low-frequency luma to within NEAR_UNIFORM_RESIDUAL grey
    levels: its dct bits are then mostly noise, and its tone is what identifies it."""
    return hashes_of([thumb])[0][1] is not None


def image_hashes(image: Image.Image | np.ndarray) -> tuple[int, int | None]:
    """(dct hash, tone hash or None when the image has structure): what ExampleGen stores per image."""
    return hashes_of([hash_input(image)])[0]


def hash_input(image: Image.Image | np.ndarray) -> np.ndarray:
    """What the hashes need of one image, at most 12 KB whatever its size, hashed in batches (`hashes_of`).

    An 8-bit L or RGB image of at most `SMALL_SIDE` pixels a side gives its own pixels: the batch
    applies the thumbnail's resize as a matrix (`_box_weights`), which cost less than a Pillow resize
    per image (8 of a 28×28 row's ~100 µs). Any other image gives its 32×32 thumbnail as Pillow
    makes it (uint8 [32, 32] gray or [32, 32, 3]; float32 for 16-bit pixels).
    """
    if isinstance(image, Image.Image) and image.mode in ("L", "RGB") and max(image.size) <= SMALL_SIDE:
        return _pixels(image)
    if isinstance(image, Image.Image) and image.mode not in _WIDE_MODES:
        return _pixels(_small_8bit(image))  # uint8, gray kept [32, 32]: its luma is the thumbnail itself
    return thumbnail(image)


def _pixels(image: Image.Image) -> np.ndarray:
    """An 8-bit L or RGB image's pixels (half the cost of `np.asarray`'s array interface, per image)."""
    shape = (image.height, image.width) if image.mode == "L" else (image.height, image.width, 3)
    return np.frombuffer(image.tobytes(), dtype=np.uint8).reshape(shape)


@functools.lru_cache(maxsize=2 * SMALL_SIDE)
def _box_weights(size: int) -> np.ndarray:
    """[32, size]: Pillow's BOX resize of one axis from `size` to 32 pixels, as a matrix (its float
    mode, so without the rounding to 8 bits of a uint8 resize)."""
    if size == SIDE:
        return np.eye(SIDE, dtype=np.float32)
    one_hot = np.eye(size, dtype=np.float32)
    columns = [np.asarray(Image.fromarray(one_hot[i][None, :], mode="F").resize((SIDE, 1), Image.Resampling.BOX))[0]
               for i in range(size)]
    return np.stack(columns, axis=1)


@functools.lru_cache(maxsize=2 * SMALL_SIDE)
def _axis_maps(size: int) -> tuple[np.ndarray, np.ndarray]:
    """One axis of an image `size` pixels long → its 9 low DCT frequencies [9, size] and its two
    halves' means [2, size], both of the 32-pixel thumbnail."""
    weights = _box_weights(size)
    return (_LOW @ weights).astype(np.float32), (weights.reshape(2, SIDE // 2, size).mean(axis=1)).astype(np.float32)


def hashes_of(inputs: Sequence[np.ndarray]) -> list[tuple[int, int | None]]:
    """`image_hashes` of N images from their `hash_input`s, vectorized over the batch (per input shape)."""
    coefficients = np.empty((len(inputs), 9, 9), dtype=np.float32)
    quadrants = np.empty((len(inputs), 2, 2, 3), dtype=np.float32)
    groups: dict[tuple[int, ...], list[int]] = {}
    for number, item in enumerate(inputs):
        groups.setdefault(item.shape, []).append(number)
    for shape, picked in groups.items():
        pixels = np.stack([inputs[i] for i in picked]).astype(np.float32).reshape(len(picked), *shape[:2], -1)
        lumas = pixels[..., 0] * _LUMA_SUM if pixels.shape[3] == 1 else pixels @ _LUMA  # [n, H, W]
        (low_rows, half_rows), (low_cols, half_cols) = _axis_maps(shape[0]), _axis_maps(shape[1])
        coefficients[picked] = low_rows @ lumas @ low_cols.T
        channels = half_rows @ pixels.transpose(0, 3, 1, 2) @ half_cols.T  # [n, C, 2, 2]
        quadrants[picked] = channels.transpose(0, 2, 3, 1)  # one channel (gray) stands for all three
    return _hashes(coefficients.reshape(len(inputs), -1), quadrants)


def _hashes(coefficients: np.ndarray, quadrants: np.ndarray) -> list[tuple[int, int | None]]:
    """The hashes from [N, 81] low-frequency DCT coefficients (frequencies 0-8 squared) and [N, 2, 2, 3]
    quadrant means."""
    values = coefficients[:, _AC_INDEX]
    ordered = np.sort(values, axis=1)
    medians = (ordered[:, 31] + ordered[:, 32]) / 2
    dct = _packed(values > medians[:, None])
    structure = coefficients @ _OFF_PLANE
    uniform = np.sqrt(np.einsum("ij,ij->i", structure, structure)) / SIDE < NEAR_UNIFORM_RESIDUAL
    tone = np.zeros(len(coefficients), dtype=np.int64)
    if uniform.any():
        tone[uniform] = tone_values(quadrants[uniform])
    return [(int(d), int(t) if u else None) for d, t, u in zip(dct, tone, uniform)]


def _packed(bits: np.ndarray) -> np.ndarray:
    """[N, 64] booleans → N signed 64-bit integers (what int64 tables hold)."""
    return np.ascontiguousarray(np.packbits(bits.astype(np.uint8), axis=1)).view(">i8")[:, 0].astype(np.int64)


def distance(a: int, b: int) -> int:
    """Hamming distance between two 64-bit hashes (signed or not)."""
    return bin((a ^ b) & 0xFFFF_FFFF_FFFF_FFFF).count("1")

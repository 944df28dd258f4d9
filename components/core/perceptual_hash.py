"""Perceptual hashes of an image's pixels: 64-bit codes that stay close for altered copies.

Three hashes come from one 32×32 box-filtered RGB thumbnail (numpy + Pillow only, no TensorFlow):

- `dct`: the classic DCT pHash. The 64 lowest-frequency AC coefficients of the 32×32 luma's 2-D
  DCT (the 8×8 block without DC, plus coefficient (8, 0)), one bit each: above their median or
  not. Exactly 32 bits are set, so distances between two dct hashes are even. Robust to JPEG
  re-encoding, resizing and brightness; compared by Hamming distance.
- `centre`: the same pHash of the thumbnail's central frame (`CENTRE_CUT` off each side, resampled
  to 32×32 by area); compared by Hamming distance with the other image's dct and centre hashes.
- `tone` (`core.tone_hash`), of every image: the mean colour and the linear gradient of each
  channel; its distance asks whether one brightness factor maps one image's onto the other's. An
  image is near-uniform when a plane (a mean plus a linear ramp) describes the low-frequency part of
  its luma to within `NEAR_UNIFORM_RESIDUAL` grey levels: its dct bits are then mostly noise, the
  tone is all there is to it, and two near-uniform images with the same tone look alike. The tone of
  an image with structure carries `tone_hash.STRUCTURED`: its mean colour alone is no evidence of a
  copy, but it corroborates a centre match (`near_kind`).

Two images are near copies (`near_kind`) when their dct hashes are within the distance ("dct"), or
both are near-uniform and their tones are within it ("tone"), or a centre hash of one is within the
distance of the other's dct or centre hash and their tones are within the distance ("centre"). Why
the third: a crop of a few percent per side, which ExampleGen's --resize stretches back to the full
frame, moves the content against the frame; the bits of the higher frequencies turn with it (on
issue 46's set, 40 of 500 such copies of photo tiles and drawings on gradients were 12 bits or more
away). A copy cut by 0-5 % on a side is at most 2.5 % off one of the two frames, the whole or the
central one. The tone, made of half-image means, hardly moves under such a crop; asking for it
keeps the centre match from pairing distinct images (without it, 5 of 750 distinct images of issue
46's set were flagged instead of 2: `CENTRE_CUT`).

Not flip- or rotation-invariant: a mirrored copy is a different image to these hashes.

An image of fewer than 32 pixels on a side (an 8-bit L or RGB file: the sizes `hash_input` sees) is
upscaled into the thumbnail, and its 64 bits then tell look-alikes, not copies, apart: on scikit-learn's
digits (28-px files upscaled from 8×8), 1,109 pairs of distinct digits across splits are within 10 bits,
while a re-encoded, brightened (±10 %) or rescaled (0.5-1.5×) copy stays within 2 bits of its original
(300 of 300 each). Its tone carries `tone_hash.LOW_DETAIL`, and a dct or centre match with such an image
counts only within `LOW_DETAIL_BITS` (3 pairs of distinct digits). Combined alterations (a crop, a
rescale, a brightness change and a JPEG at quality 60 at once) move a copy further: 36 % of those stay
within 2 bits on the digits; exact copies are also caught by the content check (`leakage`).

>>> from PIL import Image, ImageDraw
>>> a = Image.new("RGB", (120, 90), (20, 40, 60))
>>> ImageDraw.Draw(a).ellipse((10, 20, 70, 80), fill=(250, 200, 10))
>>> copy, other = a.resize((200, 150)), a.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
>>> distance(image_hashes(a)[0], image_hashes(copy)[0]), distance(image_hashes(a)[0], image_hashes(other)[0]) > 10
(2, True)
>>> near_kind(image_hashes(a), image_hashes(copy), 10), near_kind(image_hashes(a), image_hashes(other), 10)
('dct', None)
>>> bool(is_structured(image_hashes(a)[2])), is_near_uniform(thumbnail(Image.new("RGB", (50, 50), (30, 200, 40))))
(True, True)
>>> flat, larger = (image_hashes(Image.new("RGB", size, (30, 200, 40)))[2] for size in ((50, 50), (80, 60)))
>>> flat == larger
True
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
from PIL import Image

from .hamming_search import popcount
from .tone_hash import LOW_DETAIL, STRUCTURED, is_low_detail, is_structured, tone_distances, tone_values

LOW_DETAIL_BITS = 2  # how near a dct or centre hash of a low-detail image must be (module docstring)

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
# The central frame of the `centre` hash: this share of each side left out. Measured at distance 10 on
# issue 46's set (5 × 100 copies cropped up to 5 % per side, 750 distinct images; a centre match counted
# only where the tones agree): through ExampleGen at 128×128, 489 of 500 copies (460 without the centre
# hash), 2 of 750 distinct images flagged (2 without); hashed in process, 2.5 / 3.75 / 5 % found 489 / 491 /
# 490, and without the tones' check 5 of 750 were flagged. A copy cut by 0-5 % on a side is then at most
# 2.5 % off one of the two frames (the whole or the central one).
CENTRE_CUT = 0.025


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
    return not is_structured(hashes_of([thumb])[0][2])


def image_hashes(image: Image.Image | np.ndarray) -> tuple[int, int, int]:
    """(dct hash, centre hash, tone hash; `tone_hash.STRUCTURED` set when the image has structure): what
    ExampleGen stores per image."""
    return hashes_of([hash_input(image)])[0]


NEAR_KINDS = ("dct", "tone", "centre")  # what makes a pair near (`near_kinds`), by number
Hashes = tuple[np.ndarray, np.ndarray, np.ndarray]  # dct, centre and tone hash per image


def near_kinds(first: Hashes, second: Hashes, limit: int, centre: bool = True) -> np.ndarray:
    """Per pair of images, the number in NEAR_KINDS of the rule that makes them near copies within `limit` (see
    the module docstring), or -1. `centre=False`: without the centre hash (the rule before issue 46)."""
    (dct_a, centre_a, tone_a), (dct_b, centre_b, tone_b) = ([np.asarray(v, dtype=np.int64) for v in hashes]
                                                            for hashes in (first, second))
    bits = np.where(is_low_detail(tone_a) | is_low_detail(tone_b), min(limit, LOW_DETAIL_BITS), limit)
    kinds = np.where(_bits(dct_a, dct_b) <= bits, 0, -1)
    uniform = ~(is_structured(tone_a) | is_structured(tone_b))
    framed = _centre_bits(first, second) <= bits if centre else np.zeros(len(kinds), dtype=bool)
    asked = np.nonzero((kinds < 0) & (uniform | framed))[0]  # the pairs a tone can make near
    close = tone_distances(tone_a[asked], tone_b[asked], limit) <= limit
    kinds[asked[close & uniform[asked]]] = 1
    kinds[asked[close & ~uniform[asked] & framed[asked]]] = 2
    return kinds


def _bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return popcount((np.asarray(a, dtype=np.int64) ^ np.asarray(b, dtype=np.int64)).view(np.uint64))


def _centre_bits(first: Hashes, second: Hashes) -> np.ndarray:
    """Per pair, the fewest bits between hashes of which one at least is a centre hash."""
    (dct_a, centre_a, _), (dct_b, centre_b, _) = first, second
    return np.minimum.reduce([_bits(dct_a, centre_b), _bits(centre_a, dct_b), _bits(centre_a, centre_b)])


def near_kind(a: tuple[int, int, int], b: tuple[int, int, int], limit: int, centre: bool = True) -> str | None:
    """`near_kinds` of one pair of (dct, centre, tone) hashes: "dct", "tone", "centre" or None."""
    kind = int(near_kinds(tuple(np.array([v]) for v in a), tuple(np.array([v]) for v in b),  # type: ignore[arg-type]
                          limit, centre)[0])
    return NEAR_KINDS[kind] if kind >= 0 else None


def hash_input(image: Image.Image | np.ndarray, source_hw: tuple[int, int] | None = None) -> np.ndarray:
    """What the hashes need of one image, at most 12 KB whatever its size, hashed in batches (`hashes_of`).

    An 8-bit L or RGB image of at most `SMALL_SIDE` pixels a side gives its own pixels: the batch
    applies the thumbnail's resize as a matrix (`_box_weights`), which cost less than a Pillow resize
    per image (8 of a 28×28 row's ~100 µs). Any other image gives its 32×32 thumbnail as Pillow
    makes it (uint8 [32, 32] gray or [32, 32, 3]; float32 for 16-bit pixels).

    `source_hw`: the file's size before ExampleGen's resize. A file under 32 pixels a side that the resize
    enlarged is hashed at its own size again, so it is judged as the low-detail image it is.
    """
    if (source_hw is not None and isinstance(image, Image.Image) and image.mode in ("L", "RGB")
            and min(source_hw) < SIDE and image.size != (source_hw[1], source_hw[0])):
        image = image.resize((source_hw[1], source_hw[0]), Image.Resampling.BOX)
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


def _frame_weights(size: int) -> np.ndarray:
    """[32, size]: the central frame of an axis `size` pixels long (`CENTRE_CUT` off each end) resampled to 32
    pixels by area: each output pixel the mean of the input it covers, partly covered pixels in part."""
    edges = size * (CENTRE_CUT + (1 - 2 * CENTRE_CUT) * np.arange(SIDE + 1) / SIDE)
    low, high = np.arange(size), np.arange(size) + 1
    overlap = np.clip(np.minimum(edges[1:, None], high) - np.maximum(edges[:-1, None], low), 0, None)
    return (overlap / overlap.sum(axis=1, keepdims=True)).astype(np.float32)


@functools.lru_cache(maxsize=2 * SMALL_SIDE)
def _axis_maps(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One axis of an image `size` pixels long → its 9 low DCT frequencies [9, size] of the 32-pixel
    thumbnail, the same of the thumbnail's central frame, and the thumbnail's two halves' means [2, size]."""
    weights = _box_weights(size)
    # The central frame of the thumbnail as it is, not of the pixels: the same hash whatever the image's size.
    framed = _LOW @ _frame_weights(SIDE) @ weights
    return ((_LOW @ weights).astype(np.float32), framed.astype(np.float32),
            (weights.reshape(2, SIDE // 2, size).mean(axis=1)).astype(np.float32))


def hashes_of(inputs: Sequence[np.ndarray]) -> list[tuple[int, int, int]]:
    """`image_hashes` of N images from their `hash_input`s, vectorized over the batch (per input shape)."""
    coefficients = np.empty((2, len(inputs), 9, 9), dtype=np.float32)  # the whole thumbnail, its central frame
    quadrants = np.empty((len(inputs), 2, 2, 3), dtype=np.float32)
    groups: dict[tuple[int, ...], list[int]] = {}
    for number, item in enumerate(inputs):
        groups.setdefault(item.shape, []).append(number)
    low_detail = np.zeros(len(inputs), dtype=bool)
    for shape, picked in groups.items():
        low_detail[picked] = min(shape[:2]) < SIDE  # an image's own pixels, upscaled into the thumbnail
        pixels = np.stack([inputs[i] for i in picked]).astype(np.float32).reshape(len(picked), *shape[:2], -1)
        lumas = pixels[..., 0] * _LUMA_SUM if pixels.shape[3] == 1 else pixels @ _LUMA  # [n, H, W]
        low_rows, framed_rows, half_rows = _axis_maps(shape[0])
        low_cols, framed_cols, half_cols = _axis_maps(shape[1])
        coefficients[0, picked] = low_rows @ lumas @ low_cols.T
        coefficients[1, picked] = framed_rows @ lumas @ framed_cols.T
        channels = half_rows @ pixels.transpose(0, 3, 1, 2) @ half_cols.T  # [n, C, 2, 2]
        quadrants[picked] = channels.transpose(0, 2, 3, 1)  # one channel (gray) stands for all three
    return _hashes(coefficients.reshape(2, len(inputs), -1), quadrants, low_detail)


def _hashes(coefficients: np.ndarray, quadrants: np.ndarray, low_detail: np.ndarray) -> list[tuple[int, int, int]]:
    """The hashes from [2, N, 81] low-frequency DCT coefficients (frequencies 0-8 squared; of the thumbnail and
    of its central frame), [N, 2, 2, 3] quadrant means, and whether each image is low-detail."""
    dct, centre = (_dct_bits(c) for c in coefficients)
    structure = coefficients[0] @ _OFF_PLANE
    uniform = np.sqrt(np.einsum("ij,ij->i", structure, structure)) / SIDE < NEAR_UNIFORM_RESIDUAL
    tone = tone_values(quadrants) | np.where(uniform, 0, STRUCTURED) | np.where(low_detail, LOW_DETAIL, 0)
    return [(int(d), int(c), int(t)) for d, c, t in zip(dct, centre, tone)]


def _dct_bits(coefficients: np.ndarray) -> np.ndarray:
    """[N, 81] low-frequency DCT coefficients → N dct hashes: each AC coefficient above its image's median."""
    values = coefficients[:, _AC_INDEX]
    ordered = np.sort(values, axis=1)
    medians = (ordered[:, 31] + ordered[:, 32]) / 2
    return _packed(values > medians[:, None])


def _packed(bits: np.ndarray) -> np.ndarray:
    """[N, 64] booleans → N signed 64-bit integers (what int64 tables hold)."""
    return np.ascontiguousarray(np.packbits(bits.astype(np.uint8), axis=1)).view(">i8")[:, 0].astype(np.int64)


def distance(a: int, b: int) -> int:
    """Hamming distance between two 64-bit hashes (signed or not)."""
    return bin((a ^ b) & 0xFFFF_FFFF_FFFF_FFFF).count("1")

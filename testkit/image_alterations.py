"""Altered copies of an image, as a near-duplicate of it arrives (tests/example_gen, benchmarks/near_duplicates*.py),
and ExampleGen's rule that pairs two images' hashes (`is_near`).

`alter(image, alteration, rng)` for each of ALTERATIONS: a JPEG re-encode at quality 60-95, a 0.5-1.5× resize, a crop
of up to 5 % per dimension, brightness ±3-10 %, all four together ("combined"), and issue 46's `sides`
(near_duplicate_images.py).
"""
from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageEnhance

from shardflow.core.perceptual_hash import near_kind

from .near_duplicate_images import sides

ALTERATIONS = ("jpeg", "resize", "crop", "brightness", "combined", "sides")


def jpeg(image: Image.Image, quality: int) -> Image.Image:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def resize(image: Image.Image, scale: float) -> Image.Image:
    return image.resize((max(8, round(image.width * scale)), max(8, round(image.height * scale))),
                        Image.Resampling.BILINEAR)


def crop(image: Image.Image, rng: np.random.Generator, fraction: float = 0.05) -> Image.Image:
    """Up to `fraction` of each dimension cut, split at random between the two sides."""
    cut_x, cut_y = round(image.width * fraction * rng.uniform()), round(image.height * fraction * rng.uniform())
    left, top = int(rng.integers(cut_x + 1)), int(rng.integers(cut_y + 1))
    return image.crop((left, top, image.width - (cut_x - left), image.height - (cut_y - top)))


def brightness(image: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Brightness(image).enhance(factor)


def _factor(rng: np.random.Generator) -> float:
    return float(rng.uniform(0.9, 0.97) if rng.random() < 0.5 else rng.uniform(1.03, 1.1))


def alter(image: Image.Image, alteration: str, rng: np.random.Generator) -> Image.Image:
    if alteration == "jpeg":
        return jpeg(image, int(rng.integers(60, 96)))
    if alteration == "resize":
        return resize(image, float(rng.uniform(0.5, 1.5)))
    if alteration == "crop":
        return crop(image, rng)
    if alteration == "brightness":
        return brightness(image, _factor(rng))
    if alteration == "combined":
        image = resize(crop(image, rng), float(rng.uniform(0.5, 1.5)))
        return jpeg(brightness(image, _factor(rng)), int(rng.integers(60, 96)))
    if alteration == "sides":
        return sides(image, rng)
    raise ValueError(f"unknown alteration {alteration!r}")


def is_near(a: tuple[int, int, int], b: tuple[int, int, int], limit: int) -> bool:
    """ExampleGen's rule (see the module docstring)."""
    return near_kind(a, b, limit) is not None

"""The near-duplicate originals of the tests and the benchmark, and the alteration of issue 46's copies.

- `photos`: crops of scikit-learn's two sample photographs (96-300 px), with their boxes.
- `drawings`: random rectangles, ellipses, lines and text on a random flat background.
- `near_uniform`: linear gradients between two random colours (even numbers) and flat colours (odd),
  both with Gaussian noise of σ 1-4.

Issue 46's kinds, whose copies the dct hash alone missed (one in eight beyond 10 bits):

- `photo_tiles`: 100-px crops of scikit-learn's two sample photographs, upscaled to 160 px (soft: little
  detail at the hash's higher frequencies), with their boxes in the source photo. Plain-sky tiles are
  drawn again: they are near-uniform images (`near_uniform`'s kind), and any two look alike.
- `drawings_on_gradient`: a smooth two-colour linear gradient in a random direction with mild noise (σ
  1-4), and 3-8 filled ellipses and rectangles of random colours.
- `flats`: flat colours with mild noise, each at least 40 grey levels from the others in some channel
  (closer ones are, to any perceptual measure, within ±10 % brightness of each other).
- `sides`: the alteration of issue 46's copies: up to 5 % cut from each side independently (up to 10 %
  of a dimension, which ExampleGen's --resize stretches back), a 0.5-1.5× rescale (a 160-px tile can
  end at 80 px), brightness ±10 % and JPEG quality 60-95.

`originals_of` draws `count` of each of KINDS; `distinct_pairs` are their pairs but crops or tiles of one photo
overlapping by more than 30 % IoU (`box_overlap`), which are not distinct. Their other alterations: image_alterations.py.
"""
from __future__ import annotations

import io
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance

TILE, TILE_SIDE = 100, 160
SIDE = 224  # the originals' side (photo crops: 96-300 px)
Box = tuple[int, int, int, int, int]  # source photo number, left, top, right, bottom
KINDS = ("photo", "drawing", "near_uniform", "photo_tile", "drawing_on_gradient")  # the last two: issue 46


def _colour(rng: np.random.Generator) -> tuple[int, int, int]:
    return tuple(int(v) for v in rng.integers(0, 256, 3))  # type: ignore[return-value]


def photos(rng: np.random.Generator, count: int) -> tuple[list[Image.Image], list[tuple[int, ...]]]:
    """Crops of the sample photographs and their boxes (photo number, left, top, right, bottom)."""
    from sklearn.datasets import load_sample_images

    sources = [Image.fromarray(a) for a in load_sample_images().images]
    images, boxes = [], []
    for _ in range(count):
        number = int(rng.integers(len(sources)))
        source = sources[number]
        width = int(rng.integers(96, 300))
        height = min(int(width * rng.uniform(0.75, 1.33)), source.height - 1)
        left, top = int(rng.integers(source.width - width)), int(rng.integers(source.height - height))
        images.append(source.crop((left, top, left + width, top + height)))
        boxes.append((number, left, top, left + width, top + height))
    return images, boxes


def drawings(rng: np.random.Generator, count: int, side: int = SIDE) -> list[Image.Image]:
    images = []
    for _ in range(count):
        image = Image.new("RGB", (side, side), _colour(rng))
        draw = ImageDraw.Draw(image)
        for _ in range(int(rng.integers(3, 9))):
            x0, y0 = (int(v) for v in rng.integers(0, side * 9 // 10, 2))
            x1, y1 = x0 + int(rng.integers(side // 20, side // 2)), y0 + int(rng.integers(side // 20, side // 2))
            shape = int(rng.integers(4))
            if shape == 0:
                draw.rectangle((x0, y0, x1, y1), fill=_colour(rng))
            elif shape == 1:
                draw.ellipse((x0, y0, x1, y1), fill=_colour(rng))
            elif shape == 2:
                draw.line((x0, y0, x1, y1), fill=_colour(rng), width=int(rng.integers(2, 10)))
            else:
                draw.text((x0, y0), "".join(chr(int(c)) for c in rng.integers(65, 91, 5)), fill=_colour(rng))
        images.append(image)
    return images


def near_uniform(rng: np.random.Generator, count: int, side: int = SIDE) -> list[Image.Image]:
    """Gradients (even numbers) and flat colours (odd), both with slight noise."""
    y, x = np.mgrid[0:side, 0:side] / (side - 1.0)
    images, flats = [], []
    for number in range(count):
        start = np.array(_colour(rng), dtype=float)
        if number % 2:
            while any(np.abs(start - flat).max() < 40 for flat in flats):
                start = np.array(_colour(rng), dtype=float)
            flats.append(start)
            pixels = np.broadcast_to(start, (side, side, 3)).astype(float)
        else:
            angle = rng.uniform(0, 2 * np.pi)
            ramp = np.cos(angle) * (x - 0.5) + np.sin(angle) * (y - 0.5)
            ramp = ((ramp - ramp.min()) / (ramp.max() - ramp.min()))[..., None]
            pixels = start * (1 - ramp) + np.array(_colour(rng), dtype=float) * ramp
        pixels = pixels + rng.normal(0, rng.uniform(1, 4), pixels.shape)
        images.append(Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)))
    return images


def box_overlap(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    """IoU of two boxes (photo number, left, top, right, bottom); 0 for boxes in different photos."""
    if a[0] != b[0]:
        return 0.0
    width, height = max(0, min(a[3], b[3]) - max(a[1], b[1])), max(0, min(a[4], b[4]) - max(a[2], b[2]))
    inter = width * height
    return inter / ((a[3] - a[1]) * (a[4] - a[2]) + (b[3] - b[1]) * (b[4] - b[2]) - inter)


def photo_tiles(rng: np.random.Generator, count: int, avoid: Sequence[Box] = (), overlap: float = 0.3
                ) -> tuple[list[Image.Image], list[Box]]:
    """`count` tiles and their boxes; near-uniform tiles, and with `avoid` tiles overlapping one of those
    boxes by more than `overlap` IoU, are drawn again (up to 1,000 times, then kept)."""
    from sklearn.datasets import load_sample_images

    from shardflow.core.perceptual_hash import is_near_uniform, thumbnail

    sources = [Image.fromarray(a) for a in load_sample_images().images]
    tiles, boxes = [], []
    for _ in range(count):
        for _ in range(1000):
            number = int(rng.integers(len(sources)))
            left = int(rng.integers(sources[number].width - TILE))
            top = int(rng.integers(sources[number].height - TILE))
            box = (number, left, top, left + TILE, top + TILE)
            tile = sources[number].crop(box[1:]).resize((TILE_SIDE, TILE_SIDE), Image.Resampling.BICUBIC)
            if not is_near_uniform(thumbnail(tile)) and all(box_overlap(box, other) <= overlap for other in avoid):
                break
        tiles.append(tile)
        boxes.append(box)
    return tiles, boxes


def _gradient(rng: np.random.Generator, side: int) -> np.ndarray:
    y, x = np.mgrid[0:side, 0:side] / (side - 1.0)
    angle = rng.uniform(0, 2 * np.pi)
    ramp = np.cos(angle) * (x - 0.5) + np.sin(angle) * (y - 0.5)
    ramp = ((ramp - ramp.min()) / (ramp.max() - ramp.min()))[..., None]
    pixels = np.array(_colour(rng), float) * (1 - ramp) + np.array(_colour(rng), float) * ramp
    return pixels + rng.normal(0, rng.uniform(1, 4), pixels.shape)


def drawings_on_gradient(rng: np.random.Generator, count: int, side: int = TILE_SIDE) -> list[Image.Image]:
    images = []
    for _ in range(count):
        image = Image.fromarray(np.clip(_gradient(rng, side), 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(image)
        for _ in range(int(rng.integers(3, 9))):
            x0, y0 = (int(v) for v in rng.integers(0, side * 9 // 10, 2))
            x1, y1 = x0 + int(rng.integers(side // 20, side // 2)), y0 + int(rng.integers(side // 20, side // 2))
            (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=_colour(rng))
        images.append(image)
    return images


def flats(rng: np.random.Generator, count: int, side: int = TILE_SIDE, avoid: list[np.ndarray] | None = None
          ) -> tuple[list[Image.Image], list[np.ndarray]]:
    """`count` flat colours and the colours themselves, each 40 levels from the others and from `avoid`'s."""
    taken = list(avoid or [])
    images, colours = [], []
    for _ in range(count):
        colour = np.array(_colour(rng), dtype=float)
        while any(np.abs(colour - other).max() < 40 for other in taken):
            colour = np.array(_colour(rng), dtype=float)
        taken.append(colour)
        colours.append(colour)
        pixels = np.broadcast_to(colour, (side, side, 3)) + rng.normal(0, rng.uniform(1, 4), (side, side, 3))
        images.append(Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)))
    return images, colours


def sides(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """Issue 46's alteration (module docstring), decoded back from its JPEG bytes (`sides_jpeg`)."""
    return Image.open(io.BytesIO(sides_jpeg(image, rng))).convert("RGB")


def sides_jpeg(image: Image.Image, rng: np.random.Generator) -> bytes:
    width, height = image.size
    left, right = (round(width * f) for f in rng.uniform(0, 0.05, 2))
    top, bottom = (round(height * f) for f in rng.uniform(0, 0.05, 2))
    image = image.convert("RGB").crop((left, top, width - right, height - bottom))
    scale = float(rng.uniform(0.5, 1.5))
    image = image.resize((max(8, round(image.width * scale)), max(8, round(image.height * scale))),
                         Image.Resampling.BILINEAR)
    image = ImageEnhance.Brightness(image).enhance(float(rng.uniform(0.9, 1.1)))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=int(rng.integers(60, 96)))
    return buffer.getvalue()


def originals_of(rng: np.random.Generator, count: int
                 ) -> tuple[dict[str, list[Image.Image]], list[tuple[int, ...] | None]]:
    """`count` originals of each kind, in KINDS order, and each one's box in its source photo (None: not a photo)."""
    photo_images, photo_boxes = photos(rng, count)
    images = {"photo": photo_images, "drawing": drawings(rng, count), "near_uniform": near_uniform(rng, count)}
    images["photo_tile"], tile_boxes = photo_tiles(rng, count)
    images["drawing_on_gradient"] = drawings_on_gradient(rng, count)
    return images, [*photo_boxes, *[None] * (2 * count), *tile_boxes, *[None] * count]


def distinct_pairs(boxes: list[tuple[int, ...] | None]) -> tuple[np.ndarray, np.ndarray]:
    """Every pair i < j of originals but crops or tiles of one photo overlapping by more than 30 % IoU."""
    first, second = np.triu_indices(len(boxes), 1)
    boxed = np.array([box is not None for box in boxes])
    keep = np.ones(len(first), dtype=bool)
    for n in np.nonzero(boxed[first] & boxed[second])[0]:
        keep[n] = box_overlap(boxes[first[n]], boxes[second[n]]) <= 0.3  # type: ignore[arg-type]
    return first[keep], second[keep]

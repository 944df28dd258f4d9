"""Masks for tests and benchmarks: square photo crops with 4-class PNG masks, written once, and a CSV index over them.

    index = ensure_masks(Path("bench_out/masks-256"), count=1_000, size=256)   # columns image,mask

The photographs are scikit-learn's two sample photos (`photo_data`'s sources), cropped at random
offsets and sizes and resized to `size`×`size`, saved as JPEG at quality 90. Each mask gives a
pixel the class of its smoothed brightness quartile (0-63, 64-127, 128-191, 192-255 after a 5 px
box blur), so a U-Net has something learnable. Idempotent: a stamp written last records the count.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from .photo_data import _sources

SEED = 30
QUALITY = 90
NUM_CLASSES = 4
_STAMP = "masks.done"


def _crop(sources: list[Image.Image], rng: np.random.Generator, size: int) -> Image.Image:
    source = sources[int(rng.integers(len(sources)))]
    side = int(rng.integers(min(size, source.height) // 2, min(source.width, source.height) + 1))
    left, top = int(rng.integers(source.width - side + 1)), int(rng.integers(source.height - side + 1))
    return source.crop((left, top, left + side, top + side)).resize((size, size), Image.Resampling.BILINEAR)


def mask_of(photo: Image.Image) -> Image.Image:
    """Class id per pixel: the quartile of the photo's blurred brightness."""
    gray = np.asarray(photo.convert("L").filter(ImageFilter.BoxBlur(5)))
    return Image.fromarray((gray // 64).astype(np.uint8))


def ensure_masks(root: Path, count: int, size: int = 256) -> Path:
    """`root/index.csv` (columns image,mask) over `count` photos and masks, written unless done."""
    index, stamp = root / "index.csv", root / _STAMP
    if stamp.is_file() and stamp.read_text().strip() == f"{count} {size}":
        return index
    for folder in ("img", "mask"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    sources, rng = _sources(), np.random.default_rng(SEED)
    rows = []
    for number in range(count):
        photo = _crop(sources, rng, size)
        names = (f"img/{number:05d}.jpg", f"mask/{number:05d}.png")
        photo.save(root / names[0], format="JPEG", quality=QUALITY)
        mask_of(photo).save(root / names[1])
        rows.append(names)
    with open(index, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(("image", "mask"))
        writer.writerows(rows)
    stamp.write_text(f"{count} {size}")  # last: its presence means the set is complete
    return index

"""Photos for tests and benchmarks: distinct JPEG crops of real photographs, written once, and CSV indexes over them.

    root = ensure_photos(Path("bench_out/photos"))       # 2,000 JPEGs under root/img/
    index = ensure_photo_index(root, rows=20_000)         # root/index-20000.csv, columns x,y

The two photographs scikit-learn ships (`load_sample_images`: china.jpg and flower.jpg, 640×427)
are cropped at random sizes of 300–500 px per side, half of them turned to portrait, and
re-encoded at quality 90, as cameras and web images are. Crops start at random offsets, so every
file has distinct content (ExampleGen's leakage check hashes contents). A 500 px side is larger
than the photos' 427 px height: such crops are cut from the photo scaled up by 500/427 first.
Labels are `number % 10`. Both steps are idempotent, like benchmarks' `data.ensure_images`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from .file_index import ensure_index

NUM_PHOTOS = 2_000
SIDES = (300, 500)
QUALITY = 90
SEED = 14
_STAMP = "photos.done"


def photo_name(number: int) -> str:
    """Path of photo `number` relative to the data root."""
    return f"img/{number:05d}.jpg"


def _sources() -> list[Image.Image]:
    """The sample photographs, and each scaled so that its short side is the largest crop side."""
    from sklearn.datasets import load_sample_images  # imported here: only needed on the first run

    photos = [Image.fromarray(a) for a in load_sample_images().images]
    scale = SIDES[1] / min(photos[0].size)
    return photos + [p.resize((round(p.width * scale), round(p.height * scale)), Image.Resampling.BICUBIC)
                     for p in photos]


def crop_of(sources: list[Image.Image], width: int, height: int, rng: np.random.Generator) -> Image.Image:
    """A `width` × `height` crop at a random place of a random source that holds it."""
    candidates = [s for s in sources if s.width >= width and s.height >= height]
    source = candidates[int(rng.integers(len(candidates)))]
    left = int(rng.integers(source.width - width + 1))
    top = int(rng.integers(source.height - height + 1))
    return source.crop((left, top, left + width, top + height))


def _crop(sources: list[Image.Image], rng: np.random.Generator) -> Image.Image:
    width, height = (int(v) for v in rng.integers(SIDES[0], SIDES[1] + 1, size=2))
    crop = crop_of(sources, width, height, rng)
    return crop.transpose(Image.Transpose.ROTATE_90) if rng.random() < 0.5 else crop


def photo_set_written(root: Path, stamp: str, count: int) -> bool:
    """Whether the set of `count` photos under `root` is complete: its stamp file, written last, says so."""
    marker = root / stamp
    return marker.is_file() and marker.read_text().strip() == str(count)


def ensure_photos(root: Path, count: int = NUM_PHOTOS) -> Path:
    """Writes `count` JPEG crops and `labels.npy` under `root` unless already done."""
    if photo_set_written(root, _STAMP, count):
        return root
    (root / "img").mkdir(parents=True, exist_ok=True)
    sources, rng = _sources(), np.random.default_rng(SEED)
    for number in range(count):
        _crop(sources, rng).save(root / photo_name(number), format="JPEG", quality=QUALITY)
    np.save(root / "labels.npy", np.arange(count, dtype=np.int64) % 10)
    (root / _STAMP).write_text(str(count))  # written last: its presence means the set is complete
    return root


def ensure_photo_index(root: Path, rows: int) -> Path:
    """`root/index-<rows>.csv` with columns x,y: the photos repeated in order until `rows` rows."""
    return ensure_index(root, rows, name=photo_name)

"""A mixed photo set: what other photo collections hold that the default set (`testkit.photo_data`) does not.

    root = ensure_mixed_photos(Path("bench_out/photos-mixed-20000"), 20_000)   # one file per row
    index = ensure_photo_index(root, rows=20_000)

Issue 46: on 20,000 crops of real photos (some grayscale) ExampleGen took 1.09× the 2-process loop's
time, against 0.94× on the default set. Each file here is a distinct 300–500 px crop of
scikit-learn's sample photographs, as in `testkit.photo_data`, and in addition draws its traits at random:
  - aspect ratio: the long side 1–2× the short one (the default set: both sides 300–500 at random);
  - grayscale (`GRAY_SHARE`): saved as 1-channel JPEG;
  - chroma subsampling (colour files): 4:4:4 for `FULL_CHROMA_SHARE` (what many cameras and
    editors write at high quality), else 4:2:0;
  - an EXIF orientation tag other than 1 for `ROTATED_SHARE` (a phone held upright);
  - quality 80–95, and progressive encoding for `PROGRESSIVE_SHARE` (web images).
`traits.csv` records each file's traits (name, width, height, gray, subsampling, orientation,
quality, progressive): per-trait timings read it. Distinct files, one per row by default, so the
page cache and repetition favour no contender. Labels are `number % 10`; idempotent.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

from testkit.photo_data import SIDES, _sources, crop_of, photo_name, photo_set_written

GRAY_SHARE = 0.25
FULL_CHROMA_SHARE = 0.3
ROTATED_SHARE = 0.2
PROGRESSIVE_SHARE = 0.1
QUALITIES = (80, 95)
SEED = 46
_ORIENTATIONS = (2, 3, 4, 5, 6, 7, 8)
_STAMP = "mixed.done"


def _crop(sources: list[Image.Image], rng: np.random.Generator) -> Image.Image:
    short = int(rng.integers(SIDES[0], SIDES[1] + 1))
    long = min(SIDES[1], int(short * rng.uniform(1.0, 2.0))) if rng.random() < 0.8 else short
    width, height = (long, short) if rng.random() < 0.5 else (short, long)
    return crop_of(sources, width, height, rng)


def _save(image: Image.Image, path: Path, rng: np.random.Generator) -> dict[str, object]:
    gray = rng.random() < GRAY_SHARE
    traits: dict[str, object] = {"name": path.name, "width": image.width, "height": image.height, "gray": int(gray),
                                 "subsampling": "4:2:0", "orientation": 1,
                                 "quality": int(rng.integers(QUALITIES[0], QUALITIES[1] + 1)),
                                 "progressive": int(rng.random() < PROGRESSIVE_SHARE)}
    options: dict[str, object] = {"quality": traits["quality"], "progressive": bool(traits["progressive"])}
    if gray:
        image, traits["subsampling"] = image.convert("L"), "none"
    elif rng.random() < FULL_CHROMA_SHARE:
        options["subsampling"], traits["subsampling"] = 0, "4:4:4"
    if rng.random() < ROTATED_SHARE:
        exif = Image.Exif()
        exif[0x0112] = traits["orientation"] = int(rng.choice(_ORIENTATIONS))
        options["exif"] = exif.tobytes()
    image.save(path, format="JPEG", **options)
    return traits


def ensure_mixed_photos(root: Path, count: int) -> Path:
    """Writes `count` mixed JPEG crops, `labels.npy` and `traits.csv` under `root` unless already done."""
    if photo_set_written(root, _STAMP, count):
        return root
    (root / "img").mkdir(parents=True, exist_ok=True)
    sources, rng = _sources(), np.random.default_rng(SEED)
    with open(root / "traits.csv", "w", newline="") as out:
        writer = None
        for number in range(count):
            traits = _save(_crop(sources, rng), root / photo_name(number), rng)
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(traits))
                writer.writeheader()
            writer.writerow(traits)
    np.save(root / "labels.npy", np.arange(count, dtype=np.int64) % 10)
    (root / _STAMP).write_text(str(count))  # written last: its presence means the set is complete
    return root

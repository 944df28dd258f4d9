"""Photos whose labels a small model can learn, with a known share of them flipped: label-issue ground truth.

    root = ensure_labelled_photos(Path("bench_out/label_photos"), train=3_000, eval=5_000)
    flipped = plant_flips(root / "eval.csv", root / "eval-noisy.csv", share=0.05, seed=1)

The class of a photo is where it was cut from: each of scikit-learn's two sample photographs
(china.jpg, flower.jpg, 640×427) is divided into 4 vertical strips of 160 px, 8 classes in all. A
crop is a square of 80–128 px centred in the middle half of its strip's width, so a crop may
overrun into a neighbouring strip by up to 24 px (a little ambiguity at the edges, as real data has); brightness varies
±10 % and the crop is re-encoded as JPEG at quality 90. Train and eval crops are drawn from
different seeds, so no file is in both splits.

`plant_flips` changes the label of `share` of the rows, chosen at random, to another class chosen
at random, and returns the CSV row numbers it changed (1-based data rows, as rejects.jsonl and
label_issues.jsonl number them): the ground truth of the benchmark.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance

STRIPS = 4
SIDES = (80, 128)
MARGIN = 0.25  # crop centres keep this share of the strip's width from its edges
QUALITY = 90
CLASSES = 2 * STRIPS
_STAMP = "photos.done"


def _sources() -> list[Image.Image]:
    from sklearn.datasets import load_sample_images  # imported here: only needed on the first run

    return [Image.fromarray(a) for a in load_sample_images().images]


def _crop(source: Image.Image, strip: int, rng: np.random.Generator) -> Image.Image:
    side = int(rng.integers(SIDES[0], SIDES[1] + 1))
    width = source.width // STRIPS
    inset = int(MARGIN * width)
    centre_x = strip * width + inset + int(rng.integers(width - 2 * inset))
    centre_y = int(rng.integers(source.height))
    left = min(max(centre_x - side // 2, 0), source.width - side)
    top = min(max(centre_y - side // 2, 0), source.height - side)
    crop = source.crop((left, top, left + side, top + side))
    return ImageEnhance.Brightness(crop).enhance(float(rng.uniform(0.9, 1.1)))


def _write_split(root: Path, split: str, count: int, seed: int, sources: list[Image.Image]) -> None:
    rng = np.random.default_rng(seed)
    folder = root / split
    folder.mkdir(parents=True, exist_ok=True)
    labels = rng.integers(CLASSES, size=count)
    rows = []
    for number, label in enumerate(labels):
        name = f"{split}/{number:05d}.jpg"
        _crop(sources[label // STRIPS], label % STRIPS, rng).save(root / name, format="JPEG", quality=QUALITY)
        rows.append((name, int(label)))
    _write_csv(root / f"{split}.csv", rows)


def _write_csv(path: Path, rows: list[tuple[str, int]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(("image", "label"))
        writer.writerows(rows)
    os.replace(tmp, path)  # a killed run leaves no index that looks complete


def ensure_labelled_photos(root: Path, train: int, eval: int) -> Path:
    """`root/train.csv` and `root/eval.csv` over JPEGs under root/train and root/eval, unless already made."""
    stamp, wanted = root / _STAMP, f"{train} {eval}"
    if stamp.is_file() and stamp.read_text().strip() == wanted:
        return root
    sources = _sources()
    _write_split(root, "train", train, seed=101, sources=sources)
    _write_split(root, "eval", eval, seed=202, sources=sources)
    stamp.write_text(wanted)  # written last: its presence means the set is complete
    return root


def plant_flips(index: Path, noisy: Path, share: float, seed: int) -> set[int]:
    """Writes `noisy`: `index` with `share` of its labels changed to another class; returns the rows changed."""
    with open(index, newline="") as source:
        rows = [(path, int(label)) for path, label in list(csv.reader(source))[1:]]
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(rows), size=round(share * len(rows)), replace=False)
    for position in chosen:
        path, label = rows[position]
        rows[position] = (path, int((label + rng.integers(1, CLASSES)) % CLASSES))
    _write_csv(noisy, rows)
    return {int(position) + 1 for position in chosen}

"""Demo data made offline from a package: scikit-learn's digits as PNG files, a small segmentation set,
and photos: JPEG crops of the two photographs scikit-learn ships, labelled by the photograph.

    shardflow demo-data --output demo_data
    # demo_data/digits/{train,eval}.csv  columns x,y   rows like image/train_0.png,5
    # demo_data/segmentation/index.csv   columns img,msk1,msk2
    # demo_data/photos/{train,eval}.csv  columns image,label   rows like img/007.jpg,flower
    # demo_data/boxes/{train,eval}.csv   AutoML box layout   rows like img/00001.jpg,disc,0.4375,0.26,,,0.78,0.6,,
    # with --mixed-boxes N: demo_data/boxes_mixed/{train,eval}.csv, the same layout, images of any size and aspect
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

from .demo_boxes import write_boxes

DIGIT_SIZE = 28  # upscaled from 8x8 so the images have MNIST's shape


def write_digits(out_dir: Path, eval_fraction: float = 0.2, seed: int = 0) -> tuple[Path, Path]:
    """The 1,797 digits as 28x28 grayscale PNGs, with train.csv and eval.csv (FastEstimator layout)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.images))
    n_eval = int(len(order) * eval_fraction)
    (out_dir / "image").mkdir(parents=True, exist_ok=True)
    indexes = {}
    for split, ids in (("eval", order[:n_eval]), ("train", order[n_eval:])):
        rows = []
        for number, i in enumerate(ids):
            pixels = (digits.images[i] * (255.0 / 16.0)).astype(np.uint8)
            image = Image.fromarray(pixels).resize((DIGIT_SIZE, DIGIT_SIZE), Image.Resampling.BILINEAR)
            relative = f"image/{split}_{number}.png"
            image.save(out_dir / relative)
            rows.append((relative, int(digits.target[i])))
        indexes[split] = _write_csv(out_dir / f"{split}.csv", ("x", "y"), rows)
    return indexes["train"], indexes["eval"]


def write_segmentation(out_dir: Path, count: int = 64, size: int = 32, seed: int = 0) -> Path:
    """Images of random discs and squares; msk1 marks discs, msk2 squares (class ids 0/1)."""
    rng = np.random.default_rng(seed)
    for folder in ("img", "msk1", "msk2"):
        (out_dir / folder).mkdir(parents=True, exist_ok=True)
    yy, xx = np.mgrid[:size, :size]
    rows = []
    for number in range(count):
        disc = np.zeros((size, size), bool)
        square = np.zeros((size, size), bool)
        cy, cx, r = rng.integers(8, size - 8, 2).tolist() + [int(rng.integers(3, 7))]
        disc |= (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        sy, sx = rng.integers(0, size - 8, 2)
        square[sy:sy + 6, sx:sx + 6] = True
        image = rng.integers(0, 40, (size, size, 3)).astype(np.uint8)
        image[disc] = (200, 60, 60)
        image[square] = (60, 60, 200)
        names = [f"img/{number}.png", f"msk1/{number}.png", f"msk2/{number}.png"]
        Image.fromarray(image).save(out_dir / names[0])
        Image.fromarray(disc.astype(np.uint8)).save(out_dir / names[1])
        Image.fromarray(square.astype(np.uint8)).save(out_dir / names[2])
        rows.append(names)
    return _write_csv(out_dir / "index.csv", ("img", "msk1", "msk2"), rows)


def write_photos(out_dir: Path, count: int = 160, seed: int = 0) -> tuple[Path, Path]:
    """`count` JPEG crops (120-240 px a side, some portrait) of china.jpg and flower.jpg, label = the
    photograph's name, 1 in 5 in eval: a photo data set at users' file sizes, made without a download."""
    from sklearn.datasets import load_sample_images

    sources = [Image.fromarray(a) for a in load_sample_images().images]
    names = ("china", "flower")
    rng = np.random.default_rng(seed)
    (out_dir / "img").mkdir(parents=True, exist_ok=True)
    rows: dict[str, list] = {"train": [], "eval": []}
    for number in range(count):
        label = number % 2
        width, height = (int(v) for v in rng.integers(120, 241, size=2))
        source = sources[label]
        left, top = int(rng.integers(source.width - width + 1)), int(rng.integers(source.height - height + 1))
        crop = source.crop((left, top, left + width, top + height))
        crop = crop.transpose(Image.Transpose.ROTATE_90) if rng.random() < 0.3 else crop
        crop.save(out_dir / f"img/{number:03d}.jpg", format="JPEG", quality=90)
        rows["eval" if number % 5 == 4 else "train"].append([f"img/{number:03d}.jpg", names[label]])
    return (_write_csv(out_dir / "train.csv", ("image", "label"), rows["train"]),
            _write_csv(out_dir / "eval.csv", ("image", "label"), rows["eval"]))


def _write_csv(path: Path, header: tuple[str, ...], rows: list) -> Path:
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_all(out_dir: str, mixed_boxes: int = 0) -> dict[str, Path]:
    """Every demo set under `out_dir`; `mixed_boxes` > 0 adds that many box images of any size and aspect."""
    root = Path(out_dir)
    train, evaluation = write_digits(root / "digits")
    segmentation = write_segmentation(root / "segmentation")
    photos_train, photos_eval = write_photos(root / "photos")
    boxes_train, boxes_eval = write_boxes(root / "boxes")  # demo_boxes.py: shapes on photos, 0-5 an image
    written = {"digits_train": train, "digits_eval": evaluation, "segmentation": segmentation,
               "photos_train": photos_train, "photos_eval": photos_eval,
               "boxes_train": boxes_train, "boxes_eval": boxes_eval}
    if mixed_boxes:
        written["boxes_mixed_train"], written["boxes_mixed_eval"] = write_boxes(root / "boxes_mixed", mixed_boxes,
                                                                                mixed=True)
    return written

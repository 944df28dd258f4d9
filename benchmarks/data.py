"""Benchmark inputs: distinct 28×28 grayscale PNG files written once, and CSV indexes that repeat them.

    root = ensure_images(Path("bench_out/data"))          # 2,000 PNGs under root/img/
    index = ensure_index(root, rows=200_000)              # root/index-200000.csv, columns x,y

The pixels are scikit-learn's digits upscaled to 28×28 (MNIST's shape); two pixels carry the file
number so that no two files have the same content (ExampleGen's leakage check hashes contents).
Both steps are idempotent: a completed set is recognised and reused, a partial one is rewritten.
"""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

from testkit import file_index

NUM_FILES = 2_000
SIZE = 28
_STAMP = "images.done"


def _digit_images() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 digits as 28×28 uint8 arrays, and their labels."""
    from sklearn.datasets import load_digits  # imported here: only needed on the first run

    digits = load_digits()
    small = (digits.images * (255.0 / 16.0)).astype(np.uint8)
    big = np.stack([np.asarray(Image.fromarray(a).resize((SIZE, SIZE), Image.Resampling.BILINEAR)) for a in small])
    return big, digits.target.astype(np.int64)


def image_name(number: int) -> str:
    """Path of file `number` relative to the data root."""
    return f"img/{number:05d}.png"


def ensure_images(root: Path, count: int = NUM_FILES) -> Path:
    """Writes `count` distinct PNG files and `labels.csv` under `root` unless already done."""
    stamp = root / _STAMP
    if stamp.is_file() and stamp.read_text().strip() == str(count):
        return root
    (root / "img").mkdir(parents=True, exist_ok=True)
    images, targets = _digit_images()
    labels = []
    for number in range(count):
        pixels = images[number % len(images)].copy()
        pixels[0, 0], pixels[0, 1] = number % 256, number // 256  # makes every file's content unique
        Image.fromarray(pixels).save(root / image_name(number))
        labels.append(int(targets[number % len(images)]))
    np.save(root / "labels.npy", np.asarray(labels, dtype=np.int64))
    stamp.write_text(str(count))  # written last: its presence means the set is complete
    return root


def ensure_index(root: Path, rows: int, name: Callable[[int], str] = image_name) -> Path:
    """`root/index-<rows>.csv` with columns x,y: the files (the digit images by default) repeated until `rows` rows."""
    return file_index.ensure_index(root, rows, name)


def read_index(path: Path) -> list[tuple[str, int]]:
    """The (relative path, label) rows of an index, the way the seed tutorials load it: all at once."""
    with open(path, newline="") as source:
        reader = csv.reader(source)
        next(reader)
        return [(x, int(y)) for x, y in reader]


def ensure_examples(work: Path, suite: str, rows: int, split: str | None = None) -> Path:
    """ExampleGen output of `rows` 28×28 examples for `suite`, made once (its manifest marks it done).

    `split` names the one split every row goes to; None hash-splits the rows 9:1 (train/eval).
    """
    from .monitor import child_env

    out = work / suite / f"examples-{rows}"
    if (out / "manifest.json").is_file():
        return out
    data_root = ensure_images(work / "data").resolve()
    index = ensure_index(data_root, rows)
    print(f"[{suite}] ExampleGen for {rows:,} rows (not measured) ...", file=sys.stderr, flush=True)
    log = work / "logs" / f"{suite}-example-gen-{rows}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    index_arg = f"{split}={index}" if split else str(index)
    with open(log, "wb") as stream:
        subprocess.run([sys.executable, "-m", "shardflow", "example-gen", "--index", index_arg, "--data-root",
                        str(data_root), "--output", str(out)], check=True, env=child_env(), stdout=stream,
                       stderr=subprocess.STDOUT)
    return out

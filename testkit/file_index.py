"""A CSV index (columns x,y) over a set of files written once, its rows repeating the files in order.

    index = ensure_index(root, rows=20_000, name=photo_name)   # root/index-20000.csv over root/labels.npy's files

`root/labels.npy` holds one label per file; `name(number)` is file `number`'s path relative to `root`.
Idempotent: an index of that many rows is reused; a killed write leaves none that looks complete.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Callable

import numpy as np


def ensure_index(root: Path, rows: int, name: Callable[[int], str]) -> Path:
    """`root/index-<rows>.csv` with columns x,y: the files (`name(number)`) repeated in order until `rows` rows."""
    path = root / f"index-{rows}.csv"
    if path.is_file():
        return path
    labels = np.load(root / "labels.npy")
    count = len(labels)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(("x", "y"))
        writer.writerows((name(i % count), int(labels[i % count])) for i in range(rows))
    os.replace(tmp, path)  # a killed run leaves no index that looks complete
    return path

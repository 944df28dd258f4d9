"""Small generated image sets for the TFX tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def write_images(root: Path, count: int) -> Path:
    """`count` random 8x6 RGB PNGs and an index CSV (path,label) with one unreadable row."""
    rng = np.random.default_rng(0)
    rows = ["path,label"]
    for number in range(count):
        (root / "img").mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (8, 6, 3), dtype=np.uint8)).save(root / f"img/{number}.png")
        rows.append(f"img/{number}.png,{number % 3}")
    (root / "img/broken.png").write_bytes(b"not a png")
    rows.append("img/broken.png,1")
    (root / "all.csv").write_text("\n".join(rows) + "\n")
    return root / "all.csv"

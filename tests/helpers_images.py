"""Small real image files and CSV indexes for tests, written with PIL into a directory.

    rng = np.random.default_rng(0)
    write_png(root / "a.png", random_pixels(rng, (12, 10, 3)))
    write_csv(root / "train.csv", ["x", "y"], [["a.png", 3]])
"""
from __future__ import annotations

import csv
import io
import struct
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from PIL import Image

# A few distinct colours for palette masks; index i of the palette is class id i.
_PALETTE = [(0, 0, 0), (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255)]


def random_pixels(rng: np.random.Generator, shape: Sequence[int], dtype: str = "uint8") -> np.ndarray:
    """Random pixels over the dtype's whole range (so byte order and bit depth errors show)."""
    high = np.iinfo(dtype).max
    return rng.integers(0, high, size=tuple(shape), dtype=dtype, endpoint=True)


def write_png(path: Path, pixels: np.ndarray) -> Path:
    """Writes HxW or HxWx1 (L, or I;16 for uint16) and HxWx3 (RGB) arrays as PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    array = pixels[:, :, 0] if pixels.ndim == 3 and pixels.shape[2] == 1 else pixels
    if array.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"write_png takes uint8 or uint16 pixels, got {array.dtype}")
    Image.fromarray(np.ascontiguousarray(array)).save(path, format="PNG")  # uint16 → mode I;16
    return path


def write_palette_mask(path: Path, class_ids: np.ndarray) -> Path:
    """Writes an HxW array of class ids (< len(_PALETTE)) as a palette ("P" mode) PNG."""
    if int(class_ids.max()) >= len(_PALETTE):
        raise ValueError(f"class ids must be < {len(_PALETTE)}, got {int(class_ids.max())}")
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(class_ids.astype(np.uint8))
    image.putpalette(  # turns the L image into a P image whose indices are the class ids
        [channel for colour in _PALETTE for channel in colour])
    image.save(path, format="PNG")
    return path


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    """Writes an index CSV with a header row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def read_pixels(path: Path) -> np.ndarray:
    """The file's pixels as PIL gives them, always HxWxC (a channel axis added to 2-D images)."""
    with Image.open(path) as image:
        array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array


def png_bytes(pixels: np.ndarray) -> bytes:
    """The pixels as PNG file bytes (PIL's encoder)."""
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def corrupt_idat(data: bytes) -> bytes:
    """The PNG with every byte of its IDAT payload inverted (chunk length and CRC left as they were)."""
    at = data.index(b"IDAT")
    length = struct.unpack(">I", data[at - 4:at])[0]
    body = bytes(b ^ 0xFF for b in data[at + 4:at + 4 + length])
    return data[:at + 4] + body + data[at + 4 + length:]

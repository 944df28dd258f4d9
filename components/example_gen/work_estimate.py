"""How much single-core work an ingest is, estimated from the sampled files before any row is read.

ExampleGen chooses its local running mode from this (see core/beam_setup): worker processes cost
seconds to start and pay off only on enough work. A row count alone is a bad measure: a 28×28 PNG
costs ~70 µs, a 400 px photo resized to 224×224 JPEG ~2.5 ms. The model below charges each row a
fixed cost, each file byte (read and hashed), each source pixel (decoded, converted, resized) and
each stored pixel (encoded); its constants were measured on this 2-core machine. The per-file parts
run in Pillow's and TurboJPEG's C code, which releases the GIL: they are `gil_free`.

    28×28 PNG, raw storage:          60 + 0.7 KB·1.5 + 784 px·12 + 784 px·1   ≈   72 µs (70 measured)
    ~400×400 JPEG → 224×224 JPEG:    60 + 46 KB·1.5 + 170k px·12 + 50k px·5   ≈ 2.4 ms (2.3-2.6 measured)

>>> photo = FileSample(bytes=46_000, pixels=400 * 420)
>>> round((ROW_SECONDS + column_seconds([photo], stored_pixels=224 * 224, storage="jpeg")) * 1e3, 2)
2.4
"""
from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image

from .columns import ColumnSpec
from .data_root import BadCell, DataRoot, RemoteDataRoot

ROW_SECONDS = 60e-6  # CSV cells, split hash, example encoding and framing, statistics values
BYTE_SECONDS = 1.5e-9  # reading and hashing a file's bytes
SOURCE_PIXEL_SECONDS = 12e-9  # decode, convert and resize, per source pixel (PNG and JPEG alike)
STORED_PIXEL_SECONDS = {"raw": 1e-9, "png": 10e-9, "jpeg": 5e-9}  # encoding, per stored pixel
FILES_SAMPLED = 8  # per file column


@dataclass(frozen=True)
class FileSample:
    bytes: int
    pixels: int


def column_seconds(files: list[FileSample], stored_pixels: int, storage: str) -> float:
    """One row's estimated CPU seconds for one file column, from its sampled files (0 without any)."""
    if not files:
        return 0.0
    per_file = sum(f.bytes * BYTE_SECONDS + f.pixels * SOURCE_PIXEL_SECONDS for f in files) / len(files)
    return per_file + stored_pixels * STORED_PIXEL_SECONDS[storage]


def _sample_file(root: DataRoot | RemoteDataRoot, cell: str) -> FileSample | None:
    """Size and pixel count from the file's header only; None when it cannot be read."""
    try:
        data = root.read(cell)
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            return FileSample(len(data), width * height)
    except (BadCell, OSError, ValueError):
        return None


@dataclass(frozen=True)
class WorkEstimate:
    seconds: float  # single-core CPU seconds for all rows
    gil_free: float  # the part spent in C code that releases the GIL (pixels and bytes)


def estimate_work(columns: list[ColumnSpec], samples: list[list[str]], root: DataRoot | RemoteDataRoot,
                  num_rows: int) -> WorkEstimate:
    """The work of `num_rows` rows like the sampled ones."""
    per_row = ROW_SECONDS
    for column in (c for c in columns if c.is_file):
        cells = [row[column.position] for row in samples if row[column.position]][:FILES_SAMPLED]
        files = [f for f in (_sample_file(root, cell) for cell in cells) if f is not None]
        stored = column.shape[0] * column.shape[1] if column.shape else 0  # pixels, whatever the channels
        per_row += column_seconds(files, stored, column.storage)
    return WorkEstimate(per_row * num_rows, 1.0 - ROW_SECONDS / per_row)

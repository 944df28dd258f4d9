"""Masks as predict writes them: one PNG of class ids per example, and a row naming it, in CSV or Parquet.

Columns: index, row, path, mask (the PNG, relative to the output: `masks/SSSS-RRRRRRRRR.png`, named by its
source and row, so a recomputed row rewrites the same file with the same bytes), mean_score (the mean over
pixels of the winning class's probability), classes (the class ids present). The writer of one bundle's part
(`SegmentationPart`) is what predict's writer DoFn opens through `SegmentationTask.prediction_part`.

>>> mask_name(1, 42), prediction_row("new.csv", 42, "a.png", "masks/x.png", np.full((2, 2, 2), 0.5),
...                                  np.array([[0, 1], [1, 1]]))["classes"]
('0001-000000042.png', [0, 1])
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ...core import storage
from ...core.pixel_codec import encode_pixels
from ...predict.tables import TablePart
from ..base import PredictedRow, PredictionPart, PredictionSpec

MASKS = "masks"  # the output's folder of masks (SegmentationTask.prediction_items)
SCHEMA = pa.schema([
    ("index", pa.string()), ("row", pa.int64()), ("path", pa.string()), ("mask", pa.string()),
    ("mean_score", pa.float32()), ("classes", pa.list_(pa.int64()))])


def mask_name(source_id: int, row: int) -> str:
    return f"{source_id:04d}-{row:09d}.png"


def prediction_row(index: str, row: int, path: str, mask: str, probabilities: np.ndarray,
                   class_ids: np.ndarray) -> dict[str, Any]:
    return {"index": index, "row": row, "path": path, "mask": mask,
            "mean_score": float(probabilities.max(axis=-1).mean()),
            "classes": [int(c) for c in np.unique(class_ids)]}


def mask_png(class_ids: np.ndarray) -> bytes:
    """A PNG of class ids: 8-bit gray up to 256 classes, 16-bit beyond."""
    dtype = np.uint8 if int(class_ids.max(initial=0)) < 256 else np.uint16
    return encode_pixels(class_ids.astype(dtype)[:, :, None], "png")


class SegmentationPart(PredictionPart):
    """One bundle's rows (`<stem><suffix>`, a CSV or Parquet table appearing whole on `close()`); each row's
    mask written as it comes, into the staged masks folder."""

    def __init__(self, spec: PredictionSpec, stem: str) -> None:
        self.spec = spec
        self.table = TablePart(stem + spec.suffix, spec.format, SCHEMA)

    def write(self, row: PredictedRow) -> dict[str, Any]:
        name, outputs = mask_name(row.source, row.row), row.outputs
        storage.write_bytes(storage.join(self.spec.items[MASKS], name), mask_png(outputs["class_ids"]), durable=False)
        self.table.write(prediction_row(row.index, row.row, row.path, f"{MASKS}/{name}", outputs["probabilities"],
                                        outputs["class_ids"]))
        return outputs

    def close(self) -> dict[str, int]:
        return {"rows": self.table.close()}

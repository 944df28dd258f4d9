"""Class labels as predict writes them: a row per example with its best class and its top k, in CSV or Parquet.

Columns: index, row, path, class_id, class_name, score, top_k_ids, top_k_names, top_k_scores (in CSV the
top-k lists are JSON arrays). The writer of one bundle's part (`ClassificationPart`) is what predict's writer
DoFn opens through `ClassificationTask.prediction_part`.

>>> row = prediction_row("new.csv", 7, "a.png", np.array([0.1, 0.7, 0.2]), ["cat", "dog", "owl"], 2)
>>> row["class_name"], row["top_k_names"], round(row["score"], 3)
('dog', ['dog', 'owl'], 0.7)
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ...predict.tables import TablePart
from ..base import PredictedRow, PredictionPart, PredictionSpec

SCHEMA = pa.schema([
    ("index", pa.string()), ("row", pa.int64()), ("path", pa.string()), ("class_id", pa.int64()),
    ("class_name", pa.string()), ("score", pa.float32()), ("top_k_ids", pa.list_(pa.int64())),
    ("top_k_names", pa.list_(pa.string())), ("top_k_scores", pa.list_(pa.float32()))])


def prediction_row(index: str, row: int, path: str, probabilities: np.ndarray, class_names: list[str],
                   top_k: int) -> dict[str, Any]:
    order = np.argsort(-probabilities, kind="stable")[:top_k]
    best = int(order[0])
    return {"index": index, "row": row, "path": path, "class_id": best, "class_name": class_names[best],
            "score": float(probabilities[best]), "top_k_ids": [int(i) for i in order],
            "top_k_names": [class_names[int(i)] for i in order],
            "top_k_scores": [float(probabilities[int(i)]) for i in order]}


class ClassificationPart(PredictionPart):
    """One bundle's rows: `<stem><suffix>`, a CSV or Parquet table appearing whole on `close()`."""

    def __init__(self, spec: PredictionSpec, stem: str) -> None:
        self.spec = spec
        self.table = TablePart(stem + spec.suffix, spec.format, SCHEMA)

    def write(self, row: PredictedRow) -> dict[str, Any]:
        spec = self.spec
        self.table.write(prediction_row(row.index, row.row, row.path, row.outputs["probabilities"],
                                        list(spec.class_names), spec.top_k))
        return row.outputs

    def close(self) -> dict[str, int]:
        return {"rows": self.table.close()}

"""Prediction rows and the part files that hold them: CSV or Parquet, masks as PNG, PredictionLog TFRecords.

Pure Python with pyarrow (no Beam): a writer DoFn opens one `TablePart` per bundle.
Classification rows: index, row, path, class_id, class_name, score, top_k_ids, top_k_names,
top_k_scores (in CSV the top-k lists are JSON arrays). Segmentation rows: index, row, path, mask
(the PNG of class ids, relative to the output), mean_score (the mean over pixels of the winning
class's probability), classes (the class ids present).

>>> row = classification_row("new.csv", 7, "a.png", np.array([0.1, 0.7, 0.2]), ["cat", "dog", "owl"], 2)
>>> row["class_name"], row["top_k_names"], round(row["score"], 3)
('dog', ['dog', 'owl'], 0.7)
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core import storage
from ..core.pixel_codec import encode_pixels
from ..core.shard_writer import PartWriter

CLASSIFICATION_SCHEMA = pa.schema([
    ("index", pa.string()), ("row", pa.int64()), ("path", pa.string()), ("class_id", pa.int64()),
    ("class_name", pa.string()), ("score", pa.float32()), ("top_k_ids", pa.list_(pa.int64())),
    ("top_k_names", pa.list_(pa.string())), ("top_k_scores", pa.list_(pa.float32()))])
SEGMENTATION_SCHEMA = pa.schema([
    ("index", pa.string()), ("row", pa.int64()), ("path", pa.string()), ("mask", pa.string()),
    ("mean_score", pa.float32()), ("classes", pa.list_(pa.int64()))])
ROW_GROUP = 2048  # Parquet rows buffered before a row group is written: memory stays bounded per part


def classification_row(index: str, row: int, path: str, probabilities: np.ndarray, class_names: list[str],
                       top_k: int) -> dict[str, Any]:
    order = np.argsort(-probabilities, kind="stable")[:top_k]
    best = int(order[0])
    return {"index": index, "row": row, "path": path, "class_id": best, "class_name": class_names[best],
            "score": float(probabilities[best]), "top_k_ids": [int(i) for i in order],
            "top_k_names": [class_names[int(i)] for i in order],
            "top_k_scores": [float(probabilities[int(i)]) for i in order]}


def mask_name(source_id: int, row: int) -> str:
    return f"{source_id:04d}-{row:09d}.png"


def segmentation_row(index: str, row: int, path: str, mask: str, probabilities: np.ndarray,
                     class_ids: np.ndarray) -> dict[str, Any]:
    return {"index": index, "row": row, "path": path, "mask": mask,
            "mean_score": float(probabilities.max(axis=-1).mean()),
            "classes": [int(c) for c in np.unique(class_ids)]}


def mask_png(class_ids: np.ndarray) -> bytes:
    """A PNG of class ids: 8-bit gray up to 256 classes, 16-bit beyond."""
    dtype = np.uint8 if int(class_ids.max(initial=0)) < 256 else np.uint16
    return encode_pixels(class_ids.astype(dtype)[:, :, None], "png")


class TablePart:
    """One part file of prediction rows (CSV or Parquet), appearing whole on `close()`."""

    def __init__(self, path: str, fmt: str, schema: pa.Schema) -> None:
        self.path, self.fmt, self.schema, self.rows = path, fmt, schema, 0
        self._stack = contextlib.ExitStack()
        stream: BinaryIO = self._stack.enter_context(storage.open_write(path))
        self._buffer: list[dict[str, Any]] = []
        if fmt == "csv":
            self._text = io.TextIOWrapper(stream, encoding="utf-8", newline="", write_through=True)
            self._csv = csv.writer(self._text)
            self._csv.writerow(schema.names)
        else:
            self._parquet = pq.ParquetWriter(stream, schema)

    def write(self, row: dict[str, Any]) -> None:
        self.rows += 1
        if self.fmt == "csv":
            self._csv.writerow([json.dumps(row[n]) if isinstance(row[n], list) else row[n] for n in self.schema.names])
            return
        self._buffer.append(row)
        if len(self._buffer) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            self._parquet.write_table(pa.Table.from_pylist(self._buffer, schema=self.schema))
            self._buffer = []

    def close(self) -> int:
        if self.fmt == "csv":
            self._text.flush()
            self._text.detach()  # the stream stays open for open_write to finish
        else:
            self._flush()
            self._parquet.close()
        self._stack.close()
        return self.rows


def prediction_log(example: bytes, outputs: dict[str, np.ndarray], model_path: str) -> bytes:
    """A TFX-style PredictionLog (predict_log: the example in, the signature's outputs out), serialized."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(name=model_path, signature_name="serving_default"))
    request.inputs["examples"].CopyFrom(tf.make_tensor_proto([example], dtype=tf.string))
    response = predict_pb2.PredictResponse(model_spec=request.model_spec)
    for name, value in outputs.items():
        response.outputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(value)[None]))
    log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request, response=response))
    return log.SerializeToString()


def log_part(path: str) -> PartWriter:
    """A TFRecord part of PredictionLogs (framed without TensorFlow, as ExampleGen's parts are)."""
    return PartWriter(path)

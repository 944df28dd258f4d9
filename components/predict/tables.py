"""The part files predictions are written into, whatever the kind: CSV or Parquet tables, PredictionLog TFRecords.

Pure Python with pyarrow (no Beam): a kind's part writer (components/tasks/<kind>/predictions.py, opened by
writers.py's DoFn once per bundle) writes its rows into a `TablePart` of its schema; `class_outputs` splits a
labels or masks model's served call per example (core/model_info.py's `probabilities` and `class_ids`).

>>> import os, tempfile
>>> schema = pa.schema([("row", pa.int64()), ("ids", pa.list_(pa.int64()))])
>>> part = TablePart(os.path.join(tempfile.mkdtemp(), "p.csv"), "csv", schema)
>>> part.write({"row": 1, "ids": [2, 3]}), part.close(), open(part.path).read().splitlines()
(None, 1, ['row,ids', '1,"[2, 3]"'])
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
from ..core.shard_writer import PartWriter

ROW_GROUP = 2048  # Parquet rows buffered before a row group is written: memory stays bounded per part


def class_outputs(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Per example of one served call, its `probabilities` (float32) and `class_ids`: a labels or masks model's
    outputs (views of the call's own arrays)."""
    probabilities, class_ids = outputs["probabilities"].numpy(), outputs["class_ids"].numpy()
    return [{"probabilities": np.asarray(p, np.float32), "class_ids": c} for p, c in zip(probabilities, class_ids)]


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

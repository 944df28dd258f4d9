"""Per-chunk Arrow files of the values TFDV statistics need: labels, metadata, payload sizes.

Written by workers with pyarrow alone (no TensorFlow); read by the launcher's statistics pass,
which gives file features an empty placeholder value per example and patches their byte sizes
(see `statistics.py`). Tiny next to the shards: one number or label per column and row.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..core import storage
from .columns import ColumnSpec

_VALUE_TYPES = {"int64": pa.int64(), "float32": pa.float32(), "string": pa.binary()}


def _list_array(values: list, value_type: pa.DataType) -> pa.ListArray:
    offsets = pa.array(range(len(values) + 1), type=pa.int32())
    return pa.ListArray.from_arrays(offsets, pa.array(values, type=value_type))


def _ragged_array(lists: list, value_type: pa.DataType) -> pa.ListArray:
    """One list per example: numpy arrays of numbers, or lists of bytes."""
    offsets = pa.array(np.cumsum([0] + [len(values) for values in lists]), type=pa.int32())
    flat = [value for values in lists for value in values] if value_type == pa.binary() else \
        np.concatenate([np.asarray(values) for values in lists]) if lists else []
    return pa.ListArray.from_arrays(offsets, pa.array(flat, type=value_type))


def write_column_file(path: str, columns: tuple[ColumnSpec, ...], values: dict[str, list]) -> None:
    """One batch: value columns as list arrays (TFDV's layout), file columns as int64 sizes."""
    arrays = []
    for column in columns:
        column_values = values[column.name]
        if column.is_file:
            arrays.append(pa.array(column_values, type=pa.int64()))
        elif column.shape == (-1,):  # a list of any length per example (a box index's boxes)
            arrays.append(_ragged_array(column_values, _VALUE_TYPES[column.dtype]))
        else:
            if column.dtype == "string":
                column_values = [v.encode("utf-8") for v in column_values]
            arrays.append(_list_array(column_values, _VALUE_TYPES[column.dtype]))
    batch = pa.RecordBatch.from_arrays(arrays, [c.name for c in columns])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    storage.write_bytes(path, sink.getvalue().to_pybytes(), durable=False)  # staging: no fsync


def read_column_file(path: str) -> pa.RecordBatch:
    if storage.is_remote(path):
        return pa.ipc.open_file(pa.py_buffer(storage.read_bytes(path))).get_batch(0)
    with pa.memory_map(path) as source:
        return pa.ipc.open_file(source).get_batch(0)


def as_statistics_batch(batch: pa.RecordBatch, columns: tuple[ColumnSpec, ...]) -> pa.RecordBatch:
    """File columns become one empty bytes value per example: presence counts stay exact."""
    arrays = []
    for column in columns:
        array = batch.column(column.name)
        if column.is_file:
            array = _list_array([b""] * len(array), pa.binary())
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, [c.name for c in columns])

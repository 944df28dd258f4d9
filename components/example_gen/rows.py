"""One CSV row → one serialized `tf.train.Example`, or a rejection naming the column and reason.

Pure (no Beam): the chunk DoFn calls `RowEncoder.encode` for each record.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..core.example_proto import encode_example
from .columns import ColumnSpec, parse_value
from .csv_index import Record
from .data_root import BadCell, open_data_root
from .images import decode_image, encode_image, image_layout
from .splitting import SplitAssigner


@dataclass(frozen=True)
class Reject:
    row: int
    split: str | None
    column: str | None
    path: str | None
    code: str
    reason: str

    def to_json(self, index: str) -> dict[str, Any]:
        return {"index": index, "row": self.row, "split": self.split, "column": self.column,
                "path": self.path, "code": self.code, "reason": self.reason}


@dataclass
class Encoded:
    row: int
    split: str
    example: bytes
    payload_bytes: int
    values: dict[str, Any]  # column → parsed value (labels, metadata) or payload size (files)
    digests: list[int] = field(default_factory=list)  # content hashes of image-role files


def content_digest(data: bytes) -> int:
    """A 63-bit content hash (fits int64) used by the cross-split leakage check."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") >> 1


class RowEncoder:
    def __init__(self, columns: list[ColumnSpec], data_root: str, assigner: SplitAssigner) -> None:
        self.columns = columns
        self.root = open_data_root(data_root)
        self.assigner = assigner
        primary = [c for c in columns if c.role == "image"]
        self.primary = primary[0] if primary else None

    def encode(self, record: Record, fixed_split: str | None) -> Encoded | Reject:
        split = fixed_split
        if record.cells is None:
            return Reject(record.row, split, None, None, "malformed_csv", record.error)
        if split is None:
            split = self.assigner.assign(record.cells)
        features: dict[str, Any] = {}
        values: dict[str, Any] = {}
        digests: list[int] = []
        payload = 0
        for column in self.columns:
            cell = record.cells[column.position]
            try:
                if not cell:
                    raise BadCell("empty_cell", "empty cell")
                if column.is_file:
                    data = self.root.read(cell)
                    image = decode_image(data, column.rules)  # type: ignore[arg-type]
                    self._check(column, *image_layout(image))
                    blob = encode_image(image, column.storage)
                    features[column.name] = [blob]
                    values[column.name] = len(blob)  # statistics need the size, not the pixels
                    payload += len(blob)
                    if column.role == "image":
                        digests.append(content_digest(data))
                else:
                    value = self._parse(column, cell)
                    features[column.name] = [value]
                    values[column.name] = value
            except BadCell as err:
                path = cell if column.is_file and cell else None
                return Reject(record.row, split, column.name, path, err.code, err.reason)
        return Encoded(record.row, split, encode_example(features), payload, values, digests)

    def _check(self, column: ColumnSpec, dtype: str, shape: tuple[int, int, int]) -> None:
        # A mask sized unlike its image is checked first: that reason tells more than "wrong shape".
        if column.role == "mask" and self.primary is not None:
            image_hw = self.primary.shape[:2]
            if shape[:2] != image_hw:
                raise BadCell("mask_shape_mismatch",
                              f"mask of {shape[0]}x{shape[1]} does not match image {self.primary.name!r} of "
                              f"{image_hw[0]}x{image_hw[1]}")
        if dtype != column.dtype:
            raise BadCell("wrong_dtype", f"{dtype} pixels, the column holds {column.dtype}")
        if shape != column.shape:
            raise BadCell("wrong_shape", f"shape {shape} differs from the column's {column.shape}")

    @staticmethod
    def _parse(column: ColumnSpec, cell: str) -> int | float | str:
        try:
            return parse_value(cell, column.dtype)
        except ValueError as err:
            raise BadCell("bad_value", f"value {cell!r} is not a valid {column.dtype}") from err

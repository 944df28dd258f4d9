"""A rejected row of an index, as ExampleGen's rejects.jsonl records it: a leaf module, so that the row encoder
(rows.py) and the box index readers (box_types.py) write one record.

>>> Reject(3, "train", "image", "a.png", "not_found", "no such file").to_json("i.csv")["code"]
'not_found'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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

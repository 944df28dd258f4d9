"""`--record-order FILE`: which examples each optimizer step trained on, one JSON line per step and worker.

The first line describes the file; every other line is one step of one worker:

    {"split": "train", "shards": ["Split-train/data-00000-of-00002.tfrecord", ...], "indexes": ["train.csv"],
     "global_batch": 32}
    {"step": 12, "worker": 0, "examples": [[shard, record, position_in_batch, index, row], ...]}

`shard` and `index` number the header's lists; `record` counts from 0 in its shard; `row` is the CSV
row the example came from (provenance: the first data row is 1; -1 without provenance). A resumed
run appends: the stream reads ahead of training, so a killed run may have written steps it never
trained; the last line of a step and worker is the one trained (`read_order` keeps it). Worker i > 0
writes `FILE.worker-i`. Off by default: without the flag the stream has no tap at all.

    order = read_order("order.jsonl")   # {(step, worker): [[shard, record, position, index, row], ...]}
"""
from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ..core.example_rows import NoProvenanceError, read_example_rows
from ..core.manifest import Manifest
from ..core.stream_position import shard_offsets


def worker_path(path: str, worker_index: int) -> str:
    return path if worker_index == 0 else f"{path}.worker-{worker_index}"


class RecordOrderWriter:
    """The stream's record-order tap (core/input_stream.py): groups records by step and appends full steps."""

    def __init__(self, path: str, examples_dir: str, manifest: Manifest, split: str, global_batch: int,
                 per_step: int, worker_index: int, fresh: bool) -> None:
        self.path, self.global_batch, self.per_step, self.worker = worker_path(path, worker_index), global_batch, \
            per_step, worker_index
        shards = manifest.splits[split].shards
        self.starts = shard_offsets([shard.num_examples for shard in shards])
        try:
            rows = read_example_rows(examples_dir, manifest, split)
            self.index_id, self.row, indexes = rows.index_id, rows.row, list(rows.indexes)
        except NoProvenanceError:
            self.index_id = self.row = None
            indexes = []
        self.pending: dict[int, list[list[int]]] = {}
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        if fresh or not os.path.exists(self.path):
            header = {"split": split, "shards": [shard.path for shard in shards], "indexes": indexes,
                      "global_batch": global_batch}
            with open(self.path, "w", encoding="utf-8") as out:
                out.write(json.dumps(header) + "\n")

    def __call__(self, positions: np.ndarray, ids: np.ndarray) -> np.int64:
        for position, (shard, record) in zip(positions.tolist(), ids.tolist()):
            step, place = divmod(position, self.global_batch)
            example = self.starts[shard] + record
            index, row = ((int(self.index_id[example]), int(self.row[example])) if self.row is not None else (-1, -1))
            self.pending.setdefault(step, []).append([shard, record, place, index, row])
        full = [step for step, examples in self.pending.items() if len(examples) == self.per_step]
        if full:
            with open(self.path, "a", encoding="utf-8") as out:
                for step in sorted(full):
                    out.write(json.dumps({"step": step, "worker": self.worker,
                                          "examples": self.pending.pop(step)}) + "\n")
        return np.int64(0)


def read_order(path: str) -> dict[tuple[int, int], list[list[int]]]:
    """{(step, worker): examples} of a record-order file and its workers' files; a step's last line wins."""
    steps: dict[tuple[int, int], list[list[int]]] = {}
    folder, name = os.path.split(os.path.abspath(path))
    files = [path] + sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.startswith(name + ".worker-"))
    for file in files:
        with open(file, encoding="utf-8") as lines:
            for line in lines:
                entry: dict[str, Any] = json.loads(line)
                if "step" in entry:
                    steps[(entry["step"], entry["worker"])] = entry["examples"]
    return steps


"""`--record-order FILE`: which examples each optimizer step trained on, one JSON line per step and worker.

The first line describes the file; every other line is one step of one worker, or (the chief's file
only) where a run started training and how many workers it had, or where training ended:

    {"split": "train", "shards": ["Split-train/data-00000-of-00002.tfrecord", ...], "indexes": ["train.csv"],
     "global_batch": 32}
    {"start": 0, "workers": 2}
    {"step": 12, "worker": 0, "examples": [[shard, record, position_in_batch, index, row], ...]}
    {"end": 135}

`shard` and `index` number the header's lists; `record` counts from 0 in its shard; `row` is the CSV
row the example came from (provenance: the first data row is 1; -1 without provenance). The stream
reads ahead of training, so a killed run has written steps it never trained. A resumed run appends:
each worker first drops its own lines from the resume step on, and the chief's start line says how
many workers trained from there, so `read_order` drops the lines a worker absent from the resumed
run left (2 workers resumed on 1: worker 1's read-ahead), and the steps read past the end. Worker
i > 0 writes `FILE.worker-i`. Off by default: without the flag the stream has no tap at all.

    order = read_order("order.jsonl")   # {(step, worker): [[shard, record, position, index, row], ...]}: trained only
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

    def restart(self, step: int) -> None:
        """Before training starts at `step` (0: a fresh run): drops this file's lines from `step` on, read ahead
        by a killed run and never trained, and any steps half read; the chief records the start."""
        self.pending.clear()
        with open(self.path, encoding="utf-8") as lines:
            kept = [line for line in lines if _before(json.loads(line), step)]
        if self.worker == 0:
            kept.append(json.dumps({"start": step, "workers": self.global_batch // self.per_step}) + "\n")
        partial = f"{self.path}.partial"
        with open(partial, "w", encoding="utf-8") as out:
            out.writelines(kept)
        os.replace(partial, self.path)  # whole or as before: a kill here leaves a file read_order still reads

    def end(self, steps: int) -> None:
        """Training ended after `steps` steps: the lines of later steps were read ahead, not trained."""
        if self.worker == 0:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"end": steps}) + "\n")


def _before(entry: dict[str, Any], step: int) -> bool:
    """Whether a line stays when training restarts at `step`: the header and what earlier runs trained."""
    if "step" in entry:
        return entry["step"] < step
    if "start" in entry:
        return entry["start"] < step
    return "end" not in entry  # the header


def read_order(path: str) -> dict[tuple[int, int], list[list[int]]]:
    """{(step, worker): examples} of the steps trained, from a record-order file and its workers' files.

    A step's last line per worker wins (a run resumed on as many workers reads it again); a worker's
    lines for a step trained by fewer workers, and steps past the end, are dropped (the module's docstring).
    """
    steps: dict[tuple[int, int], list[list[int]]] = {}
    starts: list[tuple[int, int]] = []  # (step, workers) of each run, in the order they started
    end: int | None = None
    folder, name = os.path.split(os.path.abspath(path))
    files = [path] + sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.startswith(name + ".worker-"))
    for file in files:
        with open(file, encoding="utf-8") as lines:
            for line in lines:
                entry: dict[str, Any] = json.loads(line)
                if "step" in entry:
                    steps[(entry["step"], entry["worker"])] = entry["examples"]
                elif "start" in entry:
                    starts.append((entry["start"], entry["workers"]))
                elif "end" in entry:
                    end = entry["end"]
    return {(step, worker): examples for (step, worker), examples in steps.items()
            if (end is None or step < end) and worker < _workers_at(step, starts)}


def _workers_at(step: int, starts: list[tuple[int, int]]) -> int | float:
    """How many workers trained `step`: the last run that started at or before it (unbounded without a record).

    >>> _workers_at(41, [(0, 2), (40, 1)]), _workers_at(39, [(0, 2), (40, 1)]), _workers_at(3, [])
    (1, 2, inf)
    """
    covering = [workers for start, workers in starts if start <= step]
    return covering[-1] if covering else float("inf")

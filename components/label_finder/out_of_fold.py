"""What find-label-issues reads back: a fold's predictions by position, the given labels, each position's CSV row.

A position is an example's place in the split (shards in manifest order, records in order): predict's
table names each example by its shard and record number, which the manifest's per-shard counts turn
into a position.

>>> from shardflow.core.manifest import ShardInfo, SplitInfo
>>> split = SplitInfo(5, [ShardInfo("Split-train/a", 3, 9), ShardInfo("Split-train/b", 2, 9)])
>>> shard_starts(split)
{'Split-train/a': 0, 'Split-train/b': 3}
>>> label_ids(np.array([b"cat", b"owl", b"dog"], dtype=object), ["cat", "dog"]).tolist()
[0, 2, 1]
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import pyarrow.parquet as pq

from ..core import storage
from ..core.errors import ShardflowError
from ..core.example_rows import NoProvenanceError, read_example_rows
from ..core.manifest import Manifest, SplitInfo
from ..core.stream_position import shard_offsets


class OutOfFoldError(ShardflowError, RuntimeError):
    """The fold predictions do not account for every example exactly once. Exit 1."""


def shard_starts(split: SplitInfo) -> dict[str, int]:
    """Each shard's (as the manifest names it) first position in the split."""
    starts = shard_offsets([s.num_examples for s in split.shards])
    return {shard.path: int(start) for shard, start in zip(split.shards, starts)}


def read_predictions(predict_dir: str, starts: dict[str, int], num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(int64 [M] positions, float64 [M, C] probabilities) from a predict output of examples (parquet tables,
    top_k = C, so each row lists every class's probability)."""
    summary = storage.read_json(storage.join(predict_dir, "predict.json"))
    positions, probabilities = [], []
    for name in summary["tables"]:
        with storage.open_read(storage.join(predict_dir, name)) as stream:
            table = pq.read_table(stream, columns=["index", "row", "top_k_ids", "top_k_scores"]).to_pydict()
        rows = len(table["row"])
        found = np.zeros((rows, num_classes))
        for i, (ids, scores) in enumerate(zip(table["top_k_ids"], table["top_k_scores"])):
            found[i, ids] = scores
        positions.append(np.array([starts[s] + r - 1 for s, r in zip(table["index"], table["row"])], np.int64))
        probabilities.append(found)
    if not positions:
        return np.zeros(0, np.int64), np.zeros((0, num_classes))
    return np.concatenate(positions), np.concatenate(probabilities)


def label_ids(values: np.ndarray, vocabulary: Sequence[str] | None) -> np.ndarray:
    """The class id of each given label: itself (integer labels), or its place in the model's vocabulary
    (string labels; a value not in it is the out-of-vocabulary class, len(vocabulary), as the Evaluator maps it)."""
    if vocabulary is None:
        return np.asarray(values, np.int64)
    ids = {name: i for i, name in enumerate(vocabulary)}
    return np.array([ids.get(v.decode("utf-8") if isinstance(v, bytes) else str(v), len(vocabulary))
                     for v in values], np.int64)


def given_labels(raw_dir: str, split: str, label: str, vocabulary: Sequence[str] | None) -> np.ndarray:
    """int64 [N]: the split's given class ids, in position order (read from the raw examples, in order)."""
    from ..core.input_stream import StreamOptions, build_stream  # TensorFlow: only when a run reads labels

    options = StreamOptions(batch_size=4096, features=(label,), decode=False, deterministic=True)
    values = [batch[label].numpy() for batch in build_stream(raw_dir, split, options)]
    return label_ids(np.concatenate(values) if values else np.zeros(0, np.int64), vocabulary)


def row_descriptions(raw_dir: str, manifest: Manifest, split: str,
                     positions: np.ndarray) -> tuple[list[dict[str, Any]], str | None]:
    """Each position's {"split", "index", "row", "path"} from ExampleGen's row provenance, and None; for an
    output written before provenance, index, row and path null (as the Evaluator's list has them) and a note."""
    try:
        return read_example_rows(raw_dir, manifest, split).describe(positions), None
    except NoProvenanceError as err:
        blank = {"split": split, "index": None, "row": None, "path": None}
        return [dict(blank) for _ in range(len(positions))], \
            f"issues are listed by position only (index, row and path null): {err}"


def write_jsonl(path: str, records: list[dict[str, Any]]) -> None:
    """One JSON object per line, whole or absent."""
    storage.write_text(path, "".join(json.dumps(record, sort_keys=False) + "\n" for record in records))

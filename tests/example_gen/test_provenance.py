"""Row provenance (core/example_rows.py): ExampleGen lists each example's index file, CSV row and path in
the order the reader yields the examples; spans and Transform carry it on.

Every image's pixels hold its own number, and its file is named by it, so an example decoded from the
shards is matched to its CSV row by content, not by trusting the order being tested.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from helpers_images import write_csv, write_png
from helpers_reader import collect
from shardflow.core.errors import ShardflowError
from shardflow.core.example_rows import PROVENANCE_KEY, NoProvenanceError, read_example_rows
from shardflow.core.manifest import Manifest, read_manifest
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it


def _index(root: Path, name: str, numbers: range, bad: dict[int, list[str]]) -> tuple[Path, dict[int, list[str]]]:
    """An index of images numbered `numbers` (pixels = number % 251, label = number % 3), with the rows in
    `bad` (1-based data row → cells) replacing good ones; returns the file and every row's cells."""
    cells = {}
    for row, number in enumerate(numbers, 1):
        write_png(root / f"img{number}.png", np.full((4, 4), number % 251, np.uint8))
        cells[row] = bad.get(row, [f"img{number}.png", str(number % 3)])
    return write_csv(root / name, ["image", "label"], cells.values()), cells


def _rejected(out: Path) -> set[tuple[str, int]]:
    return {(r["index"], r["row"]) for r in map(json.loads, (out / "rejects.jsonl").read_text().splitlines())}


def _check_split(out: Path, manifest: Manifest, split: str, cells: dict[str, dict[int, list[str]]]) -> list[tuple]:
    """The provenance of `split` matches the reader's examples one by one; returns its (index, row)s."""
    rows = read_example_rows(out, manifest, split)
    assert len(rows) == manifest.splits[split].num_examples
    examples = collect(build_stream(out, split, StreamOptions(batch_size=16)))
    listed = rows.describe(range(len(rows)))
    for position, entry in enumerate(listed):
        assert entry["split"] == split
        assert entry["path"] == cells[entry["index"]][entry["row"]][0]  # the CSV's own cell
        number = int(entry["path"][3:-4])
        assert examples["image"][position].max() == examples["image"][position].min() == number % 251
        assert examples["label"][position] == int(cells[entry["index"]][entry["row"]][1])
    return [(e["index"], e["row"]) for e in listed]


@pytest.fixture(scope="module")
def hashed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One index split by hashing into train and eval, read in chunks of 7 rows into 3 shards per split,
    with a missing file, an empty cell and a malformed row among its 60 rows."""
    root = tmp_path_factory.mktemp("hashed")
    bad = {5: ["missing.png", "1"], 9: ["", "2"], 20: ["img19.png", "0", "extra"], 41: ["missing2.png", "0"]}
    index, cells = _index(root, "all.csv", range(60), bad)
    out = root / "out"
    manifest = run(ExampleGenConfig(indexes=(IndexSpec(str(index)),), data_root=str(root), output=str(out),
                                    split_weights=(("train", 1), ("eval", 1)), rows_per_chunk=7, num_shards=3,
                                    max_reject_fraction=1.0, near_duplicates="off"), echo=lambda _: None)
    return {"out": out, "manifest": manifest, "cells": {str(index): cells}, "index": str(index)}


def test_the_provenance_lists_exactly_the_accepted_rows_in_reading_order(hashed: dict) -> None:
    out, manifest = hashed["out"], hashed["manifest"]
    assert all(len(manifest.splits[s].shards) == 3 for s in ("train", "eval"))
    listed = {s: _check_split(out, manifest, s, hashed["cells"]) for s in ("train", "eval")}
    rejected = _rejected(out)
    assert rejected == {(hashed["index"], row) for row in (5, 9, 20, 41)}
    everything = {(hashed["index"], row) for row in range(1, 61)}
    assert set(listed["train"]) | set(listed["eval"]) == everything - rejected
    assert not set(listed["train"]) & set(listed["eval"]) and min(len(v) for v in listed.values()) > 10
    # The manifest points to one piece per split, in the output's own folder.
    assert manifest.extra[PROVENANCE_KEY]["eval"] == [{"file": "provenance/eval.npz",
                                                       "examples": manifest.splits["eval"].num_examples}]


def test_several_index_files_per_split_are_named_per_example(tmp_path: Path) -> None:
    a, cells_a = _index(tmp_path, "a.csv", range(0, 12), {3: ["missing.png", "0"]})
    b, cells_b = _index(tmp_path, "b.csv", range(100, 109), {})
    e, cells_e = _index(tmp_path, "e.csv", range(200, 210), {10: ["", "1"]})
    out = tmp_path / "out"
    manifest = run(ExampleGenConfig(indexes=(IndexSpec(str(a), "train"), IndexSpec(str(b), "train"),
                                             IndexSpec(str(e), "eval")), data_root=str(tmp_path), output=str(out),
                                    rows_per_chunk=4, num_shards=2, max_reject_fraction=1.0,
                                    near_duplicates="off"), echo=lambda _: None)
    cells = {str(a): cells_a, str(b): cells_b, str(e): cells_e}
    train = _check_split(out, manifest, "train", cells)
    assert train == [(str(a), r) for r in range(1, 13) if r != 3] + [(str(b), r) for r in range(1, 10)]
    assert _check_split(out, manifest, "eval", cells) == [(str(e), r) for r in range(1, 10)]
    assert read_example_rows(out, manifest, "train").indexes == (str(a), str(b), str(e))


def test_a_span_window_lists_each_example_under_its_own_spans_index(tmp_path: Path) -> None:
    indexes = {}
    for span, numbers in ((1, range(0, 8)), (2, range(50, 61))):
        index, cells = _index(tmp_path / f"span-{span}", "train.csv", numbers, {2: ["missing.png", "0"]})
        indexes[str(index)] = cells
    pattern = str(tmp_path / "span-{SPAN}")
    config = ExampleGenConfig(indexes=(IndexSpec(f"{pattern}/train.csv", "train"),), data_root=pattern,
                              output=str(tmp_path / "window"), spans=2, span_store=str(tmp_path / "store"),
                              rows_per_chunk=3, max_reject_fraction=1.0, near_duplicates="off")
    manifest = run(config, echo=lambda _: None)
    listed = _check_split(tmp_path / "window", manifest, "train", indexes)
    first, second = (str(tmp_path / f"span-{s}" / "train.csv") for s in (1, 2))
    assert listed == [(first, r) for r in range(1, 9) if r != 2] + [(second, r) for r in range(1, 12) if r != 2]
    # The window's own folder holds only its manifest: the pieces stay in the span store.
    assert sorted(p.name for p in (tmp_path / "window").iterdir()) == ["manifest.json"]


def test_outputs_without_provenance_or_with_a_wrong_count_are_refused(hashed: dict) -> None:
    out, manifest = hashed["out"], hashed["manifest"]
    older = dataclasses.replace(manifest, extra={k: v for k, v in manifest.extra.items() if k != PROVENANCE_KEY})
    with pytest.raises(NoProvenanceError, match="written before shardflow recorded them"):
        read_example_rows(out, older, "eval")
    info = manifest.splits["eval"]
    one_more = dataclasses.replace(info, num_examples=info.num_examples + 1)
    miscounted = dataclasses.replace(manifest, splits={**manifest.splits, "eval": one_more})
    with pytest.raises(ShardflowError, match="split 'eval'.*the manifest"):
        read_example_rows(out, miscounted, "eval")
    with pytest.raises(ShardflowError, match="no split 'test'"):
        read_example_rows(out, read_manifest(out), "test")

"""Hash splitting of one unnamed CSV: same inputs → same bytes; added rows never move old ones;
`--split-key` keeps related rows together; content shared across splits is reported as leakage.

Every run goes through the CLI entry point in-process, on 8x8 PNGs written here. Each row carries
a `row_id` metadata column, so the split of every row can be read back from the examples.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from helpers_images import random_pixels, write_csv, write_png
from shardflow.cli import main as shardflow_main
from shardflow.core.tfrecord import iter_records

NUM_IMAGES = 200
NUM_COPIES = 40  # rows whose file is a byte copy of img/<k>.png under another name
NUM_PATIENTS = 23
HEADER = ["x", "y", "row_id", "patient_id"]


def _row(row_id: int, path: str) -> list[object]:
    return [path, row_id % 3, row_id, f"p{row_id % NUM_PATIENTS:02d}"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("split_data")
    rng = np.random.default_rng(11)
    for i in range(NUM_IMAGES + 60):
        write_png(root / "img" / f"{i:03d}.png", random_pixels(rng, (8, 8, 1)))
    for k in range(NUM_COPIES):
        (root / "copy").mkdir(exist_ok=True)
        shutil.copyfile(root / "img" / f"{k:03d}.png", root / "copy" / f"c{k:03d}.png")
    rows = [_row(i, f"img/{i:03d}.png") for i in range(NUM_IMAGES)]
    rows += [_row(NUM_IMAGES + k, f"copy/c{k:03d}.png") for k in range(NUM_COPIES)]
    write_csv(root / "all.csv", HEADER, rows)
    # The same rows plus 60 new ones, some before, some among and some after the old rows.
    new = [_row(1000 + i, f"img/{NUM_IMAGES + i:03d}.png") for i in range(60)]
    write_csv(root / "more.csv", HEADER, new[:20] + rows[:100] + new[20:40] + rows[100:] + new[40:])
    return root


def _ingest(data: Path, out: Path, index: str = "all.csv", *extra: str) -> dict:
    args = ["example-gen", "--index", str(data / index), "--data-root", str(data), "--output", str(out),
            "--rows-per-chunk", "32", *extra]
    assert shardflow_main(args) == 0
    return json.loads((out / "manifest.json").read_text())


def _splits_of_rows(out: Path, manifest: dict) -> dict[int, str]:
    """row_id → split, read from the examples of every shard the manifest lists."""
    found: dict[int, str] = {}
    for split, info in manifest["splits"].items():
        for shard in info["shards"]:
            with open(out / shard["path"], "rb") as stream:
                for record in iter_records(stream, shard["path"]):
                    row_id = tf.train.Example.FromString(record).features.feature["row_id"].int64_list.value[0]
                    assert row_id not in found, f"row {row_id} appears twice"
                    found[row_id] = split
    return found


def _output_files(out: Path) -> dict[str, bytes]:
    names = [p for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"]
    return {str(p.relative_to(out)): p.read_bytes() for p in names}


def _without_timing(manifest: dict) -> dict:
    return {k: v for k, v in manifest.items() if k not in ("seconds", "phase_seconds")}


@pytest.fixture(scope="module")
def default_runs(data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, Path, dict]:
    first, second = tmp_path_factory.mktemp("run1"), tmp_path_factory.mktemp("run2")
    return first, _ingest(data, first), second, _ingest(data, second)


def test_same_inputs_give_identical_bytes(default_runs: tuple[Path, dict, Path, dict]) -> None:
    first, m1, second, m2 = default_runs
    files1, files2 = _output_files(first), _output_files(second)
    assert sorted(files1) == sorted(files2)
    assert any(name.startswith("Split-eval/") for name in files1) and any(n.startswith("Split-train/") for n in files1)
    assert files1 == files2  # shards, rejects, statistics and schema, byte for byte
    first, second = _without_timing(m1), _without_timing(m2)
    first_options, second_options = dict(first.pop("options")), dict(second.pop("options"))
    assert first_options.pop("output") != second_options.pop("output")
    assert first_options == second_options and first == second


def test_default_split_is_about_nine_to_one(default_runs: tuple[Path, dict, Path, dict]) -> None:
    out, manifest = default_runs[0], default_runs[1]
    splits = _splits_of_rows(out, manifest)
    assert sorted(splits) == list(range(NUM_IMAGES + NUM_COPIES))
    counts = {s: manifest["splits"][s]["num_examples"] for s in ("train", "eval")}
    assert counts["train"] + counts["eval"] == NUM_IMAGES + NUM_COPIES
    assert 10 <= counts["eval"] <= 45  # 24 expected at 9:1; the hash is fixed, so this never flakes


def test_added_rows_never_move_existing_rows(data: Path, default_runs: tuple[Path, dict, Path, dict],
                                             tmp_path: Path) -> None:
    before = _splits_of_rows(default_runs[0], default_runs[1])
    manifest = _ingest(data, tmp_path / "more", "more.csv")
    after = _splits_of_rows(tmp_path / "more", manifest)
    assert len(after) == len(before) + 60
    assert {row: after[row] for row in before} == before
    assert {after[row] for row in after if row >= 1000} == {"train", "eval"}  # new rows go to both


def test_custom_weights_are_deterministic(data: Path, tmp_path: Path) -> None:
    weights = ["--split", "train=1", "--split", "eval=1"]
    m1 = _ingest(data, tmp_path / "a", "all.csv", *weights)
    m2 = _ingest(data, tmp_path / "b", "all.csv", *weights)
    assert set(m1["splits"]) == {"train", "eval"} and m2["splits"] == m1["splits"]
    counts = [m1["splits"][s]["num_examples"] for s in ("train", "eval")]
    assert sum(counts) == NUM_IMAGES + NUM_COPIES and min(counts) >= 80  # about half each
    shards = [p for p in _output_files(tmp_path / "a") if p.startswith("Split-")]
    assert _output_files(tmp_path / "a") == _output_files(tmp_path / "b") and len(shards) == 2
    default = _ingest(data, tmp_path / "c")
    # The weights change the assignment: 1:1 moves rows that 9:1 kept in train.
    assert _splits_of_rows(tmp_path / "a", m1) != _splits_of_rows(tmp_path / "c", default)


def test_split_key_keeps_each_patient_in_one_split(data: Path, tmp_path: Path) -> None:
    # 1:1, so that 23 patients surely fill both splits (at 9:1 this set leaves eval empty).
    manifest = _ingest(data, tmp_path / "out", "all.csv", "--split-key", "patient_id",
                       "--split", "train=1", "--split", "eval=1")
    splits = _splits_of_rows(tmp_path / "out", manifest)
    by_patient: dict[str, set[str]] = defaultdict(set)
    for row_id, split in splits.items():
        by_patient[f"p{row_id % NUM_PATIENTS:02d}"].add(split)
    assert len(by_patient) == NUM_PATIENTS
    assert all(len(s) == 1 for s in by_patient.values()), by_patient
    assert {next(iter(s)) for s in by_patient.values()} == {"train", "eval"}


def test_leakage_reports_content_in_both_splits(data: Path, default_runs: tuple[Path, dict, Path, dict]) -> None:
    out, manifest = default_runs[0], default_runs[1]
    splits = _splits_of_rows(out, manifest)
    paths = {i: f"img/{i:03d}.png" for i in range(NUM_IMAGES)}
    paths.update({NUM_IMAGES + k: f"copy/c{k:03d}.png" for k in range(NUM_COPIES)})
    content_splits: dict[str, set[str]] = defaultdict(set)
    digest_of = {row: hashlib.sha256((data / path).read_bytes()).hexdigest() for row, path in paths.items()}
    for row, digest in digest_of.items():
        content_splits[digest].add(splits[row])
    leaked = {d for d, s in content_splits.items() if len(s) > 1}
    assert leaked, "the data set should have copies on both sides of the split"
    leakage = manifest["leakage"]
    assert leakage["count"] == len(leaked)
    assert 0 < len(leakage["examples"]) <= len(leaked)
    index = str(data / "all.csv")
    for example in leakage["examples"]:
        occurrences = example["occurrences"]
        assert {o["split"] for o in occurrences} == {"train", "eval"}
        digests = set()
        for occurrence in occurrences:
            row_id = occurrence["row"] - 1  # 1-based data rows; row_id is the 0-based position
            assert occurrence["index"] == index and occurrence["path"] == paths[row_id]
            assert splits[row_id] == occurrence["split"]
            digests.add(digest_of[row_id])
        assert len(digests) == 1 and digests <= leaked


def _reference_leaks(files: list[tuple[str, int, list[int], list[int]]]) -> dict:
    """Brute force over all hashes at once: the count, and the five smallest leaked hashes."""
    splits_of: dict[int, set[str]] = defaultdict(set)
    for split, _, digests, _ in files:
        for digest in digests:
            splits_of[digest].add(split)
    leaked = sorted(d for d, s in splits_of.items() if len(s) > 1)
    examples = []
    for digest in leaked[:5]:
        occurrences = []
        for split, index_id, digests, rows in files:
            matching = sorted(r for d, r in zip(digests, rows) if d == digest)[:2]
            occurrences += [{"split": split, "index_id": index_id, "row": r} for r in matching]
        examples.append({"hash": f"{digest:016x}", "occurrences": sorted(occurrences, key=lambda o: (o["split"], o["row"], o["index_id"]))})
    return {"count": len(leaked), "examples": examples}


def test_leakage_check_is_the_same_in_bounded_buckets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shardflow.example_gen import leakage

    rng = np.random.default_rng(3)
    pool = rng.integers(0, 1 << 63, 400, dtype=np.int64)  # shared contents: drawn from a small pool
    files, described = [], []
    for number in range(12):
        split = ("train", "eval", "test")[number % 3]
        digests = [int(d) for d in rng.choice(pool, 60)] + [int(d) for d in rng.integers(0, 1 << 63, 40, dtype=np.int64)]
        rows = [int(r) for r in rng.permutation(np.arange(1, 101) + 100 * number)]
        path = str(tmp_path / f"{number}.npy")
        Path(path).write_bytes(leakage.digest_table(digests, rows))
        files.append((split, number % 2, path))
        described.append((split, number % 2, digests, rows))
    expected = _reference_leaks(described)
    assert expected["count"] > 5
    assert leakage.find_leaks(files) == expected
    monkeypatch.setattr(leakage, "BUCKET_DIGESTS", 37)  # ~33 buckets: each file read in many ranges
    assert leakage.find_leaks(files) == expected
    assert leakage.find_leaks([f for f in files if f[0] == "train"]) == {"count": 0, "examples": []}

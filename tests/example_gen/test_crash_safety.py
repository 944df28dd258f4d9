"""Kill `shardflow example-gen` mid-run (SIGKILL to its process group), then rerun into the same OUT.

A killed run must leave nothing a reader would take as complete: no manifest.json and no partial
file under a final shard name. A rerun must succeed with exact counts, no stale shards (also when
the shard count changes) and no staging left behind. Killed runs are subprocesses of the real
command; completed runs go through the same CLI entry point in-process (TensorFlow is imported once).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from helpers_images import random_pixels, write_csv, write_png
from shardflow.cli import main as shardflow_main
from shardflow.core.tfrecord import iter_records

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
NUM_FILES = 100
ROWS = {"train": 2400, "eval": 600}
ROWS_PER_CHUNK = 100
FINAL_SHARD = re.compile(r"^data-\d{5}-of-\d{5}\.tfrecord(\.gz)?$")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 rows of 16x16 RGB PNGs (100 files, repeated) in two named splits, with a row id column."""
    root = tmp_path_factory.mktemp("crash_data")
    rng = np.random.default_rng(7)
    for i in range(NUM_FILES):
        write_png(root / "img" / f"{i:03d}.png", random_pixels(rng, (16, 16, 3)))
    row_id = 0
    for split, count in ROWS.items():
        rows = []
        for _ in range(count):
            rows.append([f"img/{row_id % NUM_FILES:03d}.png", row_id % 10, row_id])
            row_id += 1
        write_csv(root / f"{split}.csv", ["x", "y", "row_id"], rows)
    return root


def _args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["example-gen", "--index", f"train={data / 'train.csv'}", "--index", f"eval={data / 'eval.csv'}",
            "--data-root", str(data), "--output", str(out), "--rows-per-chunk", str(ROWS_PER_CHUNK), *extra]


def _files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()] if directory.is_dir() else []


def _kill_when_parts_appear(data: Path, out: Path, *extra: str) -> int:
    """Starts the command, SIGKILLs its process group once a part file is staged; returns chunks done by then."""
    log = open(out.parent / f"{out.name}-killed.log", "wb")
    process = subprocess.Popen([SHARDFLOW, *_args(data, out, *extra)], stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    parts = out / ".staging" / "parts"
    deadline = time.monotonic() + 240
    try:
        while not _files(parts):
            assert process.poll() is None, f"the run ended (rc {process.returncode}) before staging a part"
            assert time.monotonic() < deadline, "no part file was staged within 240 s"
            time.sleep(0.01)
        done = len(_files(out / ".staging" / "done"))
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=60)
        log.close()
    assert process.returncode == -signal.SIGKILL
    return done


def _records(path: Path) -> list[bytes]:
    """All records of a shard; raises if any record is partial or corrupt."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)  # raises EOFError on a truncated gzip member
    return list(iter_records(io.BytesIO(data), str(path)))


def _assert_nothing_complete(out: Path) -> None:
    assert not (out / "manifest.json").exists()
    for path in out.glob("Split-*/*"):
        if FINAL_SHARD.match(path.name):
            _records(path)  # a file under a final name parses to its end


def _row_ids(path: Path) -> list[int]:
    return [tf.train.Example.FromString(r).features.feature["row_id"].int64_list.value[0] for r in _records(path)]


def _assert_complete(out: Path, num_shards: int | None = None) -> dict:
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"] == sum(ROWS.values()) and manifest["rejected"] == 0
    first_id = 0
    for split, count in ROWS.items():
        info = manifest["splits"][split]
        assert info["num_examples"] == count
        listed = sorted(s["path"] for s in info["shards"])
        on_disk = sorted(str(p.relative_to(out)) for p in (out / f"Split-{split}").iterdir())
        assert on_disk == listed  # no stale shard beside the manifest's
        if num_shards is not None:
            assert len(listed) == num_shards
        ids = []
        for shard in sorted(info["shards"], key=lambda s: s["path"]):
            shard_ids = _row_ids(out / shard["path"])
            assert len(shard_ids) == shard["num_examples"] and os.path.getsize(out / shard["path"]) == shard["bytes"]
            ids.extend(shard_ids)
        assert ids == list(range(first_id, first_id + count))  # every row once, in CSV order
        first_id += count
    assert not (out / ".staging").exists()
    assert [p for p in _files(out) if ".tmp" in p.name] == []
    return manifest


def test_killed_run_leaves_nothing_complete_and_rerun_succeeds(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _kill_when_parts_appear(dataset, out)
    assert done < sum(ROWS.values()) // ROWS_PER_CHUNK  # killed mid-ingest, not after it
    _assert_nothing_complete(out)
    assert list(out.glob("Split-*")) == []  # nothing is published before the pipeline ends
    assert _files(out / ".staging" / "parts")  # the kill really left staged work behind
    assert shardflow_main(_args(dataset, out)) == 0
    _assert_complete(out)


def test_rerun_with_fewer_shards_leaves_no_stale_shards(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert shardflow_main(_args(dataset, out, "--num-shards", "4", "--gzip")) == 0
    _assert_complete(out, num_shards=4)
    # A killed rerun first withdraws the manifest; the earlier shards may stay, but nothing is complete.
    _kill_when_parts_appear(dataset, out, "--num-shards", "2")
    _assert_nothing_complete(out)
    assert shardflow_main(_args(dataset, out, "--num-shards", "2")) == 0
    manifest = _assert_complete(out, num_shards=2)
    assert manifest["compression"] == ""
    assert sorted(p.name for p in out.glob("Split-*/*")) == sorted(
        [f"data-0000{i}-of-00002.tfrecord" for i in range(2)] * 2)

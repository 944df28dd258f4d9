"""The photos benchmark suite's wiring at a tiny size: contenders run, records count, outputs decode, hooks land.

The hook modules (`photos_stages`, `photos_reader`) are replaced by fakes so that this test checks the
suite's calls and reporting, not the hooks' own work.
"""
from __future__ import annotations

import csv
import sys
import types
from pathlib import Path

import numpy as np
import tensorflow as tf

from benchmarks import photos_suite, run_all

ROWS = 60


def _fake_hooks(monkeypatch, calls: dict) -> None:
    stages = types.ModuleType("benchmarks.photos_stages")
    reader = types.ModuleType("benchmarks.photos_reader")

    def stage_times(data_root: Path, index: Path, storage: str, rows: int) -> dict:
        calls["stages"] = (data_root, index, storage, rows)
        return {"decode": 1234.5, "write": 6.0}

    def reader_figures(examples: Path, work: Path) -> dict:
        calls["reader"] = (examples, sorted(p.name for p in examples.iterdir()))
        return {"ratio": 0.5}

    stages.stage_times, reader.reader_figures = stage_times, reader_figures
    reader.markdown = lambda result: f"READER ratio {result['ratio']}"
    monkeypatch.setitem(sys.modules, "benchmarks.photos_stages", stages)
    monkeypatch.setitem(sys.modules, "benchmarks.photos_reader", reader)


def _images(path: Path) -> tuple[list[np.ndarray], list[int]]:
    spec = {"x": tf.io.FixedLenFeature([], tf.string), "y": tf.io.FixedLenFeature([], tf.int64)}
    images, labels = [], []
    for record in tf.data.TFRecordDataset(str(path)):
        example = tf.io.parse_single_example(record, spec)
        images.append(tf.io.decode_jpeg(example["x"]).numpy())
        labels.append(int(example["y"]))
    return images, labels


def test_photos_suite_runs_contenders_and_hooks(tmp_path, monkeypatch):
    calls: dict = {}
    _fake_hooks(monkeypatch, calls)
    args = run_all.build_parser(run_all.load_suites()).parse_args(
        ["--photo-rows", str(ROWS), "--photo-contenders", "a,c", "--photo-storage", "jpeg",
         "--photo-count", "12", "--keep-outputs", "--repeats", "2"])
    result = photos_suite.run(args, [], tmp_path)

    assert not result["failed"]
    # two rounds, the order rotated in the second: a slow minute cannot fall on one contender only
    assert [(r["round"], r["contender"], r["storage"], r["records"]) for r in result["runs"]] == [
        (0, "a", "jpeg", ROWS), (0, "c", "jpeg", ROWS), (1, "c", "jpeg", ROWS), (1, "a", "jpeg", ROWS)]
    a, c = result["runs"][:2]
    assert Path(result["runs"][2]["output"]) != Path(c["output"])  # each round writes its own output
    images, labels = _images(Path(a["output"]) / "a.tfrecord")
    assert len(images) == ROWS and {image.shape for image in images} == {(224, 224, 3)}
    with open(tmp_path / "photos-12" / f"index-{ROWS}.csv", newline="") as index:
        assert labels == [int(row["y"]) for row in csv.DictReader(index)]
    assert all(image.std() > 5 for image in images[:12])  # photographs, not blank frames

    data_root, index_path, storage, rows = calls["stages"]
    assert (storage, rows, index_path.name) == ("jpeg", ROWS, f"index-{ROWS}.csv") and data_root.is_dir()
    assert calls["reader"][0] == Path(c["output"]) and "manifest.json" in calls["reader"][1]
    assert result["hooks"]["stages"]["jpeg"]["result"]["decode"] == 1234.5

    text = photos_suite.markdown(result)
    a_line = next(line for line in text.splitlines() if line.startswith(f"| {ROWS} | (a)"))
    assert a_line.endswith(f"| {a['total_s']:.1f}, {result['runs'][3]['total_s']:.1f} |")  # both rounds' totals
    assert "### storage jpeg" in text and "READER ratio 0.5" in text and "| decode | 1,234.5 |" in text
    assert "[jpeg] c steady" not in text  # no (b) in this run: no ratio target to check

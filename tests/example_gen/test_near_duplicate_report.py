"""Near-duplicate leakage in ExampleGen's report: train files, eval files of which some are altered copies
of train files (the session fixture `near_duplicate_set`), every pair listed by row; the modes, the
options, and a window of spans. The hashes and the search themselves are in test_near_duplicates.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers_images import write_csv
from shardflow.cli import main as shardflow_main
from shardflow.core.errors import ConfigError
from shardflow.example_gen import ExampleGenConfig, IndexSpec, run
from shardflow.example_gen.config import DEFAULT_NEAR_DUPLICATE_DISTANCE
from shardflow.example_gen.executor import TooManyRejectsError
from shardflow.example_gen.near_duplicates import PAIRS_FILE

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

LIMIT = DEFAULT_NEAR_DUPLICATE_DISTANCE

NearSet = tuple[Path, list[tuple[str, str]]]  # the session fixture `near_duplicate_set`


def _config(root: Path, output: Path, **options: object) -> ExampleGenConfig:
    indexes = options.pop("indexes", None) or (IndexSpec(str(root / "train.csv"), "train"),
                                                IndexSpec(str(root / "eval.csv"), "eval"))
    return ExampleGenConfig(indexes=indexes, data_root=str(root), output=str(output), resize=(("*", (48, 48)),),
                            channels=(("*", "rgb"),), beam_args=("--direct_running_mode=in_memory",),
                            **options)  # type: ignore[arg-type]


def _listed(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / PAIRS_FILE).read_text().splitlines()]


def _by_row(pairs: list[dict]) -> set[tuple[tuple, ...]]:
    """Each listed pair as its two rows (split, index file, row, path)."""
    return {tuple((o["split"], o["index"], o["row"], o["path"]) for o in pair["occurrences"]) for pair in pairs}


def _planted_rows(root: Path, planted: list[tuple[str, str]]) -> set[tuple[tuple, ...]]:
    """The planted pairs as rows, found in the CSVs themselves: (eval row, train row), eval first (split order)."""
    def row_of(split: str, path: str) -> tuple:
        lines = (root / f"{split}.csv").read_text().splitlines()
        return split, str(root / f"{split}.csv"), next(i for i, line in enumerate(lines) if line.split(",")[0] == path), path
    return {(row_of("eval", e), row_of("train", t)) for t, e in planted}


def test_example_gen_lists_every_altered_copy_across_splits_by_row(near_duplicate_set: NearSet, tmp_path: Path) -> None:
    root, planted = near_duplicate_set
    printed: list[str] = []
    manifest = run(_config(root, tmp_path / "out"), echo=printed.append)
    report = manifest.extra["near_duplicates"]
    assert report["mode"] == "warn" and report["distance"] == LIMIT and report["images_hashed"] == 18
    assert report["count"] == len(planted) and not report["truncated"]  # the planted pairs, no false ones
    assert report["within_split"] == {"eval": 0, "train": 0} and report["file"] == PAIRS_FILE
    listed = _listed(tmp_path / "out")
    assert len(listed) == report["count"] and report["examples"] == listed[:5]
    assert _by_row(listed) == _planted_rows(root, planted)  # every planted copy, by split, index file, row and path
    assert all(0 <= pair["distance"] <= LIMIT and pair["hash"] in ("dct", "tone", "centre") for pair in listed)
    assert [pair["distance"] for pair in listed] == sorted(pair["distance"] for pair in listed)  # closest first
    assert manifest.extra["leakage"]["count"] == 0  # no byte-identical file: only the near check sees them
    summary = printed[-1]
    assert f"NEAR-DUPLICATES: {len(planted)} image pairs" in summary and planted[0][1] in summary
    assert f"every pair, by row: {tmp_path / 'out' / PAIRS_FILE}" in summary
    stored = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert stored["near_duplicates"]["count"] == len(planted)


def test_fail_mode_exits_1_naming_the_file_that_lists_the_pairs(near_duplicate_set: NearSet, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    root, planted = near_duplicate_set
    out = tmp_path / "out"
    status = shardflow_main(["example-gen", "--index", f"train={root / 'train.csv'}", "--index", f"eval={root / 'eval.csv'}",
                             "--data-root", str(root), "--output", str(out), "--resize", "48x48", "--channels", "rgb",
                             "--near-duplicates", "fail", "--direct_running_mode=in_memory"])
    assert status == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("shardflow example-gen: error: 4 near-duplicate image pairs across splits")
    assert any(path in line for pair in planted for path in pair) and "distance" in line
    assert f"every pair is listed in {out / PAIRS_FILE}; no manifest written" in line
    assert not (out / "manifest.json").exists() and not (out / ".staging").exists()
    assert _by_row(_listed(out)) == _planted_rows(root, planted)  # the list a failed run leaves, whole


def test_exact_copies_are_counted_exactly_and_a_failed_rerun_leaves_no_stale_list(near_duplicate_set: NearSet,
                                                                          tmp_path: Path) -> None:
    """Train repeats three files 5, 4 and 3 times, eval repeats two of them: pairs by combinatorics."""
    root, _ = near_duplicate_set
    train = [f"train/t{i}.{'jpg' if i % 2 else 'png'}" for i in range(10)]
    repeated = {"train": [train[0]] * 5 + [train[1]] * 4 + [train[2]] * 3 + train[3:6], "eval": [train[0]] * 2 + [train[1]]}
    indexes = tuple(IndexSpec(str(write_csv(tmp_path / f"{split}.csv", ["image", "label"], [[p, 0] for p in paths])), split)
                    for split, paths in repeated.items())
    manifest = run(_config(root, tmp_path / "out", indexes=indexes), echo=lambda _: None)
    report = manifest.extra["near_duplicates"]
    assert report["within_split"] == {"train": 10 + 6 + 3, "eval": 1}
    assert report["count"] == 5 * 2 + 4 * 1 and manifest.extra["leakage"]["count"] == 2  # leakage counts contents
    listed = _listed(tmp_path / "out")
    assert len(listed) == report["count"] and {p["distance"] for p in listed} == {0}
    expected = {(e, t) for e in (1, 2) for t in range(1, 6)} | {(3, t) for t in range(6, 10)}  # (eval row, train row)
    assert {(eval_side[2], train_side[2]) for eval_side, train_side in _by_row(listed)} == expected
    # A rerun that fails on its rejects, before the check, leaves its own rejects and no earlier list.
    bad = IndexSpec(str(write_csv(tmp_path / "bad.csv", ["image", "label"], [["train/t0.png", 0], ["gone.png", 0]])), "eval")
    with pytest.raises(TooManyRejectsError):
        run(_config(root, tmp_path / "out", indexes=(indexes[0], bad), max_reject_fraction=0.0), echo=lambda _: None)
    assert not (tmp_path / "out" / PAIRS_FILE).exists() and not (tmp_path / "out" / "manifest.json").exists()
    assert [json.loads(line)["path"] for line in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()] == ["gone.png"]


def test_off_hashes_nothing_and_says_so(near_duplicate_set: NearSet, tmp_path: Path) -> None:
    """The workers write no hash file when off (the encode step itself, run on the first chunk)."""
    from shardflow.example_gen.csv_index import plan_chunks
    from shardflow.example_gen.encode_chunks import EncodeChunkFn, IngestPlan

    root, _ = near_duplicate_set
    _, chunks = plan_chunks(str(root / "train.csv"), 0, 100)
    written = {}
    for mode in ("off", "warn"):
        config = _config(root, tmp_path / mode, near_duplicates=mode)
        from shardflow.example_gen.columns import detect_columns
        from shardflow.example_gen.csv_index import read_chunk

        samples = [r.cells for r in read_chunk(chunks[0])]
        plan = IngestPlan(columns=tuple(detect_columns(["image", "label"], samples, config)), data_root=str(root),
                          staging_dir=str(tmp_path / mode / "staging"), publish_root=str(tmp_path / mode / "publish"),
                          index_splits=("train",), split_weights=(("train", 1),), split_key_positions=(0,),
                          perceptual_hashes=mode != "off")
        encode = EncodeChunkFn(plan)
        encode.setup()
        list(encode.process(chunks[0]))
        written[mode] = sorted(p.name for p in (tmp_path / mode / "staging").rglob("*.npy") if "phashes" in p.parts)
    assert written["off"] == []
    assert written["warn"] == ["0000-000000.centre.npy", "0000-000000.dct.npy", "0000-000000.tone.npy"]
    table = np.load(tmp_path / "warn" / "staging" / "phashes" / "train" / "0000-000000.dct.npy")
    assert table.shape == (2, 10) and sorted(table[1]) == list(range(1, 11))  # one hash per row, rows kept


def test_options_are_checked_and_reach_the_config() -> None:
    from shardflow.example_gen.cli import add_arguments, config_from_args
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--index", "a.csv", "--data-root", "d", "--output", "o", "--near-duplicates", "fail",
                              "--near-duplicate-distance", "6"])
    config = config_from_args(args, [])
    assert (config.near_duplicates, config.near_duplicate_distance) == ("fail", 6)
    base = {"indexes": (IndexSpec("a.csv"),), "data_root": "d", "output": "o"}
    assert ExampleGenConfig(**base).near_duplicates == "warn"
    with pytest.raises(ConfigError, match="near_duplicates must be one of .*got 'maybe'"):
        ExampleGenConfig(**base, near_duplicates="maybe")
    with pytest.raises(ConfigError, match=r"near_duplicate_distance must be an integer within \[0, 20\], got 40"):
        ExampleGenConfig(**base, near_duplicate_distance=40)


def test_shardflow_run_checks_the_new_flags_up_front(tmp_path: Path) -> None:
    from shardflow.pipelines.local_run import LocalRunConfig
    from shardflow.pipelines.run_target import prepare_run

    index = write_csv(tmp_path / "train.csv", ["image", "label"], [[f"img/{i}.png", i % 2] for i in range(4)])
    def prepared(*options: str) -> dict:
        config = LocalRunConfig(index=(f"train={index}",), data_root=str(tmp_path), output=str(tmp_path / "out"),
                                example_gen_options=options)
        return prepare_run(config.arguments())
    assert prepared("--near-duplicates", "fail", "--near-duplicate-distance", "8")["example_gen_options"][-1] == "8"
    with pytest.raises(ConfigError, match="--example-gen-args.*near_duplicate_distance"):
        prepared("--near-duplicate-distance", "99")


def test_a_window_of_spans_names_the_newest_spans_list_in_full() -> None:
    """The union manifest lives apart from the spans' outputs: its `file` points into the newest span's."""
    from shardflow.core.manifest import Manifest, SplitInfo
    from shardflow.example_gen.span_ingest import union_manifest

    manifests = [Manifest({}, {"train": SplitInfo(0, [])}, "", {"near_duplicates": {"mode": "warn", "count": count,
                                                                                     "file": PAIRS_FILE}})
                 for count in (1, 2)]
    union = union_manifest(manifests, [{"span": "1", "dir": "/store/span-1"}, {"span": "2", "dir": "/store/span-2"}])
    assert union.extra["near_duplicates"] == {"mode": "warn", "count": 2, "file": f"/store/span-2/{PAIRS_FILE}"}

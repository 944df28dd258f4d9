"""End-to-end: `shardflow example-gen` on generated PNGs with one row per bad-input class.

One real run (shared by the assertions) with `--max-reject-fraction 1.0`, checked against
rejects.jsonl, manifest.json and the shards; one run with the default fraction that must fail
without a manifest. Escaping rows point at a valid PNG outside the data root, so a row accepted
from there would show up as an extra record.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from shardflow.cli import main as shardflow_main
from shardflow.core.tfrecord import iter_records

from helpers_images import corrupt_idat, png_bytes

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

NUM_GOOD = 40
MAX_PIXELS = 100  # good images are 8x8 = 64 pixels; the bomb is 16x16 = 256


@dataclass(frozen=True)
class BadRow:
    """One bad row of the index and what its reject record must say."""

    image: str
    mask: str
    label: str
    column: str | None  # None for a malformed CSV record
    code: str
    raw: str | None = None  # the literal CSV line, for malformed records


def _gray(seed: int, height: int = 8, width: int = 8) -> np.ndarray:
    return ((np.arange(height * width) * 7 + seed * 13) % 256).astype(np.uint8).reshape(height, width)


def _mask(seed: int, size: int = 8) -> np.ndarray:
    return ((np.arange(size * size) + seed) % 3).astype(np.uint8).reshape(size, size)


def _unreadable(img: Path) -> str:
    """A file inside the root that cannot be read. chmod 000 does not stop root, so as root use a
    symlink loop (open fails with ELOOP) instead."""
    if os.geteuid() != 0:
        locked = img / "locked.png"
        locked.write_bytes(png_bytes(_gray(99)))
        locked.chmod(0)
        return "img/locked.png"
    os.symlink("loop_b.png", img / "loop_a.png")
    os.symlink("loop_a.png", img / "loop_b.png")
    return "img/loop_a.png"


def _write_files(root: Path, outside: Path) -> list[BadRow]:
    img, msk = root / "img", root / "msk"
    img.mkdir(parents=True)
    msk.mkdir()
    outside.mkdir()
    for i in range(NUM_GOOD):
        (img / f"g{i}.png").write_bytes(png_bytes(_gray(i)))
        (msk / f"m{i}.png").write_bytes(png_bytes(_mask(i)))
    evil = outside / "evil.png"  # valid: if it were read, its rows would be accepted
    evil.write_bytes(png_bytes(_gray(7)))
    good = png_bytes(_gray(0))
    (img / "subdir").mkdir()
    (img / "empty.png").write_bytes(b"")
    (img / "notpng.png").write_bytes(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")
    (img / "trunc.png").write_bytes(good[: len(good) // 2])
    (img / "corrupt.png").write_bytes(corrupt_idat(good))
    (img / "tall.png").write_bytes(png_bytes(_gray(1, height=10)))
    (img / "rgb.png").write_bytes(png_bytes(np.stack([_gray(2)] * 3, axis=-1)))
    (msk / "small.png").write_bytes(png_bytes(_mask(1, size=4)))
    (img / "bomb.png").write_bytes(png_bytes(_gray(3, 16, 16)))
    os.symlink(evil, img / "link.png")
    m0 = "msk/m0.png"
    return [
        # First row: an RGB image in a gray column; the column's shape must come from the majority.
        BadRow("img/rgb.png", m0, "1", "image", "wrong_shape"),
        BadRow("img/missing.png", m0, "1", "image", "missing_file"),
        BadRow("img/subdir", m0, "1", "image", "is_directory"),
        BadRow(_unreadable(img), m0, "1", "image", "unreadable_file"),
        BadRow("img/empty.png", m0, "1", "image", "empty_file"),
        BadRow("img/notpng.png", m0, "1", "image", "not_an_image"),
        BadRow("img/trunc.png", m0, "1", "image", "corrupt_image"),
        BadRow("img/corrupt.png", m0, "1", "image", "corrupt_image"),
        BadRow("img/tall.png", m0, "1", "image", "wrong_shape"),
        BadRow("img/g0.png", "msk/small.png", "1", "mask", "mask_shape_mismatch"),
        BadRow("", m0, "1", "image", "empty_cell"),
        BadRow("", "", "", None, "malformed_csv", raw="img/g0.png,msk/m0.png,1,extra"),
        BadRow("", "", "", None, "malformed_csv", raw='"img/g1.png,msk/m1.png,1'),
        BadRow("../outside/evil.png", m0, "1", "image", "path_escapes_root"),
        BadRow(str(evil), m0, "1", "image", "path_escapes_root"),
        BadRow("img/link.png", m0, "1", "image", "path_escapes_root"),
        BadRow("img/bomb.png", m0, "1", "image", "too_many_pixels"),
    ]


def _write_index(tmp: Path) -> tuple[Path, Path, dict[int, BadRow]]:
    """Good and bad rows interleaved; returns the CSV, the root and the bad rows by 1-based row."""
    root = tmp / "root"
    bad = _write_files(root, tmp / "outside")
    # The bad label comes last: column types are detected from the first 50 rows, and a
    # non-integer among those would make the label column a string column instead.
    bad.append(BadRow("img/g2.png", "msk/m2.png", "seven", "label", "bad_value"))
    lines, expected = ["image,mask,label"], {}
    good = iter(range(NUM_GOOD))
    for position, row in enumerate(bad):
        if position:  # a few good rows between bad ones (the unbalanced quote must not swallow them)
            for i in [next(good), next(good)]:
                lines.append(f"img/g{i}.png,msk/m{i}.png,{i % 10}")
        lines.append(row.raw if row.raw is not None else f"{row.image},{row.mask},{row.label}")
        expected[len(lines) - 1] = row
    lines[-1:-1] = [f"img/g{i}.png,msk/m{i}.png,{i % 10}" for i in good]
    expected[len(lines) - 1] = expected.pop(max(expected))
    index = tmp / "index.csv"
    index.write_text("\n".join(lines) + "\n")
    return index, root, expected


def _args(index: Path, root: Path, out: Path, *extra: str) -> list[str]:
    return ["example-gen", "--index", f"train={index}", "--data-root", str(root), "--output", str(out),
            "--max-pixels", str(MAX_PIXELS), "--rows-per-chunk", "7", "--progress-seconds", "600", *extra]


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("bad_input")
    index, root, expected = _write_index(tmp)
    out = tmp / "out"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = shardflow_main(_args(index, root, out, "--max-reject-fraction", "1.0"))
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    manifest = json.loads((out / "manifest.json").read_text())
    return {"tmp": tmp, "index": index, "root": root, "out": out, "code": code, "summary": printed.getvalue(),
            "expected": expected, "rejects": rejects, "manifest": manifest}


def test_run_succeeds(bad_run: dict) -> None:
    assert bad_run["code"] == 0


def test_every_bad_row_rejected_with_row_column_path_code_reason(bad_run: dict) -> None:
    by_row = {r["row"]: r for r in bad_run["rejects"]}
    assert len(by_row) == len(bad_run["rejects"]), "a row appears twice in rejects.jsonl"
    assert sorted(by_row) == sorted(bad_run["expected"])
    for row, bad in bad_run["expected"].items():
        got = by_row[row]
        assert (got["column"], got["code"], got["split"]) == (bad.column, bad.code, "train"), got
        assert got["index"] == str(bad_run["index"])
        if bad.column == "image":
            assert got["path"] == (bad.image or None), got
        elif bad.column == "mask":
            assert got["path"] == bad.mask, got
        else:
            assert got["path"] is None, got
        assert isinstance(got["reason"], str) and len(got["reason"]) > 8, got


def test_reasons_are_readable(bad_run: dict) -> None:
    reasons = {r["code"]: r["reason"] for r in bad_run["rejects"]}
    assert "missing file: img/missing.png" == reasons["missing_file"]
    assert "directory" in reasons["is_directory"]
    assert "zero-byte" in reasons["empty_file"]
    assert "not a PNG or JPEG" in reasons["not_an_image"]
    assert "escapes the data root" in reasons["path_escapes_root"]
    assert f"limit of {MAX_PIXELS} pixels" in reasons["too_many_pixels"]
    assert "'seven'" in reasons["bad_value"] and "int64" in reasons["bad_value"]
    assert "4x4" in reasons["mask_shape_mismatch"] and "8x8" in reasons["mask_shape_mismatch"]
    assert "empty cell" in reasons["empty_cell"]
    malformed = [r["reason"] for r in bad_run["rejects"] if r["code"] == "malformed_csv"]
    assert any("4 fields, the header has 3" in m for m in malformed), malformed


def test_counts_reconcile(bad_run: dict) -> None:
    manifest, expected = bad_run["manifest"], bad_run["expected"]
    data_rows = len(bad_run["index"].read_text().splitlines()) - 1
    assert manifest["rows"] == data_rows == NUM_GOOD + len(expected)
    assert manifest["accepted"] + manifest["rejected"] == manifest["rows"]
    assert manifest["rejected"] == len(expected) == len(bad_run["rejects"])
    assert manifest["accepted"] == NUM_GOOD == manifest["splits"]["train"]["num_examples"]
    assert manifest["rejected_by_reason"] == dict(Counter(b.code for b in expected.values()))
    assert manifest["rejected_by_reason"] == dict(Counter(r["code"] for r in bad_run["rejects"]))


def test_summary_says_accepted_plus_rejected(bad_run: dict) -> None:
    rows, rejected = NUM_GOOD + len(bad_run["expected"]), len(bad_run["expected"])
    summary = bad_run["summary"]
    assert f"rows read: {rows}  accepted: {NUM_GOOD}  rejected: {rejected}" in summary, summary
    assert "rejected path_escapes_root: 3" in summary and "rejected malformed_csv: 2" in summary, summary
    assert "details: rejects.jsonl" in summary, summary


def _shard_records(bad_run: dict) -> list[bytes]:
    records = []
    for shard in bad_run["manifest"]["splits"]["train"]["shards"]:
        with open(bad_run["out"] / shard["path"], "rb") as stream:
            records.extend(iter_records(stream, shard["path"]))
    return records


def test_good_rows_in_shards_bit_for_bit(bad_run: dict) -> None:
    import tensorflow as tf  # already imported by the run; parses the records independently

    records = _shard_records(bad_run)
    assert len(records) == NUM_GOOD
    seen = Counter()
    for record in records:
        feature = tf.train.Example.FromString(record).features.feature
        label = feature["label"].int64_list.value[0]
        image = np.frombuffer(feature["image"].bytes_list.value[0], np.uint8).reshape(8, 8)
        mask = np.frombuffer(feature["mask"].bytes_list.value[0], np.uint8).reshape(8, 8)
        # Good image i has label i % 10 and its own pixels; find i from the pixels.
        i = next(i for i in range(NUM_GOOD) if np.array_equal(image, _gray(i)))
        assert label == i % 10
        assert np.array_equal(mask, _mask(i))
        seen[i] += 1
    assert seen == Counter(range(NUM_GOOD)), "every good row exactly once"


def test_nothing_outside_the_root_was_accepted(bad_run: dict) -> None:
    escaping = [r for r in bad_run["rejects"] if r["code"] == "path_escapes_root"]
    assert {r["path"] for r in escaping} == {"../outside/evil.png", str(bad_run["tmp"] / "outside" / "evil.png"),
                                            "img/link.png"}
    # evil.png's pixels equal good image 7's; image 7 must appear once (its own row), not more.
    images = _images(_shard_records(bad_run))
    assert sum(np.array_equal(image, _gray(7)) for image in images) == 1


def _images(records: list[bytes]) -> list[np.ndarray]:
    import tensorflow as tf

    return [np.frombuffer(tf.train.Example.FromString(r).features.feature["image"].bytes_list.value[0],
                          np.uint8).reshape(8, 8) for r in records]


def test_manifest_describes_columns(bad_run: dict) -> None:
    features = bad_run["manifest"]["features"]
    assert features["image"] == {"name": "image", "dtype": "uint8", "shape": [8, 8, 1],
                                      "encoding": "raw", "role": "image"}
    assert (features["mask"]["role"], features["mask"]["shape"]) == ("mask", [8, 8, 1])
    assert (features["label"]["role"], features["label"]["dtype"]) == ("label", "int64")


def test_default_reject_fraction_fails_without_manifest(bad_run: dict, capsys: pytest.CaptureFixture) -> None:
    out = bad_run["tmp"] / "out_strict"
    capsys.readouterr()
    code = shardflow_main(_args(bad_run["index"], bad_run["root"], out))
    err = capsys.readouterr().err
    assert code != 0
    rejected, rows = len(bad_run["expected"]), NUM_GOOD + len(bad_run["expected"])
    assert f"{rejected} of {rows} rows rejected" in err, err
    assert str(out / "rejects.jsonl") in err, err
    assert len((out / "rejects.jsonl").read_text().splitlines()) == rejected
    assert not (out / "manifest.json").exists()
    assert not list(out.glob("Split-*")), "no shards published by a failed run"

"""CSV quirks of real exports: bare quotes in unquoted cells, a BOM, quoted spaces, integer cells,
no header row, image files without an extension or in an unsupported format, unnamed columns, an empty CSV.

Runs go through `shardflow example-gen` on generated PNGs; row counts reconcile with an independent
count of the data lines (`splitlines`) and with Python's csv module.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers_images import png_bytes
from shardflow.cli import main as shardflow_main
from shardflow.example_gen.columns import guess_value_dtype, parse_value
from shardflow.example_gen.csv_index import plan_chunks, read_chunk

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

ROWS = 2000


def _pixels(i: int) -> np.ndarray:
    return ((np.arange(16) + i) % 256).astype(np.uint8).reshape(4, 4)


def _root(tmp: Path, names: list[str]) -> Path:
    root = tmp / "root"
    root.mkdir(exist_ok=True)
    for i, name in enumerate(names):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(png_bytes(_pixels(i)))
    return root


def _run(tmp: Path, index: Path, root: Path, *extra: str) -> tuple[int, dict | None, str]:
    """Exit code, manifest (None without one) and stderr of one example-gen run."""
    out, err = tmp / "out", io.StringIO()
    args = ["example-gen", "--index", f"train={index}", "--data-root", str(root), "--output", str(out),
            "--rows-per-chunk", "7", "--progress-seconds", "600", "--max-reject-fraction", "1.0", *extra]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = shardflow_main(args)
    manifest = out / "manifest.json"
    return code, json.loads(manifest.read_text()) if manifest.exists() else None, err.getvalue()


def _data_lines(index: Path) -> int:
    """Independent count: lines after the header (the test files have no line breaks in cells)."""
    return len(index.read_text(encoding="utf-8-sig").splitlines()) - 1


def _csv_module_rows(index: Path) -> list[list[str]]:
    with open(index, newline="", encoding="utf-8-sig") as stream:
        return list(csv.reader(stream))[1:]


# ---------------------------------------------------------------- bare quotes (inch marks) are literal

REPRO = 'image,label\n0.png,12" vinyl\n1.png,cd\n2.png,cd\n3.png,7" single\n4.png,cd\n'


def test_bare_quotes_in_unquoted_cells_are_literal(tmp_path: Path) -> None:
    index = tmp_path / "i.csv"
    index.write_text(REPRO)
    code, manifest, err = _run(tmp_path, index, _root(tmp_path, [f"{i}.png" for i in range(5)]))
    assert code == 0, err
    assert manifest["rows"] == manifest["accepted"] == _data_lines(index) == len(_csv_module_rows(index)) == 5
    assert manifest["splits"]["train"]["label_counts"]["label"] == {'12" vinyl': 1, "7\" single": 1, "cd": 3}


# ---------- one messy spreadsheet export: bare quotes, BOM, quoted spaces, integers, unnamed columns

def _messy_rows() -> tuple[list[str], dict[int, str]]:
    """2,000 data lines of `label,image,count,,`: an inch mark every 60 rows, a broken quoted cell
    every 250, quoted spaces, a `1_000` count; returns the lines and the expected rejects by row."""
    lines, rejects = [], {}
    for row in range(1, ROWS + 1):
        label, image, count = "cd", f"img/{row}.png", str(row % 7)
        if row % 60 == 0:
            label = f'{row % 13}" vinyl'
        if row == 5:
            label, image = '" padded "', '" lead.png"'
        line = f"{label},{image},{count},,"
        if row % 250 == 0:
            line = f'cd,"img/{row}.png,{count},,'  # a quoted cell that never closes
            rejects[row] = "malformed_csv"
        if row == 501:
            line = f"cd,{image},1_000,,"
            rejects[row] = "bad_value"
        lines.append(line)
    return lines, rejects


@pytest.fixture(scope="module")
def messy(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("messy")
    lines, rejects = _messy_rows()
    index = tmp / "excel.csv"
    index.write_bytes(("\n".join(["label,image,count,,"] + lines) + "\n").encode("utf-8-sig"))  # with a BOM
    root = _root(tmp, [f"img/{row}.png" for row in range(1, ROWS + 1)] + [" lead.png"])
    code, manifest, err = _run(tmp, index, root)
    reject_rows = [json.loads(line) for line in (tmp / "out/rejects.jsonl").read_text().splitlines()]
    return {"index": index, "code": code, "manifest": manifest, "err": err, "expected": rejects, "rejects": reject_rows}


def test_row_counts_reconcile_with_an_independent_line_count(messy: dict) -> None:
    manifest, index = messy["manifest"], messy["index"]
    assert messy["code"] == 0, messy["err"]
    assert manifest["rows"] == _data_lines(index) == ROWS
    assert manifest["accepted"] + manifest["rejected"] == ROWS
    assert manifest["rejected"] == len(messy["expected"]) == 9  # 8 broken quotes, one 1_000
    assert {r["row"]: r["code"] for r in messy["rejects"]} == messy["expected"]
    labels = manifest["splits"]["train"]["label_counts"]["label"]
    inch_marks = sum('" vinyl,' in line for line in index.read_text(encoding="utf-8-sig").splitlines())
    assert sum(n for name, n in labels.items() if name.endswith('" vinyl')) == inch_marks > 30  # none swallowed


def test_every_chunk_size_finds_the_csv_module_records(messy: dict) -> None:
    index = messy["index"]
    lines = index.read_text(encoding="utf-8-sig").splitlines()[1:]
    broken = {row for row, code in messy["expected"].items() if code == "malformed_csv"}
    for rows_per_chunk in (1, 7, 60, 5000):
        _, chunks = plan_chunks(str(index), 0, rows_per_chunk)
        records = [r for chunk in chunks for r in read_chunk(chunk)]
        assert [r.row for r in records] == list(range(1, ROWS + 1))
        assert {r.row for r in records if r.cells is None} == broken
        for record, line in zip(records, lines):
            if record.cells is not None:  # each line read alone by the csv module (it would let a
                assert record.cells == next(csv.reader([line]))[:3], line  # broken quote swallow lines)


def test_a_bom_is_stripped_from_the_first_column_name(messy: dict) -> None:
    features = messy["manifest"]["features"]
    assert "label" in features and features["label"]["role"] == "label"
    assert not any(name.startswith("\ufeff") for name in features)


def test_quoted_cells_keep_their_spaces(messy: dict) -> None:
    labels = messy["manifest"]["splits"]["train"]["label_counts"]["label"]
    assert labels.get(" padded ") == 1 and "padded" not in labels
    assert 5 not in {r["row"] for r in messy["rejects"]}  # " lead.png" (with its space) was read
    _, chunks = plan_chunks(str(messy["index"]), 0, 10)
    assert next(read_chunk(chunks[0])).cells[:2] == ["cd", "img/1.png"]  # unquoted cells are stripped
    assert [r.cells for r in read_chunk(chunks[0])][4][:2] == [" padded ", " lead.png"]


def test_integer_cells_are_plain_decimal_integers(messy: dict) -> None:
    assert messy["manifest"]["features"]["count"]["dtype"] == "int64"
    reject = next(r for r in messy["rejects"] if r["row"] == 501)
    assert (reject["column"], reject["code"]) == ("count", "bad_value") and "'1_000'" in reject["reason"]
    for cell in ("1_000", " 7", "\u0661\u0662", "0x10", "1e3", "+"):
        with pytest.raises(ValueError):
            parse_value(cell, "int64")
    assert parse_value("-0012", "int64") == -12 and parse_value("+5", "int64") == 5
    assert guess_value_dtype(["1_000", "2_000", "3"]) == "string"
    with pytest.raises(ValueError):
        parse_value("1_0.5", "float32")


def test_empty_unnamed_columns_are_ignored(messy: dict) -> None:
    assert sorted(messy["manifest"]["features"]) == ["count", "image", "label"]


def test_an_unnamed_column_with_a_value_is_refused(tmp_path: Path) -> None:
    index = tmp_path / "i.csv"
    index.write_text("image,label,,\na.png,1,,\nb.png,2,,x\n")
    code, manifest, err = _run(tmp_path, index, _root(tmp_path, ["a.png", "b.png"]))
    assert (code, manifest) == (2, None)
    assert "column 4 of the header has no name" in err and "row 2" in err and len(err.splitlines()) == 1, err


# ---------------------------------------------------------------- no header, image formats, an empty CSV

def test_a_csv_without_a_header_row_is_refused(tmp_path: Path) -> None:
    index = tmp_path / "i.csv"
    index.write_text("image/train_0.png,3\nimage/train_1.png,4\n")
    code, manifest, err = _run(tmp_path, index, _root(tmp_path, ["image/train_0.png", "image/train_1.png"]))
    assert (code, manifest) == (2, None)
    assert "no header row" in err and "image/train_0.png" in err and len(err.splitlines()) == 1, err


def test_extensionless_png_files_are_ingested(tmp_path: Path) -> None:
    names = [f"scan_{i}" for i in range(6)]  # PNG content, no extension
    index = tmp_path / "i.csv"
    index.write_text("scan,y\n" + "".join(f"{n},{i % 2}\n" for i, n in enumerate(names)))
    code, manifest, err = _run(tmp_path, index, _root(tmp_path, names))
    assert code == 0, err
    assert manifest["features"]["scan"]["role"] == "image" and manifest["features"]["scan"]["shape"] == [4, 4, 1]
    assert manifest["accepted"] == _data_lines(index) == 6


def test_image_files_in_an_unsupported_format_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(4):
        Image.fromarray(_pixels(i)).save(root / f"{i}.tif", format="TIFF")
    index = tmp_path / "i.csv"
    index.write_text("scan,y\n" + "".join(f"{i}.tif,{i}\n" for i in range(4)))
    code, manifest, err = _run(tmp_path, index, root)
    assert (code, manifest) == (2, None)
    assert "'scan'" in err and "TIFF" in err and len(err.splitlines()) == 1, err


def test_an_empty_csv_is_one_line_and_exit_2(tmp_path: Path) -> None:
    index = tmp_path / "i.csv"
    index.write_bytes(b"")
    code, manifest, err = _run(tmp_path, index, _root(tmp_path, []))
    assert (code, manifest) == (2, None)
    assert "empty index file" in err and len(err.splitlines()) == 1 and "Traceback" not in err, err

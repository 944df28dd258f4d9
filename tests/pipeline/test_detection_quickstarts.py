"""docs/detection.md's quickstart, run as written: its five `shardflow example-gen` lines, one per format, in a
folder holding `shapes/` as the page describes it (tests/helpers_box_formats.py writes the same set in the five
formats), each giving the set's examples; the run line's flags are checked against the parsers by test_docs."""
from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

import doc_checks
from helpers_box_formats import SPLITS, write_set
from shardflow.cli import main as shardflow_main

pytestmark = pytest.mark.pipeline
PAGE = doc_checks.REPO / "docs" / "detection.md"


def _quickstart_lines() -> list[list[str]]:
    text = PAGE.read_text()
    start = text.index("## Quickstart")
    block = re.search(r"```\w*\n(.*?)```", text[start:], re.S)
    assert block, "no command block under the quickstart"
    return [shlex.split(line) for line in doc_checks.commands_in(f"```\n{block.group(1)}```\n")]


def test_each_formats_quickstart_line_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _quickstart_lines()
    formats = [next(word for word in line if word.startswith("runs/")) for line in lines if "example-gen" in line]
    assert formats == ["runs/automl", "runs/header", "runs/coco", "runs/yolo", "runs/voc"]
    write_set(tmp_path / "shapes")
    monkeypatch.chdir(tmp_path)
    for line in lines:
        if line[:2] != ["shardflow", "example-gen"]:
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            code = shardflow_main(line[1:])
        assert code == 0, (line, printed.getvalue())
        output = tmp_path / line[line.index("--output") + 1]
        manifest = json.loads((output / "manifest.json").read_text())
        counts = {split: manifest["splits"][split]["num_examples"] for split in SPLITS}
        assert counts == {split: len(images) for split, images in SPLITS.items()}, line
        assert manifest["rejected"] == 0 and manifest["boxes"]["label_map"] == {
            "disc": 1, "square": 2, "triangle": 3}, line

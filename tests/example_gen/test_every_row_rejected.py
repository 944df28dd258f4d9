"""An index whose every row is rejected (each has one field more than the header), with
--max-reject-fraction 1.0: a manifest with every row rejected, not a traceback from the near-duplicate
search, which has no image to search (issue 55: 1 of 126 messy cases)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))


def test_every_row_rejected_writes_a_manifest_that_counts_them(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    for number in range(5):
        Image.fromarray(np.full((8, 8), number * 40, np.uint8)).save(tmp_path / "img" / f"{number}.png")
    lines = "".join(f"img/{number}.png,{number % 2},extra\n" for number in range(5))
    (tmp_path / "index.csv").write_text("image,label\n" + lines)
    done = subprocess.run([SHARDFLOW, "example-gen", "--index", str(tmp_path / "index.csv"), "--data-root",
                           str(tmp_path), "--output", str(tmp_path / "out"), "--max-reject-fraction", "1.0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (manifest["rows"], manifest["accepted"], manifest["rejected"]) == (5, 0, 5)
    rejects = (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["row"] for line in rejects) == [1, 2, 3, 4, 5]

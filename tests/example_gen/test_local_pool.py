"""ExampleGen's default local pool: the bytes of Beam's FnApiRunner, and no child outlives its launcher.

The data has two splits by hashing, rejected rows, GZIP shards cut across part files and more
chunks than workers, so every piece of the output (shards, rejects, provenance, statistics, schema)
is compared between the pool and Beam's in-process runner.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers_images import random_pixels, write_csv, write_png
from shardflow.cli import main as shardflow_main
from shardflow.core.manifest import read_manifest

pytestmark = pytest.mark.pipeline
SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
ROWS = 90


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pool_data")
    rng = np.random.default_rng(11)
    rows: list[list[object]] = []
    for i in range(ROWS):
        write_png(root / "img" / f"{i:03d}.png", random_pixels(rng, (12, 10, 3)))
        rows.append([f"img/{i % 70:03d}.png", i % 4, f"site{i % 3}"])  # 20 exact copies
    rows.insert(30, ["img/missing.png", 1, "site0"])
    (root / "img" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    rows.insert(60, ["img/broken.png", 2, "site1"])
    write_csv(root / "all.csv", ["x", "label", "site"], rows)
    return root


def _ingest(data: Path, out: Path, *beam_args: str) -> dict:
    args = ["example-gen", "--index", str(data / "all.csv"), "--data-root", str(data), "--output", str(out),
            "--rows-per-chunk", "7", "--num-shards", "3", "--gzip", "--max-reject-fraction", "0.1",
            "--progress-seconds", "600", *beam_args]
    assert shardflow_main(args) == 0
    return read_manifest(str(out)).extra


def _outputs(out: Path) -> dict[str, bytes]:
    """Every published file but the manifest (it records the runner and times)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}


def test_the_pool_writes_the_bytes_of_beams_runner(data: Path, tmp_path: Path) -> None:
    pooled = _ingest(data, tmp_path / "pool")
    beam = _ingest(data, tmp_path / "beam", "--direct_running_mode=in_memory")
    one = _ingest(data, tmp_path / "one", "--direct_num_workers=1")
    assert pooled["runner"] == "local process pool (workers=2)" and one["runner"].endswith("(workers=1)")
    assert "FnApiRunner(in_memory" in beam["runner"]
    assert pooled["rows"] == ROWS + 2 and pooled["rejected_by_reason"] == {"corrupt_image": 1, "missing_file": 1}
    outputs = _outputs(tmp_path / "pool")
    assert sum(name.startswith("Split-") for name in outputs) == 6  # 3 shards in each of 2 splits
    assert {"rejects.jsonl", "schema.pbtxt", "statistics/train.pb", "provenance/eval.npz"} <= set(outputs)
    assert outputs == _outputs(tmp_path / "beam") == _outputs(tmp_path / "one")
    for key in ("rows", "accepted", "rejected", "leakage", "near_duplicates", "provenance"):
        assert pooled[key] == beam[key] == one[key], key


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead: it only waits to be reaped
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_die_with_a_killed_launcher(data: Path, tmp_path: Path) -> None:
    """SIGKILL to the launcher alone: its workers must not go on writing into the staging area, nor its
    statistics process go on importing TensorFlow."""
    rows = [[f"img/{i % ROWS:03d}.png", i % 4, "s"] for i in range(20_000)]
    write_csv(tmp_path / "big.csv", ["x", "label", "site"], rows)
    out = tmp_path / "out"
    children: list[int] = []
    launcher = subprocess.Popen([SHARDFLOW, "example-gen", "--index", f"train={tmp_path / 'big.csv'}",
                                 "--data-root", str(data), "--output", str(out), "--rows-per-chunk", "50"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list((out / ".staging" / "done").glob("*")):
            assert launcher.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        children += [int(p) for p in Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split()]
        assert len(children) == 3  # two workers and the statistics process
        launcher.kill()
        launcher.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in children)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
        for pid in filter(_alive, children):  # orphans of a failed check
            os.kill(pid, signal.SIGKILL)

"""`shardflow run` as a person types it, on a tiny data set: what tests/pipeline/test_run_output.py and
test_run_failures.py both run."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from helpers_images import write_csv, write_png

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))


def shardflow(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """The command as a person runs it: the CLI's own defaults for TensorFlow's C++ logging (a
    TF_CPP_MIN_LOG_LEVEL the test session was started with would override them)."""
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([SHARDFLOW, *argv], capture_output=True, text=True, timeout=timeout, env=env)


def run_args(train: Path, eval_: Path, root: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--index", f"train={train}", "--index", f"eval={eval_}", "--data-root", str(root),
            "--output", str(out), *extra]


def tiny_data(root: Path, missing: int = 0) -> tuple[Path, Path]:
    """20 random 8x8 PNGs of 2 classes (16 train, 4 eval); `missing` more train rows name no file."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(20):
        write_png(root / f"img/{i}.png", rng.integers(0, 255, size=(8, 8, 1)).astype(np.uint8))
        rows.append([f"img/{i}.png", i % 2])
    rows += [[f"img/missing-{i}.png", 0] for i in range(missing)]
    return (write_csv(root / "train.csv", ["x", "y"], rows[:16] + rows[20:]),
            write_csv(root / "eval.csv", ["x", "y"], rows[16:20]))

"""The statistics process: the same statistics and schema bytes with TensorFlow's stand-in as with TensorFlow.

The stand-in (example_gen/tensorflow_absent.py) spares the statistics process ~2 s of CPU and ~360 MB;
it must change no byte. A request that fails under the stand-in is answered again with TensorFlow.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shardflow.example_gen.column_files import write_column_file
from shardflow.example_gen.columns import ColumnSpec
from shardflow.example_gen.images import ImageRules
from shardflow.example_gen.statistics_process import WITH_TENSORFLOW, StatisticsFailed, StatisticsProcess

pytestmark = pytest.mark.pipeline
COLUMNS = (ColumnSpec("x", 0, "image", "uint8", (28, 28, 1), "raw", ImageRules(10**9, None, None)),
           ColumnSpec("y", 1, "label", "int64"), ColumnSpec("site", 2, "metadata", "string"),
           ColumnSpec("weight", 3, "metadata", "float32"))


def _column_files(folder: Path) -> dict[str, list[str]]:
    """Two chunks of train (string values with ties and a long tail), one row of eval, an empty split."""
    rng = np.random.default_rng(3)
    files: dict[str, list[str]] = {"train": [], "eval": [], "test": []}
    for split, chunks, rows in (("train", 2, 1500), ("eval", 1, 1)):
        for chunk in range(chunks):
            path = str(folder / f"{split}-{chunk}.arrow")
            write_column_file(path, COLUMNS, {
                "x": [int(v) for v in rng.integers(700, 800, rows)], "y": [int(v) for v in rng.integers(0, 10, rows)],
                "site": [f"site{int(v) % 700}" for v in rng.zipf(1.3, rows)],
                "weight": [float(v) for v in rng.normal(size=rows)]})
            files[split].append(path)
    return files


def _statistics(files: dict[str, list[str]], out: Path, *args: str) -> tuple[bytes, dict[str, bytes]]:
    with StatisticsProcess(*args) as process:
        process.prepare(list(files), COLUMNS, str(out), "train")
        process.request(files)
        schema = process.schema()
    return schema.SerializeToString(), {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_the_stand_in_writes_the_bytes_tensorflow_writes(tmp_path: Path) -> None:
    files = _column_files(tmp_path)
    stand_in = _statistics(files, tmp_path / "stand_in")
    real = _statistics(files, tmp_path / "real", WITH_TENSORFLOW)
    assert sorted(stand_in[1]) == ["eval.pb", "test.pb", "train.pb"]
    assert stand_in == real
    assert b"site" in stand_in[0] and b"weight" in stand_in[0]  # a schema of every column


def test_a_request_that_fails_under_the_stand_in_is_answered_with_tensorflow(tmp_path: Path) -> None:
    files = {"train": [str(tmp_path / "missing.arrow")]}
    with StatisticsProcess() as process, pytest.raises(StatisticsFailed) as failed:
        process.prepare(["train"], COLUMNS, str(tmp_path / "out"), "train")
        process.request(files)
        process.schema()
    assert "(with TensorFlow)" in str(failed.value) and "missing.arrow" in str(failed.value)


def test_a_dead_statistics_process_is_an_error(tmp_path: Path) -> None:
    process = StatisticsProcess()
    process._process.kill()
    with pytest.raises(StatisticsFailed, match="died"):
        process.prepare(["train"], COLUMNS, str(tmp_path / "out"), "train")
        process.request(_column_files(tmp_path))
        process.schema()
    process.close()


def test_the_light_imports_leave_out_beams_cloud_connectors_but_not_the_storage_clients() -> None:
    # in a fresh interpreter, as the statistics process starts; the statistics it then writes are
    # compared with TensorFlow's byte for byte above
    code = ("import sys\n"
            "from shardflow.example_gen.statistics_process import UNUSED_BEAM_CONNECTORS, light_imports\n"
            "light_imports()\n"
            "import shardflow.example_gen.statistics, apache_beam.io.aws.s3io, apache_beam.io.gcp.gcsio\n"
            "from apache_beam.io.filesystem import FileSystem\n"
            "print(sorted(m for m in UNUSED_BEAM_CONNECTORS if sys.modules.get(m) is not None), "
            "sorted(str(c.scheme()) for c in FileSystem.get_all_subclasses()))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, schemes = done.stdout.strip().splitlines()[-1].split("] [")
    assert loaded == "[" and "'hdfs'" in schemes and "'s3'" not in schemes and "'gs'" not in schemes

"""Failures a user can cause stay one line and an exit code: a broken shard, in `shardflow train`, in a
pipeline step, and library calls that change nothing process-wide."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers_images import write_csv, write_png

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
# As a user runs it: the command itself quiets TensorFlow's start-up lines (TF_CPP_MIN_LOG_LEVEL unset).
ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ExampleGen output of 40 small PNGs in 4 train shards, made by the `shardflow` command."""
    root = tmp_path_factory.mktemp("broken")
    rng = np.random.default_rng(0)
    rows = [[write_png(root / f"img/{i}.png", rng.integers(0, 255, (8, 8, 1), dtype=np.uint8)).name, i % 2]
            for i in range(40)]
    rows = [[f"img/{name}", label] for name, label in rows]
    write_csv(root / "train.csv", ["x", "y"], rows[:32])
    write_csv(root / "eval.csv", ["x", "y"], rows[32:])
    done = subprocess.run([SHARDFLOW, "example-gen", "--index", f"train={root / 'train.csv'}",
                           "--index", f"eval={root / 'eval.csv'}", "--data-root", str(root),
                           "--output", str(root / "examples"), "--num-shards", "4"],
                          capture_output=True, text=True, env=ENV, timeout=600)
    assert done.returncode == 0, done.stderr
    return root / "examples"


def _shards(examples: Path) -> list[Path]:
    return sorted((examples / "Split-train").glob("data-*"))


def _copy(examples: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(examples, to)
    return to


def _missing(examples: Path) -> str:
    shard = _shards(examples)[1]
    shard.unlink()
    return f"shard file {shard} listed in the manifest of {examples} is missing"


def _resized(examples: Path) -> str:
    shard = _shards(examples)[2]
    with open(shard, "ab") as out:
        out.write(b"\0" * 10)
    return f"shard file {shard} has {shard.stat().st_size} bytes, the manifest says {shard.stat().st_size - 10}"


def _unlisted(examples: Path) -> str:
    extra = examples / "Split-train" / "data-99999-of-99999.tfrecord"
    extra.write_bytes(_shards(examples)[0].read_bytes())
    return "not listed ['data-99999-of-99999.tfrecord']"


@pytest.mark.parametrize("break_it", [_missing, _resized, _unlisted])
def test_a_broken_shard_is_one_line_and_exit_1_in_shardflow_train(examples: Path, tmp_path: Path, break_it) -> None:
    broken = _copy(examples, tmp_path / "examples")
    says = break_it(broken)
    done = subprocess.run([SHARDFLOW, "train", "--examples", str(broken), "--output", str(tmp_path / "model"),
                           "--epochs", "1"], capture_output=True, text=True, env=ENV, timeout=600)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith("shardflow train: error: ") and says in line, line


def test_a_broken_shard_fails_the_pipeline_step_with_the_commands_own_line(examples: Path, tmp_path: Path) -> None:
    from shardflow.core.manifest import ShardMismatchError
    from shardflow.pipelines import step_bodies

    broken = _copy(examples, tmp_path / "examples")
    says = _resized(broken)
    with pytest.raises(step_bodies.StepFailed) as failed:
        step_bodies.train(str(broken), {}, ["--epochs", "1"], "", str(tmp_path / "model"))
    assert failed.value.exit_code == 1 and isinstance(failed.value.__cause__, ShardMismatchError)
    assert str(failed.value) == f"shardflow train: error: {says} (replaced or truncated since ExampleGen wrote it)"


def test_reading_s3_from_a_library_call_leaves_sys_exit_and_the_excepthook_alone(examples: Path,
                                                                                  s3_server, s3_bucket) -> None:
    from helpers_s3 import upload_tree

    from shardflow.core.input_stream import StreamOptions, build_stream

    uri = upload_tree(s3_server, examples, s3_bucket, "examples")
    before = (sys.exit, sys.excepthook, getattr(sys, "_shardflow_exit_guard", False))
    batch = next(iter(build_stream(uri, "train", StreamOptions(batch_size=4))))
    assert batch["x"].shape[0] == 4
    assert (sys.exit, sys.excepthook, getattr(sys, "_shardflow_exit_guard", False)) == before

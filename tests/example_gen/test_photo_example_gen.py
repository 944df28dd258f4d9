"""ExampleGen on photographs: the local pool and Beam's threads change no byte; the work estimate.

Photos are JPEG crops of scikit-learn's sample photographs (testkit/photo_data.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from testkit.photo_data import ensure_photo_index, ensure_photos
from helpers_images import random_pixels, write_csv, write_png
from shardflow.core.beam_setup import MULTI_THREAD_MIN_WORK_SECONDS
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.example_gen import ExampleGenConfig, IndexSpec, run
from shardflow.example_gen.columns import detect_columns
from shardflow.example_gen.data_root import open_data_root
from shardflow.example_gen.work_estimate import estimate_work

ROWS = 1_200


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = ensure_photos(tmp_path_factory.mktemp("photos"), count=40)
    return root, ensure_photo_index(root, ROWS)


def _config(index: Path, root: Path, output: Path, *beam_args: str) -> ExampleGenConfig:
    return ExampleGenConfig(indexes=(IndexSpec(str(index), "train"),), data_root=str(root), output=str(output),
                            resize=(("*", (224, 224)),), channels=(("*", "rgb"),), storage=(("*", "jpeg"),),
                            beam_args=beam_args)


def _shard_bytes(output: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted((output / "Split-train").glob("data-*"))]


def test_photos_on_the_pool_and_on_threads_with_the_bytes_of_a_single_thread(photos: tuple[Path, Path],
                                                                            tmp_path: Path) -> None:
    root, index = photos
    pooled = run(_config(index, root, tmp_path / "auto"), echo=lambda _: None)
    threaded = run(_config(index, root, tmp_path / "threads", "--direct_running_mode=multi_threading",
                           "--direct_num_workers=2"), echo=lambda _: None)
    single = run(_config(index, root, tmp_path / "one", "--direct_running_mode=in_memory"), echo=lambda _: None)
    assert "local process pool" in pooled.extra["runner"] and "multi_threading" in threaded.extra["runner"]
    assert "in_memory" in single.extra["runner"]
    lines = len(index.read_text().splitlines()) - 1
    assert pooled.extra["accepted"] == threaded.extra["accepted"] == single.extra["accepted"] == lines == ROWS
    assert _shard_bytes(tmp_path / "auto") == _shard_bytes(tmp_path / "one") == _shard_bytes(tmp_path / "threads")
    phases = pooled.extra["phase_seconds"]  # where the time went, for the benchmark's arithmetic
    assert list(phases) == ["plan", "rows_and_shards", "statistics", "finish"]
    assert abs(sum(phases.values()) - pooled.extra["seconds"]) < 0.05
    batch = next(iter(build_stream(tmp_path / "auto", "train", StreamOptions(batch_size=4))))
    assert batch["x"].shape == (4, 224, 224, 3) and np.asarray(batch["x"]).std() > 10  # real pixels, not blank


def test_the_work_estimate_tells_photos_from_small_pngs(photos: tuple[Path, Path], tmp_path: Path) -> None:
    root, index = photos
    rows = [line.split(",") for line in index.read_text().splitlines()[1:50]]
    config = _config(index, root, tmp_path / "out")
    photo_work = estimate_work(detect_columns(["x", "y"], rows, config), rows, open_data_root(str(root)), ROWS)
    rng = np.random.default_rng(0)
    for i in range(8):
        write_png(tmp_path / "small" / f"{i}.png", random_pixels(rng, (28, 28, 1)))
    small_rows = [[f"{i % 8}.png", str(i % 3)] for i in range(50)]
    write_csv(tmp_path / "small" / "index.csv", ["x", "y"], small_rows)
    small_config = ExampleGenConfig(indexes=(IndexSpec(str(tmp_path / "small" / "index.csv"), "train"),),
                                    data_root=str(tmp_path / "small"), output=str(tmp_path / "out2"))
    small_work = estimate_work(detect_columns(["x", "y"], small_rows, small_config), small_rows,
                               open_data_root(str(tmp_path / "small")), ROWS)
    # ~2.4 ms a photo row against ~70 µs a 28×28 row, as measured (work_estimate's docstring)
    assert 1.5e-3 < photo_work.seconds / ROWS < 4e-3 and 50e-6 < small_work.seconds / ROWS < 100e-6
    assert photo_work.seconds > MULTI_THREAD_MIN_WORK_SECONDS > small_work.seconds
    assert photo_work.gil_free > 0.9 > 0.3 > small_work.gil_free

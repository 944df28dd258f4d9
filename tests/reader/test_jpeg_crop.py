"""The fused JPEG crop: decode_and_crop_jpeg's pixels, the crop windows' bounds, and a Trainer run that uses it.

One ExampleGen run per module: 40 RGB images (3 colour classes with gradients) stored as JPEG, and
the same stored as PNG (where `crop` keeps the warp path).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from shardflow.core.image_decode import JPEG_DCT, decode_crop_resize, decode_then_crop_resize
from shardflow.core.manifest import read_manifest
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig, run
from shardflow.trainer.augment import MIN_CROP_SCALE, _matrix, op_seeds, crop_windows

from helpers_images import write_csv, write_png

HEIGHT, WIDTH = 40, 48
COLOURS = np.array([[200, 40, 40], [40, 180, 60], [50, 60, 210]])


def _image(rng: np.random.Generator, label: int) -> np.ndarray:
    """The class colour with gradients and texture: JPEG has detail to crop, the colour stays learnable."""
    ramp = np.add.outer(np.arange(HEIGHT), np.arange(WIDTH))[:, :, None] % 23 * 2
    noise = rng.integers(0, 30, size=(HEIGHT, WIDTH, 3))
    return np.clip(COLOURS[label] + ramp + noise - 30, 0, 255).astype(np.uint8)


def _ingest(data: Path, out: Path, storage: str) -> Path:
    indexes = tuple(IndexSpec(str(data / f"{s}.csv"), s) for s in ("train", "eval"))
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(data), output=str(out), storage=(("x", storage),)),
                echo=lambda _: None)
    return out


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("colours")
    rng = np.random.default_rng(3)
    rows = [[write_png(root / f"img/{i}.png", _image(rng, i % 3)).relative_to(root).as_posix(), str(i % 3)]
            for i in range(40)]
    write_csv(root / "train.csv", ["x", "y"], rows[:32])
    write_csv(root / "eval.csv", ["x", "y"], rows[32:])
    return {kind: _ingest(root, tmp_path_factory.mktemp(kind) / "out", kind) for kind in ("jpeg", "png")}


def _blobs(out: Path) -> list[tf.Tensor]:
    manifest = read_manifest(out)
    stream = build_stream(out, "train", StreamOptions(batch_size=8, decode=False))
    return [b for batch in stream for b in batch["x"]][:manifest.splits["train"].num_examples]


def test_windows_hold_the_crop_op_scale_and_offsets() -> None:
    ops = ("flip", "crop")
    for index in range(20):
        seed = tf.constant([5, index], tf.int64)
        windows = crop_windows(ops, seed, 16, HEIGHT, WIDTH).numpy()
        y, x, h, w = windows.T
        assert (y >= 0).all() and (x >= 0).all() and (y + h <= HEIGHT).all() and (x + w <= WIDTH).all()
        for size, side in ((h, HEIGHT), (w, WIDTH)):
            assert (size >= math.floor(MIN_CROP_SCALE * side)).all() and (size <= side).all()
        # The crop op's matrix for the same seed: the window is its scale and offsets, rounded to pixels.
        matrix = _matrix("crop", tf.zeros([16, HEIGHT, WIDTH, 3]), op_seeds(ops, seed)[1]).numpy()
        scale, tx, ty = matrix[:, 0, 0], matrix[:, 0, 2], matrix[:, 1, 2]
        assert np.abs(h - scale * HEIGHT).max() <= 0.5 and np.abs(w - scale * WIDTH).max() <= 0.5
        assert np.abs(x - tx).max() <= 1.5 and np.abs(y - ty).max() <= 1.5
    a = crop_windows(ops, tf.constant([5, 1], tf.int64), 16, HEIGHT, WIDTH).numpy()
    np.testing.assert_array_equal(a, crop_windows(ops, tf.constant([5, 1], tf.int64), 16, HEIGHT, WIDTH).numpy())
    assert not np.array_equal(a, crop_windows(ops, tf.constant([5, 2], tf.int64), 16, HEIGHT, WIDTH).numpy())
    spans = crop_windows(ops, tf.constant([0, 0], tf.int64), 4096, HEIGHT, WIDTH).numpy()[:, 3] / WIDTH
    assert spans.min() < MIN_CROP_SCALE + 0.03 and spans.max() > 0.97  # the whole range is drawn


def test_fused_crop_equals_decode_then_crop_inside_the_window(shards: dict[str, Path]) -> None:
    """decode_and_crop_jpeg's pixels equal decode + slice except in the window's first and last column.

    There libjpeg upsamples chroma from the decoded region's edge instead of the neighbour pixel
    (measured on 224x224 photos: 0.16 % of pixels differ, at most 14 levels, all in those columns).
    """
    edge_errors = []
    for i, blob in enumerate(_blobs(shards["jpeg"])):
        windows = crop_windows(("crop",), tf.constant([9, i], tf.int64), 4, HEIGHT, WIDTH)
        for window in windows:
            y, x, h, w = window.numpy()
            fused = tf.image.decode_and_crop_jpeg(blob, window, channels=3, dct_method=JPEG_DCT).numpy().astype(int)
            full = tf.io.decode_jpeg(blob, channels=3, dct_method=JPEG_DCT).numpy()[y:y + h, x:x + w].astype(int)
            assert fused.shape == full.shape == (h, w, 3)
            np.testing.assert_array_equal(fused[:, 1:-1], full[:, 1:-1])
            edge_errors.append(np.abs(fused - full).max())
            resized = decode_crop_resize(blob, window, [HEIGHT, WIDTH], 3).numpy()
            reference = decode_then_crop_resize(blob, window, [HEIGHT, WIDTH], 3).numpy()
            assert np.abs(resized - reference).max() <= edge_errors[-1] + 1e-3
    assert max(edge_errors) <= 40 and np.mean(edge_errors) < 10


def _task_and_stream(out: Path, augment: tuple[str, ...]) -> tuple[bool, tf.Tensor]:
    from shardflow.trainer.features import RawToModel
    from shardflow.trainer.input_pipeline import build_streams, fused_crop_applies
    from shardflow.trainer.task import resolve_task

    config = TrainerConfig(input=InputOptions(examples=str(out), augment=augment, shuffle_buffer_mb=0,
                                              deterministic=True, batch_size=8, seed=4),
                           fit=FitOptions(steps=1), export=ExportOptions(output="unused"))
    task = resolve_task(config.input)
    to_model = RawToModel(task, None)
    images = next(iter(build_streams(task, config.input, 8, 1, to_model).train))[0]["x"]
    return fused_crop_applies(task, config.input, to_model), images


def test_crop_is_fused_on_jpeg_only_and_is_seeded(shards: dict[str, Path]) -> None:
    fused, images = _task_and_stream(shards["jpeg"], ("crop", "flip"))
    assert fused and images.shape == (8, HEIGHT, WIDTH, 3) and images.dtype == tf.float32
    _, again = _task_and_stream(shards["jpeg"], ("crop", "flip"))
    np.testing.assert_array_equal(images.numpy(), again.numpy())  # the same seed, the same crops
    plain = next(iter(build_stream(shards["jpeg"], "train", StreamOptions(batch_size=8))))["x"].numpy() / 255.0
    assert 0.0 <= images.numpy().min() and images.numpy().max() <= 1.0 and not np.allclose(images.numpy(), plain, atol=1e-2)
    assert not _task_and_stream(shards["png"], ("crop", "flip"))[0]
    assert not _task_and_stream(shards["jpeg"], ("flip",))[0]


def test_trainer_with_crop_on_jpeg_learns_the_colours(shards: dict[str, Path], tmp_path: Path) -> None:
    summary = run(TrainerConfig(input=InputOptions(examples=str(shards["jpeg"]), batch_size=8, augment=("crop", "flip"),
                                                   input_probe_batches=2),
                                fit=FitOptions(steps=60, learning_rate=3e-3),
                                export=ExportOptions(output=str(tmp_path / "m"))), echo=lambda _: None)
    assert summary["optimizer_steps"] == 60 and summary["train_time_augmentation"] == ["crop", "flip"]
    assert summary["history"][-1]["val_accuracy"] >= 0.75  # 3 classes: chance is 1/3

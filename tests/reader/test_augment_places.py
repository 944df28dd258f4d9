"""Augmentation draws by each example's place in the endless order, not by the worker that makes it.

The Trainer's own training streams (trainer/input_pipeline.py) over 48 generated 12x10 PNGs, built as
worker i of n builds its slice of each global batch of 8, fresh or from a resume point: the augmented
pixels of every global position are the same whichever number of workers made them and wherever the
stream started (so a run killed on 2 workers and resumed on 1 keeps every draw), and the two slices of
one global batch draw apart (before, row r of each worker's slice had the same flip, angle, shift).
A replica of the on-device augment layer draws its own part of the global batch the same way.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from helpers_images import random_pixels, write_csv, write_png
from helpers_reader import budget_for
from shardflow.core.stream_position import WorkerSlice
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.trainer.config import InputOptions
from shardflow.trainer.features import RawToModel
from shardflow.trainer.input_pipeline import _stream
from shardflow.trainer.task import resolve_task

pytestmark = pytest.mark.unit
GLOBAL_BATCH, STEPS, HEIGHT, WIDTH = 8, 6, 12, 10
EVERY_OP = ("flip", "flip_vertical", "rotate", "crop", "brightness", "contrast")


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, rng = tmp_path_factory.mktemp("places"), np.random.default_rng(11)
    rows = [[write_png(root / f"{i}.png", random_pixels(rng, (HEIGHT, WIDTH, 1))).name, str(i % 3)]
            for i in range(48)]
    write_csv(root / "train.csv", ["x", "y"], rows)
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(root / "train.csv"), "train"),), data_root=str(root),
                                 output=str(root / "out"), min_shards=2), echo=lambda _: None)
    return root / "out"


class _OneImage:
    """The model step with every example's pixels replaced by one ramp: what differs between examples is their draws."""

    def __init__(self, real: RawToModel) -> None:
        self.real, self.reader_decodes, self.tft_layer = real, real.reader_decodes, real.tft_layer
        ramp = np.add.outer(np.arange(HEIGHT), 3 * np.arange(WIDTH)) / (HEIGHT + 3 * WIDTH)
        self.ramp = tf.constant(ramp[None, :, :, None], tf.float32)

    def training_pair(self, batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        image, target = self.real.training_pair(batch)
        return tf.zeros_like(image) + self.ramp, target


def _slices(examples: Path, ops: tuple[str, ...], workers: int, first_step: int = 0, steps: int = STEPS,
            one_image: bool = False) -> np.ndarray:
    """[worker, step, row, H, W, C]: the augmented images each of `workers` workers makes for its slice of the
    global batches `first_step`, ... (the stream built as the Trainer builds it, resumed at `first_step`)."""
    inputs = InputOptions(examples=str(examples), augment=ops, shuffle_buffer_mb=budget_for(examples, 12), seed=7,
                          deterministic=True, batch_size=GLOBAL_BATCH // workers, eval_split=None)
    task = resolve_task(inputs)
    to_model = _OneImage(RawToModel(task, None)) if one_image else RawToModel(task, None)
    made = []
    for index in range(workers):
        cut = WorkerSlice.for_worker(GLOBAL_BATCH, workers, index) if workers > 1 else None
        stream = _stream(task, inputs, "train", GLOBAL_BATCH // workers, to_model, training=True,
                         start=first_step * GLOBAL_BATCH, worker_slice=cut, global_batch=GLOBAL_BATCH)
        made.append(np.stack([inputs_["x"].numpy() for inputs_, _ in stream.take(steps)]))
    return np.stack(made)


def _by_position(slices: np.ndarray) -> np.ndarray:
    """[position, H, W, C]: the workers' slices put together, global batch after global batch."""
    workers, steps, rows = slices.shape[:3]
    return slices.transpose(1, 0, 2, 3, 4, 5).reshape(steps * workers * rows, *slices.shape[3:])


@pytest.mark.parametrize("op", EVERY_OP)
def test_the_two_slices_of_a_global_batch_draw_apart(examples: Path, op: str) -> None:
    worker_0, worker_1 = _slices(examples, (op,), workers=2, one_image=True)
    assert not np.allclose(worker_0, worker_0[:, :1]), "the op drew the same for every row"
    apart = ~np.isclose(worker_0, worker_1).all(axis=(2, 3, 4))  # [step, row]: row r of each slice
    # A flip is a coin: about half the row pairs differ; a continuous draw differs everywhere.
    assert apart.mean() >= (0.25 if op.startswith("flip") else 1.0), apart


@pytest.mark.parametrize("ops", [("flip",), EVERY_OP], ids=["flips alone", "every op"])
def test_each_position_keeps_its_draws_whatever_the_workers_and_the_resume(examples: Path,
                                                                           ops: tuple[str, ...]) -> None:
    one_worker = _by_position(_slices(examples, ops, workers=1))
    assert not np.allclose(one_worker, _by_position(_slices(examples, (), workers=1)))
    two_workers = _by_position(_slices(examples, ops, workers=2))
    np.testing.assert_array_equal(two_workers, one_worker)
    half = STEPS // 2 * GLOBAL_BATCH
    # Killed after 3 steps on 2 workers, resumed on 1 (and the other way): every example as uninterrupted.
    resumed_on_one = _by_position(_slices(examples, ops, workers=1, first_step=STEPS // 2, steps=STEPS // 2))
    resumed_on_two = _by_position(_slices(examples, ops, workers=2, first_step=STEPS // 2, steps=STEPS // 2))
    np.testing.assert_array_equal(np.concatenate([two_workers[:half], resumed_on_one]), one_worker)
    np.testing.assert_array_equal(np.concatenate([one_worker[:half], resumed_on_two]), one_worker)


_REPLICAS = """
import numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
from shardflow.trainer.augment import AugmentLayer
images = tf.zeros([8, 6, 5, 1]) + tf.reshape(tf.range(30, dtype=tf.float32), [1, 6, 5, 1])  # one image, 8 times
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    layer = AugmentLayer(("flip", "rotate"), seed=3)
batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(images))))
parts = strategy.experimental_local_results(strategy.run(lambda x: layer(x, training=True), args=(batch,)))
alone = AugmentLayer(("flip", "rotate"), seed=3)(images, training=True)  # one replica, the whole global batch
np.testing.assert_array_equal(np.concatenate([p.numpy() for p in parts]), alone.numpy())
assert not np.allclose(parts[0].numpy(), parts[1].numpy())
print("ok")
"""


@pytest.mark.pipeline  # a subprocess: logical devices must be set before TensorFlow starts
def test_each_replica_of_the_augment_layer_draws_its_part_of_the_global_batch() -> None:
    done = subprocess.run([sys.executable, "-c", _REPLICAS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]

"""Training feedback: progress (rate, ETA, true step counts), TensorBoard logs, class names in serving.

One small string-labelled set (8x8 gray PNGs, labels cat/dog/bird; 64 train rows, 16 eval rows)
goes through ExampleGen once; training runs take a few steps of batch 8 (an epoch is 8 steps).
"""
from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import ModelInfo
from shardflow.core.progress import ProgressReporter, progress_text
from shardflow.core.reader import shard_files
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.evaluator import EvaluatorConfig
from shardflow.evaluator import confusion
from shardflow.evaluator import executor as evaluator
from shardflow.example_gen import run as example_gen
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig, run
from shardflow.trainer.progress import StepProgress

from helpers_images import write_csv, write_png
from helpers_models import band_model, export_model
from helpers_s3 import download_tree

WORDS = ["cat", "dog", "bird"]
TRAIN_ROWS, EVAL_ROWS, BATCH = 64, 16, 8
STEPS_PER_EPOCH = TRAIN_ROWS // BATCH


@pytest.fixture(scope="module")
def words(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, rng = tmp_path_factory.mktemp("words"), np.random.default_rng(3)
    indexes = []
    for split, count in (("train", TRAIN_ROWS), ("eval", EVAL_ROWS)):
        rows = []
        for i in range(count):
            y = i % 3
            pixels = rng.integers(0, 150, size=(8, 8, 1))
            pixels[3 * y:3 * y + 2] += 100
            write_png(root / f"{split}/{i}.png", pixels.astype(np.uint8))
            rows.append([f"{split}/{i}.png", WORDS[y]])
        indexes.append(IndexSpec(str(write_csv(root / f"{split}.csv", ["image", "label"], rows)), split))
    out = root / "examples"
    example_gen(ExampleGenConfig(indexes=tuple(indexes), data_root=str(root), output=str(out)), echo=lambda _: None)
    return out


def _train(examples: Path, out: Path, steps: int) -> tuple[dict, list[str]]:
    lines: list[str] = []
    summary = run(TrainerConfig(input=InputOptions(examples=str(examples), batch_size=BATCH, label="label",
                                                   input_probe_batches=2),
                                fit=FitOptions(steps=steps), export=ExportOptions(output=str(out))), echo=lines.append)
    return summary, lines


# --- progress ----------------------------------------------------------------------------------------

class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_ingest_progress_lines_show_rate_and_eta(tmp_path: Path) -> None:
    clock = FakeClock()
    reporter = ProgressReporter(tmp_path, total_rows=10_000, interval=60, echo=lambda _: None, clock=clock)
    assert reporter.report() == "progress: 0/10,000 rows (0%) after 0 s, ETA unknown"
    (tmp_path / "chunk-0").write_text("1500")
    (tmp_path / "chunk-1").write_text("1000")
    (tmp_path / ".chunk-2.tmp").write_text("999")  # a marker still being written is not counted
    clock.now += 50
    assert reporter.report() == "progress: 2,500/10,000 rows (25%) after 50 s, 50 rows/s, ETA 2 min 30 s"
    assert progress_text(9_000, 9_000, 4_000, "rows").endswith("2 rows/s, ETA 0 s")


def test_steps_1_shows_one_step_not_the_whole_epoch(words: Path, tmp_path: Path) -> None:
    summary, lines = _train(words, tmp_path / "m", steps=1)
    assert summary["optimizer_steps"] == 1
    epoch_lines = [line for line in lines if line.startswith("train: epoch")]
    assert epoch_lines and epoch_lines[-1].startswith("train: epoch 1/1: 1/1 steps in ")
    assert not any(f"{STEPS_PER_EPOCH}/{STEPS_PER_EPOCH}" in line for line in lines)


def _fit_with_progress(progress: StepProgress, steps: int) -> None:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    data = tf.data.Dataset.from_tensors((tf.ones([4, 2]), tf.ones([4, 1]))).repeat()
    model.fit(data, epochs=2, steps_per_epoch=10, verbose=0,
              callbacks=[progress, StopAtSteps(steps)])


class StopAtSteps(keras.callbacks.Callback):
    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.model.stop_training = int(self.model.optimizer.iterations.numpy()) >= self.steps


def test_training_progress_is_periodic_lines_in_logs_and_a_bar_on_a_terminal() -> None:
    clock, lines = FakeClock(), []

    class Ticking(StepProgress):  # 11 s per step on the fake clock: a line every 3 steps at interval 30
        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            clock.now += 11
            super().on_train_batch_end(batch, logs)

    _fit_with_progress(Ticking(10, 13, 4, lines.append, interval=30, tty=False, clock=clock), steps=13)
    periodic = [line for line in lines if " steps (" in line]
    assert len(periodic) == 4  # steps 3, 6, 9 of epoch 1 and step 3 of epoch 2 (it stops at 3)
    assert re.match(r"train: epoch 1/2: 3/10 steps \(30%\) after 33 s, 0\.091 steps/s, ETA 1 min 17 s, "
                    r"0\.36 ex/s, loss \d", periodic[0]), periodic[0]
    ends = [line for line in lines if " steps in " in line]
    assert [e.split(": ")[1] for e in ends] == ["epoch 1/2", "epoch 2/2"]
    assert ends[1].startswith("train: epoch 2/2: 3/3 steps in 33 s, loss ")
    bar = io.StringIO()
    with redirect_stdout(bar):
        _fit_with_progress(StepProgress(10, 3, 4, tty=True), steps=3)
    text = bar.getvalue()
    assert "epoch 1/2" in text and "3/3" in text and "10/10" not in text and "loss" in text


# --- TensorBoard -------------------------------------------------------------------------------------

TRAINED_STEPS = STEPS_PER_EPOCH + 4  # two epochs, the second cut short by the step budget


@pytest.fixture(scope="module")
def trained(words: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("trained") / "m"
    return out, _train(words, out, steps=TRAINED_STEPS)[0]


def read_scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} from every event file under `log_dir` (read independently of the writer)."""
    scalars: dict[str, dict[int, float]] = {}
    for path in sorted(log_dir.rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                number = tf.make_ndarray(value.tensor).item() if value.HasField("tensor") else value.simple_value
                scalars.setdefault(f"{path.parent.name}/{value.tag}", {})[event.step] = float(number)
    return scalars


def test_tensorboard_logs_hold_epoch_and_step_losses_and_the_input_rate(trained: tuple[Path, dict]) -> None:
    out, summary = trained
    assert summary["tensorboard"] == str(out / "tensorboard")
    scalars = read_scalars(out / "tensorboard")
    history = summary["history"]
    assert sorted(scalars["train/epoch_loss"]) == [0, 1]  # Keras numbers epochs from 0
    np.testing.assert_allclose([scalars["train/epoch_loss"][i] for i in (0, 1)], [e["loss"] for e in history],
                               rtol=1e-6)
    np.testing.assert_allclose(scalars["validation/epoch_accuracy"][1], history[-1]["val_accuracy"], rtol=1e-6)
    assert sorted(scalars["train/batch_loss"]) == list(range(1, TRAINED_STEPS + 1))  # every step of this tiny epoch
    report = summary["input_report"]
    assert scalars["input/rate/input_examples_per_second"] == {TRAINED_STEPS: pytest.approx(
        report["input_examples_per_second"], rel=1e-6)}
    assert scalars["input/rate/training_examples_per_second"][TRAINED_STEPS] == pytest.approx(
        report["training_examples_per_second"], rel=1e-6)
    assert sorted(scalars["input/rate/epoch_training_examples_per_second"]) == [1, 2]


def test_tensorboard_logs_are_written_to_s3(words: Path, s3_bucket: str, s3_server,  # noqa: ANN001
                                            tmp_path: Path) -> None:
    output = f"s3://{s3_bucket}/model"
    summary = run(TrainerConfig(input=InputOptions(examples=str(words), batch_size=BATCH, label="label",
                                                   input_probe_batches=2),
                                fit=FitOptions(steps=3), export=ExportOptions(output=output)), echo=lambda _: None)
    assert summary["tensorboard"] == f"{output}/tensorboard"
    download_tree(s3_server, summary["tensorboard"], tmp_path / "tb")
    scalars = read_scalars(tmp_path / "tb")
    assert list(scalars["train/epoch_loss"].values()) == pytest.approx([summary["history"][0]["loss"]], rel=1e-6)
    assert sorted(scalars["train/batch_loss"]) == [1, 2, 3]
    assert 3 in scalars["input/rate/input_examples_per_second"]


# --- class names in serving --------------------------------------------------------------------------

def test_serving_returns_class_names_for_string_labels(trained: tuple[Path, dict], words: Path) -> None:
    out, _ = trained
    manifest = read_manifest(words)
    records = [r.numpy() for r in tf.data.TFRecordDataset(shard_files(words, manifest, "eval"))]
    served = tf.saved_model.load(str(out / "model")).signatures["serving_default"](examples=tf.constant(records))
    names = sorted(WORDS)  # the vocabulary is train's values in sorted order; its OOV id is not served
    classes = served["classes"].numpy().astype(str)
    assert classes.shape == (EVAL_ROWS, len(names)) and (classes == np.array(names)).all()
    np.testing.assert_array_equal(served["scores"].numpy(), served["probabilities"].numpy())
    np.testing.assert_allclose(served["probabilities"].numpy().sum(axis=1), 1.0, atol=1e-6)
    ids = served["probabilities"].numpy().argmax(-1)
    assert served["predicted_class"].numpy().astype(str).tolist() == [names[i] for i in ids]


def test_an_unused_oov_class_is_left_out_of_the_tables_and_the_plot(words: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The served model never predicts OOV (it serves WORDS only); every eval label is in the
    # vocabulary: no support either.
    info = ModelInfo(task="classification", label="label", num_classes=3, class_names=WORDS, label_vocabulary=WORDS)
    model = export_model(band_model(3, 8), tmp_path / "model", words, "image", info)
    plotted: list[list[str]] = []
    real_plot = confusion.confusion_matrix_png

    def plot(confusion: np.ndarray, names: list[str], title: str) -> bytes:
        plotted.append(list(names))
        return real_plot(confusion, names, title)

    monkeypatch.setattr(confusion, "confusion_matrix_png", plot)  # the plot of labels and masks
    metrics = evaluator.run(EvaluatorConfig(model=str(model), examples=str(words), output=str(tmp_path / "e"),
                                            slice_by=("label",)), echo=lambda _: None).metrics
    assert metrics["hidden_classes"] == ["<OOV>"]
    assert list(metrics["per_class"]) == WORDS and plotted == [WORDS]
    assert sum(row["support"] for row in metrics["per_class"].values()) == EVAL_ROWS
    assert all(list(group["per_class"]) == WORDS for group in metrics["slices"]["label"].values())
    assert len(metrics["confusion_matrix"]) == 4 and metrics["class_names"][-1] == "<OOV>"  # ids keep their places

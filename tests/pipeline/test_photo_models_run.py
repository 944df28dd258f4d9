"""Photo models through the whole pipeline: `shardflow run` on the photos demo fine-tunes a MobileNetV2
in two phases from a weights file, is blessed and pushed, and its served model answers the original
JPEGs through both signatures with the classes the Evaluator scored; a run with --tune-args searches
before it trains, and the Trainer takes what the search found.

The weights file stands for a pretrained one (no download here): a backbone trained briefly on the
train photos, so its frozen features carry information, as pretrained ones do."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from PIL import Image

from shardflow.core.manifest import read_manifest
from shardflow.core.reader import shard_files
from shardflow.core.serving_image import canonical_pixels
from shardflow.pipelines.local_run import LocalRunConfig, run_locally

SIZE, ALPHA = 96, 0.35


def _pretrained_weights(photos: Path, path: Path) -> Path:
    """A MobileNetV2 trained briefly on the train photos (BatchNorm statistics then set on them): the
    stand-in for ImageNet weights, which cannot be downloaded here."""
    keras.utils.set_random_seed(0)
    backbone = keras.applications.MobileNetV2(input_shape=(SIZE, SIZE, 3), alpha=ALPHA, include_top=False,
                                              weights=None)
    rows = [line.split(",") for line in (photos / "train.csv").read_text().splitlines()[1:]]
    pixels = np.stack([np.asarray(Image.open(photos / p).convert("RGB").resize((SIZE, SIZE))) for p, _ in rows])
    inputs = keras.applications.mobilenet_v2.preprocess_input(pixels.astype("float32"))
    labels = np.array([label == "flower" for _, label in rows], dtype="int32")
    head = keras.layers.Dense(2, activation="softmax")(keras.layers.GlobalAveragePooling2D()(backbone.output))
    model = keras.Model(backbone.input, head)
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    model.fit(inputs, labels, epochs=6, batch_size=16, verbose=0)
    for layer in backbone.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = 0.0  # the moving statistics become the photos'
    backbone(inputs, training=True)
    backbone.save_weights(path)
    return path


@pytest.fixture(scope="module")
def demo(demo_data: Path) -> Path:
    return demo_data  # the session's demo data (tests/shared_fixtures.py); read only


@pytest.fixture(scope="module")
def photo_run(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    photos, out = demo / "photos", tmp_path_factory.mktemp("photo-run")
    weights = _pretrained_weights(photos, out.parent / "mobilenet_v2_035.h5")
    train_args = ("--model", "mobilenet_v2", "--weights", str(weights), "--backbone-alpha", str(ALPHA),
                  "--freeze-epochs", "1", "--epochs", "3", "--batch-size", "16")
    # Stored losslessly (png): the Evaluator then scores exactly the pixels ingest's resize made, and the
    # served model's answers on the original JPEGs can be held to them (the test below). JPEG storage
    # through a whole run is the README's photo quickstart (tests/pipeline/test_quickstarts.py).
    config = LocalRunConfig(index=(f"train={photos}/train.csv", f"eval={photos}/eval.csv"), data_root=str(photos),
                            output=str(out), example_gen_options=("--resize", f"{SIZE}x{SIZE}", "--channels", "rgb", "--storage", "png"),
                            train_options=train_args, eval_thresholds=("accuracy>=0.7",))
    return {"summary": run_locally(config, echo=lambda _: None), "photos": photos}


def test_both_phases_train_and_the_model_is_blessed_and_pushed(photo_run: dict) -> None:
    summary = photo_run["summary"]
    assert summary["outcome"]["state"] == "SUCCEEDED"
    history = summary["training"]["history"]
    assert [e["phase"] for e in history] == ["head", "fine_tune", "fine_tune"]
    assert summary["blessing"]["blessed"] and summary["serving_pointer"]["version"] == 1


def test_the_served_model_answers_original_jpegs_with_the_evaluators_classes(photo_run: dict) -> None:
    summary, photos = photo_run["summary"], photo_run["photos"]
    served = tf.saved_model.load(summary["serving_pointer"]["model"])
    examples = summary["outputs"]["examples"]
    records = [r.numpy() for r in tf.data.TFRecordDataset(shard_files(examples, read_manifest(examples), "eval"))]
    scored = served.signatures["serving_default"](examples=tf.constant(records))["class_ids"].numpy()
    eval_rows = [line.split(",") for line in (photos / "eval.csv").read_text().splitlines()[1:]]
    names = [name.decode() for name in served.signatures["serving_default"](
        examples=tf.constant(records[:1]))["classes"].numpy()[0]]
    truth = np.array([names.index(label) for _, label in eval_rows])
    # The Evaluator's accuracy is the accuracy of these classes: the same model on the same stored examples.
    assert (scored == truth).mean() == pytest.approx(summary["metrics"]["overall"]["accuracy"])
    originals = [(photos / path).read_bytes() for path, _ in eval_rows]  # 120-240 px, some portrait
    # The pixels serving_image computes from each original (core.serving_image, the graph's ingest ops) are
    # the stored ones the Evaluator scored, but for the rounding of two bilinear resizes (Pillow's fixed
    # point at ingest, TensorFlow's float in the graph): never more than 1 grey level (measured: ~13 % of values).
    stored = [tf.io.decode_png(tf.io.parse_single_example(r, {"image": tf.io.FixedLenFeature([], tf.string)})["image"])
              for r in records]
    for data, pixels in zip(originals, stored):
        in_graph = canonical_pixels(tf.constant(data), tuple(pixels.shape), exif=True)
        assert np.abs(in_graph.numpy().astype(int) - pixels.numpy().astype(int)).max() <= 1
    # The stored pixels themselves, as PNG files (no resize left to round): exactly the Evaluator's classes.
    as_png = served.signatures["serving_image"](images=tf.constant([tf.io.encode_png(p).numpy() for p in stored]))
    np.testing.assert_array_equal(as_png["class_ids"].numpy(), scored)
    from_files = served.signatures["serving_image"](images=tf.constant(originals))
    as_files = from_files["class_ids"].numpy()
    in_examples = served.signatures["serving_default"](examples=tf.constant([_example(d) for d in originals]))
    # From the original files the pixels differ by that 1 grey level, which moves this briefly trained
    # model's answers near a tie (measured: up to 4 of 32 flipped, margins up to 0.49): most stay.
    assert (as_files == scored).mean() >= 0.75
    np.testing.assert_array_equal(in_examples["class_ids"].numpy(), as_files)  # the same bytes, both signatures


def _example(data: bytes) -> bytes:
    feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_a_run_with_tune_args_searches_then_trains_with_the_best_values(demo: Path, tmp_path: Path) -> None:
    digits = demo / "digits"
    config = LocalRunConfig(index=(f"train={digits}/train.csv", f"eval={digits}/eval.csv"), data_root=str(digits),
                            output=str(tmp_path), train_options=("--epochs", "1", "--batch-size", "64"),
                            tune_options=("--max-trials", "2", "--trial-epochs", "1",
                                          "--space", "learning_rate=choice:0.002,0.004"),
                            eval_thresholds=("accuracy>=0.5",))
    lines: list[str] = []
    summary = run_locally(config, echo=lines.append)
    assert summary["outcome"]["state"] == "SUCCEEDED", lines
    tune_line = next(line for line in lines if line.startswith("tune "))
    assert "val_accuracy" in tune_line and "(2 trials)" in tune_line, tune_line
    best = json.loads(next(Path(summary["run"]).glob("tune/hyperparameters/best_hyperparameters.json")).read_text())
    used = json.loads(Path(summary["outputs"]["model"], "model", "shardflow_model.json").read_text())["options"]
    assert used["learning_rate"] == best["values"]["learning_rate"]

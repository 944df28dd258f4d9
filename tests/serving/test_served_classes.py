"""A classifier serves only the classes it was trained on (issue 46, item 3).

A string label's model keeps a softmax unit for Transform's OOV id (labels unseen in training), but
`shardflow_model.json`, both signatures and every answer cover the trained classes only, renormalised;
the Evaluator still counts eval labels never seen in training, in its own `<OOV>` row.

One small set: 8x8 gray PNGs whose label is their bright band ("china": rows 0-1, "flower": rows 3-4);
train has those two labels, eval also has "tulip" (band rows 6-7), a label the Trainer never sees.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import ModelInfo
from shardflow.core.reader import shard_files
from shardflow.evaluator import EvaluatorConfig
from shardflow.evaluator import run as evaluate
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.infra_validator.canaries import image_bytes
from shardflow.predict import PredictConfig
from shardflow.predict import run as predict
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig
from shardflow.trainer import run as train
from shardflow.trainer.export import served_probabilities

from helpers_images import write_csv, write_png
from helpers_models import band_model, export_model

TRAINED = ["china", "flower"]  # train's labels, sorted: the vocabulary
BANDS = {"china": 0, "flower": 1, "tulip": 2}  # band k brightens rows 3k and 3k+1
SPLITS = {"train": ["china", "flower"] * 24, "eval": ["china", "flower", "tulip", "flower"] * 4}
UNSEEN = SPLITS["eval"].count("tulip")


@pytest.fixture(scope="module")
def flowers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, rng = tmp_path_factory.mktemp("flowers"), np.random.default_rng(46)
    indexes = []
    for split, labels in SPLITS.items():
        rows = []
        for i, label in enumerate(labels):
            pixels = rng.integers(0, 120, size=(8, 8, 1))
            band = 3 * BANDS[label]
            pixels[band:band + 2] += 120
            rows.append([str(write_png(root / split / f"{i}.png", pixels.astype(np.uint8)).relative_to(root)), label])
        indexes.append(IndexSpec(str(write_csv(root / f"{split}.csv", ["image", "label"], rows)), split))
    example_gen(ExampleGenConfig(indexes=tuple(indexes), data_root=str(root), output=str(root / "examples")),
                echo=lambda _: None)
    return root / "examples"


@pytest.fixture(scope="module")
def model(flowers: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trained") / "m"
    train(TrainerConfig(input=InputOptions(examples=str(flowers), batch_size=8, label="label", input_probe_batches=1),
                        fit=FitOptions(steps=12), export=ExportOptions(output=str(out))), echo=lambda _: None)
    return out / "model"


def _eval_records(examples: Path) -> list[bytes]:
    files = shard_files(examples, read_manifest(examples), "eval")
    return [record.numpy() for record in tf.data.TFRecordDataset(files)]


def test_the_model_info_names_the_trained_classes_only(model: Path) -> None:
    written = json.loads((model / "shardflow_model.json").read_text())
    assert written["class_names"] == TRAINED and written["num_classes"] == 2  # no "<OOV>"
    assert written["label_vocabulary"] == TRAINED
    assert ModelInfo.from_json(written).label_classes == [*TRAINED, "<OOV>"]  # what the Evaluator counts in


def test_every_signature_answers_the_trained_classes_renormalised(model: Path, flowers: Path) -> None:
    """Unseen-label (tulip) examples included: they get a trained class like any other example."""
    records = _eval_records(flowers)
    signatures = tf.saved_model.load(str(model)).signatures
    pngs = image_bytes(records, read_manifest(flowers).features["image"])  # files, as a REST client sends
    answers = [signatures["serving_default"](examples=tf.constant(records)),
               signatures["serving_image"](images=tf.constant(pngs))]
    for served in answers:
        probabilities = served["probabilities"].numpy()
        assert probabilities.shape == (len(records), 2)
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
        assert (served["classes"].numpy().astype(str) == np.array(TRAINED)).all()
        np.testing.assert_array_equal(served["scores"].numpy(), probabilities)
        np.testing.assert_array_equal(served["class_ids"].numpy(), probabilities.argmax(axis=1))
        names = served["predicted_class"].numpy().astype(str).tolist()
        assert names == [TRAINED[i] for i in probabilities.argmax(axis=1)] and "<OOV>" not in names
    np.testing.assert_allclose(answers[1]["probabilities"], answers[0]["probabilities"], atol=1e-6)  # same pixels


def test_predict_tables_name_and_rank_the_trained_classes_only(model: Path, flowers: Path, tmp_path: Path) -> None:
    root = flowers.parent
    predict(PredictConfig(model=str(model), output=str(tmp_path / "p"), index=str(root / "eval.csv"),
                          data_root=str(root), top_k=3), echo=lambda _: None)
    table = [row for part in sorted((tmp_path / "p" / "predictions").glob("part-*.csv"))
             for row in csv.DictReader(part.open(newline=""))]
    assert len(table) == len(SPLITS["eval"])  # the tulip rows too
    for row in table:
        assert row["class_name"] in TRAINED and sorted(json.loads(row["top_k_names"])) == TRAINED  # top 3 of 2
        assert sum(json.loads(row["top_k_scores"])) == pytest.approx(1.0, abs=1e-6)


def test_the_evaluator_counts_unseen_labels_the_served_model_cannot_answer(model: Path, flowers: Path,
                                                                           tmp_path: Path) -> None:
    metrics = evaluate(EvaluatorConfig(model=str(model), examples=str(flowers), output=str(tmp_path / "e")),
                       echo=lambda _: None).metrics
    assert metrics["class_names"] == [*TRAINED, "<OOV>"] and metrics["hidden_classes"] == []
    confusion = np.array(metrics["confusion_matrix"])
    assert confusion[2].sum() == UNSEEN == metrics["per_class"]["<OOV>"]["support"]
    assert confusion[:, 2].sum() == 0 and metrics["per_class"]["<OOV>"]["recall"] == 0.0  # never predicted
    assert metrics["overall"]["accuracy"] <= 1 - UNSEEN / len(SPLITS["eval"])  # every unseen label is an error
    canaries = np.load(tmp_path / "e" / "canary_predictions.npy")  # what infra validation replays: the served answer
    assert canaries.shape == (len(SPLITS["eval"]), 2)
    issues = [json.loads(line) for line in (tmp_path / "e" / "label_issues.jsonl").read_text().splitlines()]
    assert all(issue["given"] in TRAINED for issue in issues)  # unseen labels are counted, not judged


def test_a_baseline_exported_when_oov_was_served_stays_comparable(model: Path, flowers: Path, tmp_path: Path) -> None:
    legacy = ModelInfo(task="classification", label="label", num_classes=3, class_names=[*TRAINED, "<OOV>"],
                       label_vocabulary=TRAINED)  # the contract before: the OOV unit served as a class
    assert legacy.label_classes == [*TRAINED, "<OOV>"]
    with pytest.raises(ValueError, match="a label vocabulary of 2 strings serves 2 classes, got 4"):
        ModelInfo(task="classification", label="label", num_classes=4, class_names=["a", "b", "c", "d"],
                  label_vocabulary=TRAINED)
    baseline = export_model(band_model(3, 8), tmp_path / "legacy", flowers, "image", legacy)
    metrics = evaluate(EvaluatorConfig(model=str(model), examples=str(flowers), output=str(tmp_path / "e"),
                                       baseline=str(baseline)), echo=lambda _: None).metrics
    assert np.array(metrics["baseline"]["confusion_matrix"]).shape == (3, 3)
    assert metrics["baseline"]["per_class"]["<OOV>"]["support"] == UNSEEN
    assert metrics["baseline"]["per_class"]["<OOV>"]["recall"] == 1.0  # band 2 is its OOV unit: it "knew" tulips


@pytest.mark.unit
def test_served_probabilities_drop_the_oov_unit_and_renormalise() -> None:
    softmax = tf.constant([[0.5, 0.3, 0.2], [0.0, 0.0, 1.0], [0.1, 0.8, 0.1]])
    np.testing.assert_allclose(served_probabilities(softmax, 2).numpy(), [[0.625, 0.375], [0.5, 0.5], [1 / 9, 8 / 9]],
                               rtol=1e-6)  # a row all in the OOV unit: 1/K each, never NaN
    masks = tf.random.uniform([2, 4, 4, 3])
    assert served_probabilities(masks, 3) is masks  # as many units as classes: served as they are

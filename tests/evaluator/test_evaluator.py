"""Evaluator on real ExampleGen output and real SavedModels: metrics equal scikit-learn, intervals,
calibration, options.

The data and hand-set models are tests/helpers_evaluator.py's ("bands": 8x8 gray PNGs whose label
brightens a band of rows, sliced by site and fold; "segments": 16x16 gray PNGs whose mask is the
brightness band, 5% flipped). Every metric is checked against an independent computation on
predictions made by calling the in-memory Keras model on pixels read with the reader (not through the
Evaluator's path). Blessing, the regression gate and failures are in test_evaluator_blessing.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tf_keras as keras

from shardflow.core.model_info import ModelInfo
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.evaluator import ConfigError, EvaluatorConfig, Regression, Threshold, run

from helpers_evaluator import ROWS, SEG_CLASSES, SEG_ROWS, SITES, WORDS, bands, models, segments  # noqa: F401
from helpers_evaluator import evaluate as _evaluate
from helpers_evaluator import evaluate_cli as _cli
from helpers_evaluator import verdict as _verdict
from helpers_metrics import assert_equals_sklearn, assert_segmentation


def _read(examples: Path) -> dict[str, np.ndarray]:
    batch = next(iter(build_stream(examples, "eval", StreamOptions(batch_size=1000))))
    return {name: tensor.numpy() for name, tensor in batch.items()}


def _predict(model: keras.Model, pixels: np.ndarray) -> np.ndarray:
    return model(pixels.astype(np.float32) / 255.0, training=False).numpy()


def test_classification_metrics_equal_sklearn_overall_and_per_slice(tmp_path: Path, bands: Path, models: dict) -> None:
    path, model = models["good"]
    metrics = _evaluate(tmp_path, path, bands, slice_by=("site", "fold"))
    data = _read(bands)
    probabilities = _predict(model, data["x"])
    assert 0.6 < metrics["overall"]["accuracy"] < 0.98  # imperfect: every confusion cell can be checked
    assert_equals_sklearn(metrics, metrics["class_names"], data["y"], probabilities)
    for column in ("site", "fold"):
        values = data[column].astype(str) if column == "fold" else np.char.decode(data[column].astype(bytes))
        assert sorted(metrics["slices"][column]) == sorted(set(values.tolist()))
        for value, group in metrics["slices"][column].items():
            chosen = values == value
            assert_equals_sklearn(group, metrics["class_names"], data["y"][chosen], probabilities[chosen])
    assert metrics["baseline"] is None and metrics["deltas"] is None
    assert (tmp_path / "eout" / "confusion_matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "eout" / "BLESSED").is_file()  # no checks asked: nothing to fail


def test_string_labels_go_through_the_vocabulary_with_an_oov_id(tmp_path: Path, bands: Path, models: dict) -> None:
    path, model = models["words"]
    metrics = _evaluate(tmp_path, path, bands)
    data = _read(bands)
    info = ModelInfo.from_json(json.loads((path / "shardflow_model.json").read_text()))
    truth = np.array([info.class_id_of(word) for word in data["word"]])
    assert (truth == 3).sum() == ROWS // 20  # the "fish" rows
    served = _predict(model, data["x"])
    assert served.shape == (ROWS, 3)  # the served classes; the Evaluator counts labels in one more, <OOV>
    assert metrics["class_names"] == [*WORDS, "<OOV>"]
    # The served model gives an unseen label probability 0: scikit-learn on a zero OOV column.
    assert_equals_sklearn(metrics, [*WORDS, "<OOV>"], truth, np.pad(served, [(0, 0), (0, 1)]))
    assert metrics["per_class"]["<OOV>"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": ROWS // 20}


def test_segmentation_end_to_end_per_class_iou_and_dice(tmp_path: Path, segments: Path, models: dict) -> None:
    path, model = models["seg"]
    metrics = _evaluate(tmp_path, path, segments, slice_by=("site",), thresholds=("mean_iou>0.5",))
    data = _read(segments)
    truth = data["mask"][..., 0].astype(np.int64)
    predicted = _predict(model, data["image"]).argmax(axis=-1)
    assert np.array_equal(predicted, np.digitize(data["image"][..., 0], [86, 171]))  # the model is a threshold
    assert 0.9 < (truth == predicted).mean() < 0.99  # the flipped mask pixels are its only errors
    assert_segmentation(metrics, SEG_CLASSES, truth, predicted)
    sites = np.char.decode(data["site"].astype(bytes))
    for value in SITES[:2]:
        assert_segmentation(metrics["slices"]["site"][value], SEG_CLASSES, truth[sites == value],
                            predicted[sites == value])
        assert metrics["slices"]["site"][value]["num_examples"] == SEG_ROWS // 2
    assert (tmp_path / "eout" / "BLESSED").read_text().startswith("mean_iou = ")
    intervals = metrics["intervals"]["candidate"]  # images resampled, never pixels
    assert sorted(intervals) == sorted(metrics["overall"])
    assert all(low <= metrics["overall"][m] <= high for m, (low, high) in intervals.items())
    assert "calibration" not in metrics and not (tmp_path / "eout" / "reliability_diagram.png").exists()


def test_options_are_parsed_and_bad_values_named(bands: Path, tmp_path: Path) -> None:
    assert Threshold.parse("mean_iou>0.5") == Threshold("mean_iou", ">", 0.5)
    assert Threshold.parse("log_loss <= 0.3").holds(0.3) and not Threshold.parse("accuracy>0.5").holds(float("nan"))
    assert Regression.parse("log_loss=0.05").worsening(0.40, 0.30) == pytest.approx(0.10)  # higher loss is worse
    assert Regression.parse("accuracy=0.01").worsening(0.90, 0.95) == pytest.approx(0.05)
    for bad, message in [("accuracy=>0.9", "METRIC>=VALUE"), ("precision>=0.9", "unknown metric 'precision'"),
                         ("accuracy>=high", "'high' is not a number")]:
        with pytest.raises(ConfigError, match=message):
            Threshold.parse(bad)
    with pytest.raises(ConfigError, match="allowed amount must be >= 0"):
        Regression.parse("accuracy=-0.1")
    common = {"model": "m", "examples": str(bands)}
    with pytest.raises(ConfigError, match="batch_size must be an integer >= 1, got 0"):
        EvaluatorConfig(output=str(tmp_path / "o"), batch_size=0, **common)
    with pytest.raises(ConfigError, match="must be a directory apart from examples"):
        EvaluatorConfig(output=str(bands / "eval_out"), **common)
    with pytest.raises(ConfigError, match="must be a directory apart from model"):
        EvaluatorConfig(model="s3://bkt/runs/m", examples=str(bands), output="s3://bkt/runs/m/eval")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"is not ExampleGen .*output \(no manifest.json\)"):  # checked at run start
        run(EvaluatorConfig(model="m", examples=str(tmp_path / "empty"), output=str(tmp_path / "o")))
    assert not (tmp_path / "o").exists()


def test_metric_of_the_other_task_is_a_config_error(tmp_path: Path, bands: Path, models: dict) -> None:
    with pytest.raises(ConfigError, match="'mean_iou' is not a classification metric .*accuracy, log_loss"):
        _evaluate(tmp_path, models["good"][0], bands, thresholds=("mean_iou>0.5",))


def _independent_ece(probabilities: np.ndarray, truth: np.ndarray) -> float:
    """ECE over 15 equal-width bins, written out bin by bin (not the Evaluator's bincount)."""
    confidence, right = probabilities.max(axis=1).astype(np.float64), probabilities.argmax(axis=1) == truth
    total = 0.0
    for b in range(15):
        chosen = (confidence > b / 15) & (confidence <= (b + 1) / 15) if b else confidence <= 1 / 15
        if chosen.any():
            total += chosen.sum() / len(truth) * abs(right[chosen].mean() - confidence[chosen].mean())
    return total


def test_intervals_and_calibration_of_a_real_comparison(tmp_path: Path, bands: Path, models: dict) -> None:
    path, model = models["good"]
    data = _read(bands)
    ece = _independent_ece(_predict(model, data["x"]), data["y"])
    metrics = _evaluate(tmp_path, path, bands, baseline=str(models["weak"][0]),
                        thresholds=(f"ece<={ece + 0.01:.4f}",), max_regressions=("accuracy=0.05",),
                        regression_tolerance=None, slice_by=("site",))
    assert metrics["overall"]["ece"] == pytest.approx(ece, abs=1e-6)
    intervals = metrics["intervals"]
    assert (intervals["resamples"], intervals["seed"], intervals["confidence"]) == (1000, 0, 0.95)
    for role, report in (("candidate", metrics["overall"]), ("baseline", metrics["baseline"]["overall"]),
                         ("delta", metrics["deltas"]["overall"])):
        assert sorted(intervals[role]) == sorted(report), role  # every metric, ECE included
        for name, (low, high) in intervals[role].items():
            assert low <= report[name] <= high, (role, name)
    assert intervals["delta"]["accuracy"][0] > 0  # the good model is demonstrably better than the weak one
    for site, group in metrics["slices"]["site"].items():  # per slice value: its own examples resampled
        found = intervals["slices"]["site"][site]
        for role, report in (("candidate", group["overall"]), ("delta", metrics["deltas"]["slices"]["site"][site])):
            assert sorted(found[role]) == sorted(report)
            assert all(low <= report[name] <= high for name, (low, high) in found[role].items()), (site, role)
    assert (tmp_path / "eout" / "reliability_diagram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sum(row["examples"] for row in metrics["calibration"]["bins"]) == ROWS
    blessing, marker = _verdict(tmp_path / "eout")
    assert marker == "BLESSED" and blessing["checks"][0]["candidate_interval"] == intervals["candidate"]["ece"]
    # The same run with an ECE threshold it misses; with the model as its own baseline, Δ = [0, 0].
    assert ece > 0.002
    missed = Threshold.parse(f"ece<{ece / 2:.4f}")
    _evaluate(tmp_path, path, bands, baseline=str(path), thresholds=(missed,))
    blessing, marker = _verdict(tmp_path / "eout")
    assert marker == "NOT_BLESSED"
    assert blessing["reasons"] == [f"ece = {metrics['overall']['ece']:.6g} fails threshold {missed}"]
    assert blessing["checks"][1]["delta_interval"] == [0.0, 0.0] and blessing["checks"][1]["passed"] is True


def test_the_gate_rule_decides_differently_on_a_real_regression(tmp_path: Path, bands: Path, models: dict) -> None:
    """The weak model against the good one, with a tolerance just over the point regression: the point rule
    passes it, non-inferiority refuses it (its interval reaches further), and the CLI takes the rule."""
    common = {"baseline": str(models["good"][0]), "thresholds": ("accuracy>=0.3",)}
    metrics = _evaluate(tmp_path, models["weak"][0], bands, gate="point", regression_tolerance=0.0, **common)
    worse = metrics["baseline"]["overall"]["accuracy"] - metrics["overall"]["accuracy"]
    tolerance = f"{worse + 0.005:.4f}"
    decided = {}
    for rule in ("point", "non-inferiority"):
        out = tmp_path / rule
        assert _cli(["--model", str(models["weak"][0]), "--examples", str(bands), "--output", str(out), "--baseline",
                     common["baseline"], "--threshold", "accuracy>=0.3", "--regression-tolerance", tolerance,
                     "--gate", rule, "--bootstrap-seed", "3"]) == 0
        decided[rule] = _verdict(out)[0]
    assert decided["point"]["blessed"] is True and decided["non-inferiority"]["blessed"] is False
    check = decided["non-inferiority"]["checks"][1]
    assert check["gate"] == "non-inferiority" and -check["delta_interval"][0] > float(tolerance)

"""Evaluator on real ExampleGen output and real SavedModels: metrics equal scikit-learn, blessing, failures.

Two small datasets go through ExampleGen once per module:
- "bands": 120 gray 8x8 PNGs whose label y (0..2) brightens rows 3y..3y+1; columns word (the label as
  a string, 6 rows "fish" = unknown), site (3 strings) and fold (ints) for slicing.
- "segments": 24 gray 16x16 PNGs; the mask is the pixel brightness band (0, 1, 2) with 5% of the
  mask pixels flipped, so the model's errors are known.
The models have hand-set weights (deterministic, imperfect): "good" averages each band, "weak" looks
at two pixels per band; the segmentation model thresholds brightness with a 1x1 convolution.
Every metric is checked against an independent computation on predictions made by calling the
in-memory Keras model on pixels read with the reader (not through the Evaluator's path).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tf_keras as keras

from shardflow.core.model_info import ModelInfo
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.evaluator import ConfigError, EvaluationError, EvaluatorConfig, Regression, Threshold, run
from shardflow.cli import main as shardflow_main
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen

from helpers_images import write_csv, write_png
from helpers_metrics import assert_equals_sklearn, assert_segmentation
from helpers_models import band_model, export_model, threshold_model

ROWS, SEG_ROWS = 120, 24
WORDS = ["cat", "dog", "bird"]
SITES = ["north", "south", "east"]
SEG_CLASSES = ["dark", "mid", "bright", "never"]


def _ingest(root: Path, header: list[str], rows: list[list[object]], **options: object) -> Path:
    write_csv(root / "eval.csv", header, rows)
    out = root / "examples"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(root / "eval.csv"), "eval"),), data_root=str(root),
                                 output=str(out), num_shards=3, **options), echo=lambda _: None)
    return out


@pytest.fixture(scope="module")
def bands(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, rng = tmp_path_factory.mktemp("bands"), np.random.default_rng(11)
    rows = []
    for i in range(ROWS):
        y = int(rng.integers(0, 3))
        pixels = rng.integers(0, 201, size=(8, 8, 1))
        pixels[3 * y:3 * y + 2] += 30
        write_png(root / f"img/{i}.png", pixels.astype(np.uint8))
        word = "fish" if i % 20 == 7 else WORDS[y]
        rows.append([f"img/{i}.png", y, word, SITES[int(rng.integers(0, 3))], i % 4])
    return _ingest(root, ["x", "y", "word", "site", "fold"], rows)


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, rng = tmp_path_factory.mktemp("segments"), np.random.default_rng(12)
    rows = []
    for i in range(SEG_ROWS):
        pixels = rng.integers(0, 256, size=(16, 16, 1)).astype(np.uint8)
        mask = np.digitize(pixels, [86, 171]).astype(np.uint8)
        flip = rng.random(mask.shape) < 0.05
        mask[flip] = (mask[flip] + 1) % 3
        write_png(root / f"img/{i}.png", pixels)
        write_png(root / f"mask/{i}.png", mask)
        rows.append([f"img/{i}.png", f"mask/{i}.png", SITES[i % 2]])
    return _ingest(root, ["image", "mask", "site"], rows, roles=(("site", "metadata"),))


@pytest.fixture(scope="module")
def models(bands: Path, segments: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, keras.Model]]:
    root = tmp_path_factory.mktemp("models")
    ints = ModelInfo(task="classification", label="y", num_classes=3, class_names=["r0", "r3", "r6"])
    words = ModelInfo(task="classification", label="word", num_classes=3, class_names=WORDS,
                      label_vocabulary=WORDS)  # served: the trained classes only
    seg = ModelInfo(task="segmentation", label="mask", num_classes=4, class_names=SEG_CLASSES)
    two = ModelInfo(task="classification", label="y", num_classes=2, class_names=["r0", "r3"])  # y has 3 values
    made = {"good": (band_model(3, 8), bands, "x", ints), "weak": (band_model(3, 2), bands, "x", ints),
            "words": (band_model(3, 8), bands, "x", words), "two": (band_model(2, 8), bands, "x", two),
            "seg": (threshold_model((16, 16, 1), (85.5, 170.5)), segments, "image", seg)}
    return {name: (export_model(model, root / name, examples, image, info), model)
            for name, (model, examples, image, info) in made.items()}


def _read(examples: Path) -> dict[str, np.ndarray]:
    batch = next(iter(build_stream(examples, "eval", StreamOptions(batch_size=1000))))
    return {name: tensor.numpy() for name, tensor in batch.items()}


def _predict(model: keras.Model, pixels: np.ndarray) -> np.ndarray:
    return model(pixels.astype(np.float32) / 255.0, training=False).numpy()


def _evaluate(tmp_path: Path, model: Path, examples: Path, **options: object) -> dict:
    outcome = run(EvaluatorConfig(model=str(model), examples=str(examples), output=str(tmp_path / "eout"),
                                  batch_size=16, **options), echo=lambda _: None)  # type: ignore[arg-type]
    written = json.loads((tmp_path / "eout" / "metrics.json").read_text())
    assert written["overall"] == pytest.approx(outcome.metrics["overall"])
    return written


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


def _verdict(out: Path) -> tuple[dict, str]:
    blessing = json.loads((out / "blessing.json").read_text())
    markers = [name for name in ("BLESSED", "NOT_BLESSED") if (out / name).is_file()]
    assert len(markers) == 1
    assert (out / markers[0]).read_text().splitlines() == blessing["reasons"]
    return blessing, markers[0]


def test_blessed_when_thresholds_hold_and_nothing_regressed(tmp_path: Path, bands: Path, models: dict) -> None:
    metrics = _evaluate(tmp_path, models["good"][0], bands, baseline=str(models["weak"][0]),
                        thresholds=("accuracy>=0.6", "log_loss<2"), max_regressions=("accuracy=0", "log_loss=0"),
                        slice_by=("site",))
    blessing, marker = _verdict(tmp_path / "eout")
    assert marker == "BLESSED" and blessing["blessed"] is True
    assert [c["passed"] for c in blessing["checks"]] == [True] * 4
    assert blessing["reasons"][0].startswith("accuracy = ") and "meets threshold accuracy>=0.6" in blessing["reasons"][0]
    assert "better than the baseline" in blessing["reasons"][2]
    # What Push compares with the served model: the baseline gated against, in both reports.
    assert metrics["gated_against"] == blessing["gated_against"] == os.path.abspath(models["weak"][0])
    for name, delta in metrics["deltas"]["overall"].items():
        assert delta == pytest.approx(metrics["overall"][name] - metrics["baseline"]["overall"][name])
    north = metrics["deltas"]["slices"]["site"]["north"]["accuracy"]
    assert north == pytest.approx(metrics["slices"]["site"]["north"]["overall"]["accuracy"]
                                  - metrics["baseline"]["slices"]["site"]["north"]["overall"]["accuracy"])


def _cli(argv: list[str]) -> int:
    return shardflow_main(["evaluate", *argv])


def test_not_blessed_when_a_threshold_fails_but_exit_code_is_zero(tmp_path: Path, bands: Path, models: dict) -> None:
    out = tmp_path / "eout"
    code = _cli(["--model", str(models["good"][0]), "--examples", str(bands), "--output", str(out),
                 "--threshold", "accuracy>=0.99", "macro_f1>0.1", "--max-regression", "accuracy=0.01"])
    assert code == 0
    blessing, marker = _verdict(out)
    accuracy = json.loads((out / "metrics.json").read_text())["overall"]["accuracy"]
    assert marker == "NOT_BLESSED" and blessing["blessed"] is False
    assert blessing["reasons"] == [f"accuracy = {accuracy:.6g} fails threshold accuracy>=0.99"]
    # No baseline: the explicit regression check and the default gate on macro_f1 are skipped.
    assert [(c["passed"], c["source"]) for c in blessing["checks"]] == [
        (False, ""), (True, ""), (None, "--max-regression"),
        (None, "the default regression tolerance; change it with --regression-tolerance")]
    assert blessing["checks"][2]["reason"] == "no baseline: regression check accuracy=0.01 skipped"
    assert blessing["gated_against"] == "none"  # Push: only into a serving directory where nothing is served


def test_not_blessed_on_a_regression_against_a_better_baseline(tmp_path: Path, bands: Path, models: dict) -> None:
    metrics = _evaluate(tmp_path, models["weak"][0], bands, baseline=str(models["good"][0]),
                        thresholds=("accuracy>=0.3",), max_regressions=("accuracy=0.01", "log_loss=5"), gate="point")
    blessing, marker = _verdict(tmp_path / "eout")
    ours, theirs = metrics["overall"]["accuracy"], metrics["baseline"]["overall"]["accuracy"]
    assert theirs - ours > 0.05
    assert marker == "NOT_BLESSED"
    assert blessing["reasons"] == [f"accuracy is {theirs - ours:.6g} worse than the baseline "
                                   f"({ours:.6g} vs {theirs:.6g}), more than the allowed 0.01"]
    assert [c["passed"] for c in blessing["checks"]] == [True, False, True]


def test_the_default_gate_refuses_a_worse_candidate_that_passes_its_threshold(tmp_path: Path, bands: Path,
                                                                             models: dict) -> None:
    """Scheduled retraining's failure: a weaker model meets `accuracy>=0.3` but is worse than the served one."""
    metrics = _evaluate(tmp_path, models["weak"][0], bands, baseline=str(models["good"][0]),
                        thresholds=("accuracy>=0.3",))
    blessing, marker = _verdict(tmp_path / "eout")
    ours, theirs = metrics["overall"]["accuracy"], metrics["baseline"]["overall"]["accuracy"]
    low, high = blessing["checks"][1]["delta_interval"]
    assert marker == "NOT_BLESSED" and low <= ours - theirs <= high
    assert blessing["reasons"] == [f"accuracy is {theirs - ours:.6g} worse than the baseline ({ours:.6g} vs "
                                   f"{theirs:.6g}); at 95% confidence at most {-low:.6g} worse (interval of the "
                                   f"difference [{low:.4g}, {high:.4g}], non-inferiority gate), more than the allowed "
                                   "0.03 (the default regression tolerance; change it with --regression-tolerance)"]
    threshold = blessing["checks"][0]
    assert (threshold["candidate"], threshold["baseline"]) == (pytest.approx(ours), pytest.approx(theirs))
    assert threshold["delta"] == pytest.approx(ours - theirs)


@pytest.mark.parametrize("tolerance, explicit, blessed", [(None, (), True), (0.5, (), True),
                                                         (0.01, ("accuracy=0.5",), True), (0.0, (), False)])
def test_the_default_gate_can_be_widened_switched_off_or_overridden(tmp_path: Path, bands: Path, models: dict,
                                                                    tolerance: float | None, explicit: tuple,
                                                                    blessed: bool) -> None:
    _evaluate(tmp_path, models["weak"][0], bands, baseline=str(models["good"][0]), thresholds=("accuracy>=0.3",),
              max_regressions=explicit, regression_tolerance=tolerance)
    blessing, _ = _verdict(tmp_path / "eout")
    assert blessing["blessed"] is blessed
    assert [c["source"] for c in blessing["checks"] if c["kind"] == "regression"] == (
        [] if tolerance is None else ["--max-regression"] if explicit else
        ["the default regression tolerance; change it with --regression-tolerance"])


@pytest.mark.parametrize("value, says", [("-0.1", "must be >= 0"), ("abc", "is not a number"), ("inf", "finite")])
def test_a_bad_regression_tolerance_is_one_line_and_exit_2(tmp_path: Path, bands: Path, models: dict, capsys,
                                                          value: str, says: str) -> None:
    code = _cli(["--model", str(models["good"][0]), "--examples", str(bands), "--output", str(tmp_path / "e"),
                 "--regression-tolerance", value])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and line.startswith("shardflow evaluate: error: regression tolerance") and says in line


def test_failed_evaluation_exits_non_zero_and_leaves_no_verdict(tmp_path: Path, bands: Path, models: dict,
                                                                capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "eout"
    good = str(models["good"][0])
    assert _cli(["--model", good, "--examples", str(bands), "--output", str(out)]) == 0
    assert (out / "BLESSED").is_file()
    not_a_model = tmp_path / "plain_savedmodel"
    not_a_model.mkdir()
    (not_a_model / "saved_model.pb").write_bytes(b"")
    assert _cli(["--model", str(not_a_model), "--examples", str(bands), "--output", str(out)]) == 1
    assert "shardflow_model.json" in capsys.readouterr().err
    assert not any((out / name).exists() for name in ("BLESSED", "NOT_BLESSED", "blessing.json", "metrics.json"))
    assert _cli(["--model", good, "--examples", str(bands), "--split", "test", "--output", str(out)]) == 2
    assert "split 'test' is not in the examples" in capsys.readouterr().err
    with pytest.raises(EvaluationError, match=r"example \d+ of split 'eval' .*label 'y' has class id 2, outside the "
                                              r"model's 2 classes"):
        _evaluate(tmp_path, models["two"][0], bands)
    with pytest.raises(EvaluationError, match=r"probabilities have shape \(None, 3\), a classification model with 2"):
        _evaluate(tmp_path, _claims_two_classes(models["good"][0], tmp_path), bands)


def _claims_two_classes(model_dir: Path, tmp_path: Path) -> Path:
    """A copy of the 3-class model whose shardflow_model.json says 2 classes."""
    copy = tmp_path / "claims_two"
    shutil.copytree(model_dir, copy)
    info = json.loads((copy / "shardflow_model.json").read_text())
    (copy / "shardflow_model.json").write_text(json.dumps({**info, "num_classes": 2, "class_names": ["a", "b"]}))
    return copy


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

"""Bootstrap intervals, the two gate rules and calibration, on generated per-example counts (pure numpy).

The Evaluator's end-to-end runs (real models: intervals in metrics.json, the reliability diagram,
`ece` thresholds, the rules on one real comparison) are in test_evaluator.py.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from shardflow.evaluator import ConfigError, EvaluatorConfig
from shardflow.evaluator.blessing import bless
from shardflow.evaluator.calibration import expected_calibration_error, reliability_table
from shardflow.tasks.classification.evaluation import overall_metrics as classification_overall
from shardflow.evaluator.config import Regression, Threshold
from shardflow.evaluator.intervals import bootstrap_intervals, resample_indices
from shardflow.tasks.segmentation.evaluation import overall_metrics as segmentation_overall
from shardflow.evaluator.slicing import mask_counts
from shardflow.tasks import task_for

pytestmark = pytest.mark.unit  # in process, small generated data: make test-fast runs it

CLASSES = 3
LABELS = task_for("classification")


def _classifier(n: int, accuracy: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per example: a cell (label * C + prediction), a log loss and a confidence, like slicing.Scores keeps."""
    labels = rng.integers(0, CLASSES, n)
    right = rng.random(n) < accuracy
    predicted = np.where(right, labels, (labels + rng.integers(1, CLASSES, n)) % CLASSES)
    confidence = np.where(right, rng.uniform(0.5, 1.0, n), rng.uniform(0.34, 0.8, n)).astype(np.float32)
    loss = -np.log(np.where(right, confidence, (1 - confidence) / 2))
    return {"cells": labels * CLASSES + predicted, "losses": loss, "confidences": confidence}


def _point(data: dict[str, np.ndarray]) -> dict[str, float]:
    confusion = np.bincount(data["cells"], minlength=CLASSES * CLASSES).reshape(CLASSES, CLASSES)
    point = classification_overall(confusion, float(data["losses"].sum()))
    correct = data["cells"] // CLASSES == data["cells"] % CLASSES
    return {**point, "ece": expected_calibration_error(data["confidences"], correct)}


def _width(interval: list[float]) -> float:
    return interval[1] - interval[0]


def test_intervals_contain_the_point_estimate_and_narrow_with_n() -> None:
    rng = np.random.default_rng(3)
    small, large = _classifier(200, 0.8, rng), _classifier(5000, 0.8, rng)
    found = {n: bootstrap_intervals(LABELS, CLASSES, data, resamples=1000, seed=0)["candidate"]
             for n, data in ((200, small), (5000, large))}
    for n, data in ((200, small), (5000, large)):
        point = _point(data)
        assert sorted(found[n]) == sorted(point)  # every metric, ECE included
        for metric, (low, high) in found[n].items():
            assert low <= point[metric] <= high, (n, metric)
    for metric in found[200]:
        assert _width(found[5000][metric]) < _width(found[200][metric]) / 3, metric  # ~1/sqrt(25) = 1/5


def test_same_seed_same_interval_and_another_seed_another() -> None:
    data = _classifier(500, 0.85, np.random.default_rng(4))
    first = bootstrap_intervals(LABELS, CLASSES, data, resamples=300, seed=7)
    assert bootstrap_intervals(LABELS, CLASSES, data, resamples=300, seed=7) == first
    assert bootstrap_intervals(LABELS, CLASSES, data, resamples=300, seed=8)["candidate"] != first["candidate"]
    # The draws do not depend on how they are chunked.
    whole = np.concatenate(list(resample_indices(50, 30, seed=1, chunk_draws=10_000)))
    assert np.array_equal(np.concatenate(list(resample_indices(50, 30, seed=1, chunk_draws=120))), whole)


def test_the_paired_difference_of_a_model_with_itself_is_exactly_zero() -> None:
    data = _classifier(300, 0.7, np.random.default_rng(5))
    found = bootstrap_intervals(LABELS, CLASSES, data, dict(data), resamples=500, seed=0)
    assert found["delta"] == {metric: [0.0, 0.0] for metric in found["candidate"]}
    assert found["baseline"] == found["candidate"]


def test_a_paired_difference_is_narrower_than_the_unpaired_one() -> None:
    """Two models that agree on most examples: pairing removes the examples' own difficulty from Δ's noise."""
    rng = np.random.default_rng(6)
    base = _classifier(1000, 0.85, rng)
    cand = {name: values.copy() for name, values in base.items()}
    flip = rng.choice(1000, 30, replace=False)  # they disagree on 3 % of the examples
    cand["cells"][flip] = (cand["cells"][flip] // CLASSES) * CLASSES + (cand["cells"][flip] + 1) % CLASSES
    found = bootstrap_intervals(LABELS, CLASSES, cand, base, resamples=1000, seed=0)
    unpaired = np.hypot(*(_width(found[role]["accuracy"]) for role in ("candidate", "baseline")))
    assert _width(found["delta"]["accuracy"]) < unpaired / 2


def test_segmentation_resamples_images_and_contains_the_split_iou() -> None:
    rng = np.random.default_rng(8)
    truth = rng.integers(0, 3, (40, 6, 6))
    predicted = np.where(rng.random(truth.shape) < 0.8, truth, rng.integers(0, 3, truth.shape))
    pixel_counts = np.stack([np.bincount((t * 3 + p).ravel(), minlength=9) for t, p in zip(truth, predicted)])
    found = bootstrap_intervals(task_for("segmentation"), 3, {"cells": mask_counts(pixel_counts, 3)}, resamples=500,
                                seed=0)
    point = segmentation_overall(pixel_counts.sum(axis=0).reshape(3, 3))
    assert sorted(found["candidate"]) == sorted(point)
    for metric, (low, high) in found["candidate"].items():
        assert low <= point[metric] <= high, metric


def _small_regression() -> tuple[dict, dict, dict]:
    """200 eval examples; the candidate is right on one fewer than the baseline (Δ accuracy = −0.005)."""
    base = np.zeros(200, np.int64)  # all labelled 0; cell 0 = right, cell 1 = predicted 1 (wrong)
    base[:20] = 1  # 180 right
    cand = base.copy()
    cand[15:20] = 0  # the candidate gets 5 of the baseline's errors right
    cand[100:106] = 1  # and 6 of its right ones wrong: 179 right
    found = bootstrap_intervals(LABELS, 2, {"cells": cand}, {"cells": base}, resamples=1000, seed=0)
    return {"accuracy": 179 / 200}, {"accuracy": 180 / 200}, found


def test_the_gate_rule_changes_the_decision_on_a_small_regression_of_a_small_eval_set() -> None:
    candidate, baseline, found = _small_regression()
    low, high = found["delta"]["accuracy"]
    assert low < -0.01 < -0.005 < high  # within the tolerance as a point; not demonstrably
    regression = (Regression("accuracy", 0.01),)
    point = bless((), regression, candidate, baseline, found, "point")
    strict = bless((), regression, candidate, baseline, found, "non-inferiority")
    assert point.blessed and not strict.blessed
    assert strict.reasons == [f"accuracy is 0.005 worse than the baseline (0.895 vs 0.9); at 95% confidence at most "
                              f"{-low:.6g} worse (interval of the difference [{low:.4g}, {high:.4g}], non-inferiority "
                              f"gate), more than the allowed 0.01"]
    assert strict.checks[0].delta_interval == [low, high] and strict.checks[0].gate == "non-inferiority"
    # A margin the interval excludes passes under both.
    wide = (Regression("accuracy", -low + 0.001),)
    assert bless((), wide, candidate, baseline, found, "non-inferiority").blessed


def test_strict_checks_thresholds_on_the_pessimistic_bound() -> None:
    intervals = {"candidate": {"accuracy": [0.88, 0.93], "log_loss": [0.2, 0.35]}}
    measured = {"accuracy": 0.905, "log_loss": 0.27}
    thresholds = (Threshold.parse("accuracy>=0.9"), Threshold.parse("log_loss<0.3"))
    assert bless(thresholds, (), measured, None, intervals, "non-inferiority").blessed  # thresholds on the point
    verdict = bless(thresholds, (), measured, None, intervals, "strict")
    assert not verdict.blessed
    assert verdict.reasons == ["accuracy = 0.905 (95% interval [0.88, 0.93]) fails threshold accuracy>=0.9 at its "
                               "lower bound", "log_loss = 0.27 (95% interval [0.2, 0.35]) fails threshold log_loss<0.3 "
                               "at its upper bound"]


def test_ece_of_constructed_probabilities() -> None:
    # 10 examples at confidence 0.9 of which 6 right (gap 0.3), 10 at 0.6 of which 6 right (gap 0): ECE 0.15.
    confidence = np.r_[np.full(10, 0.9), np.full(10, 0.6)]
    correct = np.r_[np.arange(10) < 6, np.arange(10) < 6]
    assert expected_calibration_error(confidence, correct) == pytest.approx(0.15)
    assert expected_calibration_error(confidence, confidence > 0) == pytest.approx((10 * 0.1 + 10 * 0.4) / 20)
    rows = [r for r in reliability_table(confidence, correct) if r["examples"]]
    assert [(r["bin"], r["examples"], r["accuracy"]) for r in rows] == [(8, 10, 0.6), (13, 10, 0.6)]
    assert [r["confidence"] for r in rows] == pytest.approx([0.6, 0.9])


@pytest.mark.parametrize("options, says", [
    ({"gate": "loose"}, "gate must be one of point, non-inferiority, strict, got 'loose'"),
    ({"bootstrap_resamples": 50}, "bootstrap_resamples 50 is too few for a 95% interval"),
    ({"bootstrap_resamples": 0}, "gate 'non-inferiority' decides on 95% intervals: bootstrap_resamples must be"),
    ({"bootstrap_seed": -1}, "bootstrap_seed must be an integer >= 0, got -1"),
    ({"regression_tolerance": "lots"}, "regression_tolerance must be a finite number >= 0, None (off) or 'auto'"),
])
def test_bad_gate_options_are_named(options: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        EvaluatorConfig(model="m", examples="e", output="o", **options)


def test_the_default_tolerance_follows_the_rule() -> None:
    common = {"model": "m", "examples": "e", "output": "o", "thresholds": ("accuracy>=0.5", "ece<=0.1")}
    assert EvaluatorConfig(**common).regression_tolerance == 0.03
    assert EvaluatorConfig(**common, gate="point").regression_tolerance == 0.01
    assert EvaluatorConfig(**common, gate="point", bootstrap_resamples=0).bootstrap_resamples == 0
    assert [str(r) for r in EvaluatorConfig(**common, regression_tolerance=0.02).regressions()] == [
        "accuracy=0.02", "ece=0.02"]
    assert Regression.parse("ece=0.01").worst_worsening([-0.01, 0.02]) == 0.02  # a higher ECE is worse

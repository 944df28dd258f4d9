"""Evaluator's verdict on real ExampleGen output and real SavedModels: blessed or not by thresholds and
regressions against a baseline, the default gate, and failures that leave no verdict.

The data and hand-set models ("good", "weak", and "two", which claims 2 classes) are
tests/helpers_evaluator.py's. Metrics, intervals and options are in test_evaluator.py.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from shardflow.evaluator import EvaluationError

from helpers_evaluator import bands, models, segments  # noqa: F401
from helpers_evaluator import evaluate as _evaluate
from helpers_evaluator import evaluate_cli as _cli
from helpers_evaluator import verdict as _verdict


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

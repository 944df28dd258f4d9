"""The run report on a real ExampleGen output with rejected rows and a real blessing verdict."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from shardflow.evaluator.blessing import bless
from shardflow.evaluator.config import EvaluatorConfig
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.pipelines.run_report import SHOWN_REJECTS, run_report

from helpers_images import write_csv, write_png


def _examples(root: Path, missing: int) -> Path:
    rng = np.random.default_rng(0)
    rows = [[write_png(root / f"img/{i}.png", rng.integers(0, 255, (8, 8, 1), dtype=np.uint8)).name, i % 2]
            for i in range(20)]
    rows = [[f"img/{name}", label] for name, label in rows] + [[f"img/gone-{i}.png", 0] for i in range(missing)]
    write_csv(root / "eval.csv", ["x", "y"], rows)
    out = root / "examples"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(root / "eval.csv"), "eval"),), data_root=str(root),
                                 output=str(out), max_reject_fraction=1.0), echo=lambda _: None)
    return out


def _evaluation(candidate: float, baseline: float | None, intervals: dict | None = None) -> dict:
    rule = "non-inferiority" if intervals else "point"
    config = EvaluatorConfig(model="m", examples="e", output="o", thresholds=("accuracy>=0.3",), gate=rule)
    verdict = bless(config.thresholds, config.regressions(), {"accuracy": candidate},
                    None if baseline is None else {"accuracy": baseline}, intervals, rule)
    return {"blessing": verdict.to_json(), "metrics": {"overall": {"accuracy": candidate}, "intervals": intervals,
                                                       "baseline_model": None if baseline is None else "serving/1"}}


def test_the_report_shows_baseline_candidate_delta_and_the_first_rejected_rows(tmp_path: Path) -> None:
    examples = _examples(tmp_path, missing=SHOWN_REJECTS + 3)
    text = run_report(str(examples), {"optimizer_steps": 3}, _evaluation(0.721, 0.911))
    assert text.startswith("# shardflow run\n\n**Blessed: no** — accuracy is 0.19 worse than the baseline")
    assert "Baseline: serving/1" in text
    assert "| threshold accuracy>=0.3 | accuracy | 0.7210 | 0.9110 | -0.1900 | yes |" in text
    assert "| regression accuracy=0.01 | accuracy | 0.7210 | 0.9110 | -0.1900 | **no** |" in text
    shown = [line for line in text.splitlines() if "| eval |" in line and "gone-" in line]
    assert len(shown) == SHOWN_REJECTS
    assert shown[0] == f"| eval | {tmp_path / 'eval.csv'} | 21 | img/gone-0.png | missing file: img/gone-0.png |"
    assert f"Shown: the first {SHOWN_REJECTS} of {SHOWN_REJECTS + 3} rejected rows; all of them: " \
           f"{examples / 'rejects.jsonl'}" in text
    assert ("Near-duplicate image pairs across splits: 0 (perceptual hashes within 10 bits; every pair listed in "
            f"{examples / 'near_duplicates.jsonl'})") in text


def test_the_report_of_a_first_run_without_rejects(tmp_path: Path) -> None:
    text = run_report(str(_examples(tmp_path, missing=0)), {}, _evaluation(0.95, None))
    assert "**Blessed: yes**" in text and "Baseline: none (nothing served yet)" in text
    assert "| regression accuracy=0.01 | accuracy | 0.9500 | — | — | skipped |" in text
    assert "Rejected rows: 0" in text and "rejects.jsonl" not in text


def test_the_report_shows_each_value_with_its_interval_and_the_rule(tmp_path: Path) -> None:
    intervals = {"method": "percentile bootstrap", "resamples": 1000, "seed": 0,
                 "candidate": {"accuracy": [0.69, 0.75]}, "baseline": {"accuracy": [0.89, 0.93]},
                 "delta": {"accuracy": [-0.22, -0.16]}}
    text = run_report(str(_examples(tmp_path, missing=0)), {}, _evaluation(0.721, 0.911, intervals))
    assert "Gate: non-inferiority (95% intervals: percentile bootstrap, 1,000 resamples, seed 0)" in text
    assert ("| regression accuracy=0.03 | accuracy | 0.7210 [0.6900, 0.7500] | 0.9110 [0.8900, 0.9300] | "
            "-0.1900 [-0.2200, -0.1600] | **no** |") in text


def test_the_report_counts_the_likely_label_errors_and_names_their_files(tmp_path: Path) -> None:
    evaluation = _evaluation(0.95, None)
    examples = str(_examples(tmp_path, missing=0))
    assert "label errors" not in run_report(examples, {}, evaluation)  # an evaluation older than the list
    evaluation["metrics"].update(split="eval", label_issues={"count": 7, "file": "label_issues.jsonl",
                                                             "sheet": "label_issues.png", "rows_named": True})
    assert ("Likely label errors in split eval: 7 (ranked by CSV row in the evaluation's label_issues.jsonl; "
            "the top 16 in label_issues.png)") in run_report(examples, {}, evaluation)


def test_the_report_of_a_detector_says_label_errors_were_not_searched(tmp_path: Path) -> None:
    evaluation = _evaluation(0.95, None)
    note = "label issues are found for classification and segmentation, not for boxes"
    evaluation["metrics"].update(split="eval", label_issues={"count": None, "note": note})
    report = run_report(str(_examples(tmp_path, missing=0)), {}, evaluation)
    assert f"Likely label errors: not searched ({note})" in report

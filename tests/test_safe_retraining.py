"""A scheduled rerun that trains a worse model leaves serving/ as it was, and says why: in one line of
`shardflow run`'s output and in the run report, with the baseline, the candidate and the delta.

The default regression gate does it (no --max-regression given): the rerun's threshold is one it
meets (accuracy>=0.2), so only the comparison with the served model can refuse it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from shardflow.pipelines.local_run import LocalRunConfig, run_locally

from helpers_images import write_quadrant_set


def _write_data(root: Path) -> None:
    write_quadrant_set(root, 80, seed=1)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    data, out = tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("out")
    _write_data(data)
    common = dict(index=(f"train={data}/train.csv", f"eval={data}/eval.csv"), data_root=str(data), output=str(out),
                  eval_thresholds=("accuracy>=0.2",))
    good, bad = [], []
    first = run_locally(LocalRunConfig(**common, train_options=("--epochs", "8", "--batch-size", "16")),
                        echo=good.append)
    served = sorted(p.name for p in (out / "serving").iterdir())
    # The retraining: a cold start with a learning rate that wrecks the model.
    second = run_locally(LocalRunConfig(**common, warm_start="", train_options=(
        "--epochs", "1", "--batch-size", "16", "--learning-rate", "3"), no_cache=("train",)), echo=bad.append)
    return {"out": out, "first": first, "second": second, "served_before": served, "said": bad}


def test_the_worse_model_is_not_pushed_and_the_served_one_stays(two_runs: dict) -> None:
    first, second = two_runs["first"], two_runs["second"]
    assert first["blessing"]["blessed"] and first["serving_pointer"]["version"] == 1
    assert first["metrics"]["overall"]["accuracy"] >= 0.9
    assert second["outcome"]["state"] == "SUCCEEDED"  # a refusal is a verdict, not a failed run
    assert not second["blessing"]["blessed"] and "pushed" not in second["outputs"]
    assert second["serving_pointer"] == first["serving_pointer"]
    assert sorted(p.name for p in (two_runs["out"] / "serving").iterdir()) == two_runs["served_before"]


def test_the_reason_is_one_line_of_the_output_and_in_the_report(two_runs: dict) -> None:
    candidate = two_runs["second"]["metrics"]["overall"]["accuracy"]
    baseline = two_runs["first"]["metrics"]["overall"]["accuracy"]
    assert candidate < baseline - 0.01
    said = "\n".join(two_runs["said"])
    refused = [line for line in said.splitlines() if line.startswith("not pushed: ")]
    assert refused == [f"not pushed: accuracy is {baseline - candidate:.6g} worse than the baseline "
                       f"({candidate:.6g} vs {baseline:.6g}), more than the allowed 0.01 (the default regression "
                       "tolerance; change it with --regression-tolerance)"], said
    report = two_runs["second"]["report"]
    assert re.search(rf"\| regression accuracy=0.01 \| accuracy \| {candidate:.4f} \| {baseline:.4f} \| "
                     rf"{candidate - baseline:+.4f} \| \*\*no\*\* \|", report), report
    assert f"Baseline: {two_runs['first']['serving_pointer']['model']}" in report

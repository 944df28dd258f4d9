"""A scheduled rerun that trains a worse model leaves serving/ as it was, and says why: in one line of
`shardflow run`'s output and in the run report, with the baseline, the candidate and the delta.

The default regression gate does it (no --max-regression given): the rerun's threshold is one it
meets (accuracy>=0.2), so only the comparison with the served model can refuse it.

The runs are the session's `quadrant_history` (tests/shared_fixtures.py): its "worse" run is this
retraining, after the first run and its identical rerun, shared with test_run_cache.py."""
from __future__ import annotations

import re


def test_the_worse_model_is_not_pushed_and_the_served_one_stays(quadrant_history: dict) -> None:
    runs = quadrant_history["runs"]
    first, second = runs["first"], runs["worse"]
    assert first["blessing"]["blessed"] and first["serving_pointer"]["version"] == 1
    assert first["metrics"]["overall"]["accuracy"] >= 0.9
    assert second["outcome"]["state"] == "SUCCEEDED"  # a refusal is a verdict, not a failed run
    assert not second["blessing"]["blessed"] and "pushed" not in second["outputs"]
    assert second["serving_pointer"] == first["serving_pointer"]
    assert runs["worse"]["served"] == runs["again"]["served"] == ["1", "CURRENT.json", "models.config"]


def test_the_reason_is_one_line_of_the_output_and_in_the_report(quadrant_history: dict) -> None:
    runs = quadrant_history["runs"]
    candidate = runs["worse"]["metrics"]["overall"]["accuracy"]
    baseline = runs["first"]["metrics"]["overall"]["accuracy"]
    assert candidate < baseline - 0.03
    said = "\n".join(runs["worse"]["printed"])
    refused = [line for line in said.splitlines() if line.startswith("not pushed: ")]
    low, high = runs["worse"]["metrics"]["intervals"]["delta"]["accuracy"]  # paired, on the same eval examples
    assert low <= candidate - baseline <= high
    assert refused == [f"not pushed: accuracy is {baseline - candidate:.6g} worse than the baseline "
                       f"({candidate:.6g} vs {baseline:.6g}); at 95% confidence at most {-low:.6g} worse (interval of "
                       f"the difference [{low:.4g}, {high:.4g}], non-inferiority gate), more than the allowed 0.03 (the "
                       "default regression tolerance; change it with --regression-tolerance)"], said
    report = runs["worse"]["report"]
    assert re.search(rf"\| regression accuracy=0.03 \| accuracy \| {candidate:.4f} \[[0-9.]+, [0-9.]+\] \| "
                     rf"{baseline:.4f} \[[0-9.]+, [0-9.]+\] \| {candidate - baseline:+.4f} \[{low:+.4f}, {high:+.4f}\] \| "
                     rf"\*\*no\*\* \|", report), report
    assert "Gate: non-inferiority (95% intervals: " in report
    assert f"Baseline: {runs['first']['serving_pointer']['model']}" in report

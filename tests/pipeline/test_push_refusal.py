"""A run whose Push is refused says so: the push step fails with the Pusher's one line, and `shardflow run`'s
summary names it ("not pushed: ...") next to what is served now, from the run's own record: two runs into
one `--output` each report their own outcome, not the newest run's.

The step body runs for real on tiny model directories (the Pusher copies bytes and reads the Evaluator's
records, so no TensorFlow); the run record is the exit handler's own function's, with the message the local
runner gives a failed task ("task push failed: " and the step's line)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from shardflow.pipelines import step_bodies
from shardflow.pipelines.local_run import render_summary, summarize

pytestmark = pytest.mark.unit  # in process, a few small files, no server


def _blessed(root: Path, name: str, gated_against: str) -> tuple[str, str]:
    model, evaluation = root / name / "model", root / name / "evaluation"
    model.mkdir(parents=True)
    (model / "saved_model.pb").write_text(f"graph of {name}")
    (model / "shardflow_model.json").write_text("{}")
    evaluation.mkdir()
    (evaluation / "metrics.json").write_text(json.dumps({"model": str(model), "gated_against": gated_against}))
    (evaluation / "BLESSED").write_text("accuracy = 0.93 meets threshold accuracy>=0.9\n")
    return str(model), str(evaluation)


def test_a_refused_push_fails_its_step_and_the_summary_names_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    serving = out / "serving"
    first = _blessed(tmp_path, "first", "none")
    one = serving / "1" / "model" / "1"  # version 1's model (pusher/layout.py)
    assert step_bodies.push(*first, "", str(serving), {}) == str(one)
    second = _blessed(tmp_path, "second", "none")  # gated while nothing was served, as the first was
    with pytest.raises(step_bodies.StepFailed) as refused:
        step_bodies.push(*second, "", str(serving), {})
    line = (f"{one} (version 1) is served now, but the model was gated against none (nothing was "
            "served): evaluate it against the served model, then push (a rerun of the pipeline does both)")
    assert str(refused.value) == f"shardflow push: not pushed: {line}" and refused.value.exit_code == 75
    assert sorted(p.name for p in serving.iterdir() if not p.name.startswith(".")) == ["1", "CURRENT.json", "models.config"]

    first_run, second_run = out / "pipeline_root" / "shardflow-1", out / "pipeline_root" / "shardflow-2"
    (first_run / "push").mkdir(parents=True)
    (first_run / "push" / "pushed").write_text(str(one) + "\n")  # what the push component writes
    record = Path(step_bodies.record_outcome(str(out / "runs"), first_run.name, "SUCCEEDED", "", ""))
    record.rename(record.with_name("run-0-first.json"))  # two runs' exit handlers: two processes, two names
    second_run.mkdir()  # the second run, into the same --output: its push step failed with the refusal
    step_bodies.record_outcome(str(out / "runs"), second_run.name, "FAILED", "push",
                               f"task push failed: {refused.value}")
    summary = summarize(out, second_run)
    assert summary["push"] == {"refused": line} and summary["outcome"]["state"] == "FAILED"
    shown = render_summary(summary).splitlines()
    assert shown[-2:] == [f"serving: {one} (version 1)", f"not pushed: {line}"]
    # Each run's summary is its own, whichever finished last (both print theirs when they end).
    first = summarize(out, first_run)
    assert first["push"] == {"pushed": str(one)} and first["outcome"]["state"] == "SUCCEEDED"
    assert not any(text.startswith(("not pushed", "error")) for text in render_summary(first).splitlines())
    assert summarize(out)["run"] == str(second_run) and summarize(tmp_path / "nothing")["run"] is None

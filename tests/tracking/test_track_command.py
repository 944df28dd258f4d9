"""`shardflow track`'s refusals: one line and exit 2 for a bad flag, an output with no run, an unreachable server;
and the records it reads, from a run's own files, without a server."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopback_server import free_port
from shardflow.core.errors import ConfigError
from shardflow.tracking import TrackConfig
from shardflow.tracking.records import read_run

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))


def _track(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SHARDFLOW, "track", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, said", [
    (["--output", "{tmp}", "--tracking-uri", "file:{tmp}/t"], "holds no pipeline run"),
    (["--output", "{run}", "--tracking-uri", "http://127.0.0.1:{port}"], "cannot be reached"),
    (["--output", "{run}", "--tracking-uri", "file:{tmp}/t", "--run", "yesterday"], "is not a run's name"),
    (["--output", "{run}", "--tracking-uri", "file:{tmp}/t", "--alias", "latest"], "MLflow reserves 'latest'"),
])
def test_a_mistake_is_one_line_and_exit_2(tmp_path: Path, args: list[str], said: str) -> None:
    run = tmp_path / "out"
    (run / "pipeline_root").mkdir(parents=True)
    given = [a.format(tmp=tmp_path, run=run, port=free_port()) for a in args]
    done = _track(*given)
    assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_config_names_the_bad_value() -> None:
    with pytest.raises(ConfigError, match="experiment: give a name"):
        TrackConfig(output="o", tracking_uri="file:/t", experiment="")


def test_a_run_reads_as_a_parent_and_a_nested_run_per_step_that_ran(tmp_path: Path) -> None:
    """From steps.json and the outputs it records: skipped steps make no run; numbers, options and lineage."""
    job = tmp_path / "pipeline_root" / "shardflow-2026-11-28-10-00-00-000001"
    evaluation = job / "evaluate" / "evaluation"
    evaluation.mkdir(parents=True)
    (evaluation / "metrics.json").write_text(json.dumps({
        "component": "evaluator", "shardflow_version": "0.1.0", "options": {"split": "eval", "slice_by": ["site"]},
        "gated_against": "none", "intervals": {"candidate": {"accuracy": [0.8, 0.9]}},
        "label_issues": {"count": 4}}))
    (evaluation / "canaries.tfrecord").write_bytes(b"x" * 10)
    steps = {"evaluate": {"state": "ok", "started": 100.0, "seconds": 2.5, "outputs": {
                 "metrics": {"uri": str(job / "evaluate" / "metrics"), "metadata": {"accuracy": 0.85, "blessed": True}},
                 "evaluation": {"uri": str(evaluation), "metadata": {}}, "blessed": {"value": True}}},
             "condition-4": {"state": "skipped", "started": 103.0, "seconds": None}}
    (job / "logs").mkdir()
    (job / "logs" / "steps.json").write_text(json.dumps(steps))
    records = read_run(job, {"state": "SUCCEEDED", "pipeline_job": job.name})
    (evaluate,) = records.steps
    assert records.parent.key == job.name and records.parent.status == "FINISHED"
    assert (evaluate.key, evaluate.start_ms, evaluate.end_ms) == (f"{job.name}/evaluate", 100_000, 102_500)
    assert {m.key: m.value for m in evaluate.metrics} == {"accuracy": 0.85, "blessed": 1.0, "accuracy.lower": 0.8,
                                                         "accuracy.upper": 0.9, "label_issues": 4.0}
    assert evaluate.params == {"split": "eval", "slice_by": '["site"]'}
    assert evaluate.tags["shardflow.blessed"] == "true" and evaluate.tags["shardflow.output.evaluation"] == str(evaluation)
    assert [Path(a).name for a in evaluate.artifacts] == ["metrics.json"]  # the tfrecord is linked, not sent

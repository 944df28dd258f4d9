"""The Kubeflow pipeline: golden IR, and real local runs with kfp.local through every step.

Local runs use a small generated dataset (8x8 images whose bright quadrant is the class). Three
runs share one run directory, in order: blessed and pushed; not blessed, so nothing is pushed; and
a run stopped by the validation gate before Transform.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import read_model_info
from shardflow.pipelines.compiler import compile_pipeline
from shardflow.pipelines.step_bodies import StepFailed
from shardflow.pipelines.local_run import LocalRunConfig, run_locally

from helpers_images import write_quadrant_set

GOLDEN = Path(__file__).parents[1] / "golden" / "pipeline.yaml"
# The image `make golden` compiles the golden pipeline with (an example digest, not a built image).
GOLDEN_IMAGE = ("registry.example.com/ml/shardflow"
                "@sha256:3f1c5e0a9b7d2c4e6f8a0b1c3d5e7f9a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e")
TRAIN_ARGS = ("--epochs", "6", "--batch-size", "16", "--input-probe-batches", "2")


def _without_version(text: str) -> str:
    return re.sub(r"(?m)^sdkVersion: .*$", "", text)


def test_compiled_pipeline_equals_the_golden_yaml(tmp_path: Path) -> None:
    compiled = Path(compile_pipeline(tmp_path / "pipeline.yaml", GOLDEN_IMAGE)).read_text()
    assert _without_version(compiled) == _without_version(GOLDEN.read_text()), (
        "the compiled pipeline changed: review the diff, then regenerate with `make golden`")
    golden_target = (Path(__file__).parents[2] / "Makefile").read_text().split("\ngolden:")[1].split("\n\n")[0]
    assert f"--image {GOLDEN_IMAGE}" in golden_target, "`make golden` compiles with another image than this test"


def test_the_ir_carries_accelerators_retries_caching_and_control_flow() -> None:
    ir = yaml.safe_load(GOLDEN.read_text())
    executors = ir["deploymentSpec"]["executors"]
    train = executors["exec-train"]["container"]["resources"]
    assert "trainer_accelerator_type" in train["accelerator"]["resourceType"]
    assert "trainer_accelerator_limit" in train["accelerator"]["resourceCount"]
    for name, executor in executors.items():
        assert executor["container"]["resources"].get("resourceCpuRequest"), f"{name} has no CPU request"
        assert executor["container"]["resources"].get("resourceMemoryRequest"), f"{name} has no memory request"
    tasks = ir["components"]["comp-exit-handler-1"]["dag"]["tasks"]
    for step in ("example-gen", "transform"):
        assert tasks[step]["retryPolicy"]["maxRetryCount"] == 2 and tasks[step]["retryPolicy"]["backoffFactor"] == 2
        assert tasks[step]["cachingOptions"]["enableCache"] is True
    assert tasks["fingerprint"]["cachingOptions"].get("enableCache", False) is False
    assert "fingerprint" in str(tasks["example-gen"]["inputs"]["parameters"]["data_fingerprint"])
    condition = next(t for t in tasks.values() if "triggerPolicy" in t)
    assert condition["triggerPolicy"]["condition"] == "inputs.parameter_values['pipelinechannel--evaluate-blessed'] == true"
    exit_task = ir["root"]["dag"]["tasks"]["record-outcome"]
    assert exit_task["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"


def _write_span(root: Path, span: int, shuffle_labels: bool = False) -> None:
    write_quadrant_set(root, 120, span, f"span-{span}/", shuffle_labels)


def _config(data: Path, out: Path, **options: object) -> LocalRunConfig:
    return LocalRunConfig(index=(f"train={data}/span-{{SPAN}}/train.csv", f"eval={data}/span-{{SPAN}}/eval.csv"),
                          data_root=str(data), output=str(out), train_options=TRAIN_ARGS, spans=2,
                          eval_thresholds=("accuracy>=0.8",), max_regressions=("accuracy=0.1",),
                          slice_by=("site",), **options)


@pytest.fixture(scope="module")
def span_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[dict]]:
    """Three scheduled runs as data arrives: span 1; spans 1-2; spans 2-3 with span 3 degraded."""
    data, out = tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("run")
    summaries = []
    for span in (1, 2, 3):
        _write_span(data, span, shuffle_labels=span == 3)
        summaries.append(run_locally(_config(data, out), echo=lambda _: None))
    return out, data, summaries


def test_a_local_run_goes_through_every_step_and_its_artifacts_agree(span_runs: tuple[Path, Path, list[dict]]) -> None:
    out, _, (summary, _, _) = span_runs
    outputs = summary["outputs"]
    assert set(outputs) == {"examples", "validation", "transformed", "model", "evaluation", "label_issues", "infra",
                            "report", "pushed"}
    # The likely label errors of the window's eval split, each named by its own span's CSV.
    issues = [json.loads(line) for line in Path(outputs["label_issues"]).read_text().splitlines()]
    assert len(issues) == summary["metrics"]["label_issues"]["count"] and summary["metrics"]["label_issues"]["rows_named"]
    assert all(Path(i["index"]).name == "eval.csv" and Path(i["index"]).parent.name.startswith("span-") for i in issues)
    examples = read_manifest(outputs["examples"])
    assert summary["metrics"]["num_examples"] == examples.splits["eval"].num_examples == 24
    assert read_manifest(outputs["transformed"]).splits["train"].num_examples == examples.splits["train"].num_examples
    info = read_model_info(Path(outputs["model"]) / "model")
    assert info.extra["examples"] == outputs["transformed"]
    assert summary["training"]["optimizer_steps"] == 6 * int(np.ceil(96 / 16))
    assert summary["training"]["options"]["warm_start"] is None  # nothing served yet
    assert summary["blessing"]["blessed"] is True
    assert set(summary["metrics"]["slices"]["site"]) == {"site-0", "site-1", "site-2"}
    pointer = summary["serving_pointer"]
    assert pointer["version"] == 1 and (Path(pointer["model"]) / "saved_model.pb").is_file()
    # loaded and called in a TensorFlow-only process before the push, which carries its warm-up file
    check = summary["serving_check"]
    assert check["blessed"] is True and check["load_seconds"] > 0 and check["latency"]
    assert (Path(pointer["model"]) / "assets.extra" / "tf_serving_warmup_requests").is_file()
    probe = json.loads((Path(outputs["infra"]) / "infra_validation.json").read_text())["probe"]
    assert probe["started_ahead"]  # its interpreter started with the Evaluator, in a run that trained a model
    assert summary["outcome"]["state"] == "SUCCEEDED"
    assert "Blessed: yes" in summary["report"] and "| eval | 24 |" in summary["report"]
    assert Path(outputs["validation"]).read_text().strip()
    page = (Path(summary["run"]) / "evaluate" / "evaluation_page.html").read_text()  # the KFP UI's page
    assert "Slices by site" in page and all(f"<tr><td>site-{i}</td><td>8</td>" in page for i in range(3))
    assert all((Path(summary["run"]) / "logs" / f"{step}.log").is_file() for step in ("example-gen", "train", "push"))


def test_the_second_span_reuses_the_first_and_warm_starts_from_the_served_model(
        span_runs: tuple[Path, Path, list[dict]]) -> None:
    out, _, (first, second, _) = span_runs
    spans = read_manifest(second["outputs"]["examples"]).extra["spans"]
    assert [(s["span"], s["reused"]) for s in spans] == [("1", True), ("2", False)]
    assert spans[0]["dir"] == read_manifest(first["outputs"]["examples"]).extra["spans"][0]["dir"]
    assert second["metrics"]["num_examples"] == 48  # the window's eval: both spans
    assert second["training"]["options"]["warm_start"] == str(out / "serving" / "1" / "model" / "1")
    assert second["metrics"]["baseline_model"] == str(out / "serving" / "1" / "model" / "1")
    assert second["blessing"]["blessed"] is True and second["serving_pointer"]["version"] == 2


def test_a_degraded_span_is_not_blessed_and_the_served_model_stays(span_runs: tuple[Path, Path, list[dict]]) -> None:
    out, _, (_, second, third) = span_runs
    spans = read_manifest(third["outputs"]["examples"]).extra["spans"]
    assert [(s["span"], s["reused"]) for s in spans] == [("2", True), ("3", False)]
    assert third["blessing"]["blessed"] is False
    assert any("accuracy>=0.8" in reason for reason in third["blessing"]["reasons"])
    assert "pushed" not in third["outputs"] and third["outcome"]["state"] == "SUCCEEDED"
    assert third["serving_pointer"]["version"] == 2
    assert third["serving_pointer"]["source"] == second["outputs"]["model"]  # span 2's model is still served
    assert sorted(p.name for p in (out / "serving").iterdir() if p.is_dir() and p.name.isdigit()) == ["1", "2"]


def test_the_validation_gate_stops_a_run_whose_eval_split_lacks_a_feature(span_runs: tuple[Path, Path, list[dict]],
                                                                          tmp_path: Path) -> None:
    out, data, (summary, _, _) = span_runs
    newest = read_manifest(summary["outputs"]["examples"]).extra["newest_span"]["dir"]
    schema = schema_pb2.Schema()
    text_format.Parse((Path(newest) / "schema.pbtxt").read_text(), schema)
    # The curated schema of an earlier data version had a `camera` column the new index files lack.
    feature = schema.feature.add(name="camera", type=schema_pb2.BYTES)
    feature.presence.min_fraction = 1.0
    feature.presence.min_count = 1
    curated = tmp_path / "schema.pbtxt"
    curated.write_text(text_format.MessageToString(schema))
    records_before = set((out / "runs").glob("run-*.json"))
    # The same run directory: its span store already holds the spans, nothing is re-encoded.
    with pytest.raises(StepFailed, match="validate"):
        run_locally(_config(data, out, validation_schema=str(curated)), echo=lambda _: None)
    (record,) = set((out / "runs").glob("run-*.json")) - records_before
    stopped = json.loads(record.read_text())
    assert stopped["state"] == "FAILED" and stopped["failed_task"] == "validate"
    assert stopped["message"].startswith("task validate failed: data validation failed")  # the step's own words
    run_dir = max((out / "pipeline_root").glob("shardflow-*"), key=lambda p: p.stat().st_mtime)
    report = (run_dir / "validate" / "report").read_text()
    assert "camera" in report and "eval" in report
    assert not (run_dir / "transform").exists() and not (run_dir / "train").exists()

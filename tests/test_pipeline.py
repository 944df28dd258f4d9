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
from shardflow.pipelines.local_run import LocalRunConfig, run_locally

from helpers_images import write_csv, write_png

GOLDEN = Path(__file__).parent / "golden" / "pipeline.yaml"
TRAIN_ARGS = ("--epochs", "6", "--batch-size", "16", "--input-probe-batches", "2")


def _without_version(text: str) -> str:
    return re.sub(r"(?m)^sdkVersion: .*$", "", text)


def test_compiled_pipeline_equals_the_golden_yaml(tmp_path: Path) -> None:
    compiled = compile_pipeline(tmp_path / "pipeline.yaml").read_text()
    assert _without_version(compiled) == _without_version(GOLDEN.read_text()), (
        "the compiled pipeline changed: review the diff, then regenerate with `make golden`")


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


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, rng = tmp_path_factory.mktemp("quadrants"), np.random.default_rng(0)
    rows = {"train": [], "eval": []}
    for i in range(240):
        label = i % 4
        pixels = rng.integers(0, 60, size=(8, 8, 1)).astype(np.uint8)
        y, x = divmod(label, 2)
        pixels[y * 4:(y + 1) * 4, x * 4:(x + 1) * 4] += 180
        write_png(root / f"img/{i}.png", pixels)
        rows["eval" if i % 5 == 0 else "train"].append([f"img/{i}.png", label, f"site-{i % 3}"])
    for split, split_rows in rows.items():
        write_csv(root / f"{split}.csv", ["x", "y", "site"], split_rows)
    return root


def _config(dataset: Path, out: Path, **options: object) -> LocalRunConfig:
    return LocalRunConfig(index=(f"train={dataset / 'train.csv'}", f"eval={dataset / 'eval.csv'}"),
                          data_root=str(dataset), output=str(out), train_options=TRAIN_ARGS,
                          eval_thresholds=("accuracy>=0.7",), slice_by=("site",), **options)


@pytest.fixture(scope="module")
def first_run(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("run")
    return out, run_locally(_config(dataset, out), echo=lambda _: None)


def test_a_local_run_goes_through_every_step_and_its_artifacts_agree(first_run: tuple[Path, dict]) -> None:
    out, summary = first_run
    outputs = summary["outputs"]
    assert set(outputs) == {"examples", "validation", "transformed", "model", "evaluation", "report", "pushed"}
    examples = read_manifest(outputs["examples"])
    assert summary["metrics"]["num_examples"] == examples.splits["eval"].num_examples == 48
    assert read_manifest(outputs["transformed"]).splits["train"].num_examples == examples.splits["train"].num_examples
    info = read_model_info(Path(outputs["model"]) / "model")
    assert info.extra["examples"] == outputs["transformed"]
    assert summary["training"]["optimizer_steps"] == 6 * int(np.ceil(192 / 16))
    assert summary["blessing"]["blessed"] is True
    assert set(summary["metrics"]["slices"]["site"]) == {"site-0", "site-1", "site-2"}
    pointer = summary["serving_pointer"]
    assert pointer["version"] == 1 and (Path(pointer["model"]) / "saved_model.pb").is_file()
    assert pointer["source"] == outputs["model"]
    assert summary["outcome"]["state"] == "SUCCEEDED"
    assert "Blessed: yes" in summary["report"] and "| eval | 48 |" in summary["report"]
    assert "Verdict" in Path(outputs["validation"]).read_text() or "passed" in Path(outputs["validation"]).read_text().lower()


def test_an_unblessed_model_is_not_pushed(first_run: tuple[Path, dict], dataset: Path) -> None:
    out, _ = first_run
    config = _config(dataset, out)
    unreachable = LocalRunConfig(**{**config.__dict__, "eval_thresholds": ("accuracy>=1.01",)})
    summary = run_locally(unreachable, echo=lambda _: None)
    assert summary["blessing"]["blessed"] is False
    assert any("accuracy>=1.01" in reason for reason in summary["blessing"]["reasons"])
    assert "pushed" not in summary["outputs"]
    assert summary["serving_pointer"]["version"] == 1  # still the first run's model
    assert sorted(p.name for p in (out / "serving").iterdir() if p.is_dir()) == ["1"]
    assert summary["metrics"]["baseline_model"] == str(out / "serving" / "1")  # "latest" = the served model
    assert summary["training"]["options"]["warm_start"] == str(out / "serving" / "1")


def test_the_validation_gate_stops_a_run_whose_eval_split_lacks_a_feature(first_run: tuple[Path, dict],
                                                                          dataset: Path, tmp_path: Path) -> None:
    out, summary = first_run
    schema = schema_pb2.Schema()
    text_format.Parse((Path(summary["outputs"]["examples"]) / "schema.pbtxt").read_text(), schema)
    # The curated schema of an earlier data version had a `camera` column the new index files lack.
    feature = schema.feature.add(name="camera", type=schema_pb2.BYTES)
    feature.presence.min_fraction = 1.0
    feature.presence.min_count = 1
    curated = tmp_path / "schema.pbtxt"
    curated.write_text(text_format.MessageToString(schema))
    gate_out = tmp_path / "gated"
    with pytest.raises(RuntimeError, match="validate"):
        run_locally(_config(dataset, gate_out, validation_schema=str(curated)), echo=lambda _: None)
    stopped = json.loads(next((gate_out / "runs").glob("run-*.json")).read_text())
    assert stopped["state"] == "FAILED" and stopped["failed_task"] == "validate"
    run_dir = next((gate_out / "pipeline_root").glob("shardflow-*"))
    report = (run_dir / "validate" / "report").read_text()
    assert "camera" in report and "eval" in report
    assert not (run_dir / "transform").exists() and not (run_dir / "train").exists()

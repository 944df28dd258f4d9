"""Large outputs go straight to a remote artifact URI (s3://, gs://), to `.path` otherwise; reports stay on `.path`.

The component functions are called as plain Python with real kfp artifacts and a recording stand-in
for `step_bodies`, so the test sees exactly which location each step hands to its command.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from kfp import dsl

from shardflow.pipelines import components, step_bodies
from shardflow.pipelines.locations import output_location


@pytest.mark.parametrize(("uri", "expected"), [
    ("s3://bucket/root/run/example-gen/examples", "s3://bucket/root/run/example-gen/examples"),
    ("gs://bucket/root/run/train/model", "gs://bucket/root/run/train/model"),
    ("minio://mlpipeline/v2/artifacts/run/train/model", "/minio/mlpipeline/v2/artifacts/run/train/model"),
    ("/home/me/runs/pipeline_root/shardflow-1/train/model", "/home/me/runs/pipeline_root/shardflow-1/train/model"),
])
def test_output_location_is_the_uri_only_for_storage_shardflow_writes(uri: str, expected: str) -> None:
    assert output_location(dsl.Model(uri=uri)) == expected


@pytest.fixture(autouse=True)
def not_a_step_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The components run here inside pytest, not as a step's own process: no exit guard for pytest."""
    monkeypatch.setattr("shardflow.pipelines.step_errors.install_exit_guard", lambda: None)


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple]:
    """step_bodies' step functions replaced by recorders that answer like the real ones."""
    seen: dict[str, tuple] = {}

    def record(name: str, answer: object):
        def recorder(*args: object) -> object:
            seen[name] = args
            return answer
        return recorder

    monkeypatch.setattr(step_bodies, "example_gen", record("example_gen", {"examples": {"train": 1}}))
    monkeypatch.setattr(step_bodies, "transform", record("transform", {"examples": {"train": 1}}))
    monkeypatch.setattr(step_bodies, "tune", record("tune", {"values": {"learning_rate": 0.01},
                                                             "objective": "val_accuracy", "score": 0.9,
                                                             "trials": [{}, {}]}))
    monkeypatch.setattr(step_bodies, "train", record("train", {"strategy": "default", "optimizer_steps": 1,
                                                               "history": [],
                                                               "input_report": {"training_examples_per_second": 1.0}}))
    monkeypatch.setattr(step_bodies, "resolve_model_reference", lambda reference, serving_dir: "")
    return seen


@pytest.fixture(params=[pytest.param("s3", marks=pytest.mark.cluster), pytest.param("gs", marks=pytest.mark.cluster)])
def root(request: pytest.FixtureRequest) -> str:
    """A run root in a fresh bucket of the local S3 server or the GCS emulator."""
    if request.param == "s3":
        return f"s3://{request.getfixturevalue('s3_bucket')}/root/run"
    return f"gs://{request.getfixturevalue('gcs_server').bucket()}/root/run"


def test_large_outputs_are_written_to_a_remote_uri(calls: dict[str, tuple], root: str, tmp_path: Path) -> None:
    examples, transformed = dsl.Dataset(uri=f"{root}/example-gen/examples"), dsl.Dataset(uri=f"{root}/transform/t")
    model, metrics = dsl.Model(uri=f"{root}/train/model"), dsl.Metrics(uri=f"{root}/train/training_metrics")
    page = dsl.HTML(uri=str(tmp_path / "training_page.html"))  # reports stay on .path
    components.example_gen(["train=/data/t.csv"], "/data", "fp", {}, [], [], examples)
    components.transform(examples, {}, [], [], transformed)
    tuned = dsl.Artifact(uri=f"{root}/tune/hyperparameters")  # trials hold models: large too
    components.tune(transformed, {}, ["--max-trials", "2"], ["--epochs", "1"], "nvidia.com/gpu", 1, tuned)
    components.train(transformed, tuned, {}, [], "", "/serving", "nvidia.com/gpu", 1, model, metrics, page)
    assert calls["tune"] == (transformed.path, {}, ["--max-trials", "2"], ["--epochs", "1"], tuned.uri)
    assert tuned.metadata["values"] == {"learning_rate": 0.01} and tuned.metadata["trials"] == 2
    assert calls["train"][-1] == tuned.path
    assert calls["example_gen"][-1] == examples.uri
    assert calls["transform"] == (examples.path, {}, [], [], transformed.uri)  # the input: the launcher's local copy
    assert calls["train"][0] == transformed.path and calls["train"][-2] == model.uri
    assert examples.metadata["fingerprint"] == "fp" and model.metadata["framework"] == "tensorflow"
    assert "<html" in Path(page.path).read_text().lower()


def test_local_outputs_use_the_path(calls: dict[str, tuple], tmp_path: Path) -> None:
    examples = dsl.Dataset(uri=str(tmp_path / "examples"))  # kfp.local: the URI is a local path
    components.example_gen(["train=/data/t.csv"], "/data", "fp", {}, [], [], examples)
    assert calls["example_gen"][-1] == examples.path == str(tmp_path / "examples")


def test_a_step_refuses_flags_its_command_does_not_know(tmp_path: Path) -> None:
    # train takes no Beam options: an unknown flag fails the step, naming it, before training starts.
    unknown = r"shardflow train: error: unknown option --no-such-flag \(not a shardflow train option\)"
    with pytest.raises(step_bodies.StepFailed, match=unknown):
        step_bodies.train(str(tmp_path / "examples"), {}, ["--epochs", "1", "--no-such-flag"], "", str(tmp_path / "model"))
    with pytest.raises(step_bodies.StepFailed, match="shardflow train: error: one of the arguments --epochs --steps"):
        step_bodies.train(str(tmp_path / "examples"), {}, [], "", str(tmp_path / "model"))
    assert not (tmp_path / "model").exists()

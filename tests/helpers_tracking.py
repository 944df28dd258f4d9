"""A `shardflow run` output written as the runner writes it, without running it: each run's steps.json and the
records tracking reads (ExampleGen's manifest, training.json, the evaluation's metrics and blessing), and the
serving directory's CURRENT.json as the Pusher writes it. For tracking tests that need exact provenance (a
cached Trainer, a refused then blessed model) in seconds, not whole pipeline runs."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FINGERPRINT = "a4802ecb8acd6bc49514a79a8e30acfb48962ba88b72636cda797f309ccf20c4"


def _write(path: Path, data: Any) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return str(path.parent)


def write_run(out: Path, job: str, *, blessed: bool, accuracy: float, pushed: int | None = None,
              trained_in: str | None = None, epochs: int = 2, commit: dict[str, Any] | None = None) -> Path:
    """RUN/pipeline_root/<job>: example-gen, fingerprint, train (cached from `trained_in` when given), evaluate
    (its verdict and reasons), and a push that served version `pushed` (None: the push did not run)."""
    run = out.resolve() / "pipeline_root" / job
    data = out.resolve() / "data"
    examples = _write(run / "example-gen" / "examples" / "manifest.json", {
        "component": "example_gen", "shardflow_version": "0.1.0",
        "options": {"data_root": str(data), "split_weights": [["train", 9], ["eval", 1]], "output": str(run)},
        "inputs": [{"path": str(data / f"{split}.csv"), "sha256": f"{split}-sha", "split": split}
                   for split in ("train", "eval")],
        "splits": {"train": {"num_examples": 16}, "eval": {"num_examples": 4}}})
    model_run = out.resolve() / "pipeline_root" / (trained_in or job)
    model = _write(model_run / "train" / "model" / "training.json", {
        "component": "trainer", "shardflow_version": "0.1.0",
        "options": {"epochs": epochs, "learning_rate": 0.01, "output": str(model_run / "train" / "model")}})
    reasons = [f"accuracy = {accuracy} {'meets' if blessed else 'fails'} threshold accuracy>=0.5 ({job})"]
    evaluation = _write(run / "evaluate" / "evaluation" / "metrics.json", {
        "component": "evaluator", "shardflow_version": "0.1.0",
        "options": {"split": "eval", "thresholds": ["accuracy>=0.5"]},
        "gated_against": "none", "overall": {"accuracy": accuracy},
        "intervals": {"candidate": {"accuracy": [accuracy - 0.1, accuracy + 0.05]}}})
    _write(run / "evaluate" / "evaluation" / "blessing.json",
           {"blessed": blessed, "gated_against": "none", "reasons": reasons})
    steps: dict[str, Any] = {
        "example-gen": {"state": "ok", "started": 100.0, "seconds": 1.0, "outputs": {
            "examples": {"uri": examples, "metadata": {"examples": {"train": 16, "eval": 4}, "rejected": 0}}}},
        "fingerprint": {"state": "ok", "started": 101.0, "seconds": 0.1, "outputs": {"Output": {"value": FINGERPRINT}}},
        "train": {"state": "cached" if trained_in else "ok", "started": 102.0, "seconds": 2.0, "outputs": {
            "model": {"uri": model, "metadata": {"optimizer_steps": 4}}}},
        "evaluate": {"state": "ok", "started": 104.0, "seconds": 1.0, "outputs": {
            "evaluation": {"uri": evaluation, "metadata": {"accuracy": accuracy, "blessed": blessed}},
            "blessed": {"value": blessed}}},
        "condition-4": {"state": "ok" if blessed else "skipped", "started": 105.0, "seconds": 0.0}}
    if pushed is not None:
        steps["push"] = {"state": "ok", "started": 105.0, "seconds": 0.5, "outputs": {
            "Output": {"value": served_model(out, pushed)}}}
    _write(run / "logs" / "steps.json", steps)
    if commit is not None:
        _write(run / "logs" / "source.json", commit)
    return run


def served_model(out: Path, number: int) -> str:
    """Where the Pusher puts version N's model (one immutable prefix a version: SERVING/N/model/N)."""
    return str(out.resolve() / "serving" / str(number) / "model" / str(number))


def write_pointer(out: Path, versions: dict[int, str]) -> None:
    """serving/CURRENT.json naming the highest of `versions` ({N: the run whose Trainer trained it}), each a
    version folder; `pushed_from` is the training output, as the Pusher records it."""
    serving = out.resolve() / "serving"
    history = {}
    for number, trained_in in versions.items():
        Path(served_model(out, number)).mkdir(parents=True, exist_ok=True)
        history[str(number)] = {"content_digest": f"digest-{number}", "pushed_at": "2026-12-07T11:00:00Z",
                                "model": served_model(out, number), "storage_uri": str(serving / str(number) / "model"),
                                "pushed_from": str(out.resolve() / "pipeline_root" / trained_in / "train" / "model")}
    top = max(versions)
    _write(serving / "CURRENT.json", {"version": top, "gated_against": "none", "action": "push",
                                      "served_versions": history, **history[str(top)]})

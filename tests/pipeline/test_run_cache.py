"""Caching as KFP users expect: an identical `shardflow run` reuses every cacheable step's outputs in
place, an edited CSV row runs everything from ExampleGen on again, and `no_cache` turns reuse off per
step, locally and in the compiled pipeline. The Evaluator is reused only by the local runner, keyed by
the model served now: the rerun of a run that pushed reuses its evaluation (the served model is the
candidate itself, so there is no baseline), and another run's push in between is a miss.

The runs are the session's `quadrant_history` (tests/shared_fixtures.py), shared with
test_safe_retraining.py; the step states come from each run's record (logs/steps.json)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from shardflow.core.errors import ConfigError
from shardflow.core.model_info import MODEL_INFO_NAME
from shardflow.evaluator.config import GATED_AGAINST, NO_BASELINE
from shardflow.pipelines.local_cache import StepCache, check_no_cache
from shardflow.pipelines.local_dag import Artifact
from shardflow.pusher import push_model

CACHED = ("example-gen", "validate", "transform", "tune", "train", "infra-validate")
ALWAYS_RUN = ("fingerprint", "evaluate", "run-report")
GOLDEN_IMAGE = "registry.example.com/ml/shardflow@sha256:" + "3f1c5e0a" * 8


def _states(run: dict) -> dict[str, str]:
    """step -> ok / cached / FAILED / skipped, from the run's structured record of its steps."""
    return {step: entry["state"] for step, entry in run["steps"].items()}


def test_an_identical_rerun_reuses_every_cacheable_step_and_copies_nothing(quadrant_history: dict) -> None:
    runs = quadrant_history["runs"]
    first, again = _states(runs["first"]), _states(runs["again"])
    assert all(first[step] == "ok" for step in CACHED + ALWAYS_RUN), first
    assert all(again[step] == "cached" for step in CACHED), again
    before, after = runs["first"]["bytes"], runs["again"]["bytes"]
    assert after - before < 0.15 * before, (before, after)  # reports and logs only (the ratio at scale: make bench)
    newest = Path(runs["again"]["run"])
    reused = newest / "example-gen" / "examples"
    assert reused.is_symlink() and Path(os.readlink(reused)).parent.parent != newest  # the first run's, in place
    # The served model is the candidate itself and stays served as version 1: nothing is copied again.
    assert runs["again"]["serving_pointer"]["version"] == 1 and runs["again"]["served"] == ["1", "CURRENT.json", "models.config"]


def test_the_rerun_of_a_run_that_pushed_reuses_its_evaluation(quadrant_history: dict) -> None:
    """Version 1 is served now, pushed from the same candidate: no baseline, so first's evaluation is again's."""
    runs = quadrant_history["runs"]
    again = _states(runs["again"])
    assert again["evaluate"] == "cached" and again["fingerprint"] == again["run-report"] == "ok", again
    reused, earlier = (Path(runs[name]["outputs"]["evaluation"]) for name in ("again", "first"))
    assert reused.is_symlink() and reused.resolve() == earlier.resolve()  # first's evaluation, in place
    assert runs["again"]["metrics"][GATED_AGAINST] == NO_BASELINE and runs["again"]["metrics"]["baseline"] is None
    assert runs["again"]["served"] == ["1", "CURRENT.json", "models.config"]  # nothing pushed again


def test_a_push_by_another_run_is_a_miss_for_the_evaluator(quadrant_history: dict) -> None:
    """The same candidate and examples as `edited`, but another model served: evaluated again, against it."""
    runs = quadrant_history["runs"]
    repointed = _states(runs["repointed"])
    assert all(repointed[step] == "cached" for step in ("example-gen", "transform", "train")), repointed
    assert repointed["evaluate"] == "ok"
    assert runs["repointed"]["metrics"][GATED_AGAINST] == quadrant_history["pushed_between"]
    assert runs["edited"]["metrics"][GATED_AGAINST] != quadrant_history["pushed_between"]


def _model(folder: Path, weights: bytes) -> str:
    """A model directory as far as the cache reads one: its SavedModel fingerprint and shardflow's model contract."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fingerprint.pb").write_bytes(weights)
    (folder / MODEL_INFO_NAME).write_text('{"task": "classification"}')
    return str(folder)


def test_the_evaluators_key_is_the_model_served_now_not_the_word_latest(tmp_path: Path) -> None:
    serving, cache = tmp_path / "serving", StepCache(tmp_path / "cache")
    arguments = {"model": Artifact("model", str(tmp_path / "candidate"), "system.Model"),
                 "examples": Artifact("examples", str(tmp_path / "examples"), "system.Dataset"),
                 "baseline": "latest", "serving_dir": str(serving), "options": []}

    def key(**changed: str) -> str:
        return cache.key("evaluate", {"executorLabel": "exec-evaluate"}, {}, {**arguments, **changed})

    nothing_served, no_baseline = key(), key(baseline="")
    push_model(_model(tmp_path / "candidate" / "model", b"weights c"), str(serving), gated_against=None)
    assert key() == nothing_served  # the candidate's own push: no baseline, as the step resolves it
    push_model(_model(tmp_path / "a", b"weights a"), str(serving), gated_against=None)
    served_a = key()
    assert served_a != nothing_served and key() == served_a  # the same served model: the same key
    push_model(_model(tmp_path / "b", b"weights a"), str(serving), gated_against=None)  # the same bytes elsewhere:
    assert key() == served_a  # already served (by content), no new version
    push_model(_model(tmp_path / "b", b"weights b"), str(serving), gated_against=None)  # retrained in place
    assert key() not in (served_a, nothing_served)
    given = _model(tmp_path / "given", b"weights g")  # a baseline named by path: keyed by its content too
    before = key(baseline=given)
    _model(tmp_path / "given", b"weights g, retrained in place")
    assert key(baseline=given) != before and key(baseline="") == no_baseline  # '': no model, whatever is served
    assert cache.keyed("evaluate", {}) and not cache.keyed("run-report", {})  # its IR has no caching: local only
    assert not StepCache(tmp_path, check_no_cache(("all",))).keyed("evaluate", {})


def test_editing_one_csv_row_runs_everything_from_example_gen_on(quadrant_history: dict) -> None:
    edited = _states(quadrant_history["runs"]["edited"])
    assert all(edited[step] == "ok" for step in CACHED + ALWAYS_RUN), edited


def test_the_printed_step_lines_agree_with_the_recorded_states(quadrant_history: dict) -> None:
    for name, run in quadrant_history["runs"].items():
        printed = {line.split()[0]: line.split()[1] for line in run["printed"]
                   if line.split() and line.split()[0] in run["steps"]}
        assert printed == _states(run), name
        on_disk = json.loads((Path(run["run"]) / "logs" / "steps.json").read_text())
        assert on_disk == run["steps"], name


def test_a_deleted_cached_output_is_a_miss_and_no_cache_names_cacheable_steps(tmp_path: Path) -> None:
    from kfp.dsl import Dataset

    cache = StepCache(tmp_path / "cache", check_no_cache(("train",)))
    assert cache.enabled_for("transform") and not cache.enabled_for("train")
    assert not StepCache(tmp_path, check_no_cache(("all",))).enabled_for("example-gen")
    output = tmp_path / "examples"
    output.mkdir()
    cache.store("example-gen", "k", {"examples": Dataset(uri=str(output), metadata={"n": 1}), "Output": "x"},
                tmp_path / "task")
    found = cache.lookup("example-gen", "k")
    assert found["Output"] == "x" and found["examples"].uri == str(output) and found["examples"].metadata == {"n": 1}
    output.rmdir()
    assert cache.lookup("example-gen", "k") is None
    with pytest.raises(ConfigError, match="'evaluate' is not a cached step"):
        check_no_cache(("evaluate",))


def test_the_compiled_pipeline_turns_caching_off_per_step(tmp_path: Path) -> None:
    from shardflow.pipelines.compiler import compile_pipeline

    def caching(no_cache: frozenset) -> dict[str, bool]:
        path = compile_pipeline(tmp_path / "p.yaml", GOLDEN_IMAGE, no_cache=no_cache)
        tasks = yaml.safe_load(Path(path).read_text())["components"]["comp-exit-handler-1"]["dag"]["tasks"]
        return {name: task.get("cachingOptions", {}).get("enableCache", False) for name, task in tasks.items()}

    assert {name for name, on in caching(frozenset()).items() if on} == set(CACHED)
    assert {name for name, on in caching(frozenset({"train"})).items() if on} == set(CACHED) - {"train"}
    assert not any(caching(frozenset({"all"})).values())

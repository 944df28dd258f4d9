"""Caching as KFP users expect: an identical `shardflow run` reuses every cacheable step's outputs in
place, an edited CSV row runs everything from ExampleGen on again, and `no_cache` turns reuse off per
step, locally and in the compiled pipeline.

The runs are the session's `quadrant_history` (tests/shared_fixtures.py), shared with
test_safe_retraining.py; the step states come from each run's record (logs/steps.json)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from shardflow.core.errors import ConfigError
from shardflow.pipelines.local_cache import StepCache, check_no_cache

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
    assert all(again[step] == "ok" for step in ALWAYS_RUN), again
    before, after = runs["first"]["bytes"], runs["again"]["bytes"]
    assert after - before < 0.15 * before, (before, after)  # reports and logs only (the ratio at scale: make bench)
    newest = Path(runs["again"]["run"])
    reused = newest / "example-gen" / "examples"
    assert reused.is_symlink() and Path(os.readlink(reused)).parent.parent != newest  # the first run's, in place
    # The same model is blessed against itself and stays served as version 1: nothing is copied again.
    assert runs["again"]["serving_pointer"]["version"] == 1 and runs["again"]["served"] == ["1", "CURRENT.json"]


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

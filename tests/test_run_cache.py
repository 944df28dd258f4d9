"""Caching as KFP users expect: an identical `shardflow run` reuses every cacheable step's outputs in
place, an edited CSV row runs everything from ExampleGen on again, and `no_cache` turns reuse off per
step, locally and in the compiled pipeline."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from shardflow.core.errors import ConfigError
from shardflow.pipelines.local_cache import StepCache, check_no_cache
from shardflow.pipelines.local_run import LocalRunConfig, run_locally

from helpers_images import write_quadrant_set

CACHED = ("example-gen", "validate", "transform", "tune", "train", "infra-validate")
ALWAYS_RUN = ("fingerprint", "evaluate", "run-report")
GOLDEN_IMAGE = "registry.example.com/ml/shardflow@sha256:" + "3f1c5e0a" * 8


def _write_data(root: Path) -> None:
    write_quadrant_set(root, 80, seed=0)


def _states(lines: list[str]) -> dict[str, str]:
    """step -> ok / cached / FAILED / skipped, from the run's one line per step."""
    return {line.split()[0]: line.split()[1] for line in lines if line.split() and line.split()[1] in
            ("ok", "cached", "FAILED", "skipped")}


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A first run, the identical rerun, and a rerun after one CSV row changed, into one run directory."""
    data, out = tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("out")
    _write_data(data)
    config = LocalRunConfig(index=(f"train={data}/train.csv", f"eval={data}/eval.csv"), data_root=str(data),
                            output=str(out), train_options=("--epochs", "3", "--batch-size", "16"),
                            eval_thresholds=("accuracy>=0.5",))
    said: dict[str, list[str]] = {"first": [], "again": [], "edited": []}
    sizes, summaries = {}, {}
    for name in ("first", "again", "edited"):
        if name == "edited":
            text = (data / "train.csv").read_text().splitlines()
            text[1] = text[1].rsplit(",", 1)[0] + ",3"  # one label changed
            (data / "train.csv").write_text("\n".join(text) + "\n")
        summary = run_locally(config, echo=said[name].append)
        assert summary["outcome"]["state"] == "SUCCEEDED", said[name]
        sizes[name] = _bytes(out)
        summaries[name] = {**summary, "served": sorted(p.name for p in (out / "serving").iterdir())}
    return {"out": out, "said": said, "sizes": sizes, "summaries": summaries}


def test_an_identical_rerun_reuses_every_cacheable_step_and_copies_nothing(three_runs: dict) -> None:
    first, again = _states(three_runs["said"]["first"]), _states(three_runs["said"]["again"])
    assert all(first[step] == "ok" for step in CACHED + ALWAYS_RUN), first
    assert all(again[step] == "cached" for step in CACHED), again
    assert all(again[step] == "ok" for step in ALWAYS_RUN), again
    before, after = three_runs["sizes"]["first"], three_runs["sizes"]["again"]
    assert after - before < 0.15 * before, (before, after)  # reports and logs only (the ratio at scale: make bench)
    newest = Path(three_runs["summaries"]["again"]["run"])
    reused = newest / "example-gen" / "examples"
    assert reused.is_symlink() and Path(os.readlink(reused)).parent.parent != newest  # the first run's, in place
    # The same model is blessed against itself and stays served as version 1: nothing is copied again.
    pointer = three_runs["summaries"]["again"]["serving_pointer"]
    assert pointer["version"] == 1 and three_runs["summaries"]["again"]["served"] == ["1", "CURRENT.json"]


def test_editing_one_csv_row_runs_everything_from_example_gen_on(three_runs: dict) -> None:
    edited = _states(three_runs["said"]["edited"])
    assert all(edited[step] == "ok" for step in CACHED + ALWAYS_RUN), edited


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

"""The commit a run was made with: read from a git repository the test makes and checked against `git rev-parse`
run by the test; kept in the run's own files, so a later send tags the run with it, not with the sender's
checkout; and the parent run's headline (metrics, params, dataset inputs) read from a run's files."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers_tracking import FINGERPRINT, write_run
from shardflow.core.source_state import source_state
from shardflow.tracking.records import read_run

JOB = "shardflow-2026-12-07-10-00-00-000000"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env={
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
        "HOME": str(repo), "PATH": "/usr/bin:/bin:/usr/local/bin"})
    return done.stdout.strip()


def test_the_commit_and_a_dirty_tree_of_a_repository_the_test_makes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "pkg/mod.py")
    _git(repo, "commit", "-q", "-m", "one")
    first = _git(repo, "rev-parse", "HEAD")
    assert source_state(repo / "pkg" / "mod.py") == {"commit": first, "dirty": False}
    (repo / "scratch.txt").write_text("untracked: not the source that ran\n")
    assert source_state(repo / "pkg") == {"commit": first, "dirty": False}
    (repo / "pkg" / "mod.py").write_text("x = 2\n")
    assert source_state(repo / "pkg") == {"commit": first, "dirty": True}
    _git(repo, "commit", "-q", "-am", "two")
    second = _git(repo, "rev-parse", "HEAD")
    assert second != first and source_state(repo / "pkg") == {"commit": second, "dirty": False}
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert source_state(outside) == {}


def test_a_run_is_tagged_with_the_commit_it_recorded_not_the_senders(tmp_path: Path) -> None:
    recorded = {"commit": "0" * 40, "dirty": True}
    run = write_run(tmp_path / "digits", JOB, blessed=True, accuracy=0.8, pushed=1, commit=recorded)
    tags = read_run(run).parent.tags
    assert (tags["mlflow.source.git.commit"], tags["shardflow.source.dirty"]) == ("0" * 40, "true")
    (run / "logs" / "source.json").unlink()  # a run from before the record, or from an image: no guess
    assert not {"mlflow.source.git.commit", "shardflow.source.dirty"} & set(read_run(run).parent.tags)


def test_the_parent_carries_the_headline_and_the_data(tmp_path: Path) -> None:
    out = tmp_path / "digits"
    parent = read_run(write_run(out, JOB, blessed=True, accuracy=0.8, pushed=3, epochs=4)).parent
    assert {m.key: m.value for m in parent.metrics} == {"accuracy": 0.8, "accuracy.lower": 0.8 - 0.1,
                                                        "accuracy.upper": 0.8 + 0.05, "blessed": 1.0,
                                                        "served_version": 3.0}
    assert parent.params["train.epochs"] == "4" and "train.output" not in parent.params  # a run's folder: not compared
    assert (parent.tags["shardflow.served_version"], parent.tags["shardflow.blessed"]) == ("3", "true")
    data = out.resolve() / "data"
    assert sorted((d.name, d.context, json.loads(d.source)["uri"], d.digest) for d in parent.datasets) == [
        ("eval.csv", "eval", str(data / "eval.csv"), FINGERPRINT[:36]),
        ("train.csv", "train", str(data / "train.csv"), FINGERPRINT[:36])]
    assert json.loads(parent.datasets[0].profile)["fingerprint"] == FINGERPRINT

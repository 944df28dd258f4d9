"""`shardflow find-label-issues` on the digits with 5 % of the train labels flipped at known CSV rows.

One run (3 folds, LeNet, 10 epochs of batch 32, --keep-models) per module; the tests read what it wrote: the
ranked list names the flipped rows (precision and recall asserted), each fold model trained on the
other two folds only (its step count says so), and each issue's fold is the one the assignment gives.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers_processes import wait_for
from shardflow.cli import main
from shardflow.core.folds import fold_assignment
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen

FLIPPED_FRACTION = 0.05
EPOCHS, BATCH = 10, 32
# Measured on this set (flip draw 5, --deterministic): precision 0.90, recall 0.85 (68 listed); at batch 64
# precision was 0.85. Issue 32's targets: 0.8 and 0.7.
MIN_PRECISION, MIN_RECALL = 0.8, 0.7


def _flip_labels(source: Path, target: Path, seed: int) -> dict[int, tuple[int, int]]:
    """Copies the index with FLIPPED_FRACTION of its labels changed to another class: {CSV row: (true, given)}."""
    with open(source, newline="") as stream:
        header, *rows = list(csv.reader(stream))
    rng = np.random.default_rng(seed)
    flipped = {}
    for i in rng.choice(len(rows), round(FLIPPED_FRACTION * len(rows)), replace=False).tolist():
        true = int(rows[i][1])
        rows[i][1] = str((true + int(rng.integers(1, 10))) % 10)
        flipped[i + 1] = (true, int(rows[i][1]))  # data rows are numbered from 1, as rejects.jsonl numbers them
    with open(target, "w", newline="") as stream:
        csv.writer(stream).writerows([header, *rows])
    return flipped


@pytest.fixture(scope="module")
def found(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("label-issues")
    digits = demo_data / "digits"
    flipped = _flip_labels(digits / "train.csv", folder / "train.csv", seed=5)
    examples, out = folder / "examples", folder / "issues"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(folder / "train.csv"), "train"),
                                          IndexSpec(str(digits / "eval.csv"), "eval")),
                                 data_root=str(digits), output=str(examples), min_shards=2, near_duplicates="off"),
                echo=lambda _: None)
    assert main(["find-label-issues", "--examples", str(examples), "--output", str(out), "--folds", "3",
                 "--epochs", str(EPOCHS), "--batch-size", str(BATCH), "--input-probe-batches", "1",
                 "--deterministic", "--keep-models"]) == 0  # one reading order: the figures below repeat
    issues = [json.loads(line) for line in (out / "label_issues.jsonl").read_text().splitlines()]
    return {"out": out, "index": str(folder / "train.csv"), "flipped": flipped, "issues": issues,
            "summary": json.loads((out / "label_issues.json").read_text())}


def test_the_flipped_rows_are_listed_by_csv_row(found: dict[str, Any]) -> None:
    issues, flipped = found["issues"], found["flipped"]
    assert found["summary"]["rows_named"] is True and found["summary"]["note"] is None
    assert [issue["rank"] for issue in issues] == list(range(1, len(issues) + 1))
    assert {issue["index"] for issue in issues} == {found["index"]}
    listed = {issue["row"] for issue in issues}
    hits = listed & set(flipped)
    precision, recall = len(hits) / len(listed), len(hits) / len(flipped)
    assert precision >= MIN_PRECISION and recall >= MIN_RECALL, (precision, recall)
    for issue in issues:
        assert issue["split"] == "train" and issue["path"].startswith("image/train_")
        if issue["row"] in flipped:
            true, given = flipped[issue["row"]]
            assert issue["given"] == str(given) and issue["given_id"] == given
    right = sum(i["suggested_id"] == flipped[i["row"]][0] for i in issues if i["row"] in flipped)
    assert right >= 0.8 * len(hits)  # the suggested label is mostly the true one
    scores = [issue["score"] for issue in issues]
    assert scores == sorted(scores) and all(0 <= s < 0.5 for s in scores)  # most likely first


def test_the_summary_reconciles_with_the_list_and_the_folds(found: dict[str, Any]) -> None:
    summary, issues = found["summary"], found["issues"]
    examples = summary["split_examples"]
    assert summary["folds"] == 3 and summary["issues"] == len(issues) and summary["rule"] == "noise_rate"
    assert sum(summary["examples_per_fold"]) == examples and np.ptp(summary["examples_per_fold"]) <= 1
    assert summary["out_of_fold_accuracy"] >= 0.85
    assignment = fold_assignment(examples, 3, seed=0)
    assert all(issue["fold"] == assignment[issue["position"]] for issue in issues)


def test_each_fold_model_trained_on_the_other_folds_only(found: dict[str, Any]) -> None:
    examples = found["summary"]["split_examples"]
    for run in found["summary"]["fold_runs"]:
        trained_on = examples - run["held_out"]
        assert run["trained_on"] == trained_on
        folder = found["out"] / "folds" / str(run["fold"])
        training = json.loads((folder / "train" / "training.json").read_text())
        assert training["optimizer_steps"] == EPOCHS * math.ceil(trained_on / BATCH)  # steps count the folds trained on
        assert run["model"] == training["model"] == str(folder / "train" / "model")
        options = json.loads((folder / "train" / "model" / "shardflow_model.json").read_text())["options"]
        assert options["train_folds"] == {"count": 3, "folds": [f for f in range(3) if f != run["fold"]], "seed": 0}
        predicted = json.loads((folder / "predictions" / "predict.json").read_text())
        assert predicted["predicted"] == run["held_out"]


def test_a_killed_run_keeps_its_finished_folds_and_lists_what_an_uninterrupted_run_lists(found: dict[str, Any],
                                                                                       tmp_path: Path) -> None:
    """2 folds (a third trained one more fold in each of the whole run and the rerun, and proved nothing more):
    the killed run finishes fold 1 and is killed in fold 2; the rerun keeps fold 1 and trains fold 2 only."""
    examples = found["summary"]["examples"]

    def command(out: Path) -> list[str]:
        return ["find-label-issues", "--examples", examples, "--output", str(out), "--folds", "2", "--steps", "20",
                "--input-probe-batches", "1", "--eval-split", "", "--deterministic"]

    assert main(command(tmp_path / "whole")) == 0
    out = tmp_path / "killed"
    first = subprocess.Popen([sys.executable, "-m", "shardflow", *command(out)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    wait_for(lambda: (out / "fold_results" / "0.npz").is_file(), first, 600, "fold 1's kept result")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert not (out / "label_issues.json").exists()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(command(out)) == 0
    assert "fold 1/2: kept from the earlier, unfinished run" in printed.getvalue()
    assert "fold 2/2: kept" not in printed.getvalue()  # the fold the kill interrupted is trained again
    assert (out / "label_issues.jsonl").read_text() == (tmp_path / "whole" / "label_issues.jsonl").read_text()
    assert not (out / "fold_results").exists()  # complete: a later run starts anew


def test_a_rerun_into_the_output_replaces_it_and_drops_the_kept_models(found: dict[str, Any]) -> None:
    """Runs last in this module (it rewrites the shared output): 2 folds, a few steps, no --keep-models."""
    out = found["out"]
    examples = found["summary"]["examples"]
    assert main(["find-label-issues", "--examples", examples, "--output", str(out), "--folds", "2", "--steps", "3",
                 "--input-probe-batches", "1", "--eval-split", ""]) == 0
    summary = json.loads((out / "label_issues.json").read_text())
    assert summary["folds"] == 2 and len(summary["examples_per_fold"]) == 2 and summary["models"] is None
    assert sorted(p.name for p in out.iterdir()) == ["label_issues.json", "label_issues.jsonl"]
    lines = (out / "label_issues.jsonl").read_text().splitlines()
    assert len(lines) == summary["issues"] and all(json.loads(line)["fold"] in (0, 1) for line in lines)

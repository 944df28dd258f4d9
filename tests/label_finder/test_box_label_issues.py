"""`shardflow find-label-issues` on boxes: the demo shapes with planted faults (boxes removed, classes swapped,
boxes shifted by half their size) in the train index at known rows.

One run per module (3 folds of the tiny CenterNet at 64 px, the Trainer's defaults); the tests read what it wrote: the ranked list
finds the planted faults (recall and precision asserted on every issue it lists), names each by index file,
the box's own row and path, draws the listed images, and its summary reconciles with the list and the folds.
The 1,000-image case (30 faults) is the benchmark's: benchmarks/box_label_issues_bench.py.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from benchmarks.box_faults import finds, score_box_issues
from benchmarks.box_faults import plant_box_faults
from shardflow.cli import main
from shardflow.demo_boxes import write_boxes
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen

pytestmark = pytest.mark.pipeline

IMAGES, PER_KIND = 500, 5  # 400 train images, 15 faults
EPOCHS, SIDE, PICTURES = 10, 64, 12
# Measured on this set with the detector's defaults (batches of 4, the cosine, the flip; --deterministic): the top 30
# issues found 12 of the 15 faults (recall 0.80, precision 0.40), the whole list (94 issues) the same 12; fold models
# of held-out box recall 0.67-0.70, trained on 267 images each (97 s for the module on a loaded machine). Before the
# flip and the batch of 4, 24 epochs of 16 found 9 in 306 s. Issue 65's target (recall 0.8 at precision 0.5 on 1,000
# images) is the benchmark's (box_label_issues_bench.py).
MIN_RECALL, MIN_PRECISION = 0.65, 0.32  # among the top 2 x faults issues
MIN_LISTED_RECALL = 0.65
MIN_FOLD_BOX_RECALL = 0.55


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("box-issues")
    data = folder / "boxes"
    write_boxes(data, count=IMAGES)
    faults = plant_box_faults(data / "train.csv", data / "train-faults.csv", per_kind=PER_KIND)
    examples, out = folder / "examples", folder / "issues"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(data / "train-faults.csv"), "train"),
                                          IndexSpec(str(data / "eval.csv"), "eval")),
                                 data_root=str(data), output=str(examples), resize=(("*", (SIDE, SIDE)),),
                                 near_duplicates="off"), echo=lambda _: None)
    assert main(["find-label-issues", "--examples", str(examples), "--output", str(out), "--folds", "3",
                 "--epochs", str(EPOCHS), "--eval-split", "",
                 "--input-probe-batches", "1", "--deterministic", "--pictures", str(PICTURES)]) == 0
    issues = [json.loads(line) for line in (out / "label_issues.jsonl").read_text().splitlines()]
    return {"out": out, "index": str(data / "train-faults.csv"), "faults": faults, "issues": issues,
            "rows": (data / "train-faults.csv").read_text().splitlines(),
            "summary": json.loads((out / "label_issues.json").read_text())}


def test_the_planted_faults_are_listed_first(found: dict[str, Any]) -> None:
    issues, faults = found["issues"], found["faults"]
    top = score_box_issues(issues[:2 * len(faults)], faults)  # the issues considered: twice the faults planted
    listed = score_box_issues(issues, faults)
    assert top["recall"] >= MIN_RECALL and top["precision"] >= MIN_PRECISION, (top, listed)
    assert listed["recall"] >= MIN_LISTED_RECALL, listed
    assert [issue["rank"] for issue in issues] == list(range(1, len(issues) + 1))
    scores = [issue["score"] for issue in issues]
    assert scores == sorted(scores) and all(0 <= s < 1 for s in scores)  # most likely first
    swapped = [(i, f) for f in faults if f["kind"] == "swapped" for i in issues if finds(i, f)]
    assert all(i["given"] == f["given"] and i["suggested"] != f["given"] for i, f in swapped)
    assert sum(i["suggested"] == f["true"] for i, f in swapped) >= 0.8 * len(swapped)  # mostly the true class


def test_each_issue_names_its_index_file_the_box_s_row_and_the_image(found: dict[str, Any]) -> None:
    rows = found["rows"]
    assert found["summary"]["rows_named"] is True and found["summary"]["note"] is None
    for issue in found["issues"]:
        assert issue["index"] == found["index"] and issue["split"] == "train"
        line = rows[issue["row"] - 1].split(",")
        assert line[0] == issue["path"] and rows[issue["image_row"] - 1].startswith(issue["path"] + ",")
        if issue["issue"] == "overlooked":
            assert issue["box"] is None and issue["given"] is None and issue["suggested_box"] is not None
            assert issue["row"] == issue["image_row"]
        else:  # the given box's own row: its class and corners as the CSV has them
            ymin, xmin, ymax, xmax = issue["given_box"]
            assert line[1] == issue["given"]
            assert [float(line[i]) for i in (2, 3, 6, 7)] == pytest.approx([xmin, ymin, xmax, ymax], abs=1e-6)


def test_the_listed_images_are_drawn(found: dict[str, Any]) -> None:
    issues, out = found["issues"], found["out"]
    images = list(dict.fromkeys(issue["position"] for issue in issues))
    assert found["summary"]["pictures"] == min(PICTURES, len(images))
    drawn = sorted(p.name for p in (out / "pictures").iterdir())
    assert len(drawn) == found["summary"]["pictures"]
    for position in images[:PICTURES]:
        mine = [issue for issue in issues if issue["position"] == position]
        assert {issue["picture"] for issue in mine} == {f"pictures/{mine[0]['rank']:05d}.png"}
    assert all(issue["picture"] is None for issue in issues if issue["position"] not in images[:PICTURES])
    with Image.open(out / "pictures" / drawn[0]) as picture:
        assert picture.format == "PNG" and picture.width >= 200


def test_the_summary_reconciles_with_the_list_and_the_folds(found: dict[str, Any]) -> None:
    summary, issues = found["summary"], found["issues"]
    assert summary["task"] == "detection" and summary["issues"] == len(issues)
    assert summary["issues_by_kind"] == {kind: sum(i["issue"] == kind for i in issues)
                                         for kind in ("overlooked", "swapped", "badly_located")}
    assert summary["images_listed"] == len({i["position"] for i in issues})
    assert sum(summary["examples_per_fold"]) == summary["split_examples"] == IMAGES * 4 // 5
    assert all(run["held_out_box_recall"] >= MIN_FOLD_BOX_RECALL for run in summary["fold_runs"])
    assert set(summary["class_thresholds"]) == {"disc", "square", "triangle"}
    assert sorted(p.name for p in found["out"].iterdir()) == ["label_issues.json", "label_issues.jsonl", "pictures"]

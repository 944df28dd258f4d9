"""find-label-issues on boxes: the same K fold models and out-of-fold predictions as for class labels
(fold_runs.fold_predictions), judged by core/box_issues.py instead of confident learning's joint.

Each fold's model is a Trainer run (a detector on the box target) on the other folds; predict writes its
boxes for the held-out fold down to SCORE_FLOOR (box_reading.py). Every image's given boxes (read from the
raw examples, in position order) are then judged against those detections: overlooked objects, swapped
classes, badly located boxes, ranked most likely first, each named by index file and row (the box's own row,
read again with ExampleGen's reader) and drawn in `pictures/<rank>.png` (the first `config.pictures` listed
images: the given boxes solid, each issue's suggested box dashed; tasks/detection/plots.py draws them).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import numpy as np

from .. import __version__
from ..core import storage
from ..core.box_issues import Annotation, BoxIssue, class_thresholds, find_box_issues
from ..core.output_dir import OutputDir
from ..trainer.task import TrainingTask
from .box_reading import SCORE_FLOOR, box_recall, box_source_rows, given_annotations, per_image, read_detections
from .config import FOLDS_DIR, ISSUES_NAME, PICTURES_DIR, LabelFinderConfig
from .fold_runs import FoldReading, fold_predictions, kept_folds, output_location
from .out_of_fold import row_descriptions, write_jsonl

Echo = Callable[[str], None]
# The fold models' box loss unless --box-loss is given: L1 alone, not the detector's GIoU. They are asked to find
# objects, not to place boxes to AP75: with GIoU, tests/label_finder/test_box_label_issues.py's top 30 held 7 of
# its 15 planted faults, with L1 12 (10 epochs of 4; GIoU's pull on the sizes slows the heat map's early epochs).
FOLD_BOX_LOSS = "l1"


def run_boxes(config: LabelFinderConfig, task: TrainingTask, echo: Echo, started: float) -> dict[str, Any]:
    config = dataclasses.replace(config, train=config.train.replaced(box_loss=config.train.model.box_loss
                                                                     or FOLD_BOX_LOSS))
    split = config.train.input.train_split
    examples = task.raw_manifest.splits[split].num_examples
    given = given_annotations(task.raw_dir, task.raw_manifest, split)
    out = output_location(config.output)
    kept = kept_folds(config, task, out)
    reading = FoldReading({"min_score": SCORE_FLOOR}, read_detections,
                          lambda positions, found: ("held_out_box_recall",
                                                    box_recall(given, positions, found, config.box_iou)))
    with out.staged_run() as staging:
        work = storage.join(out.root if config.keep_models else staging, FOLDS_DIR)
        fold_of, parts, folds = np.full(examples, -1, np.int64), [], []
        for fold in range(config.folds):
            positions, found, record = fold_predictions(config, task, fold, storage.join(work, str(fold)), reading,
                                                        echo, kept)
            fold_of[positions] = fold
            parts.append(found)
            folds.append(record)
        found = np.concatenate(parts)
        detections = per_image(found, examples)
        thresholds = class_thresholds(given, detections, config.box_iou)
        issues = find_box_issues(given, detections, thresholds, config.box_iou)
        records, note = _records(task, split, issues, given, fold_of)
        pictures = _draw(config, task, split, records, given, out)
        write_jsonl(out.staged(ISSUES_NAME), records)
        summary = _summary(config, task, examples, folds, thresholds, records, given, note, started)
        summary["pictures"] = pictures
        out.complete([ISSUES_NAME, PICTURES_DIR], summary)
    kept.clear()
    counts = ", ".join(f"{n} {kind}" for kind, n in summary["issues_by_kind"].items())
    echo(f"find-label-issues: {len(records):,} box issues ({counts}) in {summary['images_listed']:,} of "
         f"{examples:,} {split} images ({config.folds} folds); {storage.join(config.output, ISSUES_NAME)}")
    return summary


def _records(task: TrainingTask, split: str, issues: list[BoxIssue], given: list[Annotation],
             fold_of: np.ndarray) -> tuple[list[dict[str, Any]], str | None]:
    """The list's lines: each issue named by its source (index, the box's row, path) and its classes by name."""
    images = np.array([issue.image for issue in issues], np.int64)
    rows, note = row_descriptions(task.raw_dir, task.raw_manifest, split, images)
    firsts: dict[str, set[int]] = {}
    for row in rows:
        if row["index"] is not None:
            firsts.setdefault(row["index"], set()).add(row["row"])
    box_rows, rows_note = box_source_rows(task.raw_manifest, firsts) if firsts else ({}, None)
    names = {int(i): name for name, i in (task.label_map or {}).items()}
    records = []
    for rank, (issue, row) in enumerate(zip(issues, rows), 1):
        source = box_rows.get((row["index"], row["row"]))
        known = issue.box >= 0 and source is not None and len(source) == len(given[issue.image].classes)
        records.append({"rank": rank, **row, "row": source[issue.box] if known else row["row"],
                        "image_row": row["row"], "position": issue.image, "issue": issue.kind,
                        "box": issue.box if issue.box >= 0 else None,
                        "given": names.get(issue.given_class) if issue.given_class is not None else None,
                        "given_id": issue.given_class,
                        "suggested": names.get(issue.suggested_class) if issue.suggested_class is not None else None,
                        "suggested_id": issue.suggested_class,
                        "given_box": _rounded(issue.given_box), "suggested_box": _rounded(issue.suggested_box),
                        "score": round(issue.quality, 6), "fold": int(fold_of[issue.image]), "picture": None})
    return records, note or rows_note


def _rounded(box: tuple[float, ...] | None) -> list[float] | None:
    return None if box is None else [round(v, 6) for v in box]


def _draw(config: LabelFinderConfig, task: TrainingTask, split: str, records: list[dict[str, Any]],
          given: list[Annotation], out: OutputDir) -> int:
    """A PNG per listed image, the first `config.pictures` of them, named by the image's first rank; sets each
    record's `picture`. The number written."""
    from ..tasks.detection.plots import detections_png  # next seam: box issues move into tasks/detection
    from ..evaluator.issue_images import panels

    shown = list(dict.fromkeys(r["position"] for r in records))[:config.pictures]
    if not shown:
        return 0
    storage.makedirs(out.staged(PICTURES_DIR))
    files = task.raw_manifest.shard_paths(task.raw_dir, split)
    pixels = panels(task.raw_manifest, files, split, shown, None)
    labels = task.label_map  # a detection task's: the one rule of ids to class indexes (box_schema.LabelMap)
    assert labels is not None
    for position, (image, _) in zip(shown, pixels):
        mine = [r for r in records if r["position"] == position]
        name = f"{PICTURES_DIR}/{mine[0]['rank']:05d}.png"
        truth = given[position]
        suggested = [r for r in mine if r["suggested_box"] is not None]
        png = detections_png([image], [truth.boxes], [labels.training_ids(truth.classes)],
                             [np.array([r["suggested_box"] for r in suggested]).reshape(-1, 4)],
                             [np.array([1.0 - r["score"] for r in suggested])],
                             [labels.training_ids([r["suggested_id"] for r in suggested])],
                             task.class_names, max_images=1, score_threshold=0.0)
        storage.write_bytes(out.staged(name), png)
        for record in mine:
            record["picture"] = name
    return len(shown)


def _summary(config: LabelFinderConfig, task: TrainingTask, examples: int, folds: list[dict[str, Any]],
             thresholds: dict[int, float], records: list[dict[str, Any]], given: list[Annotation], note: str | None,
             started: float) -> dict[str, Any]:
    names = {int(i): name for name, i in (task.label_map or {}).items()}
    kinds = {kind: sum(r["issue"] == kind for r in records) for kind in ("overlooked", "swapped", "badly_located")}
    return {"component": "label_finder", "shardflow_version": __version__, "task": "detection",
            "examples": config.train.input.examples, "raw_examples": task.raw_dir,
            "split": config.train.input.train_split, "split_examples": examples, "label": task.target,
            "label_map": dict(task.label_map or {}), "given_boxes": int(sum(len(g.classes) for g in given)),
            "crowd_boxes": int(sum(int(np.sum(g.crowd)) for g in given)), "folds": config.folds,
            "fold_seed": config.seed, "examples_per_fold": [f["held_out"] for f in folds],
            "box_iou": config.box_iou, "score_floor": SCORE_FLOOR,
            "class_thresholds": {names.get(k, str(k)): round(v, 6) for k, v in sorted(thresholds.items())},
            "issues": len(records), "issues_by_kind": kinds,
            "images_listed": len({r["position"] for r in records}), "issues_file": ISSUES_NAME,
            "rows_named": note is None, "note": note, "fold_runs": folds,
            "models": FOLDS_DIR + "/" if config.keep_models else None, "seconds": round(time.time() - started, 1)}

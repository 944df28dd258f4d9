"""`run(config)`: the train split's label issues, from out-of-fold probabilities and confident learning.

The split's examples are dealt to K folds (core/folds.py, by position, seeded by the Trainer's seed).
For each fold k: a Trainer run on every other fold (`InputOptions.train_folds`), then predict over
fold k alone with that model (`PredictConfig.folds`, on the raw examples the model serves on). So
every example gets class probabilities from a model that never saw it, and confident learning
(core/label_issues.py) ranks the examples whose given label those probabilities contradict.

Outputs in `config.output` (an `OutputDir`; the summary is written last):
`label_issues.jsonl` (the issues, most likely first), `label_issues.json` (the summary), and with
`keep_models` `folds/<k>/` (`train/`: the fold's Trainer output, its model in `train/model`;
`predictions/`: predict's output), written in place as each fold finishes (each whole under its own
marker, so a failed run leaves the folds it finished; a rerun removes them first). Without it the
fold work lives in the staging area, one fold at a time: disk holds one fold model, never K; and
each finished fold's probabilities are kept in `fold_results/` (kept_folds.py), so a killed run,
rerun with the same options, goes on with the folds it had not finished (fold_runs.py). A box target
goes to boxes.py: the same folds, judged by core/box_issues.py.

    from shardflow.label_finder import LabelFinderConfig, run
    train = TrainerConfig(input=InputOptions(examples="runs/examples"), fit=FitOptions(epochs=10),
                          export=ExportOptions(output="x"))
    summary = run(LabelFinderConfig(train=train, output="runs/label-issues"))
    summary["issues"], summary["out_of_fold_accuracy"]
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from .. import __version__
from ..core import storage
from ..core.box_schema import DETECTION_TASK
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.label_issues import find_label_issues
from ..trainer.task import TrainingTask, resolve_task
from .config import FOLDS_DIR, ISSUES_NAME, LabelFinderConfig
from .fold_runs import FoldReading, fold_predictions, kept_folds, output_location
from .out_of_fold import OutOfFoldError, given_labels, read_predictions, row_descriptions, write_jsonl

Echo = Callable[[str], None]


def run(config: LabelFinderConfig, echo: Echo = print) -> dict[str, Any]:
    config.check_inputs()
    started = time.time()
    enable_tensorflow_filesystems(loc for loc in (config.train.input.examples, config.train.input.transform,
                                                  config.output) if loc)
    task = resolve_task(config.train.input)
    if task.kind == DETECTION_TASK:
        from .boxes import run_boxes  # TensorFlow's example parser, the Evaluator's drawing: only for boxes

        return run_boxes(config, task, echo, started)
    split = config.train.input.train_split
    examples = task.raw_manifest.splits[split].num_examples
    labels = given_labels(task.raw_dir, split, task.target, task.label_vocabulary)
    _check_labels(labels, examples, task)
    out = output_location(config.output)
    kept = kept_folds(config, task, out)
    with out.staged_run() as staging:
        # Kept fold runs are written in place (each whole under its own marker; a rerun removes them first).
        work = storage.join(out.root if config.keep_models else staging, FOLDS_DIR)
        probabilities = np.zeros((examples, task.num_classes))
        fold_of = np.full(examples, -1, np.int64)
        reading = class_reading(task, labels)
        folds = []
        for fold in range(config.folds):
            positions, found, record = fold_predictions(config, task, fold, storage.join(work, str(fold)), reading,
                                                        echo, kept)
            probabilities[positions], fold_of[positions] = found, fold
            folds.append(record)
        issues = find_label_issues(labels, probabilities, rule=config.rule)
        rows, note = row_descriptions(task.raw_dir, task.raw_manifest, split, issues.rows)
        names = task.class_names
        # The Evaluator's list's fields (evaluator/label_list.py), and the fold whose model judged the row.
        records = [{"rank": rank, **row, "position": p, "given": names[labels[p]], "given_id": int(labels[p]),
                    "suggested": names[s], "suggested_id": s, "score": round(score, 6), "fold": int(fold_of[p])}
                   for rank, (row, p, s, score) in enumerate(zip(rows, issues.rows.tolist(), issues.suggested.tolist(),
                                                                 issues.self_confidence.tolist()), 1)]
        write_jsonl(out.staged(ISSUES_NAME), records)
        accuracy = float(np.mean(probabilities.argmax(axis=1) == labels))
        summary = _summary(config, task, examples, folds, accuracy, len(records), note, started)
        out.complete([ISSUES_NAME], summary)
    kept.clear()  # complete: a later run starts anew
    echo(f"find-label-issues: {len(records):,} label issues among {examples:,} {split} examples "
         f"(out-of-fold accuracy {accuracy:.4f}, {config.folds} folds, rule {config.rule}); "
         f"{storage.join(config.output, ISSUES_NAME)}")
    return summary


def _check_labels(labels: np.ndarray, examples: int, task: TrainingTask) -> None:
    if len(labels) != examples:
        raise OutOfFoldError(f"{task.raw_dir}: read {len(labels)} labels, the manifest lists {examples} examples")
    outside = labels[(labels < 0) | (labels >= task.num_classes)]
    if len(outside):
        raise OutOfFoldError(f"label {task.target!r}: class id {int(outside[0])} is outside the model's "
                             f"{task.num_classes} classes")


def class_reading(task: TrainingTask, labels: np.ndarray) -> FoldReading:
    """A classifier's: every class's probability per example (parquet, top_k = C), judged by accuracy."""
    return FoldReading({"format": "parquet", "top_k": task.num_classes},
                       lambda folder, starts: read_predictions(folder, starts, task.num_classes),
                       lambda positions, found: ("held_out_accuracy",
                                                 float(np.mean(found.argmax(axis=1) == labels[positions]))))


def _summary(config: LabelFinderConfig, task: TrainingTask, examples: int, folds: list[dict[str, Any]],
             accuracy: float, issues: int, note: str | None, started: float) -> dict[str, Any]:
    return {"component": "label_finder", "shardflow_version": __version__, "examples": config.train.input.examples,
            "raw_examples": task.raw_dir, "split": config.train.input.train_split, "split_examples": examples,
            "label": task.target, "class_names": task.class_names, "folds": config.folds, "fold_seed": config.seed,
            "examples_per_fold": [f["held_out"] for f in folds], "out_of_fold_accuracy": round(accuracy, 6),
            "rule": config.rule, "issues": issues, "issue_fraction": round(issues / max(examples, 1), 6),
            "issues_file": ISSUES_NAME, "rows_named": note is None, "note": note, "fold_runs": folds,
            "models": FOLDS_DIR + "/" if config.keep_models else None, "seconds": round(time.time() - started, 1)}

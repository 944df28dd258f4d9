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
rerun with the same options, goes on with the folds it had not finished.

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
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.label_issues import find_label_issues
from ..core.output_dir import OutputDir
from ..predict import PredictConfig
from ..predict import run as predict
from ..trainer import run as train
from ..trainer.task import TrainingTask, resolve_task
from ..core.manifest import MANIFEST_NAME
from .config import FOLDS_DIR, ISSUES_NAME, SUMMARY_NAME, LabelFinderConfig
from .kept_folds import RESULTS_DIR, KeptFolds, fold_key
from .out_of_fold import OutOfFoldError, given_labels, read_predictions, row_descriptions, shard_starts, write_jsonl

Echo = Callable[[str], None]


def output_location(root: str) -> OutputDir:
    """find-label-issues' output: `label_issues.json` marks it complete."""
    return OutputDir(root, marker=SUMMARY_NAME, owned=(ISSUES_NAME,), unstaged=(FOLDS_DIR,))


def run(config: LabelFinderConfig, echo: Echo = print) -> dict[str, Any]:
    config.check_inputs()
    started = time.time()
    enable_tensorflow_filesystems(loc for loc in (config.train.input.examples, config.train.input.transform,
                                                  config.output) if loc)
    task = resolve_task(config.train.input)
    split = config.train.input.train_split
    examples = task.raw_manifest.splits[split].num_examples
    labels = given_labels(task.raw_dir, split, task.target, task.label_vocabulary)
    _check_labels(labels, examples, task)
    out = output_location(config.output)
    kept = _kept_folds(config, task, out)
    with out.staged_run() as staging:
        # Kept fold runs are written in place (each whole under its own marker; a rerun removes them first).
        work = storage.join(out.root if config.keep_models else staging, FOLDS_DIR)
        probabilities = np.zeros((examples, task.num_classes))
        fold_of = np.full(examples, -1, np.int64)
        folds = [_fold(config, task, fold, storage.join(work, str(fold)), probabilities, fold_of, labels, echo, kept)
                 for fold in range(config.folds)]
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


def _kept_folds(config: LabelFinderConfig, task: TrainingTask, out: OutputDir) -> KeptFolds:
    """The folds an earlier, unfinished run finished (none after a complete run, which a rerun redoes)."""
    manifests = b"".join(storage.read_bytes(storage.join(root, MANIFEST_NAME))
                         for root in dict.fromkeys((task.raw_dir, task.train_dir)))
    kept = KeptFolds(storage.join(out.root, RESULTS_DIR), [fold_key(config, k, manifests) for k in range(config.folds)])
    if out.is_complete():
        kept.clear()
    return kept


def _check_labels(labels: np.ndarray, examples: int, task: TrainingTask) -> None:
    if len(labels) != examples:
        raise OutOfFoldError(f"{task.raw_dir}: read {len(labels)} labels, the manifest lists {examples} examples")
    outside = labels[(labels < 0) | (labels >= task.num_classes)]
    if len(outside):
        raise OutOfFoldError(f"label {task.target!r}: class id {int(outside[0])} is outside the model's "
                             f"{task.num_classes} classes")


def _fold(config: LabelFinderConfig, task: TrainingTask, fold: int, folder: str, probabilities: np.ndarray,
          fold_of: np.ndarray, labels: np.ndarray, echo: Echo, kept: KeptFolds) -> dict[str, Any]:
    """Trains fold `fold`'s model, predicts its held-out examples into `probabilities`; the fold's record.

    A fold an earlier, killed run finished with the same options is taken as it was (its model is not
    kept then: with keep_models every fold is trained, as its model must be published)."""
    prefix = f"find-label-issues: fold {fold + 1}/{config.folds}: "
    done = None if config.keep_models else kept.load(fold)
    if done is not None:
        positions, found, record = done
        probabilities[positions], fold_of[positions] = found, fold
        echo(f"{prefix}kept from the earlier, unfinished run ({kept.folder})")
        return record
    training = train(config.fold_trainer_config(fold, storage.join(folder, "train")),
                     echo=lambda line: echo(prefix + line))
    split = config.train.input.train_split
    predict_dir = storage.join(folder, "predictions")
    predict(PredictConfig(model=training["model"], output=predict_dir, examples=task.raw_dir, split=split,
                          format="parquet", top_k=task.num_classes, memory_mb=config.memory_mb,
                          folds=config.held_out(fold)), echo=lambda line: echo(prefix + line))
    positions, found = read_predictions(predict_dir, shard_starts(task.raw_manifest.splits[split]), task.num_classes)
    expected = np.flatnonzero(config.held_out(fold).mask(len(probabilities)))
    if not np.array_equal(np.sort(positions), expected):
        raise OutOfFoldError(f"fold {fold}: predict returned {len(positions)} examples, the fold holds {len(expected)} "
                             "(or other positions)")
    probabilities[positions] = found
    fold_of[positions] = fold
    accuracy = float(np.mean(found.argmax(axis=1) == labels[positions]))
    if not config.keep_models:
        storage.remove(folder)  # one fold model on disk at a time
    last = training["history"][-1] if training["history"] else {}
    echo(f"{prefix}trained on {config.training_folds(fold).size(len(probabilities)):,} examples, "
         f"held-out accuracy {accuracy:.4f} on {len(positions):,}")
    record = {"fold": fold, "trained_on": config.training_folds(fold).size(len(probabilities)),
              "held_out": len(positions), "held_out_accuracy": round(accuracy, 6),
              "optimizer_steps": training["optimizer_steps"], "last_epoch": last,
              "model": training["model"] if config.keep_models else None}
    kept.save(fold, positions, found, record)
    return record


def _summary(config: LabelFinderConfig, task: TrainingTask, examples: int, folds: list[dict[str, Any]],
             accuracy: float, issues: int, note: str | None, started: float) -> dict[str, Any]:
    return {"component": "label_finder", "shardflow_version": __version__, "examples": config.train.input.examples,
            "raw_examples": task.raw_dir, "split": config.train.input.train_split, "split_examples": examples,
            "label": task.target, "class_names": task.class_names, "folds": config.folds, "fold_seed": config.seed,
            "examples_per_fold": [f["held_out"] for f in folds], "out_of_fold_accuracy": round(accuracy, 6),
            "rule": config.rule, "issues": issues, "issue_fraction": round(issues / max(examples, 1), 6),
            "issues_file": ISSUES_NAME, "rows_named": note is None, "note": note, "fold_runs": folds,
            "models": FOLDS_DIR + "/" if config.keep_models else None, "seconds": round(time.time() - started, 1)}

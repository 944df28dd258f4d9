"""The out-of-fold machinery both lists share (class labels: executor.py; boxes: boxes.py): the output
directory, the finished folds kept across a killed run, and one fold's Trainer run and predict run.

A fold's model is a Trainer run on every other fold; predict then runs it over its held-out fold alone, with
options and a reader that depend on what is judged (`FoldReading`: every class's probability, or boxes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..core import storage
from ..core.manifest import MANIFEST_NAME
from ..core.output_dir import OutputDir
from ..predict import PredictConfig
from ..predict import run as predict
from ..trainer import run as train
from ..trainer.task import TrainingTask
from .config import FOLDS_DIR, ISSUES_NAME, PICTURES_DIR, SUMMARY_NAME, LabelFinderConfig
from .kept_folds import RESULTS_DIR, KeptFolds, fold_key
from .out_of_fold import OutOfFoldError, shard_starts

Echo = Callable[[str], None]


def output_location(root: str) -> OutputDir:
    """find-label-issues' output: `label_issues.json` marks it complete."""
    return OutputDir(root, marker=SUMMARY_NAME, owned=(ISSUES_NAME, PICTURES_DIR), unstaged=(FOLDS_DIR,))


def kept_folds(config: LabelFinderConfig, task: TrainingTask, out: OutputDir) -> KeptFolds:
    """The folds an earlier, unfinished run finished (none after a complete run, which a rerun redoes)."""
    manifests = b"".join(storage.read_bytes(storage.join(root, MANIFEST_NAME))
                         for root in dict.fromkeys((task.raw_dir, task.train_dir)))
    kept = KeptFolds(storage.join(out.root, RESULTS_DIR), [fold_key(config, k, manifests) for k in range(config.folds)])
    if out.is_complete():
        kept.clear()
    return kept


@dataclass(frozen=True)
class FoldReading:
    """How a fold's held-out examples are predicted and read back: predict's options for the task, the reader
    of its output (predict dir, shard starts → positions [M], found: one row per position, or per box), and
    the fold's figure on them (its name and value: held-out accuracy, or box recall)."""

    predict: dict[str, Any]
    read: Callable[[str, dict[str, int]], tuple[np.ndarray, np.ndarray]]
    figure: Callable[[np.ndarray, np.ndarray], tuple[str, float]]


def fold_predictions(config: LabelFinderConfig, task: TrainingTask, fold: int, folder: str, reading: FoldReading,
                     echo: Echo, kept: KeptFolds) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Trains fold `fold`'s model and predicts its held-out examples: (positions, found, the fold's record).

    A fold an earlier, killed run finished with the same options is taken as it was (its model is not
    kept then: with keep_models every fold is trained, as its model must be published)."""
    prefix = f"find-label-issues: fold {fold + 1}/{config.folds}: "
    done = None if config.keep_models else kept.load(fold)
    if done is not None:
        echo(f"{prefix}kept from the earlier, unfinished run ({kept.folder})")
        return done
    training = train(config.fold_trainer_config(fold, storage.join(folder, "train")),
                     echo=lambda line: echo(prefix + line))
    split = config.train.input.train_split
    predict_dir = storage.join(folder, "predictions")
    predict(PredictConfig(model=training["model"], output=predict_dir, examples=task.raw_dir, split=split,
                          memory_mb=config.memory_mb, folds=config.held_out(fold), **reading.predict),
            echo=lambda line: echo(prefix + line))
    examples = task.raw_manifest.splits[split].num_examples
    positions, found = reading.read(predict_dir, shard_starts(task.raw_manifest.splits[split]))
    expected = np.flatnonzero(config.held_out(fold).mask(examples))
    if not np.array_equal(np.sort(positions), expected):
        raise OutOfFoldError(f"fold {fold}: predict returned {len(positions)} examples, the fold holds {len(expected)} "
                             "(or other positions)")
    name, value = reading.figure(positions, found)
    if not config.keep_models:
        storage.remove(folder)  # one fold model on disk at a time
    last = training["history"][-1] if training["history"] else {}
    trained_on = config.training_folds(fold).size(examples)
    echo(f"{prefix}trained on {trained_on:,} examples, {name.replace('_', ' ')} {value:.4f} on {len(positions):,}")
    record = {"fold": fold, "trained_on": trained_on, "held_out": len(positions), name: round(value, 6),
              "optimizer_steps": training["optimizer_steps"], "last_epoch": last,
              "model": training["model"] if config.keep_models else None}
    kept.save(fold, positions, found, record)
    return positions, found, record

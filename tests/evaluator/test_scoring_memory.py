"""Scoring memory is bounded in bytes: eval masks whose one-call batch needs several times the budget.

96 photo crops of 128 px with 4-class masks (the session's `mask_unet`) go through the Trainer's U-Net
(untrained: the counts, not the scores, are what batching must not change). In one call of the old
fixed batch (512, so all 96) its activations would take ~0.6 GB; with `--memory-mb 64` the
Evaluator's own peak RSS (wait4, helpers_processes) stays within the budget of a run with batches of 2.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from testkit.mask_data import NUM_CLASSES
from helpers_processes import run_with_peak_rss
from shared_fixtures import MASK_EVAL, MASK_SIDE
from shardflow.core.batch_memory import MB
from shardflow.evaluator.config import BLESSED, NOT_BLESSED

SIDE, EVAL = MASK_SIDE, MASK_EVAL
BUDGET_MB = 64
# Two processes' fixed costs (TensorFlow, the model, tf.data's threads) differ by a few tens of MB.
FIXED_COST_NOISE = 48 * MB


def _evaluate(mask_unet: tuple[Path, Path], out: Path, *options: str):
    examples, model = mask_unet
    return run_with_peak_rss([sys.executable, "-m", "shardflow", "evaluate", "--model", str(model), "--examples",
                              str(examples), "--output", str(out), "--memory-mb", str(BUDGET_MB), *options])


def test_the_scoring_batch_is_sized_from_the_budget_and_the_peak_stays_within_it(
        mask_unet: tuple[Path, Path], tmp_path: Path) -> None:
    sized, small = _evaluate(mask_unet, tmp_path / "sized"), _evaluate(mask_unet, tmp_path / "small", "--batch-size", "2")
    assert sized.returncode == 0 and small.returncode == 0, sized.stderr[-2000:] + small.stderr[-2000:]
    metrics = {name: json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("sized", "small")}
    batching = metrics["sized"]["batching"]
    example = batching["example_bytes"]
    assert batching["rule"] == "budget" and batching["budget_bytes"] == BUDGET_MB * MB
    assert batching["batch_size"] == BUDGET_MB * MB // example
    print(f"{example / MB:.1f} MB an example, batch {batching['batch_size']}; peak RSS sized "
          f"{sized.peak_rss / MB:.0f} MB, batches of 2 {small.peak_rss / MB:.0f} MB")
    # the data's one call of the old fixed batch would hold all 96 masks: several budgets
    assert EVAL * example >= 4 * BUDGET_MB * MB, f"{example / MB:.1f} MB an example"
    assert sized.peak_rss <= small.peak_rss + BUDGET_MB * MB + FIXED_COST_NOISE, (
        f"sized {sized.peak_rss / MB:.0f} MB, batches of 2 {small.peak_rss / MB:.0f} MB")
    # batching changes no count
    assert metrics["sized"]["confusion_matrix"] == metrics["small"]["confusion_matrix"]
    assert metrics["sized"]["num_examples"] == EVAL
    assert metrics["small"]["batching"] == {**batching, "batch_size": 2, "rule": "explicit",
                                            "example_bytes": metrics["small"]["batching"]["example_bytes"]}


def test_an_explicit_batch_over_the_budget_is_one_line_before_scoring(mask_unet: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    refused = _evaluate(mask_unet, tmp_path / "refused", "--batch-size", str(EVAL))
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert len(lines) == 1 and f"--batch-size {EVAL} needs about" in lines[0], lines
    assert f"over the {BUDGET_MB} MB budget" in lines[0] and "Traceback" not in refused.stderr
    assert not (tmp_path / "refused" / BLESSED).exists() and not (tmp_path / "refused" / NOT_BLESSED).exists()
    assert not (tmp_path / "refused" / "metrics.json").exists()


def test_per_image_counts_are_kept_and_add_up_to_the_confusion(mask_unet: tuple[Path, Path]) -> None:
    from shardflow.evaluator.loaded_model import load_model
    from shardflow.evaluator.scorer import plan_scoring, score
    from shardflow.tasks import task_for

    examples, model_dir = mask_unet
    model = load_model(str(model_dir), "model", task_for)
    task = task_for(model.info.task)
    plan = plan_scoring(str(examples), "eval", model.info, (), task)
    scores = score(plan, {"candidate": model}, batch_size=7, task=task, echo=lambda _: None).scores["candidate"]
    counts = scores.example_cells()
    assert counts.shape == (EVAL, 3, NUM_CLASSES) and counts.dtype == np.int32  # TP, FP, FN per class
    confusion = scores.overall.confusion
    true_positives, false_positives, false_negatives = counts.sum(axis=0)
    assert true_positives.tolist() == np.diag(confusion).tolist()
    assert (true_positives + false_negatives).tolist() == confusion.sum(axis=1).tolist()
    assert (true_positives + false_positives).tolist() == confusion.sum(axis=0).tolist()
    assert ((counts[:, 0] + counts[:, 2]).sum(axis=1) == SIDE * SIDE).all()  # each mask's own pixels
    assert scores.example_losses() is None
